// `kiln serve [--config FILE] [COLLECTION]`: kiln's main job on one
// machine. Starts a scheduler and N local workers (each with its own store
// mounted at the logical store directory, `--private-store`), declares the
// configured projects and jobsets (and one for COLLECTION), evaluates them,
// reports the builds as they finish and keeps serving until SIGINT/SIGTERM,
// then stops everything; SIGHUP re-reads the config file and applies what
// changed (docs/operations.md). A child that dies is restarted with
// back-off (serve_supervisor.h); the scheduler and the workers
// authenticate each other with CurveZMQ keys kept in the state directory.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <boost/program_options.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <iostream>
#include <thread>

#include "cli_common.h"
#include "command.h"
#include "farm_config.h"
#include "kiln/common/clock.h"
#include "kiln/common/file.h"
#include "notify_options.h"
#include "serve_farm.h"
#include "store_cli.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;
using namespace std::chrono_literals;

std::atomic<bool> gStop{false};
std::atomic<bool> gReload{false};
extern "C" void onServeSignal(int) { gStop = true; }
extern "C" void onServeHangup(int) { gReload = true; }

// The command line: a config file, a collection, and flags that override
// the config's values (kept, so that a reload applies them again).
struct ServeFlags {
  std::string configFile;
  std::string collection;
  StoreLocation loc;
  unsigned workers = 0, slots = 0;
  std::string listen, webListen, notifySecretFile;
  int metricsPort = 0;
  int64_t checkInterval = 0;
  std::vector<std::string> notify;
  SandboxOptions sandbox;
  po::variables_map vm;
  bool given(const char* name) const { return vm.count(name) > 0; }
};

// The jobset's name: the collection folder's name made a valid one.
std::string jobsetNameOf(const std::string& collection) {
  std::string jobset = baseNameOf(collection);
  for (char& c : jobset)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-')
      c = '_';
  if (jobset.empty() || isdigit(static_cast<unsigned char>(jobset[0])))
    jobset = "c_" + jobset;
  return jobset;
}

// The settings: the config file's (if any), then the command line's.
// Throws ConfigError/Error for a bad file or flag.
ServeSettings settingsOf(const ServeFlags& f) {
  ServeSettings s;
  if (!f.configFile.empty()) s.config = loadFarmConfig(f.configFile);
  FarmConfig& c = s.config;
  if (f.given("state-dir")) c.stateDir = absPath(f.loc.stateDir);
  if (c.stateDir.empty()) c.stateDir = absPath(defaultStateDir());
  if (!f.vm["store-dir"].defaulted()) c.storeDir = f.loc.storeDir;
  if (f.given("workers")) c.workers.count = f.workers;
  if (f.given("slots")) c.workers.slots = f.slots;
  if (f.given("listen")) c.scheduler.listen = f.listen;
  if (f.given("web-listen")) c.scheduler.webListen = f.webListen;
  if (f.given("metrics-port")) c.scheduler.metricsPort = f.metricsPort;
  if (f.given("notify")) c.scheduler.notify = f.notify;
  if (f.given("notify-secret-file"))
    c.scheduler.notifySecretFile = absPath(f.notifySecretFile);
  if (f.given("sandbox")) c.workers.sandbox = f.sandbox.name;
  if (f.given("platforms")) c.workers.platforms = f.sandbox.platforms;
  s.sandbox = f.sandbox;
  if (!f.collection.empty()) {
    ConfiguredJobset j;
    j.name = jobsetNameOf(f.collection);
    j.location = f.collection;
    auto it = std::find_if(c.projects.begin(), c.projects.end(),
                           [](auto& p) { return p.name == "serve"; });
    if (it == c.projects.end())
      it = c.projects.insert(c.projects.end(),
                             {"serve", "collections run by kiln serve", "", {}});
    it->jobsets.push_back(j);
  }
  if (f.given("check-interval"))
    for (auto& p : c.projects)
      for (auto& j : p.jobsets) j.checkInterval = f.checkInterval;
  // Refused here, not by a scheduler restarted in a loop.
  parseNotifyOptions(c.scheduler.notify, c.scheduler.notifySecretFile);
  return s;
}

// Re-reads the config file and applies it; a file that does not parse
// leaves the running configuration in force.
void reload(const ServeFlags& flags, ServeFarm& farm) {
  std::cout << "kiln serve: SIGHUP: re-reading " << flags.configFile
            << std::endl;
  ServeSettings next;
  try {
    next = settingsOf(flags);
  } catch (const Error& e) {
    std::cout << "kiln serve: " << flags.configFile
              << " not applied, the previous configuration stays in force:\n"
              << e.what() << std::endl;
    return;
  }
  try {
    std::string changes = farm.apply(std::move(next), gStop);
    std::cout << "kiln serve: applied " << flags.configFile
              << (changes.empty() ? " (nothing changed)\n" : ":\n") << changes
              << std::flush;
  } catch (const Error& e) {
    std::cout << "kiln serve: applying " << flags.configFile
              << " failed: " << e.what() << std::endl;
  }
}

// Refuses a state directory that is not a writable folder.
void checkStateDir(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // made by ServeFarm
    throwSysError("state directory " + dir);
  }
  if (!S_ISDIR(st.st_mode) || ::access(dir.c_str(), R_OK | W_OK | X_OK) != 0)
    throw Error("the state directory " + dir +
                " is not a folder kiln serve can read and write; choose "
                "another with --state-dir, state_dir in the config or "
                "KILN_STATE_DIR");
}

int serve(const ServeFlags& flags) {
  ServeSettings settings = settingsOf(flags);
  checkStateDir(settings.config.stateDir);
  if (geteuid() != 0 && settings.config.workers.count > 0)
    throw Error(
        "the local workers use --private-store (a mount namespace "
        "with their store on " +
        settings.config.storeDir +
        "), which needs root; run kiln serve as root, set "
        "local_workers.count = 0 (or --workers 0) and run `kiln worker` "
        "yourself (docs/operations.md)");
  ServeFarm farm(std::move(settings), std::cout);
  if (farm.start(gStop)) {
    while (!gStop) {
      if (gReload.exchange(false)) {
        if (flags.configFile.empty())
          std::cout << "kiln serve: SIGHUP ignored: no --config file"
                    << std::endl;
        else
          reload(flags, farm);
      }
      farm.poll();
      RealClock::instance().sleepFor(200ms);
    }
  }
  std::cout << "stopping" << std::endl;
  farm.stop();
  return kExitOk;
}

void addServeOptions(po::options_description& opts, ServeFlags& f) {
  opts.add_options()("help,h", "show this help")(
      "config", po::value(&f.configFile),
      "the farm's configuration file (TOML; docs/operations.md); the "
      "options below override its values")("workers", po::value(&f.workers),
                                           "local workers (default 2)")(
      "slots", po::value(&f.slots), "slots per worker (default 1)")(
      "listen", po::value(&f.listen),
      "scheduler endpoint (default tcp://127.0.0.1:7470)")(
      "metrics-port", po::value(&f.metricsPort),
      "Prometheus /metrics port on 127.0.0.1 (default 9470)")(
      "web-listen", po::value(&f.webListen),
      "dashboard and JSON API address (default 127.0.0.1:8470)")(
      "check-interval", po::value(&f.checkInterval),
      "seconds between checks of every jobset (default 60; 0 = once)")(
      "notify", po::value(&f.notify)->composing(),
      "the scheduler's notifiers (repeatable): webhook:http://HOST[:PORT]/PATH"
      " or command:CMD (kiln scheduler --help)")(
      "notify-secret-file", po::value(&f.notifySecretFile),
      "file holding the webhook's HMAC-SHA256 key");
  f.loc.addOptions(opts);
  addSandboxOptions(opts, f.sandbox);
  addPressureOptions(opts, f.sandbox.pressure);
}

int serveCommand(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln serve [options] [--config FILE] [COLLECTION]\n\n"
      "Runs kiln's main job on this machine: a scheduler and local workers\n"
      "(own stores mounted at the logical store dir; needs root), the\n"
      "projects and jobsets of --config and one for COLLECTION (project\n"
      "'serve'), evaluations, and progress lines until Ctrl-C, which stops\n"
      "everything. SIGHUP re-reads --config and applies what changed.\n\n"
      "Options");
  ServeFlags f;
  addServeOptions(opts, f);
  std::vector<std::string> paths;
  if (auto rc = parseCommandLine("serve", opts, paths, 1, args, f.vm, 0))
    return *rc;
  if (paths.empty() && f.configFile.empty()) {
    std::cerr << "kiln serve: give --config FILE (a farm's TOML file), a "
                 "COLLECTION (a folder with default.nix), or both; for "
                 "example, from kiln's source folder:\n"
                 "  kiln serve --config examples/pkgset/kiln.toml   "
                 "(what scripts/run-example.sh runs)\n"
                 "  kiln serve examples/hello\n";
    return kExitUsage;
  }
  if ((f.given("slots") && f.slots == 0) || f.workers > 64) {
    std::cerr << "kiln serve: --slots must be >= 1 and --workers <= 64\n";
    return kExitUsage;
  }
  return guarded("serve", [&] {
    if (!paths.empty()) {
      f.collection = absPath(paths[0]);
      if (!pathExists(f.collection + "/default.nix"))
        throw Error("the collection " + f.collection +
                    " has no default.nix: give a folder holding one (for "
                    "example examples/hello)");
    }
    if (!f.configFile.empty()) f.configFile = absPath(f.configFile);
    signal(SIGINT, onServeSignal);
    signal(SIGTERM, onServeSignal);
    signal(SIGHUP, onServeHangup);
    return serve(f);
  });
}

RegisterCommand reg("serve",
                    "run a scheduler and local workers building a collection",
                    serveCommand);

}  // namespace
}  // namespace kiln::cli
