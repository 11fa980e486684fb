#pragma once
/// Interned identifiers: each distinct name maps to a small integer, so that
/// attribute lookups and variable binding compare integers, not strings.

#include <cstdint>
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

/// Owns the text of every interned name. Not thread-safe.
class SymbolTable {
 public:
  SymbolTable();
  /// The symbol for `name`, creating it on first use.
  Symbol intern(std::string_view name);
  /// The text of `s`; valid while the table lives.
  std::string_view name(Symbol s) const { return names_[s.id]; }
  /// NUL-terminated text of `s`.
  const char* cName(Symbol s) const { return names_[s.id].data(); }
  size_t size() const { return names_.size() - 1; }

 private:
  /// An open-addressing slot: the name's hash and its id (0: empty).
  struct Slot {
    uint32_t hash;
    uint32_t id;
  };
  void grow();

  Arena arena_;
  std::vector<std::string_view> names_;
  /// Linear probing over a power-of-two table kept at most half full (a
  /// node-based hash map cost a cache miss per node in large files).
  std::vector<Slot> slots_;
};

}  // namespace kiln::eval
