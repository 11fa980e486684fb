#pragma once
/// Interned identifiers: each distinct name maps to a small integer, so that
/// attribute lookups and variable binding compare integers, not strings.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

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
/// shared (setShared): then interning takes a lock, and names are read
/// without one (they live in chunks that never move).
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
  /// Makes interning safe from several threads at once (or not again).
  void setShared(bool shared) { shared_ = shared; }

 private:
  /// An open-addressing slot: the name's hash and its id (0: empty).
  struct Slot {
    uint32_t hash;
    uint32_t id;
  };
  void grow();
  Symbol internLocked(std::string_view name);
  static constexpr uint32_t kChunkBits = 12, kChunkMask = (1u << kChunkBits) - 1;
  Arena arena_;
  /// Names by id, in chunks of 2^12; the chunk list is reserved up front
  /// (never moved), so readers need no lock.
  std::vector<std::unique_ptr<std::string_view[]>> chunks_;
  uint32_t count_ = 0;
  bool shared_ = false;
  std::mutex mu_;
  /// Linear probing over a power-of-two table kept at most half full (a
  /// node-based hash map cost a cache miss per node in large files).
  std::vector<Slot> slots_;
};

}  // namespace kiln::eval
