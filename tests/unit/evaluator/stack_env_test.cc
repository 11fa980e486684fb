// Environments on the C++ stack (ExprLambda::stackEnvArgs, capture.cc):
// which lambdas get them, that their calls allocate no environment, and
// that every way a body can keep its environment still gets a heap one.
#include <gtest/gtest.h>

#include <cstdlib>

#include "eval_parts.h"
#include "eval_test_util.h"

namespace kiln::eval {
namespace {

// stackEnvArgs of the lambda `text` parses to, where `f` and `g` are
// variables of enclosing lambdas.
int stackEnvArgs(const std::string& text) {
  EvalState st;
  auto* outer =
      exprAs<ExprLambda>(st.parseExprFromString("f: g: " + text, "/tmp"));
  auto* l = outer ? exprAs<ExprLambda>(exprAs<ExprLambda>(outer->body)->body)
                  : nullptr;
  EXPECT_NE(l, nullptr) << text;
  return l ? l->stackEnvArgs : -1;
}

TEST(StackEnvs, LambdasWhoseBodiesKeepNothingAreMarked) {
  // Evaluated at once, keeping only values: selections, operators,
  // interpolation, conditions, calls with constant or variable arguments,
  // lists and sets of variables, `or` defaults.
  EXPECT_EQ(stackEnvArgs("x: x.a"), 1);
  EXPECT_EQ(stackEnvArgs("x: x.a or (f x)"), 1);
  EXPECT_EQ(stackEnvArgs("o: o != \"dev\""), 1);
  EXPECT_EQ(stackEnvArgs("d: \"${d}/bin\""), 1);
  EXPECT_EQ(stackEnvArgs(
                "x: if x ? a then [ x 1 ] else { inherit x; y = x; z = { }; }"),
            1);
  EXPECT_EQ(stackEnvArgs("x: f x \"s\" 1"), 1);
  EXPECT_EQ(stackEnvArgs("x: assert x; !x"), 1);
  EXPECT_EQ(stackEnvArgs("{ a, b ? 1, c ? { }, ... }: a + b"), 1);
  // Curried: the inner closure is all the outer body makes.
  EXPECT_EQ(stackEnvArgs("cond: x: if cond then [ x ] else [ ]"), 2);
  EXPECT_EQ(stackEnvArgs("a: { b }: a + b"), 2);
}

TEST(StackEnvs, LambdasThatMayKeepTheirEnvironmentAreNot) {
  EXPECT_EQ(stackEnvArgs("x: f (g x)"), 0);      // a thunk argument
  EXPECT_EQ(stackEnvArgs("x: [ (x + 1) ]"), 0);  // a thunk element
  EXPECT_EQ(stackEnvArgs("x: [ x.a ]"), 0);  // a select of a variable: a thunk
  EXPECT_EQ(stackEnvArgs("x: f x.a"), 0);
  EXPECT_EQ(stackEnvArgs("x: { a = x + 1; }"), 0);  // a thunk attribute
  EXPECT_EQ(stackEnvArgs("x: { ${x} = 1; }"), 1);   // a name is evaluated
  EXPECT_EQ(stackEnvArgs("x: { a = 1; ${x} = x.b; }"), 0);
  EXPECT_EQ(stackEnvArgs("x: rec { a = x; }"), 0);  // an environment under it
  EXPECT_EQ(stackEnvArgs("x: let y = x; in y"), 0);
  EXPECT_EQ(stackEnvArgs("x: with x; y"), 0);
  EXPECT_EQ(stackEnvArgs("s: with s; (z: [ y ]) 1"), 0);
  EXPECT_EQ(stackEnvArgs("x: y: z: x"), 0);  // past kMaxStackEnvs
  EXPECT_EQ(stackEnvArgs("x: y: f (g y)"), 0);
  EXPECT_EQ(stackEnvArgs("x: (y: y) x"), 0);       // a closure
  EXPECT_EQ(stackEnvArgs("{ a ? b, b }: a"), 0);   // a default naming a formal
  EXPECT_EQ(stackEnvArgs("{ a ? [ 1 ] }: a"), 0);  // a default's thunk
  EXPECT_EQ(stackEnvArgs("{ a, b, c, d, e }: a"), 0);  // past kMaxStackEnv
}

// Under a `with`, a variable not yet looked up is a thunk in the
// environment: not marked.
TEST(StackEnvs, WithVariablesAsArgumentsKeepTheEnvironment) {
  EvalState st;
  auto* w = static_cast<ExprWith*>(
      st.parseExprFromString("with { h = x: x; }; y: y h", "/tmp"));
  auto* l = exprAs<ExprLambda>(w->body);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->stackEnvArgs, 0);
  EXPECT_EQ(testing::evalStrict("with { v = 2; }; (y: [ v y ]) 1"), "[ 2 1 ]");
  EXPECT_EQ(
      testing::evalStrict("let f = s: with s; (z: [ v z ]) 1; in f { v = 3; }"),
      "[ 3 1 ]");
}

class StackEnvCounts : public ::testing::Test {
 protected:
  void SetUp() override { setenv("KILN_EVAL_STATS", "1", 1); }
  void TearDown() override { unsetenv("KILN_EVAL_STATS"); }
};

TEST_F(StackEnvCounts, CallsOfMarkedLambdasAllocateNoEnvironment) {
  EvalState st;
  ASSERT_NE(st.heap().counts(), nullptr);
  testing::evalStrict(st, "builtins.genList (i: i) 10");
  const uint64_t before = st.heap().counts()->envs;
  // 4,000 calls of one-argument lambdas and 2,000 of two-argument ones
  // with both arguments: none makes an environment on the heap.
  EXPECT_EQ(testing::evalStrict(st, R"(
    let xs = builtins.genList (i: i) 2000;
    in builtins.foldl' (acc: x: acc + x) 0 (map (x: x * 2) (map (x: x.v or x) xs)))"),
            "3998000");
  EXPECT_LT(st.heap().counts()->envs - before, 50u);
  // Partly applied, the outer environment is kept by the closure: heap.
  const uint64_t before2 = st.heap().counts()->envs;
  EXPECT_EQ(testing::evalStrict(st, R"(
    let add = a: b: a + b; inc = add 1;
    in builtins.foldl' (acc: x: acc + inc x) 0 (builtins.genList (i: i) 1000))"),
            "500500");
  EXPECT_GE(st.heap().counts()->envs - before2, 1u);
  EXPECT_LT(st.heap().counts()->envs - before2, 50u);
}

TEST(StackEnvs, ValuesAreTheSameWhereverTheEnvironmentIs) {
  using testing::evalStrict;
  // Partial application, then the rest: the outer environment is on the heap.
  EXPECT_EQ(
      evalStrict("let f = x: y: [ x y ]; g = f 1; in [ (g 2) (g 3) (f 4 5) ]"),
      "[ [ 1 2 ] [ 1 3 ] [ 4 5 ] ]");
  // Three levels: two at once, then one; one, then two; three at once.
  EXPECT_EQ(evalStrict("let f = a: b: c: [ a b c ]; in [ (f 1 2 3) ((f 1 2) 4) "
                       "((f 5) 6 7) ]"),
            "[ [ 1 2 3 ] [ 1 2 4 ] [ 5 6 7 ] ]");
  // A curried lambda returning a function (the inner keeps its env).
  EXPECT_EQ(evalStrict("let f = a: b: (c: a + b + c); in (f 1 2) 3"), "6");
  // Results that keep the environment.
  EXPECT_EQ(evalStrict("let f = x: { a = x + 1; b = [ (x * 2) ]; }; in f 3"),
            "{ a = 4; b = [ 6 ]; }");
  EXPECT_EQ(evalStrict("let f = { a, b ? a * 10 }: b; in [ (f { a = 2; }) (f { "
                       "a = 1; b = 5; }) ]"),
            "[ 20 5 ]");
  EXPECT_EQ(evalStrict("let f = { b ? a, a }: b; in f { a = 7; }"), "7");
  // Stack environments in a chain of calls, each passing its argument on.
  EXPECT_EQ(evalStrict(R"(
    let id = x: x; pick = c: a: b: if c then a else b;
        twice = f: x: f (f x);
    in [ (id (id 3)) (pick true 1 2) (twice (x: x + 1) 5) (map (x: [ x ]) [ 1 2 ]) ])"),
            "[ 3 1 7 [ [ 1 ] [ 2 ] ] ]");
  // Selects of a variable left as thunks, forced after their calls return.
  EXPECT_EQ(evalStrict("let f = x: [ x.a ]; g = x: { b = x.a; }; l1 = f { a "
                       "= 1; }; l2 = f { a = 2; }; s = g { a = 3; }; in [ "
                       "(builtins.head l1) (builtins.head l2) s.b ]"),
            "[ 1 2 3 ]");
  // An error inside a stack environment's call.
  EXPECT_NE(testing::evalError("(x: x.a) { }").find("attribute 'a' missing"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::eval
