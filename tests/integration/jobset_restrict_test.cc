// Jobsets are evaluated restricted (as Hydra's restrict-eval) by every
// evaluator plugin: a jobset that tries to read the scheduler's secret
// key, a secret file, /etc/passwd, an environment variable of the
// scheduler or a URL gets Nix's "forbidden in restricted mode" error (or ""
// for getEnv), its inputs stay readable, and nothing of those secrets
// reaches the evaluation errors or the central store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/common/error.h"
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

// Each job's evaluation error by attribute.
std::map<std::string, std::string> errorsByAttr(const std::string& state) {
  auto r = test::run({"python3", "-c",
                      "import json, sqlite3, sys\n"
                      "print(json.dumps(dict(sqlite3.connect(sys.argv[1])."
                      "execute('select attr, error from eval_errors'))))",
                      state + "/scheduler.sqlite"});
  if (r.exitCode != 0) throw Error("reading eval_errors failed: " + r.err);
  return nlohmann::json::parse(r.out).get<std::map<std::string, std::string>>();
}

// Both evaluator plugins (kiln's own `kiln eval` and Nix's
// `nix-instantiate`) evaluate a jobset restricted.
class JobsetRestrict : public ::testing::TestWithParam<std::string> {};

TEST_P(JobsetRestrict, SecretsAreRefusedAndNeverReachTheStore) {
  if (GetParam() == "nix" && !test::haveProgram("nix-instantiate"))
    GTEST_SKIP() << "no Nix";
  TempDir dir;
  std::string state = dir.path() + "/state", keys = dir.path() + "/keys",
              coll = dir.path() + "/coll", secret = dir.path() + "/secret";
  auto r = test::run({test::kilnBinary(), "key", "generate", "--out", keys,
                      "--name", "scheduler"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  writeFile(keys + "/allowed-workers", "");
  writeFile(secret, "kiln-file-secret-7c4a8d09ca3762af");
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
  leak = throw ("secret:" + builtins.readFile )" +
                                       secret + R"();
  env = mk "env" (builtins.getEnv "KILN_JOBSET_SECRET");
  path = throw ("path:" + builtins.getEnv "PATH");
  fetch = mk "fetch" (builtins.readFile (builtins.fetchurl "http://127.0.0.1:9/x"));
  input = mk "input" (builtins.readFile ./input.txt);
})");
  ASSERT_EQ(kiln(state, {"project", "create", "p"}).exitCode, 0);
  r = kiln(state, {"jobset", "create", "--project", "p", "j", "--location",
                   coll, "--check-interval", "0", "--evaluator", GetParam()});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::string log = dir.path() + "/scheduler.log";
  test::KilnProcess sched = startScheduler(state, keys, log);
  ASSERT_TRUE(sched.waitForLog("listening", 30s)) << sched.log();
  r = kiln(state, {"jobset", "eval", "--project", "p", "j", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;

  auto errors = errorsByAttr(state);
  std::string all = test::evalErrors(state);
  for (auto [attr, path] : {std::pair{"key", key},
                            {"keycopy", key},
                            {"keydir", keys},
                            {"passwd", std::string("/etc/passwd")},
                            {"leak", secret}})
    EXPECT_THAT(errors[attr],
                HasSubstr("access to absolute path '" + path +
                          "' is forbidden in restricted mode"))
        << attr << "\n" << all;
  EXPECT_THAT(errors["fetch"],
              HasSubstr("access to URI 'http://127.0.0.1:9/x' is forbidden in "
                        "restricted mode"))
      << all;
  if (GetParam() == "builtin") {  // what allows it
    EXPECT_THAT(all, HasSubstr("allow paths with --allow-path PATH"));
  }
  // getEnv gives "": no error for `env`, and `path` throws "path:" alone.
  EXPECT_FALSE(errors.count("env")) << all;
  EXPECT_THAT(errors["path"], HasSubstr("path:")) << all;
  std::string schedulerPath = std::getenv("PATH") ? std::getenv("PATH") : "";
  ASSERT_FALSE(schedulerPath.empty());
  EXPECT_THAT(all, Not(HasSubstr(schedulerPath)));
  EXPECT_THAT(all, Not(HasSubstr("kiln-file-secret")));
  EXPECT_THAT(all, Not(HasSubstr(kEnvSecret)));
  // The jobset's own inputs are readable.
  EXPECT_FALSE(errors.count("input")) << all;

  // Two jobs (env, input) got derivations; no secret is in the store.
  r = kiln(state, {"queue", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("-env.drv"));
  EXPECT_THAT(r.out, HasSubstr("-input.drv"));
  EXPECT_TRUE(anyFileContains(state + "/store", "an input of the jobset"));
  EXPECT_FALSE(anyFileContains(state + "/store", secretKey));
  EXPECT_FALSE(anyFileContains(state + "/store", kEnvSecret));
  EXPECT_FALSE(anyFileContains(state + "/store", "kiln-file-secret"));
  EXPECT_FALSE(anyFileContains(state + "/store", readFile("/etc/passwd")));
}

INSTANTIATE_TEST_SUITE_P(Evaluators, JobsetRestrict,
                         ::testing::Values("builtin", "nix"),
                         [](const auto& info) {
                           return info.param == "builtin" ? "KilnEval"
                                                          : "NixInstantiate";
                         });

}  // namespace
}  // namespace kiln
