// `kiln web`: the dashboard, JSON API and binary cache as a front end of
// its own (docs/operations.md, "Running on many machines"). It keeps no
// state: it reads the farm's PostgreSQL database (the running scheduler
// stores its snapshot there each second) and queues what operators ask
// for in the requests table, as the CLI does. Run as many as you like
// behind a load balancer.
#include <prometheus/registry.h>

#include <boost/program_options.hpp>
#include <csignal>
#include <iostream>
#include <mutex>
#include <thread>

#include "cache_options.h"
#include "cli_common.h"
#include "command.h"
#include "database_options.h"
#include "kiln/common/clock.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/common/process.h"
#include "kiln/scheduler/service.h"
#include "kiln/scheduler/snapshot_store.h"
#include "kiln/scheduler/state_view.h"
#include "kiln/web/routes.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

std::atomic<bool> gWebStop{false};
void onWebSignal(int) { gWebStop = true; }

// The scheduler's stored snapshot, read on a connection of each thread's
// own; null when the scheduler has not vouched for it in 10 s. Decoded
// once a second for the whole process (a queue of thousands of steps is
// hundreds of kB of JSON: not for every page).
std::function<std::shared_ptr<const scheduler::SchedulerSnapshot>()>
storedSnapshot(const scheduler::DatabaseSpec& database) {
  struct Cache {
    std::mutex mutex;
    Clock::TimePoint readAt{};
    std::shared_ptr<const scheduler::SchedulerSnapshot> snap;
  };
  auto cache = std::make_shared<Cache>();
  return [database,
          cache]() -> std::shared_ptr<const scheduler::SchedulerSnapshot> {
    std::lock_guard lock(cache->mutex);
    auto now = RealClock::instance().now();
    if (now - cache->readAt < std::chrono::seconds(1)) return cache->snap;
    thread_local std::unique_ptr<scheduler::StateView> view;
    try {
      if (!view) view = scheduler::StateView::openIfExists(database);
      cache->snap =
          view ? scheduler::loadSnapshot(view->rows(),
                                         RealClock::instance().nowMs(), 10000)
               : nullptr;
    } catch (const std::exception& e) {
      view.reset();  // a fresh connection next time
      logWarn(std::string("reading the scheduler's snapshot: ") + e.what());
      cache->snap = nullptr;
    }
    cache->readAt = now;
    return cache->snap;
  };
}

struct WebOptions {
  std::string listen, stateDir, storeDir = "/nix/store";
  CacheOptions cache;
  std::vector<std::string> hosts;
  DatabaseOptions database;
};

std::unique_ptr<web::WebFrontend> startFrontEnd(const WebOptions& o,
                                                bool privateReads) {
  web::WebContext ctx;
  ctx.privateReads = privateReads;
  ctx.stateDir = o.stateDir;
  ctx.databaseUrl = o.database.url;
  ctx.databasePasswordFile = o.database.passwordFile;
  ctx.storeDir = o.storeDir;
  ctx.snapshot = storedSnapshot(ctx.database());
  ctx.metrics = std::make_shared<prometheus::Registry>();
  // The scheduler prunes the cache's folder; front ends sharing it do not.
  if (!o.stateDir.empty() || o.cache.objectStore())
    ctx.binaryCache = makeBinaryCache(o.stateDir, o.storeDir, o.cache, false);
  web::WebServerConfig wc;
  wc.listen = o.listen;
  wc.hosts = o.hosts;
  wc.hosts.push_back(hostName());
  return std::make_unique<web::WebFrontend>(wc, std::move(ctx));
}

int runWeb(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln web --database postgresql://USER@HOST:PORT/DB --listen "
      "HOST:PORT\n"
      "         [--state-dir DIR] [--web-host NAME ..] [--web-private]\n\n"
      "Serves the dashboard, the JSON API, build logs (live and finished,\n"
      "from the database) and (with --state-dir, a shared path to the\n"
      "scheduler's state directory) the binary cache, for a farm whose\n"
      "state is in PostgreSQL. It keeps no state of\n"
      "its own: run several behind a load balancer. What operators change\n"
      "(restart, cancel, evaluate, tokens) reaches the scheduler through\n"
      "the database. Stops on SIGINT or SIGTERM.\n\nOptions");
  WebOptions o;
  opts.add_options()("help,h", "show this help")(
      "listen", po::value(&o.listen)->required(),
      "HOST:PORT to serve on (port 0: any free one)")(
      "state-dir", po::value(&o.stateDir),
      "the scheduler's state directory on a shared path (logs, the "
      "binary cache's store)")("store-dir", po::value(&o.storeDir),
                               "logical store directory")(
      "web-host", po::value(&o.hosts),
      "a Host name the pages answer to besides IPs, localhost and this "
      "machine's name (repeatable)")("web-private",
                                     "reading pages needs a read token too");
  o.cache.add(opts);
  o.database.add(opts);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).run(), vm);
    if (vm.count("help")) {
      std::cout << opts;
      return kExitOk;
    }
    po::notify(vm);
    o.cache.check();
    if (o.database.url.empty())
      throw po::error(
          "--database is required: kiln web serves a farm whose state is in "
          "PostgreSQL (a SQLite farm's web runs in kiln scheduler "
          "--web-listen)");
    o.database.spec(o.stateDir);
  } catch (const std::exception& e) {
    std::cerr << "kiln web: " << e.what() << "\n" << opts;
    return kExitUsage;
  }
  return guarded("web", [&] {
    // The schema must be this kiln's before anything is served.
    o.database.requireCurrentSchema();
    auto web = startFrontEnd(o, vm.count("web-private") > 0);
    std::cout << "web " << web->url() << std::endl;
    std::signal(SIGINT, onWebSignal);
    std::signal(SIGTERM, onWebSignal);
    while (!gWebStop.load())
      RealClock::instance().sleepFor(std::chrono::milliseconds(100));
    logInfo("web stopping");
    return kExitOk;
  });
}

RegisterCommand reg("web",
                    "serve the dashboard, API and cache of a "
                    "PostgreSQL farm (a front end of its own)",
                    runWeb);

}  // namespace
}  // namespace kiln::cli
