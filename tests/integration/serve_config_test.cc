// `kiln serve --config FILE`: the farm declared in a TOML file. A bad file
// is refused with its line and key; SIGHUP applies a changed file (a jobset
// added, one no longer declared disabled) without touching queued builds,
// and a file that does not parse leaves the running configuration alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/common/sqlite.h"
#include "kiln/scheduler/state_db.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A collection of `jobs` (name → shell script) building with /bin/sh, plus
// `stuck`, for a system no worker has: it stays queued.
void writeCollection(const std::string& dir,
                     const std::vector<std::string>& jobs) {
  std::string text =
      "let mk = name: script: derivation { inherit name; system = "
      "builtins.currentSystem; PATH = \"/usr/bin:/bin\"; builder = "
      "\"/bin/sh\"; args = [ \"-c\" script ]; };\nin {\n";
  for (auto& j : jobs)
    text += "  " + j + " = mk \"" + j + "\" \"echo " + j + " > $out\";\n";
  text +=
      "  stuck = derivation { name = \"stuck\"; system = "
      "\"kiln-test-nowhere\"; builder = \"/bin/sh\"; };\n}\n";
  createDirs(dir);
  writeFile(dir + "/default.nix", text);
}

// The farm's config: one local worker without sandbox, project "ci" with
// the jobsets `jobsets` (name = folder, evaluated once).
std::string configText(const std::string& dir, int port, int web,
                       const std::vector<std::string>& jobsets) {
  std::string text = "state_dir = \"" + dir + "/state\"\n[scheduler]\n" +
                     "listen = \"tcp://127.0.0.1:" + std::to_string(port) +
                     "\"\nweb_listen = \"127.0.0.1:" + std::to_string(web) +
                     "\"\nmetrics_port = -1\n[local_workers]\ncount = 1\n" +
                     "sandbox = \"none\"\n[[project]]\nname = \"ci\"\n";
  for (auto& j : jobsets)
    text += "[[project.jobset]]\nname = \"" + j + "\"\npath = \"" + j +
            "\"\ncheck_interval = 0\n";
  return text;
}

// The id and finished flag of every build of job `job`.
std::vector<std::pair<int64_t, bool>> buildsOf(const std::string& state,
                                               const std::string& job) {
  scheduler::StateDb db(state + "/scheduler.sqlite",
                        scheduler::StateDb::ReadOnly{});
  auto s = db.db().prepare("SELECT id, finished FROM builds WHERE job = ?");
  s.bind(job);
  std::vector<std::pair<int64_t, bool>> out;
  while (s.step()) out.push_back({s.getInt(0), s.getInt(1) != 0});
  return out;
}

bool jobsetEnabled(const std::string& state, const std::string& name) {
  scheduler::StateDb db(state + "/scheduler.sqlite",
                        scheduler::StateDb::ReadOnly{});
  auto j = db.jobsetByName("ci", name);
  return j && j->enabled;
}

TEST(ServeConfig, ABadFileIsRefusedWithItsLineAndKey) {
  TempDir dir;
  writeFile(dir.path() + "/kiln.toml",
            "[scheduler]\nlisten = \"tcp://127.0.0.1:1\"\nheartbeat = 5\n");
  auto r = test::run(
      {test::kilnBinary(), "serve", "--config", dir.path() + "/kiln.toml"});
  EXPECT_NE(r.exitCode, 0);
  EXPECT_THAT(r.err, HasSubstr(dir.path() +
                               "/kiln.toml:3:1: scheduler.heartbeat: unknown "
                               "key"));
}

TEST(ServeConfig, SighupAddsAndDisablesJobsetsAndKeepsTheQueue) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  TempDir dir;
  std::string state = dir.path() + "/state", cfg = dir.path() + "/kiln.toml";
  writeCollection(dir.path() + "/a", {"aone"});
  writeCollection(dir.path() + "/b", {"bone", "btwo"});
  int port = test::freeLoopbackPort(), web = test::freeLoopbackPort();
  writeFile(cfg, configText(dir.path(), port, web, {"a"}));
  test::KilnProcess serve({"serve", "--config", cfg},
                          dir.path() + "/serve.log");
  ASSERT_TRUE(serve.waitForLog("builds: 1/2 finished, 1 succeeded", 180s))
      << serve.log();
  auto stuck = buildsOf(state, "stuck");
  ASSERT_EQ(stuck.size(), 1u);
  EXPECT_FALSE(stuck[0].second);

  // A file that does not parse: reported, the farm keeps running as it was.
  writeFile(cfg, configText(dir.path(), port, web, {"a", "b"}) +
                     "chek_interval = 3\n");
  serve.signal(SIGHUP);
  ASSERT_TRUE(serve.waitForLog("previous configuration stays in force", 60s))
      << serve.log();
  EXPECT_THAT(serve.log(),
              HasSubstr(cfg + ":19:1: project[0].jobset[1].chek_interval: "
                              "unknown key"));

  // Jobset b added: evaluated and built; a's queued build untouched.
  writeFile(cfg, configText(dir.path(), port, web, {"a", "b"}));
  serve.signal(SIGHUP);
  ASSERT_TRUE(serve.waitForLog("builds: 3/5 finished, 3 succeeded", 180s))
      << serve.log();
  EXPECT_THAT(serve.log(), HasSubstr("added project ci, jobset b"));
  EXPECT_THAT(serve.log(), HasSubstr("of project ci, jobset b"));
  auto after = buildsOf(state, "stuck");
  ASSERT_EQ(after.size(), 2u);  // a's (the same row) and b's
  EXPECT_EQ(after[0], stuck[0]);
  EXPECT_FALSE(after[1].second);

  // Jobset a no longer declared: disabled, its builds kept.
  writeFile(cfg, configText(dir.path(), port, web, {"b"}));
  serve.signal(SIGHUP);
  ASSERT_TRUE(serve.waitForLog("disabled project ci, jobset a", 60s))
      << serve.log();
  ASSERT_TRUE(test::pollUntil([&] { return !jobsetEnabled(state, "a"); }, 60s));
  EXPECT_TRUE(jobsetEnabled(state, "b"));
  EXPECT_EQ(buildsOf(state, "stuck"), after);
  EXPECT_TRUE(serve.running()) << serve.log();
  EXPECT_EQ(serve.stop(), 0) << serve.log();
}

}  // namespace
}  // namespace kiln
