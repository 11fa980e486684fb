// The farm `kiln serve` runs (serve_farm.h).
#include "serve_farm.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "kiln/common/clock.h"
#include "kiln/common/file.h"
#include "kiln/common/process.h"
#include "kiln/protocol/keys.h"
#include "kiln/store/signature.h"

namespace kiln::cli {

using namespace std::chrono_literals;
using nlohmann::json;

namespace {

std::string workerName(unsigned i) { return "local-" + std::to_string(i); }

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The stdout of `kiln ARGS` (this executable); throws Error with its
// output if it fails or runs longer than a minute.
std::string runKiln(const std::vector<std::string>& args) {
  ProcessSpec spec;
  spec.program = "/proc/self/exe";
  spec.args = {"kiln"};
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  spec.env = currentEnvironment();
  spec.separateStderr = true;
  Process p(spec);
  std::string out, err;
  const Clock& clock = RealClock::instance();  // Process::next waits for real
  auto deadline = clock.now() + 1min;
  while (clock.now() < deadline) {
    auto ev = p.next(1s);
    if (ev.kind == ProcessEvent::Kind::kOutput)
      (ev.stream == 2 ? err : out) += ev.data;
    if (ev.kind != ProcessEvent::Kind::kExited) continue;
    if (ev.status != 0)
      throw Error("kiln " + join(args, " ") + ": " +
                  describeWaitStatus(ev.status) + ": " + err);
    return out;
  }
  throw Error("kiln " + join(args, " ") + " ran longer than a minute");
}

// Why `host`:`port` cannot be listened on ("" when it can): binds a socket
// there (SO_REUSEADDR, as the servers do) and closes it.
std::string bindProblem(const std::string& host, int port) {
  if (port == 0) return "";
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof *v4;
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof *v6;
  } else {
    return "";  // a name: the scheduler resolves and reports it
  }
  AutoCloseFD fd(::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return "";
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) == 0) return "";
  return std::strerror(errno);
}

// Refuses to start when an address serve's scheduler must listen on is
// taken (another kiln serve, say): one line naming it and what to do.
void checkAddressesFree(const SchedulerSettings& s) {
  struct Wanted {
    std::string address, setting;
  };
  std::vector<Wanted> wanted;
  if (s.listen.rfind("tcp://", 0) == 0)
    wanted.push_back({s.listen.substr(6), "scheduler.listen, --listen"});
  if (!s.webListen.empty())
    wanted.push_back({s.webListen, "scheduler.web_listen, --web-listen"});
  if (s.metricsPort > 0)
    wanted.push_back({"127.0.0.1:" + std::to_string(s.metricsPort),
                      "scheduler.metrics_port, --metrics-port"});
  for (auto& w : wanted) {
    auto colon = w.address.rfind(':');
    if (colon == std::string::npos) continue;  // the scheduler refuses it
    std::string host = w.address.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    if (host.empty() || host == "localhost") host = "127.0.0.1";
    if (host == "*") host = "0.0.0.0";
    int port = std::atoi(w.address.c_str() + colon + 1);
    if (std::string why = bindProblem(host, port); !why.empty())
      throw Error("cannot listen on " + w.address + " (" + w.setting +
                  "): " + why +
                  "; is another kiln serve running? Stop it, or choose "
                  "another address");
  }
}

}  // namespace

std::vector<std::string> resolveExtraPaths(const LocalWorkerSettings& w) {
  std::vector<std::string> paths = w.extraPaths;
  if (w.extraPathsFrom.empty()) return paths;
  std::string expr =
      "(import " + w.extraPathsFrom + ")." + w.extraPathsAttribute;
  std::string what = "local_workers.extra_paths_from (" + w.extraPathsFrom +
                     ", attribute " + w.extraPathsAttribute + ")";
  json list = json::parse(runKiln({"instantiate", "--readonly-mode", "--eval",
                                   "--strict", "--json", "-E", expr}),
                          nullptr, false);
  if (!list.is_array() || list.size() > 256)
    throw Error(what + ": not a list of at most 256 paths");
  for (auto& p : list) {
    if (!p.is_string() || p.get<std::string>().empty() ||
        p.get<std::string>()[0] != '/')
      throw Error(what + ": " + p.dump() + " is not an absolute path");
    paths.push_back(p.get<std::string>());
  }
  return paths;
}

ServeFarm::ServeFarm(ServeSettings settings, std::ostream& out)
    : s_(std::move(settings)), out_(out) {
  logs_ = s_.config.stateDir + "/serve";
  createDirs(logs_ + "/keys");
  if (::chmod((logs_ + "/keys").c_str(), 0700) != 0)
    throwSysError("chmod " + logs_ + "/keys");
  extraPaths_ = resolveExtraPaths(s_.config.workers);
  writeAllowedWorkers();
  makeCacheKey();
}

ServeFarm::~ServeFarm() { stop(); }

// The key pair of `name` in the keys folder, made on first use; returns
// its public key.
static std::string keyPair(const std::string& dir, const std::string& name) {
  std::string secret = dir + "/" + name + ".key";
  if (!pathExists(secret))
    protocol::writeKeyPair(protocol::generateKeyPair(), dir, name, true);
  return protocol::readSecretKeyFile(secret).publicKey;
}

// The binary cache's signing key pair (Nix's format: `cache.secret`,
// `cache.public`), made on the first run and kept, named after the host as
// Nix's keys are (`HOST-kiln-1`).
void ServeFarm::makeCacheKey() const {
  std::string dir = logs_ + "/keys", secret = dir + "/cache.secret";
  if (pathExists(secret)) return;
  std::string host = hostName();
  if (host.empty()) host = "localhost";
  auto key = store::SecretKey::generate(host + "-kiln-1");
  writeFile(secret + ".tmp", key.toString(), true);
  if (::chmod((secret + ".tmp").c_str(), 0600) != 0)
    throwSysError("chmod " + secret + ".tmp");
  writeFile(dir + "/cache.public", key.toPublicKey().toString(), true);
  if (::rename((secret + ".tmp").c_str(), secret.c_str()) != 0)
    throwSysError("renaming " + secret + ".tmp");
}

void ServeFarm::writeAllowedWorkers() const {
  std::string dir = logs_ + "/keys";
  keyPair(dir, "scheduler");
  std::string allowed;
  for (unsigned i = 0; i < static_cast<unsigned>(s_.config.workers.count); i++)
    allowed += keyPair(dir, workerName(i)) + " " + workerName(i) + "\n";
  for (auto& k : s_.config.workerKeys)
    allowed += k.publicKey + " " + k.name + "\n";
  writeFile(dir + "/allowed-workers", allowed);
  if (::chmod((dir + "/allowed-workers").c_str(), 0600) != 0)
    throwSysError("chmod " + dir + "/allowed-workers");
}

std::vector<std::string> ServeFarm::schedulerArgs() const {
  const FarmConfig& c = s_.config;
  const SchedulerSettings& s = c.scheduler;
  std::string keys = logs_ + "/keys";
  std::vector<std::string> a{"scheduler",
                             "--state-dir",
                             c.stateDir,
                             "--listen",
                             s.listen,
                             "--store-dir",
                             c.storeDir,
                             "--web-listen",
                             s.webListen,
                             "--heartbeat-ms",
                             std::to_string(s.heartbeatMs),
                             "--max-retries",
                             std::to_string(s.maxRetries),
                             "--retry-backoff-ms",
                             std::to_string(s.retryBackoffMs),
                             "--log-limit",
                             std::to_string(s.logLimit),
                             "--output-limit",
                             std::to_string(s.outputLimit),
                             "--cached-failure-ttl",
                             std::to_string(s.cachedFailureTtl),
                             "--pull-close-grace",
                             std::to_string(s.pullCloseGrace),
                             "--secret-key-file",
                             keys + "/scheduler.key",
                             "--allowed-workers",
                             keys + "/allowed-workers",
                             "--cache-secret-key-file",
                             keys + "/cache.secret",
                             "--cache-compression",
                             s.cacheCompression};
  if (!c.database.empty()) a.insert(a.end(), {"--database", c.database});
  if (!c.databasePasswordFile.empty())
    a.insert(a.end(), {"--database-password-file", c.databasePasswordFile});
  if (!s.cache.empty()) a.insert(a.end(), {"--cache", s.cache});
  if (s.directUploads) a.push_back("--direct-uploads");
  if (s.webPrivate) a.push_back("--web-private");
  for (auto& h : s.webHosts) a.insert(a.end(), {"--web-host", h});
  if (!s.webPushSecretFile.empty())
    a.insert(a.end(), {"--web-push-secret-file", s.webPushSecretFile});
  if (!s.notifySecretFile.empty())
    a.insert(a.end(), {"--notify-secret-file", s.notifySecretFile});
  if (s.metricsPort >= 0)
    a.insert(a.end(), {"--metrics-port", std::to_string(s.metricsPort)});
  for (auto& n : s.notify) a.insert(a.end(), {"--notify", n});
  if (!s.notifyCaFile.empty())
    a.insert(a.end(), {"--notify-ca-file", s.notifyCaFile});
  for (auto [flag, value] : std::initializer_list<std::pair<const char*, int64_t>>{
           {"--max-message-size", s.maxMessageSize},
        {"--max-uploads-per-connection", s.maxUploadsPerConnection},
        {"--max-queued-uploads", s.maxQueuedUploads},
        {"--max-connections-per-key", s.maxConnectionsPerKey},
        {"--max-slots-per-key", s.maxSlotsPerKey},
        {"--min-free-disk", s.minFreeDisk},
        {"--step-deadline-margin", s.stepDeadlineMargin},
        {"--keep-repeat-nars", s.keepRepeatNars},
        {"--refused-check-wait", s.refusedCheckWait},
        {"--max-source-size", s.maxSourceSize}})
    a.insert(a.end(), {flag, std::to_string(value)});
  if (!c.fsyncStore) a.push_back("--no-fsync-store");
  for (auto& d : pluginDirs()) a.insert(a.end(), {"--plugin-dir", d});
  return a;
}

std::vector<std::string> ServeFarm::pluginDirs() const {
  std::vector<std::string> dirs = s_.config.pluginDirs;
  dirs.insert(dirs.end(), s_.sandbox.pluginDirs.begin(),
              s_.sandbox.pluginDirs.end());
  return dirs;
}

std::vector<std::string> ServeFarm::workerArgs(unsigned i) const {
  const FarmConfig& c = s_.config;
  const LocalWorkerSettings& w = c.workers;
  std::string name = workerName(i), keys = logs_ + "/keys";
  std::vector<std::string> a{"worker",
                             "--connect",
                             c.scheduler.listen,
                             "--private-store",
                             "--state-dir",
                             c.stateDir + "/workers/" + name,
                             "--store-dir",
                             c.storeDir,
                             "--worker-id",
                             name,
                             "--slots",
                             std::to_string(w.slots),
                             "--secret-key-file",
                             keys + "/" + name + ".key",
                             "--server-public-key-file",
                             keys + "/scheduler.pub"};
  for (auto* list : {&w.systems, &w.features, &w.mandatoryFeatures}) {
    if (list->empty()) continue;
    a.push_back(list == &w.systems    ? "--systems"
                : list == &w.features ? "--features"
                                      : "--mandatory-features");
    a.push_back(join(*list, ","));
  }
  if (!c.fsyncStore) a.push_back("--no-fsync-store");
  if (c.scheduler.directUploads)
    a.push_back(std::string("--direct-uploads=") +
                (c.scheduler.cacheCompression == "xz" ? "xz" : "zstd"));
  SandboxOptions sb = s_.sandbox;
  sb.name = w.sandbox;
  for (auto field : {&BuildLimitOptions::memoryMax, &BuildLimitOptions::pidsMax,
                     &BuildLimitOptions::cpuWeight, &BuildLimitOptions::diskMax,
                     &BuildLimitOptions::bigBuild})
    if ((sb.limits.*field).empty()) sb.limits.*field = w.limits.*field;
  mergePressureOptions(sb.pressure, w.pressure);
  sb.platforms = w.platforms;
  sb.pluginDirs = pluginDirs();
  sb.platformOptions.insert(sb.platformOptions.begin(),
                            w.platformOptions.begin(), w.platformOptions.end());
  std::vector<std::string> options = w.sandboxOptions;
  if (!extraPaths_.empty())
    options.push_back("extra-paths=" + join(extraPaths_, " "));
  sb.options.insert(sb.options.begin(), options.begin(), options.end());
  auto sa = sandboxArgs(sb);
  a.insert(a.end(), sa.begin(), sa.end());
  return a;
}

// Waits until the scheduler listens. At serve's start (`failFast`) one
// that exits first is not restarted: what it printed is the reason, and
// serve stops with it; later (a reload) it is restarted as usual.
bool ServeFarm::waitReady(const std::atomic<bool>& stop, bool failFast) {
  auto deadline = clock_.now() + 5min;
  while (!stop) {
    bool running = sched_->running();
    std::string text = sched_->logSinceStart();
    if (running && text.find("listening ") != std::string::npos) return true;
    bool late = clock_.now() > deadline;
    if (late || (failFast && !running)) {
      sched_->stop(5s);
      throw Error(std::string("the scheduler ") +
                  (late ? "did not start within 5 minutes"
                        : "stopped before it listened") +
                  " (its log: " + sched_->log() + "):\n" +
                  text.substr(text.size() > 2000 ? text.size() - 2000 : 0));
    }
    if (auto line = sched_->supervise(); !line.empty())
      out_ << "kiln serve: " << line << std::endl;
    clock_.sleepFor(50ms);
  }
  return false;
}

bool ServeFarm::start(const std::atomic<bool>& stop) {
  checkAddressesFree(s_.config.scheduler);
  sched_ = std::make_unique<SupervisedChild>("scheduler", schedulerArgs(),
                                             logs_ + "/scheduler.log",
                                             RealClock::instance());
  sched_->start();
  if (!waitReady(stop, true)) return false;
  std::string changes;
  resizeWorkers(changes);
  printBanner();
  jobsets_ = std::make_unique<JobsetSync>(s_.config.databaseSpec(), out_);
  for (auto& line : jobsets_->applyTokens(s_.config.tokens))
    out_ << line << std::endl;
  jobsets_->apply(s_.config.projects, true);
  console_ = std::make_unique<ServeConsole>(
      s_.config.stateDir, s_.config.databaseSpec(), webUrl_, out_);
  return true;
}

std::vector<ServedJobset> ServeFarm::servedJobsets() const {
  std::vector<ServedJobset> out;
  for (auto& p : s_.config.projects)
    for (auto& j : p.jobsets)
      if (j.enabled)
        out.push_back({p.name, j.name, jobsets_->evaluating(p.name, j.name)});
  return out;
}

// Starts, stops or restarts local workers so that `count` run with the
// current settings.
void ServeFarm::resizeWorkers(std::string& changes) {
  unsigned want = static_cast<unsigned>(s_.config.workers.count);
  while (workers_.size() > want) {
    out_ << "  " << workers_.back()->name() << ": "
         << workers_.back()->stop(30s) << std::endl;
    changes += "stopped " + workers_.back()->name() + "\n";
    workers_.pop_back();
    workerArgs_.pop_back();
  }
  for (unsigned i = 0; i < want; i++) {
    auto args = workerArgs(i);
    if (i < workers_.size() && workerArgs_[i] == args) continue;
    std::string name = workerName(i);
    auto child = std::make_unique<SupervisedChild>(
        name, args, logs_ + "/" + name + ".log", RealClock::instance());
    child->start();
    if (i < workers_.size()) {
      workers_[i]->stop(30s);
      workers_[i] = std::move(child);
      workerArgs_[i] = args;
      changes += "restarted " + name + " with its new settings\n";
    } else {
      workers_.push_back(std::move(child));
      workerArgs_.push_back(args);
      if (jobsets_) changes += "started " + name + "\n";
    }
  }
}

void ServeFarm::printBanner() {
  const FarmConfig& c = s_.config;
  std::string log = sched_->logSinceStart(), url = "(not started)";
  webUrl_.clear();
  if (auto at = log.find(" web http://"); at != std::string::npos)
    url = webUrl_ =
        log.substr(at + 5, log.find_first_of(" \n", at + 5) - at - 5);
  std::string pids = "scheduler " + std::to_string(sched_->pid());
  for (auto& w : workers_)
    pids += ", " + w->name() + " " + std::to_string(w->pid());
  out_ << "kiln serve: "
       << (c.file.empty() ? std::string("(no config file)") : c.file) << "\n"
       << "  state dir:  " << c.stateDir << "\n"
       << "  scheduler:  " << c.scheduler.listen << " (CurveZMQ, keys in "
       << logs_ << "/keys; log " << logs_ << "/scheduler.log)\n"
       << "  workers:    " << c.workers.count << " x " << c.workers.slots
       << " slots, private stores under " << c.stateDir << "/workers,"
       << " sandbox " << c.workers.sandbox << "\n"
       << "  dashboard:  " << url << "/\n"
       << "  cache:      " << url << " (binary cache; trusted-public-keys = "
       << readFile(logs_ + "/keys/cache.public") << ")\n";
  if (c.scheduler.metricsPort >= 0)
    out_ << "  metrics:    http://127.0.0.1:" << c.scheduler.metricsPort
         << "/metrics\n";
  std::string db = c.database.empty() ? "" : " --database " + c.database;
  out_ << "  queue:      kiln queue --state-dir " << c.stateDir << db << "\n"
       << "  logs:       kiln log --state-dir " << c.stateDir << db
       << " DRV, and "
       << logs_ << "/\n"
       << "  processes:  " << pids << " (restarted if they die)\n"
       << "Ctrl-C stops everything; SIGHUP re-reads the config file."
       << std::endl;
}

void ServeFarm::poll() {
  if (auto line = sched_->supervise(); !line.empty())
    out_ << "kiln serve: " << line << std::endl;
  for (auto& w : workers_)
    if (auto line = w->supervise(); !line.empty())
      out_ << "kiln serve: " << line << std::endl;
  if (jobsets_) jobsets_->poll();
  if (console_) console_->report(servedJobsets());
}

std::string ServeFarm::apply(ServeSettings next,
                             const std::atomic<bool>& stop) {
  if (next.config.stateDir != s_.config.stateDir ||
      next.config.storeDir != s_.config.storeDir ||
      next.config.database != s_.config.database ||
      next.config.databasePasswordFile != s_.config.databasePasswordFile)
    throw Error(
        "state_dir, store_dir and database cannot change while kiln serve "
        "runs");
  auto paths = resolveExtraPaths(next.config.workers);
  bool keysChanged = next.config.workerKeys != s_.config.workerKeys ||
                     next.config.workers.count != s_.config.workers.count;
  auto oldArgs = schedulerArgs();
  s_ = std::move(next);
  extraPaths_ = std::move(paths);
  std::string changes;
  if (keysChanged) writeAllowedWorkers();
  if (keysChanged || schedulerArgs() != oldArgs) {
    out_ << "  scheduler: " << sched_->stop(30s) << std::endl;
    sched_ = std::make_unique<SupervisedChild>("scheduler", schedulerArgs(),
                                               logs_ + "/scheduler.log",
                                               RealClock::instance());
    sched_->start();
    if (!waitReady(stop, false)) return changes;
    changes +=
        "restarted the scheduler with its new settings (its queue is "
        "kept)\n";
  }
  resizeWorkers(changes);
  for (auto& line : jobsets_->applyTokens(s_.config.tokens))
    changes += line + "\n";
  for (auto& line : jobsets_->apply(s_.config.projects, false))
    changes += line + "\n";
  return changes;
}

void ServeFarm::stop() {
  for (auto it = workers_.rbegin(); it != workers_.rend(); ++it)
    out_ << "  " << (*it)->name() << ": " << (*it)->stop(30s) << "\n";
  workers_.clear();
  workerArgs_.clear();
  if (sched_) out_ << "  scheduler: " << sched_->stop(30s) << std::endl;
  sched_.reset();
}

}  // namespace kiln::cli
