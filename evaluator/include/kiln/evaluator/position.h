#pragma once
/// Source positions (file:line:column) shared by the AST, values and errors.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
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
  /// The table of `text`, built in memory of its own (no arena: threads
  /// build theirs without a lock), to copy into an arena with place().
  static std::vector<uint8_t> encode(std::string_view text);
  /// A copy of `table` (from encode()) in `arena`.
  static const uint8_t* place(const std::vector<uint8_t>& table, Arena& arena);
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
  ~PosTable();
  PosTable(const PosTable&) = delete;
  PosTable& operator=(const PosTable&) = delete;
  /// Registers `source` (named `path`; its text kept for error snippets
  /// only if `keepText`) and returns its origin index. Throws EvalError
  /// when the sources of one evaluation exceed the 2 GiB index space
  /// (the limit given to the constructor).
  uint32_t addOrigin(std::string path, std::shared_ptr<const std::string> source,
                     bool keepText);
  /// The position of byte 0 of `origin` (byte `offset`, at most the
  /// source's size, is at base + offset). Safe while other threads add.
  PosIdx base(uint32_t origin) const { return at(origin).base; }
  /// Resolves `p` (not kNoPos) to origin, line and column (1-based, bytes).
  /// Safe while other threads add, without a lock.
  Pos get(PosIdx p) const;
  /// Origin `i` (one addOrigin returned); the reference stays valid
  /// (origins are never moved).
  const Origin& origin(uint32_t i) const { return at(i); }
  /// "file:line:col", or "«none»" for kNoPos.
  std::string show(PosIdx p) const;
  /// "\n       at file:line:col:\n\n" followed by the source line and a caret,
  /// Nix-style; empty for kNoPos.
  std::string snippet(PosIdx p) const;

 private:
  static constexpr uint32_t kChunkBits = 12, kChunkMask = (1u << kChunkBits) - 1;
  const Origin& at(uint32_t i) const { return chunks_[i >> kChunkBits].get()[i & kChunkMask]; }
  /// Storage for 2^12 origins, each constructed when added: a chunk is
  /// 256 KiB, and constructing all of it up front made it resident for
  /// the few origins of a small evaluation.
  struct ChunkFree {
    void operator()(Origin* p) const { ::operator delete(p); }
  };
  /// Origins in chunks of 2^12; the chunk list is reserved up front for
  /// every origin the index space allows (each takes at least one index),
  /// so it never moves and readers need no lock: an origin is constructed
  /// before count_ (release) counts it, and never changes after.
  std::vector<std::unique_ptr<Origin, ChunkFree>> chunks_;
  /// Constructs origin `n` (the next) in place, in a new chunk's storage
  /// when `n` starts one (under mu_, or in the constructor).
  Origin& construct(uint32_t n, Origin o);
  std::atomic<uint32_t> count_{0};
  PosIdx limit_;
  Arena lineTables_;  // under mu_
  std::mutex mu_;     // adders
};

}  // namespace kiln::eval
