// What keeps a scope (an environment) alive after it is done: a set
// literal of variables made at once behind its thunk (ExprAttrs::
// builtAtOnce) keeps none, and a lambda passed as an argument has its thunk
// in an object of its own (ExprLambda::loneThunk), not beside values that
// live on.
#include "gc_support.h"  // first: GC_THREADS before any libgc header

#include <gtest/gtest.h>

#include <sstream>
#include <utility>

#include "eval_parts.h"
#include "eval_test_util.h"

namespace kiln::eval {
namespace {

// Evaluates `text` (a set) to weak head normal form, without forcing its
// attributes.
void evalShallow(EvalState& st, const std::string& text, Value& v) {
  runWithLargeStack([&] { st.eval(st.parseExprFromString(text, "/tmp"), v); });
  ASSERT_EQ(v.type, VType::kAttrs) << text;
}

// The attribute `name` of set `v`, unforced.
Value* attr(EvalState& st, Value& v, const char* name) {
  Value* a = v.attrs->get(st.sym(name));
  EXPECT_NE(a, nullptr) << name;
  return a;
}

TEST(KeptScopes, SetsOfVariablesAreMadeAtOnceAndKeepNoScope) {
  EvalState st;
  Value v;
  evalShallow(
      st,
      "let big = builtins.genList (i: i) 100; c = 1; in { scope = c + 1; "
      "vars = { inherit c big; d = \"s\"; e = 2; }; "
      "calc = { x = c + 1; }; }",
      v);
  Value* scope = attr(st, v, "scope");  // a thunk of the let's scope
  Value* vars = attr(st, v, "vars");
  Value* calc = attr(st, v, "calc");
  ASSERT_EQ(scope->type, VType::kThunk);
  ASSERT_EQ(vars->type, VType::kThunk);  // still a thunk: --eval prints <CODE>
  ASSERT_EQ(calc->type, VType::kThunk);
  EXPECT_NE(vars->thunk.env, scope->thunk.env)
      << "the set's thunk keeps the let's scope";
  EXPECT_EQ(calc->thunk.env, scope->thunk.env)
      << "a set with an expression in it is made later";
  std::ostringstream shown;
  printValue(st, shown, v);
  EXPECT_EQ(shown.str(), "{ calc = <CODE>; scope = <CODE>; vars = <CODE>; }");
  EXPECT_EQ(testing::evalStrict(st, "let c = 1; in { v = { inherit c; }; }.v"),
            "{ c = 1; }");
}

TEST(KeptScopes, SetsMadeAtOnceSeeEveryBindingOfTheirScope) {
  const std::pair<const char*, const char*> kCases[] = {
      // A binding not made yet when the set is: a thunk of it, looked up later.
      {"let a = { inherit b; }; b = 1; in a.b", "1"},
      {"rec { a = { inherit b; }; b = 2; c = a.b; }.c", "2"},
      {"({ a ? { inherit b; }, b }: a.b) { b = 3; }", "3"},
      // A set's variables from `with` are looked up when it is forced.
      {"with { x = 4; }; let s = { inherit x; }; in s.x", "4"},
      {"rec { a = 1; b = { inherit a; }; __overrides = { a = 5; }; }.b.a", "5"},
  };
  for (auto [expr, value] : kCases)
    EXPECT_EQ(testing::evalStrict(expr), value) << expr;
}

TEST(KeptScopes, LambdaArgumentsHaveTheirThunkInAnObjectOfTheirOwn) {
  EvalState st;
  // The function's argument itself is the result's `g`.
  Value call;
  evalShallow(st, "(g: { inherit g; }) (x: x)", call);
  Value* g = attr(st, call, "g");
  ASSERT_EQ(g->type, VType::kThunk);
  EXPECT_EQ(GC_base(g), static_cast<void*>(g));
  EXPECT_LT(GC_size(g), 3 * sizeof(Value)) << "in a block of three values";
  // A lambda in a list or bound to a name mostly lives on: packed.
  Value set;
  evalShallow(st, "let h = x: x; in { l = [ (y: y) h ]; }", set);
  Value* l = attr(st, set, "l");
  runWithLargeStack([&] { st.forceValue(*l, kNoPos); });
  ASSERT_EQ(l->type, VType::kList);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_GE(GC_size(GC_base(l->list.elems[i])), 3 * sizeof(Value)) << i;
  EXPECT_EQ(testing::evalStrict(st, "map (x: x + 1) [ 1 2 ]"), "[ 2 3 ]");
}

}  // namespace
}  // namespace kiln::eval
