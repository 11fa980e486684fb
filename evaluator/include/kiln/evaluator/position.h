#pragma once
/// Source positions (file:line:column) shared by the AST, values and errors.

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/evaluator/arena.h"

namespace kiln::eval {

/// Index into a PosTable; 0 means "no position". Each source owns a range
/// of indices, one per byte offset (plus one for its end), so a position
/// costs no memory until it is resolved to a line and column.
using PosIdx = uint32_t;
constexpr PosIdx kNoPos = 0;
/// The largest index a PosTable hands out: positions fit in 31 bits (the
/// AST keeps a flag beside them), so one evaluation's sources are limited
/// to 2 GiB.
constexpr PosIdx kMaxPosIdx = 0x7fffffff;

/// Where a piece of source came from.
struct Origin {
  std::string path;  ///< file path, or "«string»" / "«stdin»"
  std::shared_ptr<const std::string> text;  ///< the source, for error snippets
  PosIdx base = 0;   ///< index of byte offset 0
  uint32_t size = 0;  ///< source length in bytes
  const uint8_t* lines = nullptr;  ///< where its lines start (see LineTable)
};

/// Where the lines of a source start, compactly (kept for every source of
/// an evaluation: 4 bytes a line were 8 MB for a 50,000-file package set):
/// each line's length as a varint (one byte for lines under 128 bytes),
/// with the start of every 64th line as an anchor, so a lookup decodes at
/// most 64 lengths.
struct LineTable {
  /// The table of `text` in `arena`.
  static const uint8_t* make(std::string_view text, Arena& arena);
  /// 1-based line and the offset of its first byte for byte `offset`.
  static std::pair<uint32_t, uint32_t> find(const uint8_t* table, uint32_t offset);
};

/// A resolved position.
struct Pos {
  uint32_t origin = 0;
  uint32_t line = 0;
  uint32_t column = 0;
};

/// All positions of an evaluation: the sources, each with its range of
/// indices. Sources are appended, never removed.
class PosTable {
 public:
  /// Hands out indices up to `limit` (lower only in tests).
  explicit PosTable(PosIdx limit = kMaxPosIdx);
  /// Registers `source` (named `path`; its text kept for error snippets
  /// only if `keepText`) and returns its origin index. Throws EvalError
  /// when the sources of one evaluation exceed the 2 GiB index space
  /// (the limit given to the constructor).
  uint32_t addOrigin(std::string path, std::shared_ptr<const std::string> source,
                     bool keepText);
  /// The position of byte 0 of `origin` (byte `offset`, at most the
  /// source's size, is at base + offset). Safe while other threads add.
  PosIdx base(uint32_t origin) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return origins_[origin].base;
  }
  /// Resolves `p` (not kNoPos) to origin, line and column (1-based, bytes).
  Pos get(PosIdx p) const;
  /// Origin `i`; the reference stays valid (origins are never moved).
  const Origin& origin(uint32_t i) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return origins_[i];
  }
  /// "file:line:col", or "«none»" for kNoPos.
  std::string show(PosIdx p) const;
  /// "\n       at file:line:col:\n\n" followed by the source line and a caret,
  /// Nix-style; empty for kNoPos.
  std::string snippet(PosIdx p) const;

 private:
  Pos getLocked(PosIdx p) const;
  /// A deque: adding never moves an origin. Adds take mu_ exclusively,
  /// lookups shared (threads may parse imports while others read).
  std::deque<Origin> origins_;
  PosIdx limit_;
  Arena lineTables_;  // under mu_
  mutable std::shared_mutex mu_;
};

}  // namespace kiln::eval
