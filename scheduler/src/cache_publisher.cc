// The publisher of the farm's built outputs (cache_publisher.h).
#include "kiln/scheduler/cache_publisher.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <cstdio>

#include "kiln/common/error.h"
#include "kiln/common/fail_point.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/store/cache_copy.h"
#include "kiln/store/local_store.h"

namespace kiln::scheduler {

/// The `kiln_cache_*` families (detached when there is no registry).
struct CachePublisher::Metrics {
  explicit Metrics(prometheus::Registry& r)
      : waiting(prometheus::BuildGauge()
                    .Name("kiln_cache_outputs_waiting")
                    .Help("Built outputs not yet published to the farm's "
                          "binary cache")
                    .Register(r)
                    .Add({})),
        failing(prometheus::BuildGauge()
                    .Name("kiln_cache_publish_failing")
                    .Help("1 while publishing to the farm's binary cache "
                          "fails (unreachable or refusing)")
                    .Register(r)
                    .Add({})),
        paths(prometheus::BuildCounter()
                  .Name("kiln_cache_published_paths_total")
                  .Help("Store paths published to the farm's binary cache")
                  .Register(r)
                  .Add({})),
        bytes(prometheus::BuildCounter()
                  .Name("kiln_cache_published_nar_bytes_total")
                  .Help("NAR bytes (uncompressed) published to the farm's "
                        "binary cache")
                  .Register(r)
                  .Add({})),
        failures(prometheus::BuildCounter()
                     .Name("kiln_cache_publish_failures_total")
                     .Help("Failed attempts to publish to the farm's binary "
                           "cache (each retried)")
                     .Register(r)
                     .Add({})) {}
  prometheus::Gauge& waiting;
  prometheus::Gauge& failing;
  prometheus::Counter& paths;
  prometheus::Counter& bytes;
  prometheus::Counter& failures;
};

CachePublisher::CachePublisher(CachePublisherConfig config,
                               std::unique_ptr<store::CacheStorage> storage,
                               prometheus::Registry* registry,
                               const Clock& clock)
    : cfg_(std::move(config)),
      storage_(std::move(storage)),
      clock_(clock),
      markFile_(cfg_.stateDir + "/cache-published") {
  store::checkCompression(cfg_.compression);
  if (registry) metrics_ = std::make_unique<Metrics>(*registry);
  shared_.lock()->status.uri = storage_->uri();
  loadMark();
  thread_ = std::thread([this] { run(); });
}

CachePublisher::~CachePublisher() {
  shared_.lock()->stop = true;
  shared_.notifyAll();
  thread_.join();
}

void CachePublisher::wake() {
  shared_.lock()->woken = true;
  shared_.notifyAll();
}

CachePublisherStatus CachePublisher::status() const {
  return shared_.lock()->status;
}

bool CachePublisher::stopping() { return shared_.lock()->stop; }

// The mark file: the cache's URI, then the last published row id. A mark
// for another cache (the farm moved to a new bucket) counts as none.
void CachePublisher::loadMark() {
  if (!pathExists(markFile_)) return;
  auto text = readFile(markFile_);
  auto nl = text.find('\n');
  if (nl == std::string::npos || text.substr(0, nl) != storage_->uri()) {
    logInfo("binary cache " + storage_->uri() +
            ": every built output will be published (" + markFile_ +
            " names another cache)");
    return;
  }
  try {
    mark_ = std::stoll(text.substr(nl + 1));
  } catch (const std::exception&) {
    logWarn("binary cache: ignoring the unreadable mark " + markFile_);
  }
}

// Written through a temporary file and a rename: a crash leaves the old
// mark or the new one. Not fsynced: a mark lost to a power failure only
// makes the next start ask the cache again for paths it has.
void CachePublisher::saveMark() {
  std::string tmp = markFile_ + ".tmp";
  writeFile(tmp, storage_->uri() + "\n" + std::to_string(mark_) + "\n");
  if (std::rename(tmp.c_str(), markFile_.c_str()) != 0)
    throwSysError("renaming '" + tmp + "'");
}

void CachePublisher::pause(std::chrono::milliseconds d, bool wakeable) {
  auto s = shared_.lock();
  s.waitUntil(clock_, clock_.now() + d,
              [&] { return s->stop || (wakeable && s->woken); });
  s->woken = false;
}

size_t CachePublisher::publishBatch() {
  // The thread's own handle looks (once a poll); a handle per batch reads
  // the paths: its temporary roots (which keep a collector off them) end
  // with it.
  if (!looker_)
    looker_ = std::make_unique<store::LocalStore>(
        cfg_.stateDir, store::StoreDir(cfg_.storeDir));
  auto outputs = looker_->queryBuiltPathsAfter(mark_, cfg_.batch);
  uint64_t waiting = outputs.empty() ? 0 : looker_->countBuiltPathsAfter(mark_);
  shared_.lock()->status.waiting = waiting;
  if (metrics_) metrics_->waiting.Set(double(waiting));
  if (outputs.empty()) return 0;
  store::LocalStore st(cfg_.stateDir, store::StoreDir(cfg_.storeDir));
  store::CacheWriteOptions opts;
  opts.compression = cfg_.compression;
  if (cfg_.signingKey) opts.signingKey = &*cfg_.signingKey;
  store::BinaryCacheWriter writer(*storage_, store::StoreDir(cfg_.storeDir),
                                  opts);
  size_t handled = 0;
  for (auto& out : outputs) {
    if (stopping()) break;
    if (known_.size() > cfg_.maxKnown) known_.clear();
    store::CopyResult r;
    try {
      r = store::copyClosureToCache(st, writer, {out.path}, known_);
    } catch (const store::InvalidPathError& e) {
      // Collected meanwhile: nothing is left to publish.
      if (st.isValid(out.path)) throw;
      logInfo("binary cache: not publishing " + st.printPath(out.path) +
              ", collected before it was published");
    }
    KILN_FAIL_POINT("scheduler.cache-publish.before-mark");
    mark_ = out.id;
    saveMark();
    uint64_t bytes = 0;
    for (auto& p : r.copied) bytes += st.requirePathInfo(p).narSize;
    {
      auto s = shared_.lock();
      s->status.publishedPaths += r.copied.size();
      s->status.publishedBytes += bytes;
      if (s->status.waiting > 0) --s->status.waiting;
      waiting = s->status.waiting;
    }
    if (metrics_) {
      metrics_->paths.Increment(double(r.copied.size()));
      metrics_->bytes.Increment(double(bytes));
      metrics_->waiting.Set(double(waiting));
    }
    ++handled;
  }
  return handled;
}

void CachePublisher::succeeded() {
  std::string was;
  uint64_t waiting = 0;
  {
    auto s = shared_.lock();
    was = std::exchange(s->status.lastError, "");
    s->status.failingSinceMs = 0;
    waiting = s->status.waiting;
  }
  if (metrics_) metrics_->failing.Set(0);
  if (!was.empty())
    logInfo("binary cache " + storage_->uri() + ": publishing again; " +
            std::to_string(waiting) + " built outputs wait");
}

void CachePublisher::failed(const std::string& error) {
  uint64_t waiting = 0;
  bool first = false, changed = false;
  try {
    // The count the failure leaves waiting (init() may fail before any
    // batch counted it).
    store::LocalStore st(cfg_.stateDir, store::StoreDir(cfg_.storeDir));
    waiting = st.countBuiltPathsAfter(mark_);
  } catch (const std::exception& e) {
    logWarn(std::string("binary cache: counting unpublished outputs: ") +
            e.what());
  }
  {
    auto s = shared_.lock();
    s->status.waiting = waiting;
    first = s->status.failingSinceMs == 0;
    changed = s->status.lastError != error;
    if (first) s->status.failingSinceMs = clock_.nowMs();
    s->status.lastError = error;
    ++s->status.failures;
  }
  if (metrics_) {
    metrics_->waiting.Set(double(waiting));
    metrics_->failing.Set(1);
    metrics_->failures.Increment();
  }
  // Said when it starts, when the reason changes, then once a minute.
  auto now = clock_.now();
  if (first || changed || now - lastWarning_ > std::chrono::minutes(1)) {
    lastWarning_ = now;
    logWarn("binary cache " + storage_->uri() + ": publishing waits (" +
            std::to_string(waiting) + " built outputs unpublished): " + error +
            "; retrying");
  }
}

void CachePublisher::run() noexcept {
  bool initialised = false;
  auto backoff = cfg_.minBackoff;
  while (!stopping()) {
    try {
      if (!initialised) {
        // nix-cache-info first: a client finds the cache's store directory.
        store::BinaryCacheWriter(*storage_, store::StoreDir(cfg_.storeDir), {})
            .init();
        initialised = true;
      }
      size_t n = publishBatch();
      succeeded();
      backoff = cfg_.minBackoff;
      if (n == 0) pause(cfg_.poll, true);
    } catch (const std::exception& e) {
      failed(e.what());
      pause(backoff, false);
      backoff = std::min(backoff * 2, cfg_.maxBackoff);
    }
  }
}

}  // namespace kiln::scheduler
