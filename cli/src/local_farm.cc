#include "local_farm.h"

#include <sys/stat.h>
#include <unistd.h>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/trace.h"

namespace kiln::cli {

namespace {

constexpr const char* kProject = "cli";
constexpr const char* kJobset = "kiln-build";

/// A private folder for the scheduler's socket: only this user may
/// connect, which is what makes plain text acceptable.
std::string socketEndpoint(const std::string& stateDir) {
  std::string dir = stateDir + "/build-socket";
  createDirs(dir);
  if (chmod(dir.c_str(), 0700) != 0)
    throw SysError("making '" + dir + "' private", errno);
  return "ipc://" + dir + "/scheduler." + std::to_string(getpid());
}

scheduler::ServiceConfig serviceConfig(const LocalFarmConfig& c,
                                       const std::string& endpoint) {
  scheduler::ServiceConfig s;
  s.stateDir = c.stateDir;
  s.storeDir = c.storeDir;
  s.listen = endpoint;
  s.insecurePlaintext = true;
  s.syncStoreFiles = c.syncStoreFiles;
  s.heartbeatInterval = std::chrono::milliseconds(1000);
  s.core.retryBackoffBase = std::chrono::seconds(1);
  s.core.retryBackoffMax = std::chrono::seconds(5);
  return s;
}

}  // namespace

LocalFarm::LocalFarm(const LocalFarmConfig& config) {
  createDirs(config.stateDir);
  std::string endpoint = socketEndpoint(config.stateDir);
  traceEvent("build", "scheduler-starting", 0);
  auto sc = serviceConfig(config, endpoint);
  sc.eventSinks.push_back(changes_);
  service_ = std::make_unique<scheduler::SchedulerService>(std::move(sc));
  traceEvent("build", "scheduler-started", 0);
  startWorker(config, service_->endpoint());
}

LocalFarm::~LocalFarm() {
  for (auto& w : workers_) w->daemon->stop();
  // The daemons say Bye to the scheduler, which must keep answering while
  // they finish.
  for (bool running = true; running && service_;) {
    running = false;
    for (auto& w : workers_) running = running || !w->ended.load();
    if (running) service_->pollOnce(std::chrono::milliseconds(20));
  }
  traceEvent("build", "workers-stopped", 0);
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
  workers_.clear();  // the daemons: their sandboxes finish their clean-up
  traceEvent("build", "workers-destroyed", 0);
  service_.reset();
  traceEvent("build", "scheduler-stopped", 0);
}

void LocalFarm::startWorker(const LocalFarmConfig& config,
                            const std::string& endpoint) {
  worker::DaemonConfig d;
  d.client.connect = endpoint;
  d.client.insecurePlaintext = true;
  d.client.reconnectMax = std::chrono::milliseconds(1000);
  d.helloRetryMin = std::chrono::milliseconds(200);
  d.stateDir = config.stateDir + "/build-worker";
  d.storeDir = config.storeDir;
  d.workerId = "local";
  d.slots = config.jobs;
  d.syncStoreFiles = config.syncStoreFiles;
  d.kilnVersion = KILN_VERSION;
  applySandboxOptions(config.sandbox, d);
  auto w = std::make_unique<Worker>();
  w->daemon = std::make_unique<worker::Daemon>(std::move(d));
  Worker* raw = w.get();
  raw->thread = std::thread([raw] {
    try {
      raw->daemon->run();
    } catch (const std::exception& e) {
      raw->failure = e.what();
    }
    raw->ended.store(true);
  });
  workers_.push_back(std::move(w));
}

std::string LocalFarm::workerFailure() const {
  for (auto& w : workers_)
    if (w->ended.load())
      return w->failure.empty() ? "the local worker stopped" : w->failure;
  return "";
}

bool LocalFarm::takeBuildChanges() {
  bool changed = changes_->changed;
  changes_->changed = false;
  return changed;
}

int64_t LocalFarm::jobset() {
  if (jobset_ == 0) jobset_ = findOrCreateJobset();
  return jobset_;
}

int64_t LocalFarm::findOrCreateJobset() {
  auto& db = service_->db();
  if (auto j = db.jobsetByName(kProject, kJobset)) return j->id;
  if (!db.projectByName(kProject)) {
    scheduler::ProjectRow p;
    p.name = kProject;
    p.description = "one-shot builds of kiln build";
    db.createProject(p);
  }
  scheduler::JobsetRow j;
  j.project = db.projectByName(kProject)->id;
  j.name = kJobset;
  j.location = "-";
  j.checkIntervalSec = 0;
  j.enabled = false;
  return db.createJobset(j);
}

}  // namespace kiln::cli
