#include "deferred_writes.h"

#include "kiln/common/logging.h"
#include "kiln/scheduler/sql.h"

namespace kiln::scheduler {

void DeferredWrites::warn(const char* what) {
  auto now = clock_.now();
  if (now - lastWarning_ < std::chrono::seconds(10)) return;
  lastWarning_ = now;
  logWarn(std::string(what) + " (" + std::to_string(queue_.size()) +
          " state writes wait for the database)");
}

void DeferredWrites::finished(const Write& w, bool committed) {
  if (!w.done) return;
  try {
    w.done(committed);
  } catch (const std::exception& e) {
    logError(std::string("after a state write: ") + e.what());
  }
}

void DeferredWrites::run(std::function<void()> write, Done done) {
  Write w{std::move(write), std::move(done)};
  if (queue_.empty() && !held_) {
    try {
      w.write();
    } catch (const SqlError& e) {
      if (!e.transient()) {
        finished(w, false);
        throw;
      }
      queue_.push_back(std::move(w));
      stalled_ = true;
      warn(e.what());
      return;
    } catch (...) {
      finished(w, false);
      throw;
    }
    finished(w, true);
    return;
  }
  queue_.push_back(std::move(w));
}

DeferredWrites::Hold::Hold(DeferredWrites& writes) : writes_(writes) {
  writes_.held_ = true;
}

DeferredWrites::Hold::~Hold() {
  writes_.held_ = false;
  // While the database is away, the periodic flush paces the retries.
  if (writes_.stalled_) return;
  try {
    writes_.flush();
  } catch (const std::exception& e) {
    logError(std::string("state writes: ") + e.what());
  }
}

bool DeferredWrites::runFirst() {
  bool committed = false;
  try {
    queue_.front().write();
    committed = true;
  } catch (const SqlError& e) {
    if (e.transient()) {
      stalled_ = true;
      warn(e.what());
      return false;
    }
    logError(std::string("a deferred state write failed for good: ") +
             e.what());
  } catch (const std::exception& e) {
    logError(std::string("a deferred state write failed for good: ") +
             e.what());
  }
  // Off the queue before `done` runs: it may queue writes of its own.
  Write w = std::move(queue_.front());
  queue_.pop_front();
  finished(w, committed);
  return true;
}

size_t DeferredWrites::flush() {
  while (!queue_.empty())
    if (!runFirst()) return queue_.size();
  stalled_ = false;
  return 0;
}

bool DeferredWrites::flushOne() {
  if (queue_.empty() || stalled_) return false;
  return runFirst();
}

}  // namespace kiln::scheduler
