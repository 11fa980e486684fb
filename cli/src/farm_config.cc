// The farm's configuration file (farm_config.h).
#include "farm_config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <functional>
#include <regex>
#include <set>
#include <tuple>

#include "kiln/common/file.h"
#include "kiln/protocol/keys.h"
#include "kiln/store/binary_cache.h"

namespace kiln::cli {
namespace {

constexpr size_t kMaxFileBytes = 1 << 20;
constexpr size_t kMaxString = 4096;
constexpr size_t kMaxList = 256;

std::string joinLines(const std::vector<std::string>& v) {
  std::string out;
  for (auto& s : v) out += (out.empty() ? "" : "\n") + s;
  return out;
}

// Where problems are collected, and how relative paths resolve.
class Problems {
 public:
  Problems(std::string file, std::string dir)
      : file_(std::move(file)), dir_(std::move(dir)) {}
  void add(const toml::source_region& at, const std::string& key,
           const std::string& reason) {
    found_.push_back({at.begin.line, at.begin.column,
                      file_ + ":" + std::to_string(at.begin.line) + ":" +
                          std::to_string(at.begin.column) + ": " + key + ": " +
                          reason});
  }
  // `p` made absolute against the file's folder, normalized.
  std::string resolve(const std::string& p) const {
    std::filesystem::path path(p);
    if (path.is_relative()) path = std::filesystem::path(dir_) / path;
    std::string s = path.lexically_normal().string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
  }
  bool empty() const { return found_.empty(); }
  // The problems in the order of the file.
  std::vector<std::string> list() const {
    auto sorted = found_;
    std::stable_sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) {
      return std::tie(a.line, a.column) < std::tie(b.line, b.column);
    });
    std::vector<std::string> out;
    for (auto& f : sorted) out.push_back(f.text);
    return out;
  }

 private:
  struct Found {
    uint32_t line, column;
    std::string text;
  };
  std::string file_, dir_;
  std::vector<Found> found_;
};

// One TOML table being read: typed getters that report wrong types and
// invalid values, and finish(), which reports the keys nobody asked for.
class Table {
 public:
  Table(const toml::table& t, std::string prefix, Problems& p)
      : t_(t), prefix_(std::move(prefix)), p_(p) {}
  std::string keyName(const std::string& key) const {
    return prefix_.empty() ? key : prefix_ + "." + key;
  }
  const toml::node* get(const std::string& key) {
    used_.insert(key);
    return t_.get(key);
  }
  void bad(const toml::node& n, const std::string& key, const std::string& r) {
    p_.add(n.source(), keyName(key), r);
  }
  // Reports `key` if the table lacks it.
  void require(const std::string& key) {
    if (!t_.get(key)) here(key, "missing (required)");
  }
  // A problem of `key` reported at the table itself.
  void here(const std::string& key, const std::string& reason) {
    p_.add(t_.source(), keyName(key), reason);
  }
  Problems& problems() { return p_; }

  // A string; `check` returns "" or why the value is invalid.
  bool str(const std::string& key, std::string& out,
           const std::function<std::string(const std::string&)>& check = {}) {
    const toml::node* n = get(key);
    if (!n) return false;
    auto v = n->value<std::string>();
    if (!n->is_string() || !v) return bad(*n, key, "must be a string"), false;
    std::string why = v->size() > kMaxString ? "longer than 4096 bytes"
                      : check                ? check(*v)
                                             : "";
    if (!why.empty()) return bad(*n, key, why), false;
    out = *v;
    return true;
  }
  // A number (integer or float) or a string, as text for `check`.
  bool numberText(const std::string& key, std::string& out,
                  const std::function<std::string(const std::string&)>& check) {
    const toml::node* n = get(key);
    if (!n || !n->is_number()) return str(key, out, check);
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, *n->value<double>());
    std::string text(buf, ec == std::errc() ? end : buf);
    if (auto why = check(text); !why.empty()) return bad(*n, key, why), false;
    out = text;
    return true;
  }
  bool integer(const std::string& key, int64_t& out, int64_t min, int64_t max) {
    const toml::node* n = get(key);
    if (!n) return false;
    auto v = n->value_exact<int64_t>();
    if (!v) return bad(*n, key, "must be an integer"), false;
    if (*v < min || *v > max)
      return bad(*n, key,
                 "must be " + std::to_string(min) + ".." + std::to_string(max)),
             false;
    out = *v;
    return true;
  }
  // A number (integer or float) from 0 to 1.
  void fraction(const std::string& key, double& out) {
    const toml::node* n = get(key);
    if (!n) return;
    auto v = n->value<double>();
    if (!n->is_number() || !v || !(*v >= 0 && *v <= 1))
      return bad(*n, key, "must be a number from 0 to 1");
    out = *v;
  }
  void boolean(const std::string& key, bool& out) {
    const toml::node* n = get(key);
    if (!n) return;
    if (auto v = n->value_exact<bool>())
      out = *v;
    else
      bad(*n, key, "must be true or false");
  }
  void strList(const std::string& key, std::vector<std::string>& out,
               const std::function<std::string(const std::string&)>& check) {
    const toml::node* n = get(key);
    if (!n) return;
    const toml::array* a = n->as_array();
    if (!a || a->size() > kMaxList)
      return bad(*n, key, "must be an array of at most 256 strings");
    std::vector<std::string> v;
    for (const toml::node& e : *a) {
      auto s = e.value_exact<std::string>();
      std::string why = !s                       ? "must hold strings only"
                        : s->size() > kMaxString ? "longer than 4096 bytes"
                                                 : check(*s);
      if (!why.empty()) return bad(e, key, why);
      v.push_back(*s);
    }
    out = std::move(v);
  }
  // A sub-table (nullptr if absent or not a table, reported).
  const toml::table* table(const std::string& key) {
    const toml::node* n = get(key);
    if (n && !n->is_table()) bad(*n, key, "must be a table");
    return n ? n->as_table() : nullptr;
  }
  // An array of tables ([[key]]), empty if absent.
  std::vector<const toml::table*> tables(const std::string& key) {
    std::vector<const toml::table*> out;
    const toml::node* n = get(key);
    if (!n) return out;
    const toml::array* a = n->as_array();
    if (!a || !a->is_array_of_tables() || a->size() > kMaxList) {
      bad(*n, key,
          "must be an array of at most 256 tables ([[" + keyName(key) + "]])");
      return out;
    }
    for (const toml::node& e : *a) out.push_back(e.as_table());
    return out;
  }
  void finish() {
    for (auto&& [k, v] : t_)
      if (!used_.count(std::string(k.str())))
        p_.add(k.source(), keyName(std::string(k.str())), "unknown key");
  }

 private:
  const toml::table& t_;
  std::string prefix_;
  Problems& p_;
  std::set<std::string> used_;
};

// Value checks: "" when valid, otherwise why not.
std::string nonEmpty(const std::string& s) {
  return s.empty() ? "must not be empty" : "";
}
std::string validName(const std::string& s) {
  static const std::regex re("[A-Za-z_][A-Za-z0-9_.-]{0,99}");
  return std::regex_match(s, re) ? ""
                                 : "'" + s +
                                       "' is not a valid name: letters, "
                                       "digits, '_', '.', '-', starting with a "
                                       "letter or '_', at most 100";
}
std::string validWord(const std::string& s) {
  static const std::regex re("[A-Za-z0-9_.+-]{1,100}");
  return std::regex_match(s, re) ? "" : "'" + s + "' is not a valid word";
}
std::string validPath(const std::string& s) {
  return s.empty() || s.find('\0') != std::string::npos ? "must be a path" : "";
}
std::string validDatabaseUrl(const std::string& s) {
  try {
    scheduler::checkDatabaseUrl(s);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}
std::string validStoreDir(const std::string& s) {
  return s.size() > 1 && s[0] == '/' && s.back() != '/'
             ? ""
             : "must be an absolute path without a trailing '/'";
}
std::string validEndpoint(const std::string& s) {
  return s.rfind("tcp://", 0) == 0 || s.rfind("ipc://", 0) == 0
             ? ""
             : "must be a ZeroMQ endpoint (tcp://HOST:PORT or ipc://PATH)";
}
std::string validNotify(const std::string& s) {
  static const std::regex re("[A-Za-z0-9_-]+:.+");
  return std::regex_match(s, re) ? ""
                                 : "must be KIND:ARGUMENT (webhook:http://..."
                                   " or command:CMD)";
}
std::string validKeyValue(const std::string& s) {
  auto eq = s.find('=');
  return eq == 0 || eq == std::string::npos ? "must be KEY=VALUE" : "";
}
// A build limit as `kiln worker` parses it: "" or the problem.
std::function<std::string(const std::string&)> validLimit(
    std::string BuildLimitOptions::*field) {
  return [field](const std::string& v) {
    BuildLimitOptions o;
    o.*field = v;
    try {
      parseBuildLimits(o);
      parseBigBuildLimits(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
}

std::string validOption(const std::string& s) {
  if (auto why = validKeyValue(s); !why.empty()) return why;
  return s.substr(0, s.find('=')) == "extra-paths"
             ? "give extra paths as local_workers.extra_paths"
             : "";
}
std::string validRelativeFile(const std::string& s) {
  return s.empty() || s[0] == '/' || s.find("..") != std::string::npos
             ? "must be a relative path inside the collection, without '..'"
             : "";
}
// Whether one of that name is loaded is the scheduler's check when the
// jobset is applied (jobset-create/jobset-update list the loaded ones).
std::string validEvaluator(const std::string& s) {
  bool ok = !s.empty() && s.size() <= 64 &&
            std::all_of(s.begin(), s.end(), [](char c) {
              return std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
                     c == '_';
            });
  return ok ? ""
            : "must name an evaluator plugin (1 to 64 letters, digits, '-' "
              "or '_'): 'builtin', 'nix' or another loaded one";
}
std::string validChannelJob(const std::string& s) {
  return scheduler::isChannelJobName(s)
             ? ""
             : "must be a job name: 1 to 200 bytes without control characters";
}
std::string validKey(const std::string& s) {
  try {
    protocol::AllowList().add(s);
    return "";
  } catch (const Error& e) {
    return "not a CurveZMQ public key (40 Z85 characters, from `kiln key "
           "generate`): " +
           std::string(e.what());
  }
}

// A host name for web_hosts: letters, digits, '-' and '.', or "*".
std::string validHostName(const std::string& v) {
  if (v == "*") return "";
  if (v.empty() || v.size() > 253 ||
      v.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          "0123456789-.") != std::string::npos)
    return "not a host name (letters, digits, '-' and '.', or \"*\" for any)";
  return "";
}

void readScheduler(Table t, SchedulerSettings& s) {
  t.str("listen", s.listen, validEndpoint);
  t.str("web_listen", s.webListen);
  t.integer("metrics_port", s.metricsPort, -1, 65535);
  t.integer("heartbeat_ms", s.heartbeatMs, 1, 3600000);
  t.integer("max_retries", s.maxRetries, 0, 100);
  t.integer("retry_backoff_ms", s.retryBackoffMs, 0, 86400000);
  t.integer("log_limit", s.logLimit, 1024, int64_t{1} << 40);
  t.integer("output_limit", s.outputLimit, 0, int64_t{1} << 50);
  t.integer("cached_failure_ttl", s.cachedFailureTtl, 0, int64_t{1} << 40);
  t.integer("pull_close_grace", s.pullCloseGrace, 0, int64_t{1} << 31);
  t.strList("notify", s.notify, validNotify);
  if (t.str("notify_secret_file", s.notifySecretFile, validPath))
    s.notifySecretFile = t.problems().resolve(s.notifySecretFile);
  t.boolean("web_private", s.webPrivate);
  t.strList("web_hosts", s.webHosts, validHostName);
  if (t.str("web_push_secret_file", s.webPushSecretFile, validPath))
    s.webPushSecretFile = t.problems().resolve(s.webPushSecretFile);
  t.str("cache_compression", s.cacheCompression, [](const std::string& v) {
    return v == "zstd" || v == "xz" || v == "none"
               ? ""
               : "must be 'zstd', 'xz' or 'none'";
  });
  t.str("cache", s.cache, [](const std::string& v) -> std::string {
    if (v.starts_with("s3://")) {
      try {
        store::S3CacheStorage::checkUri(v);
      } catch (const FormatError& e) {
        return e.what();
      }
      return "";
    }
    return v.starts_with("file:///") || v.starts_with("/")
               ? ""
               : "must be s3://BUCKET?endpoint=..., file:///DIR or an "
                 "absolute directory (credentials come from the "
                 "environment or a credentials file, never from here)";
  });
  t.boolean("direct_uploads", s.directUploads);
  if (s.directUploads && !s.cache.starts_with("s3://"))
    t.here("direct_uploads",
           "needs the cache on an object store (cache = \"s3://...\")");
  if (t.str("notify_ca_file", s.notifyCaFile, validPath))
    s.notifyCaFile = t.problems().resolve(s.notifyCaFile);
  t.integer("max_message_size", s.maxMessageSize, int64_t{1} << 20,
            int64_t{256} << 20);
  t.integer("max_uploads_per_connection", s.maxUploadsPerConnection, 1, 1024);
  t.integer("max_queued_uploads", s.maxQueuedUploads, 1, 65536);
  t.integer("max_connections_per_key", s.maxConnectionsPerKey, 0, 65536);
  t.integer("max_slots_per_key", s.maxSlotsPerKey, 0, 1 << 20);
  t.integer("min_free_disk", s.minFreeDisk, 0, int64_t{1} << 50);
  t.integer("step_deadline_margin", s.stepDeadlineMargin, 0, 86400 * 7);
  t.integer("keep_repeat_nars", s.keepRepeatNars, 0, 36500);
  t.integer("refused_check_wait", s.refusedCheckWait, 0, 86400 * 7);
  t.integer("max_source_size", s.maxSourceSize, 0, int64_t{1} << 50);
  t.finish();
}

// The pressure thresholds, each checked as `kiln worker` parses it.
void readPressure(Table& t, PressureOptions& p) {
  auto valid = [](std::string PressureOptions::*field) {
    return [field](const std::string& v) {
      PressureOptions o;
      o.*field = v;
      try {
        parsePressureOptions(o);
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string();
    };
  };
  for (auto [key, field] :
       {std::pair{"max_load_average", &PressureOptions::maxLoadAverage},
        {"max_memory_pressure", &PressureOptions::maxMemoryPressure},
        {"max_cpu_pressure", &PressureOptions::maxCpuPressure},
        {"max_io_pressure", &PressureOptions::maxIoPressure},
        {"min_free_disk", &PressureOptions::minFreeDisk}})
    t.numberText(key, p.*field, valid(field));
}

void readWorkers(Table t, LocalWorkerSettings& w) {
  t.integer("count", w.count, 0, 64);
  t.integer("slots", w.slots, 1, 256);
  t.strList("systems", w.systems, validWord);
  t.strList("features", w.features, validWord);
  t.strList("mandatory_features", w.mandatoryFeatures, validWord);
  t.str("sandbox", w.sandbox, validWord);
  t.str("platforms", w.platforms, nonEmpty);
  t.strList("extra_paths", w.extraPaths, validPath);
  for (auto& p : w.extraPaths) p = t.problems().resolve(p);
  if (t.str("extra_paths_from", w.extraPathsFrom, validPath))
    w.extraPathsFrom = t.problems().resolve(w.extraPathsFrom);
  t.str("extra_paths_attribute", w.extraPathsAttribute, nonEmpty);
  t.strList("sandbox_options", w.sandboxOptions, validOption);
  t.strList("platform_options", w.platformOptions, validKeyValue);
  auto& l = w.limits;
  t.str("build_memory_max", l.memoryMax,
        validLimit(&BuildLimitOptions::memoryMax));
  t.str("build_pids_max", l.pidsMax, validLimit(&BuildLimitOptions::pidsMax));
  t.str("build_cpu_weight", l.cpuWeight,
        validLimit(&BuildLimitOptions::cpuWeight));
  t.str("build_disk_max", l.diskMax, validLimit(&BuildLimitOptions::diskMax));
  t.str("big_build_limits", l.bigBuild,
        validLimit(&BuildLimitOptions::bigBuild));
  readPressure(t, w.pressure);
  t.finish();
}

void readArguments(Table& t, ConfiguredJobset& j) {
  const toml::table* args = t.table("arguments");
  if (!args) return;
  for (auto&& [k, v] : *args) {
    auto s = v.value_exact<std::string>();
    if (!s)
      t.bad(v, "arguments." + std::string(k.str()),
            "must be a string holding a Nix expression");
    else
      j.arguments[std::string(k.str())] = *s;
  }
}

ConfiguredJobset readJobset(Table t) {
  ConfiguredJobset j;
  t.str("name", j.name, validName);
  t.require("name");
  bool path = t.str("path", j.location, validPath);
  bool git = t.str("git", j.location, nonEmpty);
  if (path == git)
    t.here("path", path ? "give either path or git, not both"
                        : "missing: give path (a folder) or git (a "
                          "repository URL or folder)");
  if (git) j.kind = "git";
  if (path || (git && j.location.find("://") == std::string::npos &&
               j.location.find('@') == std::string::npos))
    j.location = t.problems().resolve(j.location);
  std::string branch;
  if (t.str("branch", branch, validWord) && !git)
    t.bad(*t.get("branch"), "branch", "only a git jobset has a branch");
  j.branch = branch;
  t.str("file", j.file, validRelativeFile);
  t.str("attribute", j.attribute);
  t.str("evaluator", j.evaluator, validEvaluator);
  t.str("channel_job", j.channelJob, validChannelJob);
  t.integer("max_closure_growth", j.maxClosureGrowth, 0, 1000000);
  t.integer("max_build_time_growth", j.maxBuildTimeGrowth, 0, 1000000);
  t.fraction("repeat_fraction", j.repeatFraction);
  t.integer("check_interval", j.checkInterval, 0, int64_t{1} << 31);
  t.integer("shares", j.shares, 1, 1000000);
  t.boolean("enabled", j.enabled);
  readArguments(t, j);
  t.finish();
  return j;
}

ConfiguredProject readProject(Table t) {
  ConfiguredProject p;
  t.str("name", p.name, validName);
  t.require("name");
  t.str("description", p.description);
  if (t.str("webhook_secret_file", p.webhookSecretFile, validPath))
    p.webhookSecretFile = t.problems().resolve(p.webhookSecretFile);
  std::set<std::string> names;
  auto jobsets = t.tables("jobset");
  for (size_t i = 0; i < jobsets.size(); i++) {
    Table jt(*jobsets[i], t.keyName("jobset[" + std::to_string(i) + "]"),
             t.problems());
    p.jobsets.push_back(readJobset(jt));
    if (!p.jobsets.back().name.empty() &&
        !names.insert(p.jobsets.back().name).second)
      jt.bad(*jobsets[i]->get("name"), "name",
             "jobset '" + p.jobsets.back().name + "' is declared twice");
  }
  t.finish();
  return p;
}

ConfiguredWorkerKey readWorkerKey(Table t) {
  ConfiguredWorkerKey k;
  t.str("name", k.name, validName);
  t.require("name");
  if (k.name.rfind("local-", 0) == 0)
    t.bad(*t.get("name"), "name", "'local-*' names the local workers");
  t.str("public_key", k.publicKey, validKey);
  t.require("public_key");
  t.finish();
  return k;
}

ConfiguredToken readToken(Table t) {
  ConfiguredToken k;
  t.str("name", k.name, validName);
  t.require("name");
  t.str("scope", k.scope, [](const std::string& v) {
    return v == "read" || v == "operate" || v == "admin"
               ? ""
               : "must be 'read', 'operate' or 'admin'";
  });
  t.require("scope");
  if (t.str("secret_file", k.secretFile, validPath))
    k.secretFile = t.problems().resolve(k.secretFile);
  t.require("secret_file");
  t.finish();
  return k;
}

void readTokens(Table& t, FarmConfig& c) {
  auto tokens = t.tables("token");
  std::set<std::string> names, files;
  for (size_t i = 0; i < tokens.size(); i++) {
    Table tt(*tokens[i], "token[" + std::to_string(i) + "]", t.problems());
    c.tokens.push_back(readToken(tt));
    auto& k = c.tokens.back();
    if (!k.name.empty() && !names.insert(k.name).second)
      tt.bad(*tokens[i]->get("name"), "name",
             "token '" + k.name + "' is declared twice");
    if (!k.secretFile.empty() && !files.insert(k.secretFile).second)
      tt.bad(*tokens[i]->get("secret_file"), "secret_file",
             k.secretFile + " is the secret of another token too");
  }
}

void readTop(Table t, FarmConfig& c) {
  if (t.str("state_dir", c.stateDir, validPath))
    c.stateDir = t.problems().resolve(c.stateDir);
  t.str("store_dir", c.storeDir, validStoreDir);
  t.str("database", c.database, validDatabaseUrl);
  if (t.str("database_password_file", c.databasePasswordFile, validPath))
    c.databasePasswordFile = t.problems().resolve(c.databasePasswordFile);
  t.boolean("fsync_store", c.fsyncStore);
  t.strList("plugin_dirs", c.pluginDirs, validPath);
  for (auto& d : c.pluginDirs) d = t.problems().resolve(d);
  readTokens(t, c);
  if (auto* s = t.table("scheduler"))
    readScheduler(Table(*s, "scheduler", t.problems()), c.scheduler);
  if (auto* w = t.table("local_workers"))
    readWorkers(Table(*w, "local_workers", t.problems()), c.workers);
  auto keys = t.tables("worker_key");
  for (size_t i = 0; i < keys.size(); i++)
    c.workerKeys.push_back(readWorkerKey(Table(
        *keys[i], "worker_key[" + std::to_string(i) + "]", t.problems())));
  auto projects = t.tables("project");
  std::set<std::string> names;
  for (size_t i = 0; i < projects.size(); i++) {
    std::string key = "project[" + std::to_string(i) + "]";
    c.projects.push_back(readProject(Table(*projects[i], key, t.problems())));
    const std::string& name = c.projects.back().name;
    if (!name.empty() && !names.insert(name).second)
      t.problems().add(projects[i]->source(), key + ".name",
                       "project '" + name + "' is declared twice");
  }
  t.finish();
}

}  // namespace

ConfigError::ConfigError(std::vector<std::string> problems)
    : FormatError(joinLines(problems)), problems_(std::move(problems)) {}

FarmConfig parseFarmConfig(std::string_view text, const std::string& file) {
  FarmConfig c;
  c.file = file;
  Problems problems(file, std::filesystem::path(file).parent_path().string());
  toml::table root;
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    problems.add(e.source(), "(syntax)", std::string(e.description()));
    throw ConfigError(problems.list());
  }
  readTop(Table(root, "", problems), c);
  if (!problems.empty()) throw ConfigError(problems.list());
  return c;
}

FarmConfig loadFarmConfig(const std::string& path) {
  std::string abs = absPath(path);
  std::error_code ec;
  auto size = std::filesystem::file_size(abs, ec);
  if (ec) throw SysError("config file '" + abs + "'", ec.value());
  if (size > kMaxFileBytes) throw ConfigError({abs + ": larger than 1 MiB"});
  std::string text = readFile(abs);
  return parseFarmConfig(text, abs);
}

}  // namespace kiln::cli
