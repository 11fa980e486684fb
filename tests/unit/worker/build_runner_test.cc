// The build runner with real /bin/sh builders in a temporary store whose
// logical and physical directories coincide.
#include "kiln/worker/build_runner.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <set>
#include <sstream>

#include "fake_spawner.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/nar.h"
#include "sandbox_fixture.h"
#include "test_support.h"

namespace kiln::worker {
namespace {

using kiln::StepStatus;
using std::chrono::seconds;

class BuildRunnerTest : public ::testing::Test {
 protected:
  BuildRunnerTest() : storeDir_(root_.path() + "/store") {
    createDirs(storeDir_.dir());
    createDirs(root_.path() + "/tmp");
  }

  BuildRunnerConfig config() {
    BuildRunnerConfig c;
    c.store = {storeDir_, storeDir_.dir(), false};
    c.buildDirParent = root_.path() + "/tmp";
    c.impureEnv = {};
    return c;
  }

  /// A derivation running `/bin/sh -c script` with the given outputs.
  BuildRequest request(const std::string& name, const std::string& script,
                       std::vector<std::string> outputs = {"out"}) {
    return sbtest::shellRequest(storeDir_, name, script, "", outputs);
  }

  BuildResult build(const BuildRequest& r, const CancelFlag* cancel = nullptr,
                    const LogCallback& onLog = {}) {
    BuildRunner runner(config(), launcher_, RealClock::instance());
    log_.clear();
    return runner.run(
        r,
        [&](std::string_view chunk) {
          log_ += chunk;
          if (onLog) onLog(chunk);
        },
        cancel);
  }

  /// A store path holding one file, as an input of later builds.
  store::StorePath addInput(const std::string& name,
                            const std::string& contents) {
    auto p = storeDir_.makeTextPath(
        name, hashString(HashAlgo::kSha256, contents), {});
    writeFile(storeDir_.dir() + "/" + p.baseName(), contents);
    return p;
  }

  std::string path(const store::StorePath& p) { return storeDir_.printPath(p); }
  std::vector<std::string> buildDirs() {
    std::vector<std::string> out;
    auto r = test::run({"ls", "-A", root_.path() + "/tmp"});
    std::istringstream in(r.out);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }

  TempDir root_{"runner-test"};
  store::StoreDir storeDir_;
  RealProcessLauncher launcher_;
  std::string log_;
};

std::set<std::string> lines(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.insert(l);
  return out;
}

TEST_F(BuildRunnerTest, SuccessWithExactEnvironment) {
  auto r = request("envtest", "/usr/bin/env > $out; echo built");
  r.drv.env["big"] = "contents of big";
  r.drv.env["passAsFile"] = "big";
  r.buildCores = 3;
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg;
  EXPECT_EQ(res.errorMsg, "");
  EXPECT_EQ(res.waitStatus, 0);
  EXPECT_EQ(log_, "built\n");
  EXPECT_EQ(res.logBytes, 6u);
  auto out = path(*r.drv.outputs["out"].path);
  auto env = lines(readFile(out));
  std::string top;
  for (auto& l : env)
    if (l.rfind("NIX_BUILD_TOP=", 0) == 0) top = l.substr(14);
  ASSERT_EQ(top.rfind(root_.path() + "/tmp/nix-build-envtest.drv-", 0), 0u)
      << top;
  std::set<std::string> want = {
      "HOME=/homeless-shelter",
      "NIX_BUILD_CORES=3",
      "NIX_BUILD_TOP=" + top,
      "NIX_LOG_FD=2",
      "NIX_STORE=" + storeDir_.dir(),
      "PATH=/path-not-set",
      "PWD=" + top,  // added by the shell
      "TEMP=" + top,
      "TEMPDIR=" + top,
      "TERM=xterm-256color",
      "TMP=" + top,
      "TMPDIR=" + top,
      "bigPath=" + top +
          "/.attr-1lak0mvllw8rv9i9ygkglvhqsq19qi9ynl4bi7gbf69ab5nzw89a",
      "builder=/bin/sh",
      "name=envtest",
      "out=" + out,
      "passAsFile=big",
      "system=x86_64-linux"};
  EXPECT_EQ(env, want);
  // The output is described, and the build dir is gone.
  ASSERT_EQ(res.outputs.size(), 1u);
  auto& o = res.outputs[0];
  EXPECT_EQ(o.name, "out");
  EXPECT_EQ(o.physicalPath, out);
  StringSink nar;
  store::dumpPath(out, nar);
  EXPECT_EQ(o.narSize, nar.s.size());
  EXPECT_EQ(o.narHash, hashString(HashAlgo::kSha256, nar.s));
  // The file holds out=<its own path>: a self-reference.
  EXPECT_EQ(o.references, store::StorePathSet{*r.drv.outputs["out"].path});
  EXPECT_TRUE(buildDirs().empty());
}

TEST_F(BuildRunnerTest, WorkingDirectoryArgv0PassAsFileAndUmask) {
  auto r = request(
      "cwd", "echo \"$(pwd) $0 $(umask)\" > $out; /bin/cat $bigPath >> $out");
  r.drv.env["big"] = "file contents";
  r.drv.env["passAsFile"] = "big";
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg;
  auto text = readFile(path(*r.drv.outputs["out"].path));
  EXPECT_NE(text.find("/nix-build-cwd.drv-"), std::string::npos) << text;
  EXPECT_NE(text.find(" sh 0022\nfile contents"), std::string::npos) << text;
}

TEST_F(BuildRunnerTest, MultipleOutputsAndReferences) {
  auto dep1 = addInput("dep1", "one");
  auto dep2 = addInput("dep2", "two");
  auto unrelated = addInput("unrelated", "three");
  auto r = request("multi",
                   "/bin/mkdir $out; echo " + path(dep1) +
                       " > $out/a; echo $dev > $out/b; " + "echo " +
                       path(unrelated) + " >> $out/b; echo " +
                       std::string(dep2.hashPart()) + " > $dev",
                   {"out", "dev", "doc"});
  r.drv.args[1] += "; echo doc > $doc";
  r.inputClosure = {dep1, dep2};
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg;
  ASSERT_EQ(res.outputs.size(), 3u);
  std::map<std::string, BuiltOutputInfo> by;
  for (auto& o : res.outputs) by[o.name] = o;
  // The unrelated path occurs but is not a candidate.
  EXPECT_EQ(by["out"].references,
            (store::StorePathSet{dep1, *r.drv.outputs["dev"].path}));
  EXPECT_EQ(by["dev"].references, (store::StorePathSet{dep2}));
  EXPECT_TRUE(by["doc"].references.empty());
  for (auto& [name, o] : by) {
    StringSink nar;
    store::dumpPath(o.physicalPath, nar);
    EXPECT_EQ(o.narHash, hashString(HashAlgo::kSha256, nar.s)) << name;
  }
}

// Nix 2.8 refuses outputs that reference each other in a cycle.
TEST_F(BuildRunnerTest, ReferenceCycleBetweenOutputsFails) {
  auto r = request("cycle",
                   "echo $dev > $out; echo $doc > $dev; echo $out $doc > $doc",
                   {"out", "dev", "doc"});
  auto res = build(r);
  EXPECT_EQ(res.status, StepStatus::kFailed);
  EXPECT_EQ(res.errorMsg,
            "builder for '" + path(r.drvPath) +
                "' made outputs that reference each other in a cycle: "
                "dev -> doc -> out -> dev");
  EXPECT_TRUE(res.outputs.empty());
  EXPECT_FALSE(pathExists(path(*r.drv.outputs["out"].path)));
}

TEST_F(BuildRunnerTest, FailingBuilderReportsExitCodeAndCleansUp) {
  auto r = request("fails", "echo oops; echo partial > $out; exit 3");
  auto res = build(r);
  EXPECT_EQ(res.status, StepStatus::kFailed);
  EXPECT_EQ(res.errorMsg,
            "builder for '" + path(r.drvPath) + "' exited with code 3");
  EXPECT_EQ(log_, "oops\n");
  EXPECT_FALSE(pathExists(path(*r.drv.outputs["out"].path)));
  EXPECT_TRUE(buildDirs().empty());
  EXPECT_EQ(res.keptBuildDir, "");

  r.keepFailedBuildDir = true;
  res = build(r);
  EXPECT_EQ(res.status, StepStatus::kFailed);
  ASSERT_NE(res.keptBuildDir, "");
  EXPECT_TRUE(pathExists(res.keptBuildDir));
  EXPECT_EQ(buildDirs().size(), 1u);
}

TEST_F(BuildRunnerTest, MissingOutputFails) {
  auto r = request("missing", "echo x > $out", {"out", "dev"});
  auto res = build(r);
  EXPECT_EQ(res.status, StepStatus::kFailed);
  EXPECT_EQ(res.errorMsg, "builder for '" + path(r.drvPath) +
                              "' did not produce output 'dev' at '" +
                              path(*r.drv.outputs["dev"].path) + "'");
  EXPECT_FALSE(pathExists(path(*r.drv.outputs["out"].path)));
}

TEST_F(BuildRunnerTest, StaleOutputsAreRemovedBeforeTheBuild) {
  auto r = request("stale", "test -e $out && exit 9; echo fresh > $out");
  writeFile(path(*r.drv.outputs["out"].path), "left over");
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg;
  EXPECT_EQ(readFile(path(*r.drv.outputs["out"].path)), "fresh\n");
}

TEST_F(BuildRunnerTest, BuilderThatCannotStart) {
  auto r = request("nobuilder", "");
  r.drv.builder = root_.path() + "/no-such-builder";
  auto res = build(r);
  EXPECT_EQ(res.status, StepStatus::kFailed);
  EXPECT_NE(res.errorMsg.find("cannot start the builder: executing '" +
                              r.drv.builder + "': No such file or directory"),
            std::string::npos)
      << res.errorMsg;
  EXPECT_FALSE(res.waitStatus.has_value());
}

// fork(2) failing (a full process table) fails the step; nothing started.
TEST_F(BuildRunnerTest, AFailedForkFailsTheStep) {
  testing::FakeSpawner spawner;
  spawner.failNext({EAGAIN});
  RealProcessLauncher launcher(spawner);
  auto r = request("noprocess", "echo never > $out");
  BuildResult res;
  {
    // ~BuildRunner waits for the build directory's removal.
    BuildRunner runner(config(), launcher, RealClock::instance());
    res = runner.run(
        r, [](std::string_view) {}, nullptr);
  }
  EXPECT_EQ(res.status, StepStatus::kFailed);
  EXPECT_NE(res.errorMsg.find("cannot start the builder: fork for '/bin/sh'"),
            std::string::npos)
      << res.errorMsg;
  EXPECT_FALSE(res.waitStatus.has_value());
  EXPECT_EQ(spawner.calls().size(), 1u);
  EXPECT_TRUE(buildDirs().empty());
}

TEST_F(BuildRunnerTest, MaxSilentKillsTheTree) {
  auto r = request("silent", "/bin/sleep 1000 & echo $!; wait");
  r.limits.maxSilent = seconds(1);
  auto start = std::chrono::steady_clock::now();
  auto res = build(r);
  EXPECT_EQ(res.status, StepStatus::kTimedOut);
  EXPECT_EQ(res.errorMsg, "build produced no output for 1 s (maxSilent)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(20));
  EXPECT_GE(res.duration, seconds(1));
  pid_t sleeper = std::stoi(log_);
  EXPECT_TRUE(
      test::pollUntil([&] { return !processAlive(sleeper); }, seconds(10)));
}

// The total timeout despite output is timed exactly, with a scripted
// builder and a fake clock, in build_supervision_test.cc
// (TotalTimeoutIsExact): a real builder adds nothing but a wall-clock wait.

TEST_F(BuildRunnerTest, CancelKillsBackgroundGrandchild) {
  auto r = request("cancelled",
                   "/bin/sleep 1000 & echo $!; echo started > $out; wait");
  CancelFlag cancel;
  std::string seen;
  auto res = build(r, &cancel, [&](std::string_view chunk) {
    seen += chunk;
    if (seen.find('\n') != std::string::npos) cancel.cancel();
  });
  EXPECT_EQ(res.status, StepStatus::kCancelled);
  EXPECT_EQ(res.errorMsg, "build cancelled");
  ASSERT_TRUE(res.waitStatus.has_value());
  pid_t sleeper = std::stoi(seen);
  EXPECT_TRUE(
      test::pollUntil([&] { return !processAlive(sleeper); }, seconds(10)));
  EXPECT_FALSE(pathExists(path(*r.drv.outputs["out"].path)));
}

// Another thread's abort while the builder is silent: scripted, in
// build_supervision_test.cc (CancelledWhileSilent).

TEST_F(BuildRunnerTest, LogLimitKillsAndTruncates) {
  auto r = request("loud", "/usr/bin/yes kiln; /bin/sleep 1000");
  r.limits.logLimitBytes = 1000;
  auto res = build(r);
  EXPECT_EQ(res.status, StepStatus::kLogLimitExceeded);
  EXPECT_EQ(res.errorMsg, "build log exceeded the limit of 1000 bytes");
  EXPECT_EQ(res.logBytes, 1000u);
  EXPECT_EQ(log_.size(), 1000u);
  EXPECT_EQ(log_.substr(0, 10), "kiln\nkiln\n");
}

TEST_F(BuildRunnerTest, OutputLimit) {
  auto r =
      request("big", "/usr/bin/head -c 5000 /dev/zero > $out; echo x > $dev",
              {"out", "dev"});
  r.limits.outputLimitBytes = 4000;
  auto res = build(r);
  EXPECT_EQ(res.status, StepStatus::kOutputLimitExceeded);
  EXPECT_EQ(res.errorMsg,
            "the outputs' NAR size exceeds the output limit of 4000 bytes");
  EXPECT_TRUE(res.outputs.empty());
  EXPECT_FALSE(pathExists(path(*r.drv.outputs["dev"].path)));
  r.limits.outputLimitBytes = 6000;
  EXPECT_EQ(build(r).status, StepStatus::kSuccess);
}

TEST_F(BuildRunnerTest, FixedOutputHashIsChecked) {
  auto contents = std::string("hello\n");
  auto h = hashString(HashAlgo::kSha256, contents);
  auto r = request("fod", "echo hello > $out");
  auto& out = r.drv.outputs["out"];
  out.hashAlgo = "sha256";
  out.hash = h.toHex();
  out.path = storeDir_.makeFixedOutputPath("fod", false, h, {});
  r.drv.env["out"] = path(*out.path);
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg;

  out.hash = hashString(HashAlgo::kSha256, "other").toHex();
  res = build(r);
  EXPECT_EQ(res.status, StepStatus::kFailed);
  EXPECT_EQ(res.errorMsg.rfind("hash mismatch in fixed-output derivation '", 0),
            0u)
      << res.errorMsg;
  EXPECT_NE(res.errorMsg.find("got " + h.to(HashFormat::kSri)),
            std::string::npos);

  // Recursive sha1 over a directory.
  r.drv.args[1] = "/bin/mkdir $out; echo hello > $out/f";
  res = build(r);  // flat hash of a directory: refused
  EXPECT_EQ(res.status, StepStatus::kFailed);
  out.hashAlgo = "r:sha1";
  EXPECT_THROW(build(r), FormatError);  // a sha256 digest given for sha1
  out.hash = hashString(HashAlgo::kSha1, "").toHex();
  res = build(r);
  ASSERT_EQ(res.status, StepStatus::kFailed);
  auto got = res.errorMsg.substr(res.errorMsg.find("got ") + 4);
  out.hash = Hash::parse(got).toHex();
  res = build(r);
  EXPECT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg;
}

TEST_F(BuildRunnerTest, StructuredAttrsFiles) {
  auto r = request("sa",
                   "/bin/cat $NIX_ATTRS_JSON_FILE > $(/usr/bin/head -c 1000 "
                   "$NIX_ATTRS_SH_FILE | "
                   "/bin/sed -n \"s/.*'out'\\]='\\([^']*\\)'.*/\\1/p\")");
  r.drv.env = {{"__json", R"({"name":"sa","x":1})"}};
  auto res = build(r);
  ASSERT_EQ(res.status, StepStatus::kSuccess) << res.errorMsg << log_;
  EXPECT_EQ(readFile(path(*r.drv.outputs["out"].path)),
            R"({"name":"sa","outputs":{"out":")" +
                path(*r.drv.outputs["out"].path) + R"("},"x":1})");
}

TEST_F(BuildRunnerTest, RefusesAStoreNotVisibleAtItsLogicalDirectory) {
  auto c = config();
  c.store.physical = root_.path() + "/elsewhere";
  BuildRunner runner(c, launcher_, RealClock::instance());
  try {
    runner.run(request("x", "true"), [](std::string_view) {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "is not visible at the logical store directory"),
              std::string::npos);
  }
  c.store.mountedAtLogical = true;  // the caller says it is mounted there
  c.store.physical = storeDir_.dir();
  BuildRunner ok(c, launcher_, RealClock::instance());
  EXPECT_EQ(ok.run(request("y", "echo > $out"), [](std::string_view) {}).status,
            StepStatus::kSuccess);
}

}  // namespace
}  // namespace kiln::worker
