// Jobsets are evaluated restricted (as Hydra's restrict-eval): a jobset
// that tries to read the scheduler's secret key, /etc/passwd or an
// environment variable of the scheduler gets Nix's "forbidden in
// restricted mode" error (or "" for getEnv), its inputs stay readable, and
// nothing of those secrets reaches the central store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/common/file.h"
#include "kiln_process.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

constexpr const char* kEnvSecret = "kiln-env-secret-5d41402abc4b2a76";

// A `kiln scheduler` with a real secret key and a secret in its
// environment (SIGKILLed with the test's process object).
test::KilnProcess startScheduler(const std::string& state,
                                 const std::string& keys,
                                 const std::string& log) {
  return test::KilnProcess(
      {"scheduler", "--state-dir", state, "--listen", "tcp://127.0.0.1:*",
       "--metrics-port", "0", "--secret-key-file", keys + "/scheduler.key",
       "--allowed-workers", keys + "/allowed-workers"},
      log, {{"KILN_JOBSET_SECRET", kEnvSecret}});
}

test::RunResult kiln(const std::string& state, std::vector<std::string> args) {
  args.insert(args.begin(), test::kilnBinary());
  args.insert(args.end(), {"--state-dir", state});
  return test::run(args);
}

// Whether any file below `dir` contains `needle`.
bool anyFileContains(const std::string& dir, const std::string& needle) {
  for (auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path());
    std::stringstream s;
    s << in.rdbuf();
    if (s.str().find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(JobsetRestrict, SecretsAreRefusedAndNeverReachTheStore) {
  TempDir dir;
  std::string state = dir.path() + "/state", keys = dir.path() + "/keys",
              coll = dir.path() + "/coll";
  auto r = test::run({test::kilnBinary(), "key", "generate", "--out", keys,
                      "--name", "scheduler"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  writeFile(keys + "/allowed-workers", "");
  std::string key = keys + "/scheduler.key", secretKey = readFile(key);
  createDirs(coll);
  writeFile(coll + "/input.txt", "an input of the jobset");
  writeFile(coll + "/default.nix", R"(let
  mk = name: text: derivation { inherit name text; system = "x86_64-linux"; builder = "/bin/sh"; };
in {
  key = mk "key" (builtins.readFile )" +
                                       key + R"();
  keycopy = mk "keycopy" "${)" + key + R"(}";
  keydir = mk "keydir" (builtins.toJSON (builtins.readDir )" +
                                       keys + R"());
  passwd = mk "passwd" (builtins.readFile /etc/passwd);
  env = mk "env" (builtins.getEnv "KILN_JOBSET_SECRET");
  input = mk "input" (builtins.readFile ./input.txt);
})");
  ASSERT_EQ(kiln(state, {"project", "create", "p"}).exitCode, 0);
  r = kiln(state, {"jobset", "create", "--project", "p", "j", "--location",
                   coll, "--check-interval", "0"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::string log = dir.path() + "/scheduler.log";
  test::KilnProcess sched = startScheduler(state, keys, log);
  ASSERT_TRUE(sched.waitForLog("listening", 30s)) << sched.log();
  r = kiln(state, {"jobset", "eval", "--project", "p", "j", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;

  std::string errors = test::evalErrors(state);
  for (auto [attr, path] : {std::pair{"key", key},
                            {"keycopy", key},
                            {"keydir", keys},
                            {"passwd", std::string("/etc/passwd")}})
    EXPECT_THAT(errors,
                HasSubstr(std::string(attr) + ": access to absolute path '" +
                          path + "' is forbidden in restricted mode"))
        << errors;
  EXPECT_THAT(
      errors,
      HasSubstr("allow paths with --allow-path PATH"));  // what allows it
  EXPECT_THAT(errors, Not(HasSubstr("env:")));  // getEnv gives "", no error
  EXPECT_THAT(
      errors,
      Not(HasSubstr("input:")));  // the jobset's own inputs are readable

  // Two jobs (env, input) got derivations; no secret is in the store.
  r = kiln(state, {"queue", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("-env.drv"));
  EXPECT_THAT(r.out, HasSubstr("-input.drv"));
  EXPECT_TRUE(anyFileContains(state + "/store", "an input of the jobset"));
  EXPECT_FALSE(anyFileContains(state + "/store", secretKey));
  EXPECT_FALSE(anyFileContains(state + "/store", kEnvSecret));
  EXPECT_FALSE(anyFileContains(state + "/store", readFile("/etc/passwd")));
}

}  // namespace
}  // namespace kiln
