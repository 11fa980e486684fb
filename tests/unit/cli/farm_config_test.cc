// The configuration file of `kiln serve --config` (cli/src/farm_config.h):
// a complete file read into every field, defaults, and each kind of bad
// file reported with its file, line and key.
#include "farm_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/protocol/keys.h"

namespace kiln::cli {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kFile = "/etc/kiln/farm.toml";

// The problems parsing `text` reports (fails the test if it parses).
std::vector<std::string> problemsOf(const std::string& text) {
  try {
    parseFarmConfig(text, kFile);
  } catch (const ConfigError& e) {
    return e.problems();
  }
  ADD_FAILURE() << "parsed:\n" << text;
  return {};
}

TEST(FarmConfigTest, ReadsEveryKey) {
  std::string key = protocol::generateKeyPair().publicKey;
  FarmConfig c = parseFarmConfig(R"(
state_dir = "state"
store_dir = "/kiln/store"
fsync_store = false
plugin_dirs = ["plugins", "/usr/lib/kiln/plugins"]
[[token]]
name = "ci"
scope = "operate"
secret_file = "tokens/ci.secret"
[[token]]
name = "reader"
scope = "read"
secret_file = "/run/kiln/reader"
[scheduler]
listen = "tcp://0.0.0.0:7000"
web_listen = "0.0.0.0:8000"
metrics_port = -1
heartbeat_ms = 2000
max_retries = 5
retry_backoff_ms = 100
log_limit = 4096
output_limit = 1000000
cached_failure_ttl = 3600
notify = ["command:/bin/true"]
notify_secret_file = "hook.key"
web_private = true
web_hosts = ["farm.example.org", "*"]
web_push_secret_file = "push.key"
cache_compression = "xz"
notify_ca_file = "ca.pem"
max_message_size = 2097152
max_uploads_per_connection = 2
max_queued_uploads = 10
max_connections_per_key = 3
max_slots_per_key = 8
min_free_disk = 1000
step_deadline_margin = 60
keep_repeat_nars = 7
refused_check_wait = 5
max_source_size = 4096
[local_workers]
count = 3
slots = 4
systems = ["x86_64-linux"]
features = ["kvm", "big-parallel"]
mandatory_features = ["benchmark"]
sandbox = "none"
platforms = "native"
extra_paths = ["/usr/bin", "tarballs"]
extra_paths_from = "pkgs/host.nix"
extra_paths_attribute = "paths"
sandbox_options = ["build-user=nobody"]
platform_options = ["qemu-dir=/opt/qemu"]
build_memory_max = "4G"
build_pids_max = "2048"
build_cpu_weight = "100"
build_disk_max = "20G"
big_build_limits = "memory-max=16G"
max_memory_pressure = 20
max_io_pressure = 12.5
max_load_average = "8"
min_free_disk = "10G"
[[worker_key]]
name = "builder1"
public_key = ")" + key + R"("
[[project]]
name = "main"
description = "the package set"
webhook_secret_file = "forge.key"
[[project.jobset]]
name = "trunk"
git = "https://example.org/pkgs.git"
branch = "main"
file = "release.nix"
attribute = "jobs"
evaluator = "nix"
channel_job = "release.tested"
repeat_fraction = 0.05
check_interval = 30
shares = 7
enabled = false
arguments = { system = '"x86_64-linux"' }
[[project.jobset]]
name = "local"
path = "../pkgset"
)",
                                 kFile);
  EXPECT_EQ(c.file, kFile);
  EXPECT_EQ(c.stateDir, "/etc/kiln/state");
  EXPECT_EQ(c.storeDir, "/kiln/store");
  EXPECT_EQ(c.scheduler.listen, "tcp://0.0.0.0:7000");
  EXPECT_EQ(c.scheduler.webListen, "0.0.0.0:8000");
  EXPECT_EQ(c.scheduler.metricsPort, -1);
  EXPECT_EQ(c.scheduler.heartbeatMs, 2000);
  EXPECT_EQ(c.scheduler.maxRetries, 5);
  EXPECT_EQ(c.scheduler.retryBackoffMs, 100);
  EXPECT_EQ(c.scheduler.logLimit, 4096);
  EXPECT_EQ(c.scheduler.outputLimit, 1000000);
  EXPECT_EQ(c.scheduler.cachedFailureTtl, 3600);
  EXPECT_THAT(c.scheduler.notify, ElementsAre("command:/bin/true"));
  EXPECT_EQ(c.scheduler.notifySecretFile, "/etc/kiln/hook.key");
  EXPECT_TRUE(c.scheduler.webPrivate);
  EXPECT_EQ(c.scheduler.webHosts,
            (std::vector<std::string>{"farm.example.org", "*"}));
  EXPECT_EQ(c.scheduler.webPushSecretFile, "/etc/kiln/push.key");
  EXPECT_EQ(c.scheduler.cacheCompression, "xz");
  EXPECT_EQ(c.scheduler.notifyCaFile, "/etc/kiln/ca.pem");
  EXPECT_EQ(c.scheduler.maxMessageSize, 2097152);
  EXPECT_EQ(c.scheduler.maxUploadsPerConnection, 2);
  EXPECT_EQ(c.scheduler.maxQueuedUploads, 10);
  EXPECT_EQ(c.scheduler.maxConnectionsPerKey, 3);
  EXPECT_EQ(c.scheduler.maxSlotsPerKey, 8);
  EXPECT_EQ(c.scheduler.minFreeDisk, 1000);
  EXPECT_EQ(c.scheduler.stepDeadlineMargin, 60);
  EXPECT_EQ(c.scheduler.keepRepeatNars, 7);
  EXPECT_EQ(c.scheduler.refusedCheckWait, 5);
  EXPECT_EQ(c.scheduler.maxSourceSize, 4096);
  EXPECT_FALSE(c.fsyncStore);
  EXPECT_THAT(c.pluginDirs,
              ElementsAre("/etc/kiln/plugins", "/usr/lib/kiln/plugins"));
  ASSERT_EQ(c.tokens.size(), 2u);
  EXPECT_EQ(c.tokens[0],
            (ConfiguredToken{"ci", "operate", "/etc/kiln/tokens/ci.secret"}));
  EXPECT_EQ(c.tokens[1],
            (ConfiguredToken{"reader", "read", "/run/kiln/reader"}));
  EXPECT_EQ(c.workers.count, 3);
  EXPECT_EQ(c.workers.slots, 4);
  EXPECT_THAT(c.workers.systems, ElementsAre("x86_64-linux"));
  EXPECT_THAT(c.workers.features, ElementsAre("kvm", "big-parallel"));
  EXPECT_THAT(c.workers.mandatoryFeatures, ElementsAre("benchmark"));
  EXPECT_EQ(c.workers.sandbox, "none");
  EXPECT_EQ(c.workers.platforms, "native");
  EXPECT_EQ(c.workers.pressure,
            (PressureOptions{"8", "20", "", "12.5", "10G"}));
  EXPECT_EQ(c.workers.limits,
            (BuildLimitOptions{"4G", "2048", "100", "20G", "memory-max=16G"}));
  EXPECT_THAT(c.workers.extraPaths,
              ElementsAre("/usr/bin", "/etc/kiln/tarballs"));
  EXPECT_EQ(c.workers.extraPathsFrom, "/etc/kiln/pkgs/host.nix");
  EXPECT_EQ(c.workers.extraPathsAttribute, "paths");
  EXPECT_THAT(c.workers.sandboxOptions, ElementsAre("build-user=nobody"));
  EXPECT_THAT(c.workers.platformOptions, ElementsAre("qemu-dir=/opt/qemu"));
  ASSERT_EQ(c.workerKeys.size(), 1u);
  EXPECT_EQ(c.workerKeys[0].name, "builder1");
  EXPECT_EQ(c.workerKeys[0].publicKey, key);
  ASSERT_EQ(c.projects.size(), 1u);
  EXPECT_EQ(c.projects[0].description, "the package set");
  EXPECT_EQ(c.projects[0].webhookSecretFile, "/etc/kiln/forge.key");
  ASSERT_EQ(c.projects[0].jobsets.size(), 2u);
  const ConfiguredJobset& t = c.projects[0].jobsets[0];
  EXPECT_EQ(t.kind, "git");
  EXPECT_EQ(t.location, "https://example.org/pkgs.git");
  EXPECT_EQ(t.branch, "main");
  EXPECT_EQ(t.file, "release.nix");
  EXPECT_EQ(t.attribute, "jobs");
  EXPECT_EQ(t.evaluator, "nix");
  EXPECT_EQ(t.channelJob, "release.tested");
  EXPECT_DOUBLE_EQ(t.repeatFraction, 0.05);
  EXPECT_EQ(t.checkInterval, 30);
  EXPECT_EQ(t.shares, 7);
  EXPECT_FALSE(t.enabled);
  EXPECT_EQ(t.arguments, (nlohmann::json{{"system", "\"x86_64-linux\""}}));
  const ConfiguredJobset& l = c.projects[0].jobsets[1];
  EXPECT_EQ(l.kind, "path");
  EXPECT_EQ(l.channelJob, "tested");  // the default
  EXPECT_EQ(l.repeatFraction, 0);
  EXPECT_EQ(l.location, "/etc/pkgset");
  EXPECT_EQ(l.file, "default.nix");
  EXPECT_TRUE(l.enabled);
}

TEST(FarmConfigTest, AnEmptyFileGivesTheDefaults) {
  FarmConfig c = parseFarmConfig("", kFile);
  EXPECT_EQ(c.stateDir, "");
  EXPECT_EQ(c.storeDir, "/nix/store");
  EXPECT_EQ(c.scheduler, SchedulerSettings{});
  EXPECT_EQ(c.workers, LocalWorkerSettings{});
  EXPECT_TRUE(c.projects.empty());
  EXPECT_TRUE(c.workerKeys.empty());
  EXPECT_TRUE(c.tokens.empty());
  EXPECT_TRUE(c.pluginDirs.empty());
  EXPECT_TRUE(c.fsyncStore);
}

// `database` puts the farm's state in PostgreSQL; a URL with a password
// (it would reach the scheduler's command line) or of another kind is
// refused before anything starts.
TEST(FarmConfigTest, TheDatabaseIsAPostgresUrlWithoutAPassword) {
  FarmConfig c = parseFarmConfig(
      "state_dir = \"s\"\ndatabase = \"postgresql://kiln@db:5432/kiln\"\n"
      "database_password_file = \"pw\"\n",
      kFile);
  EXPECT_EQ(c.database, "postgresql://kiln@db:5432/kiln");
  EXPECT_TRUE(c.databasePasswordFile.ends_with("/pw"));
  EXPECT_TRUE(c.databaseSpec().isPostgres());
  EXPECT_EQ(parseFarmConfig("", kFile).databaseSpec().isPostgres(), false);
  EXPECT_THAT(
      problemsOf("database = \"postgresql://kiln:secret@db/kiln\"\n"),
      ElementsAre(AllOf(HasSubstr("database"), HasSubstr("PGPASSFILE"))));
  EXPECT_THAT(problemsOf("database = \"mysql://db/kiln\"\n"),
              ElementsAre(HasSubstr("not a PostgreSQL URL")));
}

TEST(FarmConfigTest, ASyntaxErrorNamesTheLine) {
  EXPECT_THAT(problemsOf("state_dir = \"x\"\n\nlisten = = 3\n"),
              ElementsAre(HasSubstr(kFile + ":3:")));
}

TEST(FarmConfigTest, UnknownKeysAreErrors) {
  auto p = problemsOf(
      "stat_dir = \"x\"\n[scheduler]\nlisten = \"tcp://h:1\"\n"
      "max_retry = 2\n[[project]]\nname = \"p\"\n[[project.jobset]]\n"
      "name = \"j\"\npath = \".\"\nchek_interval = 3\n");
  EXPECT_THAT(p,
              ElementsAre(kFile + ":1:1: stat_dir: unknown key",
                          kFile + ":4:1: scheduler.max_retry: unknown key",
                          kFile + ":10:1: project[0].jobset[0].chek_interval: "
                                  "unknown key"));
}

TEST(FarmConfigTest, WrongTypesNameTheKey) {
  auto p = problemsOf(
      "[local_workers]\ncount = \"two\"\nsystems = \"x86_64-linux\"\n"
      "[scheduler]\nmetrics_port = 1.5\n");
  ASSERT_EQ(p.size(), 3u) << ::testing::PrintToString(p);
  EXPECT_THAT(p, ElementsAre(HasSubstr(":2:9: local_workers.count: must be "
                                       "an integer"),
                             HasSubstr(":3:11: local_workers.systems: must be "
                                       "an array"),
                             HasSubstr(":5:16: scheduler.metrics_port: must "
                                       "be an integer")));
}

TEST(FarmConfigTest, InvalidValuesAreRefused) {
  auto p = problemsOf(
      "store_dir = \"relative\"\n[scheduler]\nlisten = \"127.0.0.1:7\"\n"
      "heartbeat_ms = 0\nnotify = [\"nowhere\"]\n[local_workers]\n"
      "slots = 0\nsandbox_options = [\"extra-paths=/bin\"]\n"
      "[[worker_key]]\nname = \"w\"\npublic_key = \"short\"\n");
  ASSERT_EQ(p.size(), 7u) << ::testing::PrintToString(p);
  EXPECT_THAT(p[0], HasSubstr(":1:13: store_dir: must be an absolute path"));
  EXPECT_THAT(p[1], HasSubstr(":3:10: scheduler.listen: must be a ZeroMQ"));
  EXPECT_THAT(p[2], HasSubstr(":4:16: scheduler.heartbeat_ms: must be 1.."));
  EXPECT_THAT(p[3], HasSubstr(":5:11: scheduler.notify: must be KIND:"));
  EXPECT_THAT(p[4], HasSubstr(":7:9: local_workers.slots: must be 1..256"));
  EXPECT_THAT(p[5], HasSubstr(":8:20: local_workers.sandbox_options: give"));
  EXPECT_THAT(p[6], HasSubstr(":11:14: worker_key[0].public_key: not a"));
}

TEST(FarmConfigTest, BadBuildLimitsNameTheKey) {
  auto p = problemsOf(
      "[local_workers]\nbuild_memory_max = \"2GB\"\n"
      "big_build_limits = \"pids-max=0\"\n");
  ASSERT_EQ(p.size(), 2u) << ::testing::PrintToString(p);
  EXPECT_THAT(p[0], HasSubstr("local_workers.build_memory_max: "
                              "--build-memory-max: invalid size '2GB'"));
  EXPECT_THAT(p[1], HasSubstr("local_workers.big_build_limits: "));
}

TEST(FarmConfigTest, BadPressureThresholdsNameTheKey) {
  auto p = problemsOf(
      "[local_workers]\nmax_memory_pressure = 120\n"
      "min_free_disk = \"lots\"\nmax_cpu_pressure = true\n");
  ASSERT_EQ(p.size(), 3u) << ::testing::PrintToString(p);
  std::string all = ::testing::PrintToString(p);
  EXPECT_THAT(all, HasSubstr("local_workers.max_memory_pressure: "
                             "--max-memory-pressure: invalid value '120'"));
  EXPECT_THAT(all, HasSubstr("local_workers.min_free_disk: "));
  EXPECT_THAT(all,
              HasSubstr("local_workers.max_cpu_pressure: must be a string"));
}

TEST(FarmConfigTest, BadWebAndCacheSettingsNameTheKey) {
  auto p = problemsOf(
      "[scheduler]\nweb_private = \"yes\"\ncache_compression = \"gzip\"\n"
      "web_push_secret_file = \"\"\nweb_hosts = [\"evil.example/x\"]\n");
  ASSERT_EQ(p.size(), 4u) << ::testing::PrintToString(p);
  EXPECT_THAT(p[0], HasSubstr("farm.toml:2:15: scheduler.web_private: must be "
                              "true or false"));
  EXPECT_THAT(p[1], HasSubstr("farm.toml:3:21: scheduler.cache_compression: "
                              "must be 'zstd', 'xz' or 'none'"));
  EXPECT_THAT(p[2],
              HasSubstr("farm.toml:4:24: scheduler.web_push_secret_file"));
  EXPECT_THAT(p[3], HasSubstr("scheduler.web_hosts: not a host name"));
}

TEST(FarmConfigTest, TheCacheIsABucketOrADirectoryWithoutCredentials) {
  auto c = parseFarmConfig(
      "[scheduler]\ncache = \"s3://farm?endpoint=http://s3:8480\"\n", kFile);
  EXPECT_EQ(c.scheduler.cache, "s3://farm?endpoint=http://s3:8480");
  EXPECT_EQ(parseFarmConfig("[scheduler]\ncache = \"/srv/cache\"\n", kFile)
                .scheduler.cache,
            "/srv/cache");
  EXPECT_EQ(parseFarmConfig("", kFile).scheduler.cache, "");
  // Credentials have no place in the file: an unknown parameter is refused.
  auto p = problemsOf(
      "[scheduler]\ncache = "
      "\"s3://farm?endpoint=http://s3:8480&secret=abc\"\n");
  ASSERT_EQ(p.size(), 1u) << ::testing::PrintToString(p);
  EXPECT_THAT(p[0],
              HasSubstr("scheduler.cache: 's3://farm?endpoint=http://"
                        "s3:8480&secret=abc': unknown parameter 'secret'"));
  p = problemsOf("[scheduler]\ncache = \"http://cache.example.org\"\n");
  ASSERT_EQ(p.size(), 1u) << ::testing::PrintToString(p);
  EXPECT_THAT(p[0], HasSubstr("scheduler.cache: must be s3://BUCKET"));
}

TEST(FarmConfigTest, DirectUploadsNeedTheCacheOnAnObjectStore) {
  auto c = parseFarmConfig(
      "[scheduler]\ncache = \"s3://farm?endpoint=http://s3:8480\"\n"
      "direct_uploads = true\n",
      kFile);
  EXPECT_TRUE(c.scheduler.directUploads);
  EXPECT_FALSE(parseFarmConfig("", kFile).scheduler.directUploads);
  auto p = problemsOf(
      "[scheduler]\ncache = \"/srv/cache\"\ndirect_uploads = true\n");
  ASSERT_EQ(p.size(), 1u) << ::testing::PrintToString(p);
  EXPECT_THAT(p[0], HasSubstr("scheduler.direct_uploads: needs the cache on "
                              "an object store"));
}

TEST(FarmConfigTest, JobsetsNeedANameAndOneLocation) {
  auto p = problemsOf(
      "[[project]]\nname = \"p\"\n[[project.jobset]]\npath = \".\"\n"
      "git = \"x\"\n[[project.jobset]]\nname = \"b\"\nbranch = \"main\"\n"
      "path = \".\"\nevaluator = \"gu le\"\nfile = \"../x.nix\"\n");
  ASSERT_EQ(p.size(), 5u) << ::testing::PrintToString(p);
  EXPECT_THAT(p[0], HasSubstr(":3:1: project[0].jobset[0].name: missing"));
  EXPECT_THAT(p[1], HasSubstr(":3:1: project[0].jobset[0].path: give either "
                              "path or git, not both"));
  EXPECT_THAT(p[2], HasSubstr(":8:10: project[0].jobset[1].branch: only a "
                              "git"));
  EXPECT_THAT(p[3], HasSubstr(":10:13: project[0].jobset[1].evaluator: must"));
  EXPECT_THAT(p[4], HasSubstr(":11:8: project[0].jobset[1].file: must be a "
                              "relative path"));
}

TEST(FarmConfigTest, AChannelJobIsAJobName) {
  auto p = problemsOf(
      "[[project]]\nname = \"p\"\n[[project.jobset]]\nname = \"a\"\n"
      "path = \".\"\nchannel_job = \"\"\n");
  ASSERT_EQ(p.size(), 1u) << ::testing::PrintToString(p);
  EXPECT_THAT(p[0], HasSubstr("project[0].jobset[0].channel_job: must be a "
                              "job name"));
}

TEST(FarmConfigTest, ARepeatFractionIsFromZeroToOne) {
  for (const char* bad : {"1.5", "-0.1", "\"0.1\"", "nan"}) {
    auto p = problemsOf(
        std::string("[[project]]\nname = \"p\"\n[[project.jobset]]\n"
                    "name = \"a\"\npath = \".\"\nrepeat_fraction = ") +
        bad + "\n");
    ASSERT_EQ(p.size(), 1u) << bad << ::testing::PrintToString(p);
    EXPECT_THAT(p[0], HasSubstr("project[0].jobset[0].repeat_fraction: must "
                                "be a number from 0 to 1"));
  }
  FarmConfig c = parseFarmConfig(
      "[[project]]\nname = \"p\"\n[[project.jobset]]\nname = \"a\"\n"
      "path = \".\"\nrepeat_fraction = 1\n",
      kFile);
  EXPECT_EQ(c.projects[0].jobsets[0].repeatFraction, 1.0);
}

TEST(FarmConfigTest, DuplicateNamesAreRefused) {
  auto p = problemsOf(
      "[[project]]\nname = \"p\"\n[[project.jobset]]\nname = \"a\"\n"
      "path = \".\"\n[[project.jobset]]\nname = \"a\"\npath = \"..\"\n"
      "[[project]]\nname = \"p\"\n");
  ASSERT_EQ(p.size(), 2u) << ::testing::PrintToString(p);
  EXPECT_THAT(p[0], HasSubstr(":7:8: project[0].jobset[1].name: jobset 'a' "
                              "is declared twice"));
  EXPECT_THAT(p[1], HasSubstr("project[1].name: project 'p' is declared "
                              "twice"));
}

TEST(FarmConfigTest, BadTokensNameFileLineAndKey) {
  auto p = problemsOf(
      "[[token]]\nname = \"ci\"\nscope = \"root\"\nsecret_file = \"a\"\n"
      "[[token]]\nname = \"ci\"\nscope = \"read\"\nsecret_file = \"a\"\n"
      "[[token]]\nscope = \"read\"\nsecret = \"kiln_x\"\n");
  ASSERT_EQ(p.size(), 6u) << ::testing::PrintToString(p);
  EXPECT_EQ(p[0], kFile +
                      ":3:9: token[0].scope: must be 'read', 'operate' "
                      "or 'admin'");
  EXPECT_EQ(p[1], kFile + ":6:8: token[1].name: token 'ci' is declared twice");
  EXPECT_EQ(p[2], kFile +
                      ":8:15: token[1].secret_file: /etc/kiln/a is the "
                      "secret of another token too");
  EXPECT_EQ(p[3], kFile + ":9:1: token[2].name: missing (required)");
  EXPECT_EQ(p[4], kFile + ":9:1: token[2].secret_file: missing (required)");
  EXPECT_EQ(p[5], kFile + ":11:1: token[2].secret: unknown key");
}

TEST(FarmConfigTest, LimitsOutOfRangeNameTheKey) {
  auto p = problemsOf(
      "fsync_store = 1\nplugin_dirs = [\"\"]\n[scheduler]\n"
      "max_message_size = 1000\nmax_uploads_per_connection = 0\n"
      "step_deadline_margin = -1\n[local_workers]\n"
      "platform_options = [\"qemu\"]\n");
  ASSERT_EQ(p.size(), 6u) << ::testing::PrintToString(p);
  EXPECT_THAT(p[0], HasSubstr(":1:15: fsync_store: must be true or false"));
  EXPECT_THAT(p[1], HasSubstr(":2:16: plugin_dirs: must be a path"));
  EXPECT_THAT(p[2], HasSubstr(":4:20: scheduler.max_message_size: must be "
                              "1048576..268435456"));
  EXPECT_THAT(p[3], HasSubstr(":5:30: scheduler.max_uploads_per_connection: "
                              "must be 1..1024"));
  EXPECT_THAT(p[4], HasSubstr(":6:24: scheduler.step_deadline_margin: must "
                              "be 0..604800"));
  EXPECT_THAT(p[5], HasSubstr(":8:21: local_workers.platform_options: must "
                              "be KEY=VALUE"));
}

// The reproducibility checks' and evaluated sources' settings are bounded
// as the scheduler's flags of the same names.
TEST(FarmConfigTest, CheckAndSourceSettingsOutOfRangeNameTheKey) {
  auto p = problemsOf(
      "[scheduler]\nkeep_repeat_nars = 40000\nrefused_check_wait = -1\n"
      "max_source_size = -5\n");
  ASSERT_EQ(p.size(), 3u) << ::testing::PrintToString(p);
  EXPECT_THAT(p[0], HasSubstr("scheduler.keep_repeat_nars: must be 0..36500"));
  EXPECT_THAT(p[1],
              HasSubstr("scheduler.refused_check_wait: must be 0..604800"));
  EXPECT_THAT(p[2], HasSubstr("scheduler.max_source_size: must be 0.."));
}

TEST(FarmConfigTest, AMissingFileIsRefused) {
  EXPECT_THROW(loadFarmConfig("/nonexistent/kiln.toml"), SysError);
}

TEST(FarmConfigTest, AJobsetWithoutLocationIsRefused) {
  EXPECT_THAT(problemsOf("[[project]]\nname = \"p\"\n[[project.jobset]]\n"
                         "name = \"j\"\n"),
              ElementsAre(HasSubstr(":3:1: project[0].jobset[0].path: missing: "
                                    "give path (a folder) or git")));
}

}  // namespace
}  // namespace kiln::cli
