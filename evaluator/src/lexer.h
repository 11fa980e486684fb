#pragma once
// Tokenizer for Nix source. The parser drives it: default-mode tokens are
// produced on demand (with a small lookahead buffer); strings, indented
// strings and interpolated paths are scanned by the parser directly from
// the cursor, so the buffer must be empty when one of those starts.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

enum class Tok : uint8_t {
  kEof, kId, kInt, kFloat, kPath, kHPath, kSPath, kUri, kPathStart, kHPathStart,
  kStrOpen, kIndStrOpen, kDollarCurly, kLBrace, kRBrace, kLBracket, kRBracket,
  kLParen, kRParen, kSemi, kColon, kComma, kAt, kDot, kEllipsis, kQuestion,
  kAssign, kEq, kNEq, kLt, kGt, kLeq, kGeq, kAnd, kOr, kImpl, kUpdate, kConcat,
  kPlus, kMinus, kStar, kSlash, kNot, kIf, kThen, kElse, kAssert, kWith, kLet,
  kIn, kRec, kInherit, kOrKw
};

struct Token {
  Tok t = Tok::kEof;
  size_t start = 0;
  size_t end = 0;
  std::string_view text;
  int64_t i = 0;
  double f = 0;
};

/// Human name of a token kind, bison-style ("'}'", "end of file", "ID").
const char* tokenName(Tok t);

class Lexer {
 public:
  Lexer(EvalState& state, const std::string& text, uint32_t origin);
  /// The n-th upcoming default-mode token (0 = next).
  const Token& peek(size_t n = 0);
  Token next();
  /// Cursor in raw mode; only valid when no token is buffered.
  size_t cursor() const { return pos_; }
  void setCursor(size_t p) { pos_ = p; }
  bool buffered() const { return count_ != 0; }
  const std::string& text() const { return text_; }
  PosIdx posAt(size_t offset) const { return base_ + static_cast<PosIdx>(offset); }
  [[noreturn]] void error(size_t offset, const std::string& msg);
  /// Drops the buffered tokens and lexes on from `offset` (a token start).
  void restartAt(size_t offset) {
    count_ = 0;
    pos_ = offset;
  }
  /// Errors without the source snippet (a speculative parse's errors are
  /// never shown, and a snippet reads the file again).
  void setQuiet() { quiet_ = true; }
  /// Lexes every token through the full longest-match rules, none of the
  /// fast paths: the reference the fast paths are tested against.
  void setSlowOnly() { slowOnly_ = true; }

 private:
  Token lex();
  void skipSpace();
  size_t matchPath(size_t p) const;
  size_t matchUri(size_t p) const;
  size_t matchFloat(size_t p) const;

  EvalState& state_;
  const std::string& text_;
  PosIdx base_;  ///< the position of the source's first byte
  size_t pos_ = 0;
  bool quiet_ = false;
  bool slowOnly_ = false;
  Token lexSlow(Token& tok);
  Token finishId(Token& tok, size_t len);
  /// Makes `tok` the `len` bytes at the cursor, of kind `t`, and moves on.
  Token finishAs(Token& tok, Tok t, size_t len);
  /// Lookahead ring: the parser peeks at most three tokens ahead, and a
  /// token it holds a reference to stays in place until kLookahead more
  /// have been read.
  static constexpr size_t kLookahead = 8;
  Token buf_[kLookahead];
  size_t head_ = 0;
  size_t count_ = 0;
};

/// Nix's identifier characters: [a-zA-Z_] to start, then [a-zA-Z0-9_'-].
bool isIdStart(char c);
bool isIdChar(char c);
/// Whether `word` is one of Nix's keywords (`if`, `let`, `inherit`, `or`…).
bool isKeyword(std::string_view word);
bool isPathChar(char c);

}  // namespace kiln::eval
