#pragma once
/// The farm declared in a TOML file for `kiln serve --config FILE`
/// (docs/operations.md, "The configuration file"): state and store, the
/// scheduler's addresses and limits, the local workers, the public keys of
/// remote workers, notifiers, projects and jobsets. Parsed with toml++;
/// every value is checked and every unknown key is an error, each reported
/// with the file, line, column and the key's dotted name.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/common/error.h"
#include "kiln/scheduler/state_db.h"
#include "limit_options.h"
#include "pressure_options.h"

namespace kiln::cli {

/// A jobset of a project (`[[project.jobset]]`).
struct ConfiguredJobset {
  std::string name;
  std::string kind = "path";  ///< "path" (a folder) or "git"
  std::string location;       ///< absolute folder, or repository URL/folder
  std::string branch;         ///< git only ("" = the remote's HEAD)
  std::string file = "default.nix";
  std::string attribute;
  std::string evaluator = "builtin";
  /// The job whose success advances the channel (docs/release.md).
  std::string channelJob = "tested";
  /// Regression gates, percent (0: not checked; docs/release.md).
  int64_t maxClosureGrowth = 0;
  int64_t maxBuildTimeGrowth = 0;
  /// Reproducibility checks: the share of successful steps built again,
  /// 0 to 1 (0: none; docs/release.md).
  double repeatFraction = 0;
  int64_t checkInterval = 60;  ///< seconds; 0 = evaluated once
  int64_t shares = 100;
  bool enabled = true;
  /// `--arg` expressions by name (a JSON object of strings).
  nlohmann::json arguments = nlohmann::json::object();
  bool operator==(const ConfiguredJobset&) const = default;
};

/// A project and its jobsets (`[[project]]`).
struct ConfiguredProject {
  std::string name;
  std::string description;
  /// The forges' webhook secret (docs/ci.md); absolute, or "" (none).
  std::string webhookSecretFile;
  std::vector<ConfiguredJobset> jobsets;
  bool operator==(const ConfiguredProject&) const = default;
};

/// A remote worker allowed to join (`[[worker_key]]`).
struct ConfiguredWorkerKey {
  std::string name;
  std::string publicKey;  ///< Z85, 40 characters
  bool operator==(const ConfiguredWorkerKey&) const = default;
};

/// `[scheduler]`: what `kiln scheduler` takes as flags.
struct SchedulerSettings {
  std::string listen = "tcp://127.0.0.1:7470";
  std::string webListen = "127.0.0.1:8470";
  int64_t metricsPort = 9470;  ///< -1: no separate /metrics port
  int64_t heartbeatMs = 10000;
  int64_t maxRetries = 3;
  int64_t retryBackoffMs = 30000;
  int64_t logLimit = int64_t{64} << 20;  ///< bytes per step
  int64_t outputLimit = 0;               ///< bytes per output NAR; 0 = none
  int64_t cachedFailureTtl = 0;          ///< seconds; 0 = until cleared
  int64_t pullCloseGrace = 600;          ///< seconds (docs/ci.md)
  std::vector<std::string> notify;       ///< KIND:ARG, as --notify
  std::string notifySecretFile;          ///< absolute, or ""
  bool webPrivate = false;  ///< reads on the web need a read-scope token
  std::vector<std::string> webHosts;      ///< host names the web answers for
  std::string webPushSecretFile;          ///< push webhook's secret; abs. or ""
  std::string cacheCompression = "zstd";  ///< zstd, xz or none
  /// The farm's binary cache (`--cache`): s3://BUCKET?endpoint=…, or a
  /// directory; "" = `<state>/binary-cache/<compression>`.
  std::string cache;
  /// Workers upload their outputs straight to the s3:// cache (`kiln
  /// scheduler --direct-uploads`; the local workers follow it, compressing
  /// as cacheCompression says: xz, else zstd).
  bool directUploads = false;
  std::string notifyCaFile;  ///< CAs of an https webhook; abs. or ""
  // Limits (`kiln scheduler`'s flags of the same names).
  int64_t maxMessageSize = int64_t{32} << 20;  ///< bytes per message
  int64_t maxUploadsPerConnection = 4;
  int64_t maxQueuedUploads = 256;
  int64_t maxConnectionsPerKey = 16;         ///< 0 = unlimited
  int64_t maxSlotsPerKey = 0;                ///< 0 = unlimited
  int64_t minFreeDisk = int64_t{256} << 20;  ///< bytes an upload leaves
  int64_t stepDeadlineMargin = 600;          ///< seconds
  // Reproducibility checks and evaluated sources (docs/release.md).
  int64_t keepRepeatNars = 30;               ///< days
  int64_t refusedCheckWait = 60;             ///< seconds
  int64_t maxSourceSize = int64_t{1} << 30;  ///< bytes; 0 = keep none
  bool operator==(const SchedulerSettings&) const = default;
};

/// `[local_workers]`: the workers `kiln serve` starts on this machine.
struct LocalWorkerSettings {
  int64_t count = 2;
  int64_t slots = 1;
  std::vector<std::string> systems;  ///< empty: what the platforms run
  std::vector<std::string> features;
  std::vector<std::string> mandatoryFeatures;
  std::string sandbox = "linux";
  std::string platforms = "native,qemu-user";
  /// The sandbox's extra host paths (absolute); empty: the plugin default.
  std::vector<std::string> extraPaths;
  /// A Nix file whose attribute `extraPathsAttribute` lists more extra
  /// paths (a collection's declared impurity, e.g. host.nix); "" = none.
  std::string extraPathsFrom;
  std::string extraPathsAttribute = "sandboxPaths";
  /// Further sandbox options, KEY=VALUE.
  std::vector<std::string> sandboxOptions;
  /// Options of the platform plugins, KEY=VALUE.
  std::vector<std::string> platformOptions;
  /// Limits per build: build_memory_max, build_pids_max, build_cpu_weight,
  /// build_disk_max, big_build_limits (as kiln worker's --build-* flags,
  /// which override them).
  BuildLimitOptions limits;
  /// Pressure thresholds: max_load_average, max_memory_pressure,
  /// max_cpu_pressure, max_io_pressure, min_free_disk (as kiln worker's
  /// flags of the same names, which override them).
  PressureOptions pressure;
  bool operator==(const LocalWorkerSettings&) const = default;
};

/// An API token `kiln serve` keeps in the scheduler's state (`[[token]]`,
/// serve_tokens.h).
struct ConfiguredToken {
  std::string name;            ///< unique in the file
  std::string scope = "read";  ///< read, operate or admin
  std::string secretFile;      ///< absolute; made (mode 0600) when missing
  bool operator==(const ConfiguredToken&) const = default;
};

/// The whole file.
struct FarmConfig {
  std::string file;      ///< the file it was read from (absolute)
  std::string stateDir;  ///< absolute, or "" (kiln's default)
  /// The farm's state in PostgreSQL (`database = "postgresql://…"`; the
  /// password from PGPASSFILE or database_password_file); "": SQLite under
  /// stateDir.
  std::string database;
  std::string databasePasswordFile;  ///< absolute, or ""
  /// The state database these name.
  scheduler::DatabaseSpec databaseSpec() const {
    return scheduler::DatabaseSpec::inStateDir(stateDir, database,
                                               databasePasswordFile);
  }
  std::string storeDir = "/nix/store";
  /// fsync each file added to the central and the workers' stores.
  bool fsyncStore = true;
  /// Where the scheduler and the local workers search plugins (absolute;
  /// with the command line's --plugin-dir, instead of the defaults).
  std::vector<std::string> pluginDirs;
  std::vector<ConfiguredToken> tokens;
  SchedulerSettings scheduler;
  LocalWorkerSettings workers;
  std::vector<ConfiguredWorkerKey> workerKeys;
  std::vector<ConfiguredProject> projects;
};

/// A configuration that cannot be used: what() lists every problem, one
/// per line, as "FILE:LINE:COLUMN: KEY: reason".
class ConfigError : public FormatError {
 public:
  explicit ConfigError(std::vector<std::string> problems);
  /// The problems, one per entry.
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

/// Parses `text` as the configuration file `file` (named in errors;
/// relative paths in it resolve against its folder). Throws ConfigError
/// listing every syntax error, unknown key, wrong type and invalid value.
FarmConfig parseFarmConfig(std::string_view text, const std::string& file);

/// Reads and parses `path` (at most 1 MiB). Throws SysError if it cannot
/// be read, ConfigError if it is not a valid configuration.
FarmConfig loadFarmConfig(const std::string& path);

}  // namespace kiln::cli
