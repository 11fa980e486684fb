// Job enumeration: which attributes become jobs, what a job records, and
// that one failing job never stops the others.
#include "kiln/evaluator/jobs.h"

#include <gtest/gtest.h>

#include <map>

#include "kiln/evaluator/attr_path.h"

namespace kiln::eval {
namespace {

const char* kMk =
    "let mk = name: extra: derivation ({ inherit name; system = \"x86_64-linux\";"
    " builder = \"/bin/sh\"; } // removeAttrs extra [ \"meta\" ])"
    " // { meta = extra.meta or {}; }; in ";

/// Enumerates the jobs of `expr` (optionally below `attr`), keyed by attr path.
std::map<std::string, Job> jobsOf(const std::string& expr, const std::string& attr = "") {
  std::map<std::string, Job> out;
  runWithLargeStack([&] {
    EvalState st;
    Value root;
    st.eval(st.parseExprFromString(kMk + expr, "/tmp"), root);
    Bindings* noArgs = st.allocBindings(0);
    Value& sel = *findAlongAttrPath(st, attr, noArgs, root);
    enumerateJobs(st, sel, noArgs, attr, [&](const Job& j) { out[j.attr] = j; });
  });
  return out;
}

TEST(Jobs, TopLevelAndRecurseForDerivationsOnly) {
  auto jobs = jobsOf(
      "{ a = mk \"a\" {}; plain = { b = mk \"b\" {}; };"
      "  rec1 = { recurseForDerivations = true; c = mk \"c\" {};"
      "           deeper = { d = mk \"d\" {}; }; }; n = 1; l = [ (mk \"e\" {}) ]; }");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs.at("a").name, "a");
  EXPECT_EQ(jobs.at("rec1.c").name, "c");
}

TEST(Jobs, RecordsNameSystemOutputsAndMeta) {
  auto jobs = jobsOf(
      "{ m = mk \"m\" { outputs = [ \"out\" \"dev\" ];"
      "  meta = { description = \"d\"; schedulingPriority = 5; maintainers = [ \"x\" ];"
      "           broken = throw \"no\"; f = x: x; }; }; }");
  const Job& j = jobs.at("m");
  EXPECT_EQ(j.error, "");
  EXPECT_EQ(j.system, "x86_64-linux");
  EXPECT_NE(j.drvPath.find("-m.drv"), std::string::npos);
  ASSERT_EQ(j.outputs.size(), 2u);
  EXPECT_EQ(j.outputs[0].first, "out");
  EXPECT_EQ(j.outputs[1].first, "dev");
  EXPECT_NE(j.outputs[1].second.find("-m-dev"), std::string::npos);
  // The throwing and the function-valued meta attributes are left out.
  std::string json = jobToJson(j);
  EXPECT_NE(json.find("\"meta\":{\"description\":\"d\",\"maintainers\":[\"x\"],"
                      "\"schedulingPriority\":5}"),
            std::string::npos)
      << json;
}

// As nix-eval-jobs and Hydra (DrvInfo::querySystem): a derivation set
// without `system` of its own (a set's own wrapper around `derivation`) is
// a job of system "unknown", not an error.
TEST(Jobs, ADerivationSetWithoutSystemIsOfSystemUnknown) {
  auto jobs = jobsOf(
      "{ w = let d = mk \"w\" {}; in { type = \"derivation\"; name = \"w\";"
      "  inherit (d) drvPath outPath; }; }");
  const Job& j = jobs.at("w");
  EXPECT_EQ(j.error, "");
  EXPECT_EQ(j.system, "unknown");
  EXPECT_NE(j.drvPath.find("-w.drv"), std::string::npos);
}

TEST(Jobs, OneErrorDoesNotStopTheOthers) {
  auto jobs = jobsOf(
      "{ a = mk \"a\" {}; bad = throw \"broken package\"; c = mk \"c\" {};"
      "  sub = { recurseForDerivations = true; t = 1 + \"x\"; u = mk \"u\" {}; };"
      "  loop = let x = x; in x; }");
  ASSERT_EQ(jobs.size(), 6u);
  EXPECT_EQ(jobs.at("bad").error, "broken package");
  EXPECT_EQ(jobs.at("bad").drvPath, "");
  EXPECT_NE(jobs.at("sub.t").error.find("cannot add a string to an integer"), std::string::npos);
  EXPECT_NE(jobs.at("loop").error.find("infinite recursion"), std::string::npos);
  EXPECT_EQ(jobs.at("c").error, "");
  EXPECT_EQ(jobs.at("sub.u").error, "");
  EXPECT_EQ(jobToJson(jobs.at("bad")), "{\"attr\":\"bad\",\"error\":\"broken package\"}");
}

TEST(Jobs, AttrPathSelectsASubtreeOrOneDerivation) {
  auto jobs = jobsOf("{ s = { x = mk \"x\" {}; y = { z = mk \"z\" {}; }; }; }", "s");
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs.at("s.x").name, "x");
  auto one = jobsOf("{ s = { x = mk \"x\" {}; }; }", "s.x");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one.at("s.x").name, "x");
}

TEST(Jobs, ARootThatIsNoSetIsAnError) {
  EXPECT_THROW(jobsOf("42"), EvalError);
  EXPECT_THROW(jobsOf("throw \"top\""), EvalError);
}

TEST(Jobs, AttrNamesWithDotsAreQuoted) {
  auto jobs = jobsOf("{ \"a.b\" = mk \"ab\" {}; }");
  ASSERT_EQ(jobs.count("\"a.b\""), 1u);
}

}  // namespace
}  // namespace kiln::eval
