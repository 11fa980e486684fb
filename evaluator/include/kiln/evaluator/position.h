#pragma once
/// Source positions (file:line:column) shared by the AST, values and errors.

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace kiln::eval {

/// Index into a PosTable; 0 means "no position".
using PosIdx = uint32_t;
constexpr PosIdx kNoPos = 0;

/// Where a piece of source came from.
struct Origin {
  std::string path;  ///< file path, or "«string»" / "«stdin»"
  std::shared_ptr<const std::string> text;  ///< the source, for error snippets
};

/// A resolved position.
struct Pos {
  uint32_t origin = 0;
  uint32_t line = 0;
  uint32_t column = 0;
};

/// All positions of an evaluation. Positions are appended, never removed.
class PosTable {
 public:
  PosTable();
  /// Registers a source and returns its origin index.
  uint32_t addOrigin(std::string path, std::shared_ptr<const std::string> text);
  PosIdx add(uint32_t origin, uint32_t line, uint32_t column);
  const Pos& get(PosIdx p) const { return positions_[p]; }
  const Origin& origin(uint32_t i) const { return origins_[i]; }
  /// "file:line:col", or "«none»" for kNoPos.
  std::string show(PosIdx p) const;
  /// "\n       at file:line:col:\n\n" followed by the source line and a caret,
  /// Nix-style; empty for kNoPos.
  std::string snippet(PosIdx p) const;

 private:
  std::vector<Origin> origins_;
  /// A deque: the table grows to millions of entries for large files and
  /// a vector's doubling would hold up to twice that (and copy it).
  std::deque<Pos> positions_;
};

}  // namespace kiln::eval
