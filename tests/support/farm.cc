// The process farm of tests/support/farm.h: spawning, signalling and
// polling `kiln scheduler` / `kiln worker` processes.
#include "farm.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <thread>

#include "kiln/common/error.h"

namespace kiln::test {

using namespace std::chrono_literals;

namespace {

std::string tail(const std::string& s, size_t n = 4000) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

}  // namespace

// ---------------------------------------------------------------- farm

Farm::Farm(FarmOptions options)
    : options_(std::move(options)),
      dir_(std::make_unique<TempDir>("kiln-farm")),
      port_(freeLoopbackPort()),
      metricsPort_(freeLoopbackPort()) {
  if (std::getenv("KILN_KEEP_FARM")) dir_->keep();
}

Farm::~Farm() {
  for (auto& w : workers_)
    if (w.process) w.process->kill();
  if (scheduler_) scheduler_->kill();
}

bool Farm::canRun(std::string* why) {
  if (geteuid() != 0) {
    if (why) *why = "workers use --private-store, which needs root";
    return false;
  }
  if (!haveProgram("nix-instantiate")) {
    if (why) *why = "evaluations need nix-instantiate (Nix) on PATH";
    return false;
  }
  return true;
}

std::string Farm::endpoint() const {
  return "tcp://" + options_.host + ":" + std::to_string(port_);
}

void Farm::startScheduler(std::chrono::milliseconds timeout) {
  if (scheduler_ && scheduler_->running())
    throw Error("farm: the scheduler is already running");
  std::vector<std::string> args = {"scheduler",
                                   "--state-dir",
                                   stateDir(),
                                   "--listen",
                                   endpoint(),
                                   "--metrics-port",
                                   std::to_string(metricsPort_),
                                   "--heartbeat-ms",
                                   std::to_string(options_.heartbeat.count()),
                                   "--max-retries",
                                   std::to_string(options_.maxRetries)};
  if (!options_.database.empty())
    args.insert(args.end(), {"--database", options_.database});
  auto security = schedulerSecurityArgs();
  args.insert(args.end(), security.begin(), security.end());
  args.insert(args.end(), options_.schedulerArgs.begin(),
              options_.schedulerArgs.end());
  std::map<std::string, std::string> env = options_.schedulerEnv;
  if (!schedulerFailPoint_.empty())
    env["KILN_FAIL_POINT"] = std::exchange(schedulerFailPoint_, "");
  scheduler_.reset();
  scheduler_ = std::make_unique<KilnProcess>(
      args, dir() + "/scheduler." + std::to_string(++schedulerStarts_) + ".log",
      env, options_.netns);
  auto& p = *scheduler_;
  // A restarted scheduler may find the port still held for a moment.
  bool up = p.waitForLog("listening ", timeout);
  if (!up || !p.running())
    throw Error("farm: kiln scheduler did not start (" +
                (p.running() ? std::string("no 'listening' line")
                             : "exit " + std::to_string(*p.exitCode())) +
                "): " + tail(p.log()));
}

std::string Farm::writeCollection(const std::string& name,
                                  const std::string& body) const {
  std::string d = dir() + "/" + name;
  createDirs(d);
  writeFile(d + "/default.nix", R"(let
  mk = name: script: deps: derivation {
    inherit name deps;
    system = "x86_64-linux";
    builder = "/bin/sh";
    args = [ "-c" script ];
    PATH = "/usr/bin:/bin";
  };
in )" + body + "\n");
  return d;
}

std::string Farm::keyPair(const std::string& name) {
  auto known = publicKeys_.find(name);
  if (known != publicKeys_.end()) return known->second;
  auto r = run({kilnBinary(), "key", "generate", "--out", dir() + "/keys",
                "--name", name, "--json"});
  if (r.exitCode != 0)
    throw Error("farm: kiln key generate --name " + name + ": " + r.err);
  auto key = nlohmann::json::parse(r.out).at("publicKey").get<std::string>();
  publicKeys_[name] = key;
  return key;
}

std::vector<std::string> Farm::schedulerSecurityArgs() {
  if (!options_.curve) return {"--insecure-plaintext"};
  keyPair("scheduler");
  std::string allowed;
  for (size_t i = 0; i < workers_.size(); i++)
    if (workers_[i].options.keyAllowed)
      allowed += keyPair(workerName(i)) + " " + workerName(i) + "\n";
  writeFile(dir() + "/keys/allowed-workers", allowed);
  return {"--secret-key-file", dir() + "/keys/scheduler.key",
          "--allowed-workers", dir() + "/keys/allowed-workers"};
}

KilnProcess& Farm::scheduler() {
  if (!scheduler_) throw Error("farm: no scheduler was started");
  return *scheduler_;
}

void Farm::killScheduler() { scheduler().kill(); }

int Farm::stopScheduler() { return scheduler().stop(); }

size_t Farm::addWorker(WorkerOptions options) {
  workers_.push_back({std::move(options), nullptr, 0});
  startWorker(workers_.size() - 1);
  return workers_.size() - 1;
}

std::string Farm::workerStateDir(size_t i) const {
  return dir() + "/worker-" + std::to_string(i);
}

std::string Farm::workerName(size_t i) const {
  const auto& o = workers_.at(i).options;
  return o.name.empty() ? "worker-" + std::to_string(i) : o.name;
}

void Farm::startWorker(size_t i) {
  auto& w = workers_.at(i);
  if (w.process && w.process->running())
    throw Error("farm: worker " + std::to_string(i) + " is already running");
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (auto& x : v) s += (s.empty() ? "" : ",") + x;
    return s;
  };
  std::vector<std::string> args = {
      "worker",      "--connect",
      endpoint(),    "--private-store",
      "--state-dir", workerStateDir(i),
      "--worker-id", workerName(i),
      "--slots",     std::to_string(w.options.slots)};
  if (!w.options.sandbox.empty())
    args.insert(args.end(), {"--sandbox", w.options.sandbox});
  if (!w.options.systems.empty())
    args.insert(args.end(), {"--systems", join(w.options.systems)});
  if (!w.options.platforms.empty())
    args.insert(args.end(), {"--platforms", w.options.platforms});
  if (options_.curve) {
    keyPair("scheduler");
    keyPair(workerName(i));
    args.insert(args.end(),
                {"--secret-key-file", dir() + "/keys/" + workerName(i) + ".key",
                 "--server-public-key-file", dir() + "/keys/scheduler.pub"});
  } else {
    args.push_back("--insecure-plaintext");
  }
  if (!w.options.features.empty())
    args.insert(args.end(), {"--features", join(w.options.features)});
  if (!w.options.mandatoryFeatures.empty())
    args.insert(args.end(),
                {"--mandatory-features", join(w.options.mandatoryFeatures)});
  args.insert(args.end(), w.options.extraArgs.begin(),
              w.options.extraArgs.end());
  w.process.reset();
  w.process = std::make_unique<KilnProcess>(
      args,
      dir() + "/worker-" + std::to_string(i) + "." +
          std::to_string(++w.starts) + ".log",
      std::map<std::string, std::string>{}, w.options.netns);
}

KilnProcess& Farm::worker(size_t i) {
  auto& w = workers_.at(i);
  if (!w.process)
    throw Error("farm: worker " + std::to_string(i) + " never started");
  return *w.process;
}

void Farm::killWorker(size_t i) { worker(i).kill(); }
int Farm::stopWorker(size_t i) { return worker(i).stop(); }
void Farm::pauseWorker(size_t i) { worker(i).signal(SIGSTOP); }
void Farm::resumeWorker(size_t i) { worker(i).signal(SIGCONT); }

bool Farm::waitForWorkers(size_t n, std::chrono::milliseconds timeout) {
  std::optional<double> last;
  bool joined = pollUntil(
      [&] {
        last = metric("kiln_workers");
        return last && static_cast<size_t>(*last) == n;
      },
      timeout);
  if (!joined) std::cerr << workersDiagnosis(n, last);
  return joined;
}

std::string Farm::workersDiagnosis(size_t n, std::optional<double> last) {
  std::string out = "farm: waited for " + std::to_string(n) +
                    " worker(s); kiln_workers on metrics port " +
                    std::to_string(metricsPort_) + " was " +
                    (last ? std::to_string(*last) : std::string("unreadable")) +
                    "\n";
  if (scheduler_)
    out += "--- scheduler (" +
           std::string(scheduler_->running() ? "running" : "exited") + "):\n" +
           tail(scheduler_->log()) + "\n";
  for (size_t i = 0; i < workers_.size(); i++) {
    const auto& p = workers_[i].process;
    if (!p) continue;
    out += "--- worker " + std::to_string(i) + " (" +
           (p->running() ? "running" : "exited") + "):\n" + tail(p->log()) +
           "\n";
  }
  return out;
}

std::string Farm::addSandboxedWorker(WorkerOptions options) {
  options.sandbox = "";
  size_t i = addWorker(std::move(options));
  if (waitForWorkers(1, std::chrono::seconds(60))) return "";
  auto log = worker(i).log();
  if (log.find("sandbox cannot run on this host") != std::string::npos)
    return log;
  throw Error("sandboxed worker did not come up:\n" + log);
}

// ---------------------------------------------------------------- commands

RunResult Farm::kiln(std::vector<std::string> args) const {
  args.insert(args.begin(), kilnBinary());
  args.push_back("--state-dir");
  args.push_back(stateDir());
  if (!options_.database.empty())
    args.insert(args.end(), {"--database", options_.database});
  return run(args);
}

nlohmann::json Farm::kilnJson(std::vector<std::string> args) const {
  args.push_back("--json");
  std::string cmd;
  for (auto& a : args) cmd += " " + a;
  auto r = kiln(args);
  if (r.exitCode != 0)
    throw Error("farm: kiln" + cmd + " exited " + std::to_string(r.exitCode) +
                ": " + r.err);
  try {
    return nlohmann::json::parse(r.out);
  } catch (const nlohmann::json::exception& e) {
    throw Error("farm: kiln" + cmd + " printed no JSON: " + r.out);
  }
}

void Farm::createJobset(const std::string& project, const std::string& jobset,
                        const std::string& collection,
                        const std::string& arguments) {
  auto v = view();
  if (!v || !v->rows().projectByName(project))
    kilnJson({"project", "create", project});
  kilnJson({"jobset", "create", "--project", project, jobset, "--location",
            collection, "--check-interval", "0", "--arguments", arguments});
}

int64_t Farm::evaluate(const std::string& project, const std::string& jobset,
                       std::chrono::seconds timeout) {
  auto j = kilnJson({"jobset", "eval", "--project", project, jobset,
                     "--timeout", std::to_string(timeout.count())});
  if (!j.contains("eval") || !j["eval"].is_number_integer())
    throw Error("farm: jobset eval answered " + j.dump());
  return j["eval"].get<int64_t>();
}

// ---------------------------------------------------------------- state

scheduler::DatabaseSpec Farm::database() const {
  return scheduler::DatabaseSpec::inStateDir(stateDir(), options_.database);
}

std::unique_ptr<scheduler::StateView> Farm::view() const {
  return scheduler::StateView::openIfExists(database());
}

std::vector<FarmBuild> Farm::builds(int64_t eval) const {
  auto v = view();
  return v ? v->builds(eval) : std::vector<FarmBuild>{};
}

std::vector<FarmStep> Farm::steps() const {
  auto v = view();
  return v ? v->steps() : std::vector<FarmStep>{};
}

bool Farm::waitForBuilds(int64_t eval,
                         std::chrono::milliseconds timeout) const {
  // On PostgreSQL one view serves the whole wait: a new connection each
  // poll would start a server process and authenticate 20 times a second,
  // CPU the farm under test would lose. SQLite opens the file each poll.
  std::unique_ptr<scheduler::StateView> kept;
  return pollUntil(
      [&] {
        std::unique_ptr<scheduler::StateView> fresh;
        scheduler::StateView* v = kept.get();
        if (!v) {
          fresh = view();
          v = fresh.get();
          if (!v) return false;
          if (!options_.database.empty()) kept = std::move(fresh);
        }
        auto c = v->buildCounts(eval);
        return c.all > 0 && c.finished == c.all;
      },
      timeout);
}

// ---------------------------------------------------------------- metrics

std::string Farm::metricsText() const {
  return httpGet(metricsPort_, "/metrics", options_.netns);
}

std::optional<double> Farm::metric(const std::string& sample) const {
  try {
    return prometheusSample(metricsText(), sample);
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string partsCollection(int n, bool partsAreJobs) {
  std::string count = std::to_string(n);
  std::string text = R"(let
  parts = builtins.genList
    (i: mk "part${toString i}" "sleep 0.3; echo ${toString i} > $out" []) )" +
                     count + R"(;
in { all = mk "all" "cat $deps > $out" parts; })";
  if (!partsAreJobs) return text;
  return text + R"( //
   builtins.listToAttrs (builtins.genList
     (i: { name = "part${toString i}"; value = builtins.elemAt parts i; }) )" +
         count + ")";
}

namespace {
std::string httpGetHere(int port, const std::string& path) {
  AutoCloseFD fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) throwSysError("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string where = "127.0.0.1:" + std::to_string(port) + path;
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    throwSysError("connecting to " + where);
  writeAll(fd.get(), "GET " + path +
                         " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: "
                         "close\r\n\r\n");
  std::string resp;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throwSysError("reading from " + where);
    if (n == 0) break;
    resp.append(buf, static_cast<size_t>(n));
  }
  auto body = resp.find("\r\n\r\n");
  if (resp.compare(0, 9, "HTTP/1.0 ") != 0 &&
      resp.compare(0, 9, "HTTP/1.1 ") != 0)
    throw Error("GET " + where + ": not an HTTP answer");
  if (resp.compare(9, 3, "200") != 0 || body == std::string::npos)
    throw Error("GET " + where + ": " + resp.substr(0, resp.find('\r')));
  return resp.substr(body + 4);
}
}  // namespace

std::string httpGet(int port, const std::string& path,
                    const std::string& netns) {
  if (netns.empty()) return httpGetHere(port, path);
  // setns(CLONE_NEWNET) changes the calling thread only: a thread of its
  // own enters the namespace, the test's threads stay where they are.
  std::string body, error;
  std::thread t([&] {
    try {
      AutoCloseFD ns(
          open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC));
      if (ns.get() < 0) throwSysError("opening /run/netns/" + netns);
      if (setns(ns.get(), CLONE_NEWNET) != 0)
        throwSysError("entering network namespace " + netns);
      body = httpGetHere(port, path);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  t.join();
  if (!error.empty()) throw Error(error);
  return body;
}

std::optional<double> prometheusSample(const std::string& text,
                                       const std::string& sample) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() <= sample.size() || line[0] == '#') continue;
    if (line.compare(0, sample.size(), sample) != 0 ||
        line[sample.size()] != ' ')
      continue;
    return std::strtod(line.c_str() + sample.size() + 1, nullptr);
  }
  return std::nullopt;
}

}  // namespace kiln::test
