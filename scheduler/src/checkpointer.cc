#include "kiln/scheduler/checkpointer.h"

#include "kiln/common/logging.h"
#include "kiln/common/sqlite.h"

namespace kiln::scheduler {

Checkpointer::Checkpointer(std::string dbPath,
                           std::chrono::milliseconds interval,
                           const Clock& clock)
    : path_(std::move(dbPath)), interval_(interval), clock_(clock) {
  thread_ = std::thread([this] { run(); });
}

Checkpointer::~Checkpointer() {
  state_.lock()->stop = true;
  state_.notifyAll();
  thread_.join();
}

uint64_t Checkpointer::checkpoints() { return state_.lock()->done; }

void Checkpointer::run() noexcept {
  try {
    SqliteOptions o;
    o.create = false;
    o.fullSync = false;
    SqliteDb db(path_, o);
    for (bool last = false; !last;) {
      {
        auto s = state_.lock();
        s.waitUntil(clock_, clock_.now() + interval_, [&] { return s->stop; });
        last = s->stop;
      }
      try {
        db.exec("PRAGMA wal_checkpoint(PASSIVE)");
        ++state_.lock()->done;
      } catch (const std::exception& e) {
        logWarn(std::string("checkpointing ") + path_ + ": " + e.what());
      }
    }
  } catch (const std::exception& e) {
    logError(std::string("checkpointer of ") + path_ + ": " + e.what());
  }
}

}  // namespace kiln::scheduler
