// `kiln scheduler`: runs the scheduler service on a state directory until
// SIGINT/SIGTERM (docs/operations.md).
#include <boost/program_options.hpp>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cache_options.h"
#include "command.h"
#include "database_options.h"
#include "kiln/common/clock.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/common/process.h"
#include "kiln/plugin_host/host_services.h"
#include "kiln/plugin_host/registry.h"
#include "kiln/scheduler/service.h"
#include "kiln/store/signature.h"
#include "kiln/web/binary_cache.h"
#include "kiln/web/routes.h"
#include "notify_options.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

std::atomic<bool> gStop{false};

void onSignal(int) { gStop = true; }

// The web front ends of a scheduler: everything on --web-listen, only
// /metrics on --metrics-port (each when asked).
struct SchedulerWeb {
  std::unique_ptr<web::WebFrontend> all;
  std::unique_ptr<web::WebFrontend> metrics;
};

// How the web serves the central store as a binary cache.

// Starts the front ends of `svc`: pages read the state through their own
// connections and the service's snapshot, and queue requests for it like
// the CLI does; /metrics serves the service's registry and `extra`; the
// binary cache serves the central store.
// Who may read and push (--web-private, --web-push-secret-file).
struct WebAccess {
  bool privateReads = false;
  std::string pushSecretFile;
  std::vector<std::string> hosts;  ///< --web-host, with this host's name
};

SchedulerWeb startWeb(
    const std::string& listen, int metricsPort,
    const scheduler::ServiceConfig& cfg, scheduler::SchedulerService& svc,
    std::vector<std::shared_ptr<prometheus::Collectable>> extra,
    const WebAccess& access, const CacheOptions& cache) {
  web::WebContext ctx;
  ctx.privateReads = access.privateReads;
  if (!access.pushSecretFile.empty()) {
    ctx.pushSecret = readFile(access.pushSecretFile);
    while (!ctx.pushSecret.empty() &&
           (ctx.pushSecret.back() == '\n' || ctx.pushSecret.back() == '\r'))
      ctx.pushSecret.pop_back();
    if (ctx.pushSecret.empty())
      throw Error(access.pushSecretFile + " holds no push secret");
  }
  ctx.stateDir = cfg.stateDir;
  ctx.databaseUrl = cfg.databaseUrl;
  ctx.databasePasswordFile = cfg.databasePasswordFile;
  ctx.storeDir = cfg.storeDir;
  ctx.snapshot = [&svc] { return svc.snapshot(); };
  ctx.checkEvaluator =
      scheduler::loadedEvaluatorCheck(plugins::processPlugins());
  ctx.metrics = svc.metricsRegistry();
  ctx.extraMetrics = std::move(extra);
  SchedulerWeb web;
  web::WebServerConfig wc;
  if (!listen.empty()) {
    wc.listen = listen;
    wc.hosts = access.hosts;
    web::WebContext all = ctx;
    all.binaryCache = makeBinaryCache(cfg.stateDir, cfg.storeDir, cache, true);
    web.all = std::make_unique<web::WebFrontend>(wc, std::move(all));
  }
  if (metricsPort >= 0) {
    wc.listen = "127.0.0.1:" + std::to_string(metricsPort);
    wc.hosts = {"*"};  // metrics only: scraped by any name the host has
    web.metrics = std::make_unique<web::WebFrontend>(
        wc, ctx, web::RouteSet::kMetricsOnly);
  }
  return web;
}

// A standby's wait: the farm's lock once no other scheduler holds it, or
// null if SIGINT/SIGTERM came first. Polls every second (the lock is free
// as soon as the active scheduler's session ends).
std::shared_ptr<scheduler::SchedulerLock> waitForFarmLock(
    const scheduler::ServiceConfig& cfg) {
  bool announced = false;
  while (!gStop.load()) {
    try {
      if (auto l = scheduler::SchedulerLock::tryAcquire(cfg.loopDatabase(),
                                                        cfg.stateDir)) {
        if (announced) logInfo("standby: the farm's lock is free; taking over");
        return l;
      }
      if (!announced)
        logInfo("standby: another scheduler holds the farm (" +
                cfg.databaseUrl + "); waiting to take over");
      announced = true;
    } catch (const scheduler::SqlError& e) {
      logWarn(std::string("standby: ") + e.what());
    }
    for (int i = 0; i < 10 && !gStop.load(); ++i)
      RealClock::instance().sleepFor(std::chrono::milliseconds(100));
  }
  return nullptr;
}

int runScheduler(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln scheduler --state-dir DIR --listen tcp://HOST:PORT\n"
      "         (--insecure-plaintext | --secret-key-file F "
      "--allowed-workers FILE)\n"
      "         [--metrics-port P] [--web-listen HOST:PORT] [options]\n\n"
      "Runs the scheduler: workers dial in on --listen; state, central store\n"
      "and logs live in --state-dir (the state in PostgreSQL with\n"
      "--database). Stops on SIGINT or SIGTERM.\n\nOptions");
  scheduler::ServiceConfig cfg;
  std::string keyFile, allowFile, webListen;
  WebAccess webAccess;
  int metricsPort = -1;
  int64_t heartbeatMs = 10000, ttl = 0, requestPollMs = 2000;
  int64_t pullCloseGraceSec = 600;
  int64_t databaseTimeoutMs = scheduler::kLoopQueryTimeout.count();
  unsigned retries = 3;
  int64_t backoffMs = 30000;
  int64_t deadlineMarginSec = 600;
  int64_t keepLogPiecesSec = 3600, keepStoredLogsDays = 0;
  int64_t keepRepeatNarsDays = 30;
  int64_t refusedCheckWaitSec = 60;
  std::vector<std::string> notify;
  std::string notifySecret, notifyCa;
  std::vector<std::string> pluginDirs;
  CacheOptions cache;
  std::string evaluationsWhere;
  opts.add_options()("help,h", "show this help")(
      "state-dir", po::value(&cfg.stateDir)->required(), "state directory")(
      "listen", po::value(&cfg.listen)->required(),
      "ZeroMQ endpoint to bind, e.g. tcp://127.0.0.1:7470")(
      "insecure-plaintext", "no CurveZMQ: anyone reaching the port may join")(
      "secret-key-file", po::value(&keyFile),
      "the scheduler's secret key (kiln key generate)")(
      "allowed-workers", po::value(&allowFile),
      "file of worker public keys allowed to join")(
      "metrics-port", po::value(&metricsPort),
      "serve Prometheus /metrics on 127.0.0.1:P")(
      "web-listen", po::value(&webListen),
      "serve the web front end (dashboard, JSON API, binary cache) on "
      "HOST:PORT")("web-private",
                   "reads on the web need a read-scope API token too")(
      "web-host", po::value(&webAccess.hosts)->composing(),
      "a host name the web answers for (repeatable; IP addresses, "
      "localhost and this machine's name always are; '*' = any). Requests "
      "for other names get 421, which keeps web pages from reaching the "
      "farm through DNS rebinding")(
      "web-push-secret-file", po::value(&webAccess.pushSecretFile),
      "file holding the HMAC-SHA256 key of the push webhook "
      "(/api/push/PROJECT/JOBSET; without it every push is refused)")(
      "store-dir", po::value(&cfg.storeDir),
      "logical store directory (default /nix/store)")(
      "no-fsync-store",
      "do not fsync each file of an upload before registering it in the "
      "central store (Nix's default)")(
      "plugin-dir", po::value(&pluginDirs)->composing(),
      "search evaluator and notifier plugins here (repeatable; default: "
      "$KILN_PLUGIN_PATH, the build tree, the install folder)")(
      "heartbeat-ms", po::value(&heartbeatMs),
      "heartbeat interval announced to workers (default 10000)")(
      "request-poll-ms", po::value(&requestPollMs),
      "with --database: how often the requests table is read besides the "
      "LISTEN/NOTIFY wake-ups (default 2000)")(
      "database-timeout-ms", po::value(&databaseTimeoutMs),
      "with --database: how long a statement of the scheduler's loop may "
      "wait for PostgreSQL before the connection is dropped and the loop "
      "goes on from memory (default 5000)")(
      "max-retries", po::value(&retries),
      "retries of transient failures (default 3)")(
      "retry-backoff-ms", po::value(&backoffMs),
      "wait before the first retry of a transient failure, doubled for "
      "each further one (default 30000)")(
      "log-limit", po::value(&cfg.logLimitBytes),
      "bytes of log kept per step (default 64 MiB)")(
      "keep-log-pieces", po::value(&keepLogPiecesSec),
      "seconds the pieces of an ended attempt's log stay in the database "
      "before they become its stored log, if it has none (default 3600)")(
      "keep-stored-logs", po::value(&keepStoredLogsDays),
      "days the stored logs of finished steps stay in the database "
      "(default 0: for good; the log files stay)")(
      "keep-repeat-nars", po::value(&keepRepeatNarsDays),
      "days the second build's NARs and log of a reproducibility check "
      "that differs or failed stay under <state>/repeat-checks once its "
      "report is stored (default 30; a check that found the same NARs "
      "keeps none)")(
      "refused-check-wait", po::value(&refusedCheckWaitSec),
      "seconds a reproducibility check that a worker refused (it holds the "
      "outputs) waits for another worker when none is connected, before it "
      "ends failed (default 60; 0: at once)")(
      "output-limit", po::value(&cfg.outputLimitBytes),
      "largest accepted output NAR in bytes (default unlimited)")(
      "max-message-size", po::value(&cfg.maxMessageBytes),
      "largest message a worker may send, in bytes (default 32 MiB)")(
      "max-uploads-per-connection", po::value(&cfg.maxConcurrentUploads),
      "uploads one worker connection may send at once (default 4)")(
      "max-queued-uploads", po::value(&cfg.maxQueuedUploads),
      "announced uploads waiting per connection (default 256)")(
      "max-connections-per-key", po::value(&cfg.maxConnectionsPerKey),
      "connections per worker key, 0 = unlimited (default 16)")(
      "max-slots-per-key", po::value(&cfg.maxSlotsPerKey),
      "slots per worker key, 0 = unlimited (default)")(
      "min-free-disk", po::value(&cfg.minFreeDiskBytes),
      "bytes an upload must leave free (default 256 MiB)")(
      "step-deadline-margin", po::value(&deadlineMarginSec),
      "seconds past a step's timeout before it is taken back (default 600)")(
      "cached-failure-ttl", po::value(&ttl),
      "seconds a failure stays cached (default: until cleared)")(
      "pull-close-grace", po::value(&pullCloseGraceSec),
      "seconds after a forge closed a pull request before its jobset's "
      "unfinished builds are cancelled (default 600; docs/ci.md)")(
      "notify", po::value(&notify)->composing(),
      "send build events to a notifier plugin (repeatable):\n"
      "webhook:http(s)://HOST[:PORT]/PATH (POSTs JSON) or command:CMD "
      "(runs CMD with the JSON on stdin)")(
      "notify-secret-file", po::value(&notifySecret),
      "file holding the webhook's HMAC-SHA256 key "
      "(X-Kiln-Signature-256 header)")(
      "notify-ca-file", po::value(&notifyCa),
      "PEM file of the CAs an https webhook's certificate must chain to "
      "(default: the system's CAs)");
  cache.add(opts);
  opts.add_options()(
      "direct-uploads",
      "with --cache s3://…: workers started with --direct-uploads PUT "
      "their compressed outputs to staging/ of the bucket through "
      "presigned URLs; the scheduler verifies each one before publishing "
      "it (docs/protocol.md, \"Direct uploads\")")(
      "direct-part-size", po::value(&cfg.directPartBytes),
      "direct uploads larger than this many bytes are multipart uploads "
      "in parts of this size (default 64 MiB, at least 5 MiB)")(
      "direct-rehash",
      "hash verified direct uploads again when adding them to the central "
      "store (benchmarks only)")(
      "verify-threads", po::value(&cfg.directVerifyThreads),
      "threads that verify and publish direct uploads (default min(2, "
      "cores); the outputs of one step go one at a time)");
  DatabaseOptions database;
  database.add(opts);
  opts.add_options()(
      "standby",
      "with --database: while another scheduler holds the farm, wait and "
      "take over when it stops (fail-over)")(
      "evaluations", po::value(&evaluationsWhere)->default_value("local"),
      "local: evaluate jobsets in this process; remote: leave them to "
      "`kiln evaluator` hosts and record what they publish")(
      "max-source-size", po::value(&cfg.maxSourceBytes),
      "largest evaluated checkout (NAR bytes) kept as the evaluation's "
      "sources, a channel's nixexprs.tar.xz; larger ones are not kept "
      "(default 1 GiB; 0: none)");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).run(), vm);
    if (vm.count("help")) {
      std::cout << opts;
      return kExitOk;
    }
    po::notify(vm);
    cfg.insecurePlaintext = vm.count("insecure-plaintext") > 0;
    cfg.syncStoreFiles = vm.count("no-fsync-store") == 0;
    cfg.directUploads = vm.count("direct-uploads") > 0;
    cfg.directRehash = vm.count("direct-rehash") > 0;
    if (cfg.directUploads && !cache.objectStore())
      throw po::error("--direct-uploads needs --cache s3://…");
    if (cfg.directPartBytes < (5u << 20) || cfg.directPartBytes > (5ull << 30))
      throw po::error("--direct-part-size must be 5 MiB..5 GiB");
    if (cfg.directVerifyThreads > 64)
      throw po::error("--verify-threads must be 1..64");
    plugins::configurePluginDirs(pluginDirs);
    try {
      database.spec(cfg.stateDir);
    } catch (const Error& e) {
      throw po::error(e.what());
    }
    cfg.databaseUrl = database.url;
    cfg.databasePasswordFile = database.passwordFile;
    if (evaluationsWhere != "local" && evaluationsWhere != "remote")
      throw po::error("--evaluations must be local or remote, not '" +
                      evaluationsWhere + "'");
    cfg.remoteEvaluations = evaluationsWhere == "remote";
    if (vm.count("standby") && database.url.empty())
      throw po::error("--standby needs --database (a PostgreSQL farm)");
    if (!cfg.insecurePlaintext && (keyFile.empty() || allowFile.empty()))
      throw po::error(
          "give --secret-key-file and --allowed-workers, or "
          "--insecure-plaintext for local development");
    if (heartbeatMs < 1 || heartbeatMs > 3600000)
      throw po::error("--heartbeat-ms must be 1..3600000");
    if (databaseTimeoutMs < 1000 || databaseTimeoutMs > 3600000)
      throw po::error("--database-timeout-ms must be 1000..3600000");
    if (requestPollMs < 100 || requestPollMs > 3600000)
      throw po::error("--request-poll-ms must be 100..3600000");
    if (backoffMs < 0 || backoffMs > 86400000)
      throw po::error("--retry-backoff-ms must be 0..86400000");
    if (keepLogPiecesSec < 0 || keepLogPiecesSec > 86400 * 365)
      throw po::error("--keep-log-pieces must be 0..31536000");
    if (keepStoredLogsDays < 0 || keepStoredLogsDays > 36500)
      throw po::error("--keep-stored-logs must be 0..36500");
    if (keepRepeatNarsDays < 0 || keepRepeatNarsDays > 36500)
      throw po::error("--keep-repeat-nars must be 0..36500");
    if (refusedCheckWaitSec < 0 || refusedCheckWaitSec > 86400 * 7)
      throw po::error("--refused-check-wait must be 0..604800");
    if (deadlineMarginSec < 0 || deadlineMarginSec > 86400 * 7)
      throw po::error("--step-deadline-margin must be 0..604800");
    if (cfg.maxMessageBytes < (1 << 20) ||
        cfg.maxMessageBytes > protocol::kMaxBodyFrame)
      throw po::error("--max-message-size must be 1 MiB..256 MiB");
    if (cfg.maxConcurrentUploads < 1)
      throw po::error("--max-uploads-per-connection must be at least 1");
    cache.check();
    try {
      parseNotifyOptions(notify, notifySecret, notifyCa);
    } catch (const Error& e) {
      throw po::error(e.what());
    }
  } catch (const po::error& e) {
    std::cerr << "kiln scheduler: " << e.what() << "\n" << opts;
    return kExitUsage;
  }
  try {
    if (!cfg.insecurePlaintext) {
      cfg.keys = protocol::readSecretKeyFile(keyFile);
      cfg.allowed = protocol::AllowList::readFile(allowFile);
    }
    cfg.heartbeatInterval = std::chrono::milliseconds(heartbeatMs);
    cfg.databaseTimeout = std::chrono::milliseconds(databaseTimeoutMs);
    cfg.requestSafetyPoll = std::chrono::milliseconds(requestPollMs);
    cfg.core.maxRetries = retries;
    cfg.core.retryBackoffBase = std::chrono::milliseconds(backoffMs);
    cfg.cachedFailureTtlSec = ttl;
    if (pullCloseGraceSec < 0)
      throw po::error("--pull-close-grace must be >= 0");
    cfg.pullCloseGrace = std::chrono::seconds(pullCloseGraceSec);
    cfg.stepDeadlineMargin = std::chrono::seconds(deadlineMarginSec);
    cfg.logRetention.endedPiecesAfter = std::chrono::seconds(keepLogPiecesSec);
    cfg.logRetention.storedLogsAfter =
        std::chrono::hours(24) * keepStoredLogsDays;
    cfg.keepRepeatNars = std::chrono::hours(24) * keepRepeatNarsDays;
    cfg.refusedCheckWait = std::chrono::seconds(refusedCheckWaitSec);
    if (cache.objectStore()) {
      cfg.cacheUri = cache.uri;
      cfg.cacheCompression = cache.compression;
      if (!cache.secretKeyFile.empty())
        cfg.cacheSigningKey = store::readSecretKeyFile(cache.secretKeyFile);
      else
        logWarn("--cache " + cache.uri +
                " without --cache-secret-key-file: outputs are published "
                "unsigned");
    }
    // Evaluations run this very executable as `kiln eval`.
    cfg.kilnBinary = std::filesystem::read_symlink("/proc/self/exe").string();
    SchedulerNotifiers notifiers(notify, notifySecret, notifyCa);
    // Plugins' own counters (metric_add), labelled with the plugin.
    std::vector<std::shared_ptr<prometheus::Collectable>> extraMetrics{
        plugins::pluginMetrics()};
    if (auto outbox = notifiers.outbox()) {
      cfg.eventSinks.push_back(outbox);
      extraMetrics.push_back(notifiers.registry());
    }
    std::signal(SIGINT, onSignal);
    std::signal(SIGTERM, onSignal);
    if (vm.count("standby")) {
      cfg.heldLock = waitForFarmLock(cfg);
      if (!cfg.heldLock) return kExitOk;  // stopped while standing by
    }
    scheduler::SchedulerService svc(cfg);
    notifiers.start(cfg.database(), RealClock::instance());
    webAccess.privateReads = vm.count("web-private") > 0;
    webAccess.hosts.push_back(hostName());
    auto web = startWeb(webListen, metricsPort, cfg, svc, extraMetrics,
                        webAccess, cache);
    std::cout << "listening " << svc.endpoint();
    if (web.metrics) std::cout << " metrics " << web.metrics->port();
    if (web.all) std::cout << " web " << web.all->url();
    std::cout << std::endl;
    svc.run(gStop);
    logInfo("scheduler stopping");
    return kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "kiln scheduler: " << e.what() << "\n";
    return kExitFailure;
  }
}

RegisterCommand reg("scheduler", "run the scheduler service", runScheduler);

}  // namespace
}  // namespace kiln::cli
