#pragma once
/// Interned identifiers: each distinct name maps to a small integer, so that
/// attribute lookups and variable binding compare integers, not strings.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "kiln/common/spin_mutex.h"
#include "kiln/evaluator/arena.h"

namespace kiln::eval {

/// An interned name. Id 0 is "no symbol" (a dynamic attribute name, an
/// anonymous lambda argument); real names start at 1.
struct Symbol {
  uint32_t id = 0;
  explicit operator bool() const { return id != 0; }
  bool operator==(const Symbol& o) const = default;
  bool operator<(const Symbol& o) const { return id < o.id; }
};

/// Owns the text of every interned name. One thread at a time unless made
/// shared (setShared): then a name already interned is found without a
/// lock (most are: every identifier of every file parsed), a new one is
/// added under a lock, and names are read without one (they live in chunks
/// that never move).
class SymbolTable {
 public:
  SymbolTable();
  /// The symbol for `name`, creating it on first use.
  Symbol intern(std::string_view name);
  /// The text of `s`; valid while the table lives.
  std::string_view name(Symbol s) const { return chunks_[s.id >> kChunkBits][s.id & kChunkMask]; }
  /// NUL-terminated text of `s`.
  const char* cName(Symbol s) const { return name(s).data(); }
  size_t size() const { return count_ - 1; }
  /// Makes interning safe from several threads at once (or, with false,
  /// once those threads have stopped, one thread's again).
  void setShared(bool shared);

 private:
  /// Open-addressing slots: a name's hash (high 32 bits) and its id (low
  /// 32 bits; 0: empty), each written once with a release store after the
  /// name, so a lock-free reader that sees the slot sees the name.
  struct Table {
    explicit Table(size_t n) : mask(n - 1), slots(new std::atomic<uint64_t>[n]()) {}
    size_t mask;
    std::unique_ptr<std::atomic<uint64_t>[]> slots;
  };
  /// The id of `name` in `t`, or 0 when `t` does not hold it.
  uint32_t find(const Table& t, uint32_t hash, std::string_view name) const;
  void grow();
  /// intern() past the thread's cache of recent names.
  Symbol internUncached(std::string_view name, uint32_t hash);
  Symbol internLocked(std::string_view name, uint32_t hash);
  /// Tells this table's entries in the threads' recent-name caches from
  /// other tables' (unique per table made, never 0).
  uint64_t serial_;
  static constexpr uint32_t kChunkBits = 12, kChunkMask = (1u << kChunkBits) - 1;
  Arena arena_;
  /// Names by id, in chunks of 2^12; the chunk list is reserved up front
  /// (never moved), so readers need no lock.
  std::vector<std::unique_ptr<std::string_view[]>> chunks_;
  uint32_t count_ = 0;
  bool shared_ = false;
  /// New names; a spin lock: two parsers of one split file add
  /// thousands of names each (a package set's attribute names), a few
  /// hundred nanoseconds apiece, and a sleeping mutex put them to sleep
  /// ~140 times in a gen-overrides 50,000 start.
  SpinMutex mu_;
  /// Linear probing over a power-of-two table kept at most half full (a
  /// node-based hash map cost a cache miss per node in large files).
  /// Replaced by a larger copy when it fills; while shared, the tables it
  /// replaced stay until setShared(false), for readers still probing them
  /// (a reader that misses there takes the lock and looks again).
  std::unique_ptr<Table> table_;
  std::atomic<Table*> current_{nullptr};
  std::vector<std::unique_ptr<Table>> retired_;
};

}  // namespace kiln::eval
