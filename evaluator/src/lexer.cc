// Default-mode tokenizer for Nix source (see lexer.h).
#include "lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace kiln::eval {

namespace {

bool isAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isUriSchemeChar(char c) { return isAlpha(c) || isDigit(c) || c == '+' || c == '-' || c == '.'; }
bool isUriChar(char c) {
  return isAlpha(c) || isDigit(c) || (c && std::strchr("%/?:@&=+$,-_.!~*'", c) != nullptr);
}

struct Op {
  const char* text;
  Tok tok;
};
// Longest first.
constexpr Op kOps[] = {
    {"...", Tok::kEllipsis}, {"${", Tok::kDollarCurly}, {"==", Tok::kEq},
    {"!=", Tok::kNEq},       {"<=", Tok::kLeq},         {">=", Tok::kGeq},
    {"&&", Tok::kAnd},       {"||", Tok::kOr},          {"->", Tok::kImpl},
    {"//", Tok::kUpdate},    {"++", Tok::kConcat},      {"{", Tok::kLBrace},
    {"}", Tok::kRBrace},     {"[", Tok::kLBracket},     {"]", Tok::kRBracket},
    {"(", Tok::kLParen},     {")", Tok::kRParen},       {";", Tok::kSemi},
    {":", Tok::kColon},      {",", Tok::kComma},        {"@", Tok::kAt},
    {".", Tok::kDot},        {"?", Tok::kQuestion},     {"=", Tok::kAssign},
    {"<", Tok::kLt},         {">", Tok::kGt},           {"+", Tok::kPlus},
    {"-", Tok::kMinus},      {"*", Tok::kStar},         {"/", Tok::kSlash},
    {"!", Tok::kNot}};

}  // namespace

bool isKeyword(std::string_view word) { return keywordToken(word) != Tok::kId; }

const char* tokenName(Tok t) {
  switch (t) {
    case Tok::kEof: return "end of file";
    case Tok::kId: return "ID";
    case Tok::kInt: return "INT";
    case Tok::kFloat: return "FLOAT";
    case Tok::kPath: case Tok::kPathStart: return "PATH";
    case Tok::kHPath: case Tok::kHPathStart: return "HPATH";
    case Tok::kSPath: return "SPATH";
    case Tok::kUri: return "URI";
    case Tok::kStrOpen: return "'\"'";
    case Tok::kIndStrOpen: return "IND_STRING_OPEN";
    case Tok::kDollarCurly: return "DOLLAR_CURLY";
    case Tok::kIf: return "IF";
    case Tok::kThen: return "THEN";
    case Tok::kElse: return "ELSE";
    case Tok::kAssert: return "ASSERT";
    case Tok::kWith: return "WITH";
    case Tok::kLet: return "LET";
    case Tok::kIn: return "IN";
    case Tok::kRec: return "REC";
    case Tok::kInherit: return "INHERIT";
    case Tok::kOrKw: return "OR_KW";
    case Tok::kEllipsis: return "ELLIPSIS";
    case Tok::kEq: return "EQ";
    case Tok::kNEq: return "NEQ";
    case Tok::kLeq: return "LEQ";
    case Tok::kGeq: return "GEQ";
    case Tok::kAnd: return "AND";
    case Tok::kOr: return "OR";
    case Tok::kImpl: return "IMPL";
    case Tok::kUpdate: return "UPDATE";
    case Tok::kConcat: return "CONCAT";
    default:
      break;
  }
  for (const Op& op : kOps)
    if (op.tok == t) {
      static thread_local char buf[8];
      std::snprintf(buf, sizeof buf, "'%s'", op.text);
      return buf;
    }
  return "token";
}

Lexer::Lexer(EvalState& state, const std::string& text, uint32_t origin)
    : state_(state), text_(text), base_(state.positions.base(origin)) {}

void Lexer::error(size_t offset, const std::string& msg) {
  if (quiet_) throw ParseError(msg);
  throw ParseError(msg + state_.positions.snippet(posAt(offset)));
}

const Token& Lexer::peekSlow(size_t n) {
  if (n >= kLookahead) throw std::logic_error("lexer lookahead too far");
  while (count_ <= n) {
    lex(buf_[(head_ + count_) % kLookahead]);
    ++count_;
  }
  return buf_[(head_ + n) % kLookahead];
}

void Lexer::skipSpace() {
  const size_t n = text_.size();
  while (pos_ < n) {
    char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      ++pos_;
    } else if (c == '#') {
      while (pos_ < n && text_[pos_] != '\n' && text_[pos_] != '\r') ++pos_;
    } else if (c == '/' && pos_ + 1 < n && text_[pos_ + 1] == '*') {
      size_t end = text_.find("*/", pos_ + 2);
      if (end == std::string::npos) error(pos_, "syntax error, unterminated comment");
      pos_ = end + 2;
    } else {
      break;
    }
  }
}

size_t Lexer::pathCharsEnd(size_t p) const {
  while (p < text_.size() && isPathChar(text_[p])) ++p;
  return p;
}

// {PATH_CHAR}*(\/{PATH_CHAR}+)+\/?  — returns 0 if no match.
size_t Lexer::matchPath(size_t p) const {
  const size_t n = text_.size();
  size_t q = pathCharsEnd(p);
  size_t segments = 0;
  while (q + 1 < n && text_[q] == '/' && isPathChar(text_[q + 1])) {
    q = pathCharsEnd(q + 1);
    ++segments;
  }
  if (segments == 0) return 0;
  if (q < n && text_[q] == '/') ++q;
  return q - p;
}

size_t Lexer::matchUri(size_t p) const {
  const size_t n = text_.size();
  if (p >= n || !isAlpha(text_[p])) return 0;
  size_t q = p + 1;
  while (q < n && isUriSchemeChar(text_[q])) ++q;
  if (q >= n || text_[q] != ':') return 0;
  size_t r = q + 1;
  while (r < n && isUriChar(text_[r])) ++r;
  return r == q + 1 ? 0 : r - p;
}

// (([1-9][0-9]*\.[0-9]*)|(0?\.[0-9]+))([Ee][+-]?[0-9]+)?
size_t Lexer::matchFloat(size_t p) const {
  const size_t n = text_.size();
  size_t q = p;
  if (q < n && text_[q] >= '1' && text_[q] <= '9') {
    while (q < n && isDigit(text_[q])) ++q;
    if (q >= n || text_[q] != '.') return 0;
    ++q;
    while (q < n && isDigit(text_[q])) ++q;
  } else {
    if (q < n && text_[q] == '0') ++q;
    if (q >= n || text_[q] != '.' || q + 1 >= n || !isDigit(text_[q + 1])) return 0;
    ++q;
    while (q < n && isDigit(text_[q])) ++q;
  }
  if (q < n && (text_[q] == 'e' || text_[q] == 'E')) {
    size_t r = q + 1;
    if (r < n && (text_[r] == '+' || text_[r] == '-')) ++r;
    if (r < n && isDigit(text_[r])) {
      while (r < n && isDigit(text_[r])) ++r;
      q = r;
    }
  }
  return q - p;
}

// Lexes into `tok` in place (a ring slot): building a Token on the stack
// and copying it out cost more than lexing most tokens.
void Lexer::lex(Token& tok) {
  skipSpace();
  tok.start = pos_;
  tok.i = 0;
  tok.f = 0;
  const size_t n = text_.size();
  if (pos_ >= n) {
    tok.t = Tok::kEof;
    tok.end = pos_;
    tok.text = {};
    return;
  }
  if (__builtin_expect(slowOnly_, 0)) return lexSlow(tok);
  const char* s = text_.data();
  auto finish = [&](Tok t, size_t len) { return finishAs(tok, t, len); };
  // Fast paths for what most tokens are. Punctuation that no longer token
  // (operator, path, URI, number) can start with, and '=' / "==":
  switch (s[pos_]) {
    case '"': return finish(Tok::kStrOpen, 1);
    case '{': return finish(Tok::kLBrace, 1);
    case '}': return finish(Tok::kRBrace, 1);
    case '[': return finish(Tok::kLBracket, 1);
    case ']': return finish(Tok::kRBracket, 1);
    case '(': return finish(Tok::kLParen, 1);
    case ')': return finish(Tok::kRParen, 1);
    case ';': return finish(Tok::kSemi, 1);
    case ',': return finish(Tok::kComma, 1);
    case '@': return finish(Tok::kAt, 1);
    case '?': return finish(Tok::kQuestion, 1);
    case ':': return finish(Tok::kColon, 1);
    case '=':
      return pos_ + 1 < n && s[pos_ + 1] == '=' ? finish(Tok::kEq, 2) : finish(Tok::kAssign, 1);
    default: break;
  }
  // An identifier or keyword, unless the character after it could extend
  // it into a path ('.', '+', '/'), a URI (':') or a longer match: only
  // path characters, '/' and ':' continue those, and the path characters
  // that are not identifier characters are '.' and '+'.
  if (isIdStart(s[pos_])) {
    size_t l = 1;
    while (pos_ + l < n && isIdChar(s[pos_ + l])) ++l;
    char d = pos_ + l < n ? s[pos_ + l] : 0;
    if (d != '.' && d != '+' && d != '/' && d != ':') return finishId(tok, l);
    // `x: body`: a URI needs a URI character right after its ':'.
    if (d == ':' && (pos_ + l + 1 >= n || !isUriChar(s[pos_ + l + 1]))) return finishId(tok, l);
    // `a.b.c`, `x+1`: a path needs a '/' and a URI a ':' right after the
    // run of path characters (URI scheme characters are path characters),
    // so without one there the identifier is the longest match. (An
    // identifier with a '\'' is no path or URI at all.)
    if (d != '/' && d != ':') {
      size_t r = pathCharsEnd(pos_ + l);
      if (r >= n || (s[r] != '/' && s[r] != ':')) return finishId(tok, l);
    }
  } else if (s[pos_] == '.' && pos_ + 1 < n && !isDigit(s[pos_ + 1]) && s[pos_ + 1] != '.') {
    // A select's '.': no float (".5"), "..." or "../", and no path unless
    // the run of path characters after it ends at a '/' (".b/c").
    size_t r = pathCharsEnd(pos_ + 1);
    if (r >= n || s[r] != '/') return finish(Tok::kDot, 1);
  }
  return lexSlow(tok);
}

namespace {
// The keyword `w` (`len` bytes) is, or kId: Nix's ten keywords, by
// length, then by their bytes.
Tok keywordOf(const char* w, size_t len) {
  auto is = [&](const char* k) { return std::memcmp(w, k, len) == 0; };
  switch (len) {
    case 2: return is("if") ? Tok::kIf : is("in") ? Tok::kIn : is("or") ? Tok::kOrKw : Tok::kId;
    case 3: return is("let") ? Tok::kLet : is("rec") ? Tok::kRec : Tok::kId;
    case 4:
      return is("then") ? Tok::kThen : is("else") ? Tok::kElse : is("with") ? Tok::kWith : Tok::kId;
    case 6: return is("assert") ? Tok::kAssert : Tok::kId;
    case 7: return is("inherit") ? Tok::kInherit : Tok::kId;
    default: return Tok::kId;
  }
}
}  // namespace

Tok keywordToken(std::string_view word) { return keywordOf(word.data(), word.size()); }

void Lexer::finishId(Token& tok, size_t len) {
  return finishAs(tok, keywordOf(text_.data() + pos_, len), len);
}

void Lexer::finishAs(Token& tok, Tok t, size_t len) {
  tok.t = t;
  tok.end = pos_ + len;
  tok.text = std::string_view(text_.data() + pos_, len);
  pos_ += len;
}

// Every default-mode rule at once; the longest match wins.
void Lexer::lexSlow(Token& tok) {
  const size_t n = text_.size();
  const char* s = text_.data();
  char c = s[pos_];
  auto finish = [&](Tok t, size_t len) { return finishAs(tok, t, len); };

  // Interpolated paths: a run of path characters and slashes ending in '/'
  // or a complete path, immediately followed by "${".
  if (isPathChar(c) || c == '/' || (c == '~' && pos_ + 1 < n && s[pos_ + 1] == '/')) {
    size_t q = pos_ + (c == '~' ? 1 : 0);
    while (q < n && (isPathChar(s[q]) || s[q] == '/')) ++q;
    if (q + 1 < n && s[q] == '$' && s[q + 1] == '{') {
      std::string_view run(s + pos_, q - pos_);
      if (run.find('/') != std::string_view::npos && run.find("//") == std::string_view::npos)
        return finish(c == '~' ? Tok::kHPathStart : Tok::kPathStart, q - pos_);
    }
  }

  size_t lId = isIdStart(c) ? 1 : 0;
  if (lId)
    while (pos_ + lId < n && isIdChar(s[pos_ + lId])) ++lId;
  size_t lInt = 0;
  while (pos_ + lInt < n && isDigit(s[pos_ + lInt])) ++lInt;
  size_t lFloat = matchFloat(pos_);
  size_t lPath = matchPath(pos_);
  size_t lUri = matchUri(pos_);
  size_t lHPath = 0;
  if (c == '~' && pos_ + 1 < n && s[pos_ + 1] == '/') {
    size_t l = matchPath(pos_ + 1);
    if (l && s[pos_ + 1] == '/') lHPath = l + 1;
  }
  size_t lSPath = 0;
  if (c == '<') {
    size_t q = pos_ + 1;
    bool ok = q < n && isPathChar(s[q]);
    while (ok) {
      q = pathCharsEnd(q);
      if (q + 1 < n && s[q] == '/' && isPathChar(s[q + 1])) {
        ++q;
        continue;
      }
      break;
    }
    if (ok && q < n && s[q] == '>') lSPath = q + 1 - pos_;
  }
  size_t lOp = 0;
  Tok opTok = Tok::kEof;
  for (const Op& op : kOps) {
    if (op.text[0] != c) continue;
    size_t l = std::strlen(op.text);
    if (text_.compare(pos_, l, op.text) == 0) {
      lOp = l;
      opTok = op.tok;
      break;
    }
  }
  bool strOpen = c == '"';
  bool indOpen = c == '\'' && pos_ + 1 < n && s[pos_ + 1] == '\'';

  size_t best = std::max({lId, lInt, lFloat, lPath, lUri, lHPath, lSPath, lOp});
  if (strOpen) return finish(Tok::kStrOpen, 1);
  if (indOpen) {
    size_t q = pos_ + 2;
    while (q < n && s[q] == ' ') ++q;
    size_t len = (q < n && s[q] == '\n') ? q + 1 - pos_ : 2;
    return finish(Tok::kIndStrOpen, len);
  }
  if (best == 0) error(pos_, std::string("syntax error, unexpected character '") + c + "'");
  // Ties go to the rule listed first in Nix's lexer: operators and
  // keywords, identifiers, numbers, then paths and URIs.
  if (lOp == best && (opTok == Tok::kEllipsis || lOp >= 2)) return finish(opTok, lOp);
  if (lId == best) return finishId(tok, lId);
  if (lInt == best) {
    finish(Tok::kInt, lInt);
    std::string digits(tok.text);
    errno = 0;
    char* end = nullptr;
    unsigned long long u = std::strtoull(digits.c_str(), &end, 10);
    if (errno == ERANGE || u > static_cast<unsigned long long>(INT64_MAX))
      error(tok.start, "invalid integer '" + digits + "'");
    tok.i = static_cast<int64_t>(u);
    return;
  }
  if (lFloat == best) {
    finish(Tok::kFloat, lFloat);
    tok.f = std::strtod(std::string(tok.text).c_str(), nullptr);
    return;
  }
  if (lPath == best) return finish(Tok::kPath, lPath);
  if (lHPath == best) return finish(Tok::kHPath, lHPath);
  if (lSPath == best) return finish(Tok::kSPath, lSPath);
  if (lUri == best) return finish(Tok::kUri, lUri);
  return finish(opTok, lOp);
}

}  // namespace kiln::eval
