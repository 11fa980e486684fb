// The database sink of build events (docs/architecture.md).
#include "kiln/scheduler/build_events.h"

#include "kiln/common/fail_point.h"

namespace kiln::scheduler {

void StateDbSink::finishSucceeded(int64_t id, const std::string& drvPath,
                                  int64_t timeMs) {
  auto outputs = outputsOf_(drvPath);
  StateDb::Transaction txn(db_);
  db_.setBuildOutputs(id, outputs);
  db_.finishBuild(id, 0, timeMs, "");
  KILN_FAIL_POINT("scheduler.build-finish.before-commit");
  txn.commit();
}

void StateDbSink::onBuildEvent(const BuildEvent& ev, int64_t timeMs) {
  switch (ev.kind) {
    case BuildEvent::Kind::kSucceeded:
      // The cause of a success is the build's own derivation: no read.
      if (!ev.causeDrvPath.empty())
        finishSucceeded(ev.build, ev.causeDrvPath, timeMs);
      else if (auto b = db_.build(ev.build))
        finishSucceeded(b->id, b->drvPath, timeMs);
      break;
    case BuildEvent::Kind::kFailed:
      db_.finishBuild(ev.build, static_cast<int>(ev.status), timeMs,
                      "failed because of " + ev.causeDrvPath);
      break;
    case BuildEvent::Kind::kRevived:
      db_.reopenBuild(ev.build);
      break;
    case BuildEvent::Kind::kCancelled:
      db_.finishBuild(ev.build, static_cast<int>(StepStatus::kCancelled),
                      timeMs, "cancelled");
      break;
  }
}

}  // namespace kiln::scheduler
