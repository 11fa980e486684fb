// What `kiln eval` offers Hydra users as nix-eval-jobs does (issue 36):
// `--format nix-eval-jobs` lines, `--force-recurse`, `--constituents`
// (aggregate jobs' constituents resolved to .drv paths, in one process, on
// threads and in worker processes alike) and `--check-cache-status`
// against kiln's store and a file:// cache.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using nlohmann::json;

constexpr const char* kCollection = R"(
let
  mk = name: deps: derivation {
    inherit name;
    system = "x86_64-linux";
    builder = "/bin/sh";
    args = [ "-c" "echo ${name} ${toString deps} > $out" ];
  };
  a = mk "a" [ ];
  b = mk "b" [ a ];
  agg = name: constituents: (mk name [ ]) // { _hydraAggregate = true; inherit constituents; };
in {
  inherit a b;
  c = mk "c" [ b a ];
  broken = throw "this job is broken";
  hidden = { d = mk "d" [ ]; deeper.e = mk "e" [ ]; };
  scope = { recurseForDerivations = true; f = mk "f" [ a ]; };
  tested = agg "tested" [ a "b" "scope.f" ];
  release = agg "release" [ "tested" "c" ];
  bad = agg "bad" [ "broken" "missing" "a" ];
  loop1 = agg "loop1" [ "loop2" ];
  loop2 = agg "loop2" [ "loop1" ];
}
)";

class EvalNixEvalJobs : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(file_) << kCollection; }

  test::RunResult eval(std::vector<std::string> extra, const std::string& state = "") {
    std::vector<std::string> args = {test::kilnBinary(), "eval", file_, "--format",
                                     "nix-eval-jobs"};
    if (state.empty()) args.push_back("--readonly-mode");
    args.insert(args.end(), extra.begin(), extra.end());
    return test::run(args, "", {"KILN_STATE_DIR=" + (state.empty() ? dir_.path() + "/none" : state)});
  }

  // attr → its line, each attr once.
  static std::map<std::string, json> byAttr(const std::string& out) {
    std::map<std::string, json> jobs;
    for (auto& line : test::nonEmptyLines(out)) {
      json j = json::parse(line);
      std::string attr = j.at("attr");
      EXPECT_FALSE(jobs.count(attr)) << "reported twice: " << attr;
      jobs[attr] = j;
    }
    return jobs;
  }

  TempDir dir_{"kiln-nej"};
  std::string file_ = dir_.path() + "/release.nix";
};

TEST_F(EvalNixEvalJobs, LinesCarryNixEvalJobsFields) {
  auto r = eval({"--meta"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto jobs = byAttr(r.out);
  // Not entered without recurseForDerivations: hidden.
  EXPECT_FALSE(jobs.count("hidden.d"));
  ASSERT_TRUE(jobs.count("scope.f"));
  json f = jobs["scope.f"];
  EXPECT_EQ(f["attrPath"], json::array({"scope", "f"}));
  EXPECT_EQ(f["name"], "f");
  EXPECT_EQ(f["system"], "x86_64-linux");
  EXPECT_TRUE(f["drvPath"].get<std::string>().ends_with("-f.drv"));
  EXPECT_TRUE(f["outputs"]["out"].get<std::string>().ends_with("-f"));
  EXPECT_TRUE(f["meta"].is_object());
  json broken = jobs["broken"];
  EXPECT_NE(broken["error"].get<std::string>().find("this job is broken"), std::string::npos);
  EXPECT_FALSE(broken.contains("drvPath"));
  // Without --constituents aggregates are plain jobs.
  EXPECT_FALSE(jobs["tested"].contains("constituents"));
  // No meta without --meta.
  r = eval({});
  EXPECT_FALSE(byAttr(r.out)["a"].contains("meta"));
}

TEST_F(EvalNixEvalJobs, ForceRecurseEntersEverySet) {
  auto r = eval({"--force-recurse"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto jobs = byAttr(r.out);
  EXPECT_TRUE(jobs.count("hidden.d"));
  EXPECT_TRUE(jobs.count("hidden.deeper.e"));
  EXPECT_EQ(jobs["hidden.deeper.e"]["attrPath"], json::array({"hidden", "deeper", "e"}));
}

TEST_F(EvalNixEvalJobs, ConstituentsResolvedInEveryMode) {
  for (std::vector<std::string> mode :
       {std::vector<std::string>{}, {"--workers", "2"}, {"--processes", "2"}}) {
    SCOPED_TRACE(mode.empty() ? "one process" : mode[0]);
    mode.push_back("--constituents");
    auto r = eval(mode);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    auto jobs = byAttr(r.out);
    ASSERT_EQ(jobs.size(), 10u) << r.out;
    json tested = jobs["tested"];
    EXPECT_FALSE(tested.contains("error")) << tested;
    EXPECT_FALSE(tested.contains("namedConstituents"));
    std::vector<std::string> want = {jobs["a"]["drvPath"], jobs["b"]["drvPath"],
                                     jobs["scope.f"]["drvPath"]};
    std::sort(want.begin(), want.end());
    EXPECT_EQ(tested["constituents"], json(want));
    // An aggregate of an aggregate gets its .drv path.
    json release = jobs["release"];
    EXPECT_FALSE(release.contains("error")) << release;
    EXPECT_NE(std::find(release["constituents"].begin(), release["constituents"].end(),
                        tested["drvPath"]),
              release["constituents"].end());
    // Failures name each constituent and why.
    std::string bad = jobs["bad"]["error"];
    EXPECT_NE(bad.find("broken: "), std::string::npos) << bad;
    EXPECT_NE(bad.find("missing: does not exist"), std::string::npos) << bad;
    EXPECT_EQ(bad.find("a: "), std::string::npos) << bad;
    EXPECT_NE(jobs["loop1"]["error"].get<std::string>().find("loop2"), std::string::npos);
    EXPECT_NE(jobs["loop2"]["error"].get<std::string>().find("cycle"), std::string::npos);
    // Aggregates come last.
    auto lines = test::nonEmptyLines(r.out);
    EXPECT_TRUE(json::parse(lines.back()).contains("constituents"));
    EXPECT_NE(r.err.find("4 of 10 jobs failed"), std::string::npos) << r.err;
  }
}

// The .drv at full logical path `drv` in store `state` as kiln store
// show-derivation --check prints it (the check recomputes its outputs and
// path; a failure is reported in `problems`).
json showDerivation(const std::string& state, const std::string& drv, std::string& problems) {
  std::string file = state + "/store/" + drv.substr(drv.rfind('/') + 1);
  auto r = test::run({test::kilnBinary(), "store", "show-derivation", "--check", file});
  problems = r.exitCode == 0 ? "" : r.err + r.out;
  if (r.exitCode != 0) return nullptr;
  return json::parse(r.out).begin().value();
}

TEST_F(EvalNixEvalJobs, AggregatesInTheStoreDependOnEveryConstituent) {
  auto readOnly = byAttr(eval({"--constituents"}).out);
  std::string state = dir_.path() + "/state";
  auto r = eval({"--constituents"}, state);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto jobs = byAttr(r.out);
  // `tested` names b and scope.f, and its `//` leaves a out of its
  // derivation: written again with the three as inputs, new outputs.
  json tested = jobs["tested"];
  ASSERT_FALSE(tested.contains("error")) << tested;
  EXPECT_NE(tested["drvPath"], readOnly["tested"]["drvPath"]);
  EXPECT_NE(tested["outputs"]["out"], readOnly["tested"]["outputs"]["out"]);
  std::string problems;
  json drv = showDerivation(state, tested["drvPath"], problems);
  ASSERT_TRUE(problems.empty()) << problems;
  for (auto* c : {"a", "b", "scope.f"})
    EXPECT_EQ(drv["inputDrvs"][jobs[c]["drvPath"].get<std::string>()], json::array({"out"}))
        << c << "\n" << drv.dump(2);
  EXPECT_EQ(drv["outputs"]["out"]["path"], tested["outputs"]["out"]);
  EXPECT_EQ(drv["env"]["out"], tested["outputs"]["out"]);
  // `release` names `tested`: it depends on the rewritten one.
  json release = showDerivation(state, jobs["release"]["drvPath"], problems);
  ASSERT_TRUE(problems.empty()) << problems;
  EXPECT_TRUE(release["inputDrvs"].contains(tested["drvPath"].get<std::string>()))
      << release.dump(2);
  // Plain jobs keep their derivations.
  EXPECT_EQ(jobs["c"]["drvPath"], readOnly["c"]["drvPath"]);
}

TEST_F(EvalNixEvalJobs, CacheStatusLocalCachedAndNotBuilt) {
  std::string built = dir_.path() + "/built", fresh = dir_.path() + "/fresh";
  auto r = test::run({test::kilnBinary(), "build", file_, "-A", "a", "--no-out-link"}, "",
                     {"KILN_STATE_DIR=" + built});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto a = byAttr(eval({"-A", "a"}).out)["a"];  // read-only: its output path
  std::string out = a["outputs"]["out"];
  std::string cache = "file://" + dir_.path() + "/cache";
  r = test::run({test::kilnBinary(), "store", "copy-to-cache", "--to", cache, out}, "",
                {"KILN_STATE_DIR=" + built});
  ASSERT_EQ(r.exitCode, 0) << r.err;

  // Where it was built: local.
  r = eval({"--check-cache-status", "-A", "a"}, built);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  json local = byAttr(r.out)["a"];
  EXPECT_EQ(local["cacheStatus"], "local");
  EXPECT_EQ(local["isCached"], true);
  EXPECT_EQ(local["neededBuilds"], json::array());

  // A fresh store with the cache: a is cached, b and c need building.
  r = eval({"--check-cache-status", "--substituters", cache}, fresh);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto jobs = byAttr(r.out);
  EXPECT_EQ(jobs["a"]["cacheStatus"], "cached");
  EXPECT_EQ(jobs["a"]["neededSubstitutes"], json::array({out}));
  EXPECT_EQ(jobs["c"]["cacheStatus"], "notBuilt");
  EXPECT_EQ(jobs["c"]["isCached"], false);
  // Dependencies first; a is fetched, not built.
  EXPECT_EQ(jobs["c"]["neededBuilds"], json::array({jobs["b"]["drvPath"], jobs["c"]["drvPath"]}));
  EXPECT_EQ(jobs["c"]["neededSubstitutes"], json::array({out}));
  EXPECT_FALSE(jobs["broken"].contains("cacheStatus"));

  // Without the cache nothing is cached.
  r = eval({"--check-cache-status", "-A", "b"}, fresh);
  json b = byAttr(r.out)["b"];
  EXPECT_EQ(b["cacheStatus"], "notBuilt");
  EXPECT_EQ(b["neededBuilds"], json::array({a["drvPath"], b["drvPath"]}));
}

TEST_F(EvalNixEvalJobs, BadOptionsAreUsageErrors) {
  auto r = eval({"--check-cache-status"});  // read-only
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("cannot be used with --readonly-mode"), std::string::npos) << r.err;
  r = test::run({test::kilnBinary(), "eval", file_, "--readonly-mode", "--constituents"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("use --format nix-eval-jobs or --json"), std::string::npos) << r.err;
  r = test::run({test::kilnBinary(), "eval", file_, "--readonly-mode", "--format", "yaml"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("lines, json or nix-eval-jobs"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kiln
