#pragma once
// Tokenizer for Nix source. The parser drives it: default-mode tokens are
// produced on demand (with a small lookahead buffer); strings, indented
// strings and interpolated paths are scanned by the parser directly from
// the cursor, so the buffer must be empty when one of those starts.

#include <array>
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
  const Token& peek(size_t n = 0) {
    if (__builtin_expect(n < count_, 1)) return buf_[(head_ + n) % kLookahead];
    return peekSlow(n);
  }
  Token next() {
    peek(0);
    const Token& t = buf_[head_];
    head_ = (head_ + 1) % kLookahead;
    --count_;
    return t;
  }
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
  void lex(Token& tok);
  /// peek() when the token is not buffered yet: lexes up to it.
  const Token& peekSlow(size_t n);
  void skipSpace();
  /// The first offset from `p` on that is no path character.
  size_t pathCharsEnd(size_t p) const;
  size_t matchPath(size_t p) const;
  size_t matchUri(size_t p) const;
  size_t matchFloat(size_t p) const;

  EvalState& state_;
  const std::string& text_;
  PosIdx base_;  ///< the position of the source's first byte
  size_t pos_ = 0;
  bool quiet_ = false;
  bool slowOnly_ = false;
  void lexSlow(Token& tok);
  void finishId(Token& tok, size_t len);
  /// Makes `tok` the `len` bytes at the cursor, of kind `t`, and moves on.
  void finishAs(Token& tok, Tok t, size_t len);
  /// Lookahead ring: the parser peeks at most three tokens ahead, and a
  /// token it holds a reference to stays in place until kLookahead more
  /// have been read.
  static constexpr size_t kLookahead = 8;
  Token buf_[kLookahead];
  size_t head_ = 0;
  size_t count_ = 0;
};

namespace lexer_detail {
enum : uint8_t { kIdStart = 1, kIdChar = 2, kPathChar = 4 };
/// Each byte's classes: one load per test in the lexer's inner loops.
inline constexpr auto kCharClasses = [] {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'), digit = c >= '0' && c <= '9';
    if (alpha || c == '_') t[c] |= kIdStart | kIdChar | kPathChar;
    if (digit || c == '-') t[c] |= kIdChar | kPathChar;
    if (c == '\'') t[c] |= kIdChar;
    if (c == '.' || c == '+') t[c] |= kPathChar;
  }
  return t;
}();
}  // namespace lexer_detail

/// Nix's identifier characters: [a-zA-Z_] to start, then [a-zA-Z0-9_'-].
inline bool isIdStart(char c) {
  return lexer_detail::kCharClasses[static_cast<uint8_t>(c)] & lexer_detail::kIdStart;
}
inline bool isIdChar(char c) {
  return lexer_detail::kCharClasses[static_cast<uint8_t>(c)] & lexer_detail::kIdChar;
}
/// Nix's path characters: [a-zA-Z0-9._+-].
inline bool isPathChar(char c) {
  return lexer_detail::kCharClasses[static_cast<uint8_t>(c)] & lexer_detail::kPathChar;
}
/// Whether `word` is one of Nix's keywords (`if`, `let`, `inherit`, `or`…).
bool isKeyword(std::string_view word);
/// The keyword token `word` is (kIf, kLet…), or kId.
Tok keywordToken(std::string_view word);

}  // namespace kiln::eval
