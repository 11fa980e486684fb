// `kiln worker`: the build worker daemon (docs/worker.md, "Daemon").
#include <signal.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <iostream>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "command.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/common/process.h"
#include "kiln/plugin_host/host_services.h"
#include "kiln/protocol/keys.h"
#include "kiln/web/routes.h"
#include "kiln/worker/daemon.h"
#include "kiln/worker/endpoint_list.h"
#include "kiln/worker/private_store.h"
#include "sandbox_options.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

worker::Daemon* gDaemon = nullptr;

extern "C" void onStopSignal(int) {
  if (gDaemon) gDaemon->stop();
}

std::vector<std::string> splitList(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (auto& item : in) {
    std::string cur;
    for (char c : item + ",") {
      if (c == ',' || c == ' ') {
        if (!cur.empty()) out.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
  }
  return out;
}

// `/metrics` of this worker on `listen` (HOST:PORT, port 0: any): the
// counters of the plugins loaded here (sandbox, platform; labelled kind
// and plugin), the requests answered, and kiln_worker_info. Logs its URL.
std::unique_ptr<web::WebFrontend> serveWorkerMetrics(
    const std::string& listen, const worker::DaemonConfig& cfg) {
  web::WebContext ctx;  // no state directory: no central store to sample
  ctx.metrics = std::make_shared<prometheus::Registry>();
  prometheus::BuildGauge()
      .Name("kiln_worker_info")
      .Help("This worker: its name (--worker-id, \"\" = the host name), "
            "kiln version and slots")
      .Register(*ctx.metrics)
      .Add({{"worker", cfg.workerId.empty() ? hostName() : cfg.workerId},
            {"version", cfg.kilnVersion},
            {"slots", std::to_string(cfg.slots)}})
      .Set(1);
  ctx.extraMetrics = {plugins::pluginMetrics()};
  web::WebServerConfig wc;
  wc.listen = listen;
  wc.hosts = {"*"};  // metrics only: scraped by any name the host has
  auto web = std::make_unique<web::WebFrontend>(wc, std::move(ctx),
                                                web::RouteSet::kMetricsOnly);
  logInfo("worker metrics " + web->url() + "/metrics");
  return web;
}

int runWorker(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln worker --connect tcp://HOST:PORT[,tcp://HOST:PORT..]\n"
      "         --state-dir DIR\n"
      "         (--insecure-plaintext | --secret-key-file F "
      "--server-public-key-file G)\n"
      "         [--systems S,..] [--features F,..] [--mandatory-features "
      "F,..]\n"
      "         [--slots N] [--speed-factor X] [--store-dir D]\n"
      "         [--private-store | --store-mounted-at-logical]\n"
      "         [--sandbox linux|none] [--sandbox-option K=V ..]\n"
      "         [--platforms native,qemu-user] [--platform-option K=V ..]\n"
      "         [--metrics-listen HOST:PORT]\n\n"
      "Connects to a kiln scheduler and builds the steps it is given until\n"
      "SIGINT/SIGTERM, each in a sandbox (default linux: namespaces, only\n"
      "the input closure, a build user, no network; docs/worker.md).\n"
      "Given several schedulers (an active one and standbys), it follows\n"
      "the first that answers and moves to the next, round-robin, when it\n"
      "loses it (docs/worker.md, \"Fail-over\").\n"
      "Exits 1 if the scheduler refuses the worker or the sandbox cannot\n"
      "run here.\n\n"
      "Options");
  worker::DaemonConfig cfg;
  std::string secretFile, serverPubFile;
  std::vector<std::string> connect;
  std::vector<std::string> systems, features, mandatory;
  std::string metricsListen;
  opts.add_options()("help,h", "show this help")(
      "connect", po::value(&connect)->required()->composing(),
      "scheduler endpoint, e.g. tcp://sched.example.org:7470; repeat it or "
      "separate endpoints by commas to list standby schedulers, tried in "
      "order (all with the same --server-public-key-file)")(
      "insecure-plaintext", "no encryption or authentication (development)")(
      "secret-key-file", po::value(&secretFile), "this worker's secret key")(
      "server-public-key-file", po::value(&serverPubFile),
      "the scheduler's public key")("state-dir",
                                    po::value(&cfg.stateDir)->required(),
                                    "the worker's store and scratch space")(
      "store-dir", po::value(&cfg.storeDir),
      "logical store directory (default /nix/store); must be STATE/store "
      "unless the store is mounted there")(
      "store-mounted-at-logical",
      "the physical store STATE/store is also visible at --store-dir")(
      "private-store",
      "enter a mount namespace of this worker's own and bind-mount "
      "STATE/store on --store-dir (needs root or CAP_SYS_ADMIN); lets "
      "several workers share one host")("worker-id", po::value(&cfg.workerId),
                                        "name (default: host name)")(
      "systems", po::value(&systems)->multitoken(),
      "systems announced (default: those the --platforms run here)")(
      "features", po::value(&features)->multitoken(),
      "supported system features")("mandatory-features",
                                   po::value(&mandatory)->multitoken(),
                                   "features a step must require to run here")(
      "slots", po::value(&cfg.slots), "builds at once (default 1)")(
      "no-fsync-store",
      "do not fsync each file added to this worker's store (Nix's default; "
      "the store is a cache the scheduler's checks stand behind)")(
      "speed-factor", po::value(&cfg.speedFactor),
      "relative speed (default 1.0)")(
      "direct-uploads",
      po::value(&cfg.directUploads)->implicit_value("zstd"),
      "upload outputs straight to the farm's object store through "
      "presigned URLs the scheduler grants, compressed with zstd "
      "(default) or xz (falls back to the connection when the scheduler "
      "has no direct uploads)")(
      "metrics-listen", po::value(&metricsListen),
      "serve Prometheus /metrics (the sandbox and platform plugins' "
      "counters) on HOST:PORT")("verbose,v", "log debug messages");
  SandboxOptions sandboxOpts;
  addSandboxOptions(opts, sandboxOpts);
  addPressureOptions(opts, sandboxOpts.pressure);
  // Hidden (not in --help): test-only fault injection, docs/worker.md.
  po::options_description hidden;
  unsigned debugVersion = 0;
  std::string procRoot;
  hidden.add_options()("debug-protocol-version", po::value(&debugVersion),
                       "speak this protocol version (tests only)")(
      "debug-corrupt-uploads", po::value(&cfg.debug.corruptUploads),
      "corrupt the first N output uploads (tests only)")(
      "debug-exit-after-staging",
      "exit right after the first direct upload is staged (tests only)")(
      "debug-kill-after-parts", po::value(&cfg.debug.killAfterParts),
      "SIGKILL the worker once N parts of a multipart direct upload are up "
      "(tests only)")(
      "debug-proc-root", po::value(&procRoot),
      "read pressure and memory from DIR/pressure and DIR/meminfo instead "
      "of /proc (tests only)");
  po::options_description all;
  all.add(opts).add(hidden);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).run(), vm);
    if (vm.count("help")) {
      std::cout << opts;
      return kExitOk;
    }
    po::notify(vm);
    if (debugVersion > 0xffff)
      throw po::error("--debug-protocol-version must be 0..65535");
    cfg.debug.protocolVersion = static_cast<uint16_t>(debugVersion);
    cfg.debug.exitAfterStaging = vm.count("debug-exit-after-staging") > 0;
    if (!cfg.directUploads.empty() && cfg.directUploads != "zstd" &&
        cfg.directUploads != "xz")
      throw po::error("--direct-uploads must be zstd or xz");
    cfg.schedulers = worker::EndpointList::parse(connect);
  } catch (const Error& e) {
    std::cerr << "kiln worker: --connect: " << e.what() << "\n";
    return kExitUsage;
  } catch (const po::error& e) {
    std::cerr << "kiln worker: " << e.what() << "\n" << opts;
    return kExitUsage;
  }
  cfg.client.insecurePlaintext = vm.count("insecure-plaintext") > 0;
  if (!cfg.client.insecurePlaintext &&
      (secretFile.empty() || serverPubFile.empty())) {
    std::cerr << "kiln worker: give --secret-key-file and "
                 "--server-public-key-file, or --insecure-plaintext\n";
    return kExitUsage;
  }
  cfg.storeMountedAtLogical = vm.count("store-mounted-at-logical") > 0;
  cfg.syncStoreFiles = vm.count("no-fsync-store") == 0;
  bool privateStore = vm.count("private-store") > 0;
  if (privateStore && cfg.storeMountedAtLogical) {
    std::cerr << "kiln worker: --private-store and "
                 "--store-mounted-at-logical exclude each other\n";
    return kExitUsage;
  }
  cfg.systems = splitList(systems);
  cfg.supportedFeatures = splitList(features);
  cfg.mandatoryFeatures = splitList(mandatory);
  cfg.kilnVersion = KILN_VERSION;
  if (vm.count("verbose")) setLogLevel(LogLevel::kDebug);
  try {
    if (privateStore) {
      // Before anything starts a thread (ZeroMQ, the store): unshare needs
      // a single-threaded process.
      cfg.stateDir = absPath(cfg.stateDir);
      worker::enterPrivateStore(cfg.stateDir + "/store", cfg.storeDir);
      cfg.storeMountedAtLogical = true;
    }
    applySandboxOptions(sandboxOpts, cfg);
    if (!procRoot.empty()) cfg.pressure = worker::procPressureSource(procRoot);
    if (!cfg.client.insecurePlaintext) {
      cfg.client.keys = protocol::readSecretKeyFile(secretFile);
      cfg.client.serverPublicKey = protocol::readKeyFile(serverPubFile);
    }
    std::unique_ptr<web::WebFrontend> metrics;
    if (!metricsListen.empty()) metrics = serveWorkerMetrics(metricsListen, cfg);
    worker::Daemon daemon(std::move(cfg));
    gDaemon = &daemon;
    signal(SIGINT, onStopSignal);
    signal(SIGTERM, onStopSignal);
    daemon.run();
    gDaemon = nullptr;
    return kExitOk;
  } catch (const worker::WorkerRefused& e) {
    gDaemon = nullptr;
    std::cerr << "kiln worker: " << e.what() << "\n";
    return kExitFailure;
  } catch (const Error& e) {
    gDaemon = nullptr;
    std::cerr << "kiln worker: " << e.what() << "\n";
    return kExitFailure;
  }
}

RegisterCommand reg("worker", "run a build worker that serves a scheduler",
                    runWorker);

}  // namespace
}  // namespace kiln::cli
