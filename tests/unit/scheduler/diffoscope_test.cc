// The reproducibility checks' reports (diffoscope.h): the real diffoscope
// on two small folders (skipped when it is not installed), a scripted
// stand-in for the time limit and the output bound, and the queue that
// keeps comparisons off the caller's thread.
#include "kiln/scheduler/diffoscope.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <sstream>
#include <thread>

#include "kiln/common/file.h"

namespace kiln::scheduler {
namespace {

bool haveDiffoscope() {
  return access("/usr/bin/diffoscope", X_OK) == 0 ||
         access("/usr/local/bin/diffoscope", X_OK) == 0;
}

// A shell script standing in for diffoscope.
std::string script(const TempDir& dir, const std::string& body) {
  std::string p = dir.path() + "/fake-diffoscope";
  writeFile(p, "#!/bin/sh\n" + body + "\n");
  chmod(p.c_str(), 0755);
  return p;
}

class DiffoscopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto* d : {"/a", "/b"}) mkdir((dir_.path() + d).c_str(), 0755);
  }
  TempDir dir_{"kiln-diffoscope"};
  RealProcessLauncher launcher_;
};

TEST_F(DiffoscopeTest, RealDiffoscopeShowsTheDifferingBytes) {
  if (!haveDiffoscope()) GTEST_SKIP() << "diffoscope is not installed";
  writeFile(dir_.path() + "/a/stamp", "built at 123456789\n");
  writeFile(dir_.path() + "/b/stamp", "built at 987654321\n");
  DiffoscopeDiffer d(launcher_, {std::chrono::minutes(2), 1 << 20});
  auto r = d.diff(dir_.path() + "/a", dir_.path() + "/b");
  EXPECT_EQ(r.outcome, DiffReport::Outcome::kDiffers) << r.text;
  EXPECT_NE(r.text.find("123456789"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("987654321"), std::string::npos) << r.text;
}

TEST_F(DiffoscopeTest, RealDiffoscopeFindsEqualFoldersSame) {
  if (!haveDiffoscope()) GTEST_SKIP() << "diffoscope is not installed";
  writeFile(dir_.path() + "/a/f", "same\n");
  writeFile(dir_.path() + "/b/f", "same\n");
  DiffoscopeDiffer d(launcher_, {std::chrono::minutes(2), 1 << 20});
  auto r = d.diff(dir_.path() + "/a", dir_.path() + "/b");
  EXPECT_EQ(r.outcome, DiffReport::Outcome::kSame) << r.text;
}

TEST_F(DiffoscopeTest, TimeLimitKillsTheRun) {
  auto p = script(dir_, "echo partial; exec sleep 600");
  DiffoscopeDiffer d(launcher_, {std::chrono::milliseconds(200), 1 << 20}, p);
  auto r = d.diff("x", "y");
  EXPECT_EQ(r.outcome, DiffReport::Outcome::kTimedOut);
  EXPECT_EQ(r.text, "partial\n");
}

TEST_F(DiffoscopeTest, ReportIsBoundedAndExitCodesMap) {
  auto big = script(dir_, "head -c 100000 /dev/zero | tr '\\0' x; exit 1");
  auto r = DiffoscopeDiffer(launcher_, {std::chrono::minutes(1), 1000}, big)
               .diff("x", "y");
  EXPECT_EQ(r.outcome, DiffReport::Outcome::kDiffers);
  EXPECT_EQ(r.text, std::string(1000, 'x'));
  EXPECT_TRUE(r.truncated);
  auto bad = script(dir_, "echo broken; exit 2");
  EXPECT_EQ(DiffoscopeDiffer(launcher_, {}, bad).diff("x", "y").outcome,
            DiffReport::Outcome::kFailed);
  EXPECT_EQ(DiffoscopeDiffer(launcher_, {}, dir_.path() + "/missing")
                .diff("x", "y")
                .outcome,
            DiffReport::Outcome::kUnavailable);
}

// A differ that reports which thread ran it.
class ThreadDiffer : public Differ {
 public:
  DiffReport diff(const std::string& a, const std::string& b) override {
    std::ostringstream id;
    id << std::this_thread::get_id();
    return {DiffReport::Outcome::kDiffers, a + b + "@" + id.str(), false};
  }
};

TEST(DiffQueueTest, RunsOffTheCallersThreadInOrderAndBounded) {
  ThreadDiffer differ;
  std::promise<std::string> first, second;
  {
    DiffQueue q(differ, 2);
    EXPECT_TRUE(
        q.submit("a", "b", [&](DiffReport r) { first.set_value(r.text); }));
    EXPECT_TRUE(
        q.submit("c", "d", [&](DiffReport r) { second.set_value(r.text); }));
    auto f = first.get_future(), s = second.get_future();
    std::string a = f.get(), c = s.get();
    std::ostringstream self;
    self << std::this_thread::get_id();
    EXPECT_EQ(a.substr(0, 3), "ab@");
    EXPECT_EQ(c.substr(0, 3), "cd@");
    EXPECT_NE(a.substr(3), self.str());
  }
  DiffQueue full(differ, 0);
  EXPECT_FALSE(full.submit("a", "b", [](DiffReport) {}));
}

}  // namespace
}  // namespace kiln::scheduler
