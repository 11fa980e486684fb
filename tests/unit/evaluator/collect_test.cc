// Which derivations `kiln instantiate` prints for a value
// (collectDerivations), as nix-instantiate 2.8 does.
#include <gc/gc.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "eval_test_util.h"
#include "kiln/evaluator/attr_path.h"

namespace kiln::eval {
namespace {

// The names of the .drv files collected from `expr` (its store paths
// without the hash), in the order they are printed.
std::vector<std::string> collectedNames(const std::string& expr) {
  EvalState st;
  std::vector<std::string> names;
  runWithLargeStack([&] {
    Value v;
    st.eval(st.parseExprFromString(expr, "/tmp"), v);
    for (auto& d : collectDerivations(st, v, st.vEmptyAttrs.attrs))
      names.emplace_back(d.drvPath.substr(d.drvPath.find('-') + 1));
  });
  return names;
}

TEST(CollectDerivations, AttributesAreNotCalledAndOddNamesAreSkipped) {
  // nix-instantiate 2.8 prints deeper, ok, inner for this set: "1a" and
  // "a.b" do not match its attribute-name pattern, `f` is a function with
  // a required argument (not called), the list inside the set is skipped,
  // and the recursed set `s` is called through its __functor.
  std::string expr = R"(
    let d = n: derivation { name = n; system = "x"; builder = "/bin/sh"; }; in
    { "1a" = d "one"; "a.b" = d "dot"; ok = d "ok"; f = { url }: d "f";
      s = { recurseForDerivations = true; __functor = self: { x ? 1 }: { inner = d "inner"; }; };
      l = [ (d "inlist") ];
      n = { recurseForDerivations = true; deeper = d "deeper"; g = { y }: y; };
      plain = { hidden = d "hidden"; }; })";
  EXPECT_EQ(collectedNames(expr),
            (std::vector<std::string>{"deeper.drv", "ok.drv", "inner.drv"}));
}

TEST(CollectDerivations, TheSelectedValueAndListElementsAreCalled) {
  std::string d =
      "derivation { name = \"a\"; system = \"x\"; builder = \"/bin/sh\"; }";
  EXPECT_EQ(collectedNames("{ x ? 1 }: " + d),
            (std::vector<std::string>{"a.drv"}));
  EXPECT_EQ(collectedNames("[ ({ y ? 2 }: { v = " + d + "; }) ]"),
            (std::vector<std::string>{"a.drv"}));
}

// A derivation reached under several names is reported once, at its first
// place in the walk, however many there are (the index of those seen grows).
TEST(CollectDerivations, EachDerivationOnceInWalkOrderAcrossManyAliases) {
  std::string expr = R"(
    let d = n: derivation { name = "d${toString n}"; system = "x"; builder = "/bin/sh"; };
        ds = builtins.genList d 300; in
    builtins.listToAttrs (builtins.genList (i: { name = "a${toString (1000 + i)}";
      value = builtins.elemAt ds (i / 2); }) 600))";
  std::vector<std::string> expected;
  for (int i = 0; i < 300; ++i) expected.push_back("d" + std::to_string(i) + ".drv");
  EXPECT_EQ(collectedNames(expr), expected);
}

// forEachDerivation reports views, not copies: the derivations' strings
// (computed names, so made while evaluating and collectable, in a set only
// the walk reaches: the called function's result) stay valid
// through collections until it returns, because its set of the derivations
// seen is traced; and it reports nothing when the walk throws.
TEST(CollectDerivations, ForEachReportsLiveViewsAfterTheWalkOnly) {
  EvalState st;
  runWithLargeStack([&] {
    Value v;
    // A function: the set it returns is reachable only from the walk.
    st.eval(st.parseExprFromString(R"({ k ? 0 }:
      let d = n: derivation { name = "p-${toString n}"; system = "x"; builder = "/bin/sh";
                              outputs = [ "dev" "out" ]; }; in
      { a = d 1; b = (d 2).out; c = { recurseForDerivations = true; x = d 3; }; })",
                                   "/tmp"),
            v);
    std::vector<std::string> seen;
    forEachDerivation(st, v, st.vEmptyAttrs.attrs,
                      [&](std::string_view drvPath, std::string_view output) {
                        GC_gcollect();
                        seen.push_back(std::string(drvPath.substr(drvPath.find('-') + 1)) + "!" +
                                       std::string(output));
                      });
    EXPECT_EQ(seen, (std::vector<std::string>{"p-1.drv!dev", "p-2.drv!", "p-3.drv!dev"}));
    Value bad;
    st.eval(st.parseExprFromString("{ a = derivation { name = \"a\"; system = \"x\"; "
                                   "builder = \"/bin/sh\"; }; b = throw \"no\"; }",
                                   "/tmp"),
            bad);
    size_t reported = 0;
    EXPECT_ANY_THROW(forEachDerivation(st, bad, st.vEmptyAttrs.attrs,
                                       [&](std::string_view, std::string_view) { ++reported; }));
    EXPECT_EQ(reported, 0u);
  });
}

}  // namespace
}  // namespace kiln::eval
