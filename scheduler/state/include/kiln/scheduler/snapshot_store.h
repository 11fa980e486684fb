#pragma once
/// The running scheduler's snapshot (snapshot.h) kept in the state database
/// for web front ends on other hosts (`kiln web`, docs/operations.md,
/// "Running on many machines"): the scheduler writes it about once a
/// second when its state is in PostgreSQL; a front end reads the newest.
/// The queue is cut to kMaxStoredQueue entries (the front ends' queue page
/// says so); everything read back is validated and bounded.

#include <cstdint>
#include <memory>
#include <string>

#include "kiln/scheduler/snapshot.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// How many queue entries a stored snapshot keeps.
inline constexpr size_t kMaxStoredQueue = 5000;

/// `snap` as stored (JSON text; its queue cut to kMaxStoredQueue).
std::string encodeSnapshot(const SchedulerSnapshot& snap);
/// A stored snapshot back; throws FormatError if `text` is not one (wrong
/// types, more than kMaxStoredQueue entries, more than 100,000 workers).
SchedulerSnapshot decodeSnapshot(const std::string& text);

/// Replaces the stored snapshot with `snap` (null: keeps the stored one),
/// vouched for at `nowMs` (the scheduler's clock). Throws SqlError.
void storeSnapshot(StateDb& db, const SchedulerSnapshot* snap, int64_t nowMs);
/// Whether a scheduler vouched for the stored snapshot at or after
/// `sinceMs` (its clock): one runs, though it may be between sessions of
/// the farm's lock (the database restarted). Throws SqlError.
bool snapshotVouchedSince(StateDb& db, int64_t sinceMs);
/// Marks the stored snapshot as vouched for by nobody (a scheduler
/// stopping): front ends and commands know at once that none runs. Throws
/// SqlError.
void withdrawSnapshot(StateDb& db);
/// The stored snapshot, or null if none was stored or the scheduler last
/// vouched for it more than `maxAgeMs` before `nowMs` (it is gone or
/// cannot write). Throws
/// SqlError; a malformed one is null (and logged).
std::shared_ptr<const SchedulerSnapshot> loadSnapshot(StateDb& db,
                                                      int64_t nowMs,
                                                      int64_t maxAgeMs);

}  // namespace kiln::scheduler
