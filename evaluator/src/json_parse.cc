// builtins.fromJSON's parser: JSON text straight into values, without
// building an nlohmann::json document first (which cost a tree of nodes,
// a std::map per object and a std::string per string, then a second walk).
// It accepts exactly what nlohmann::json::parse accepts and makes the same
// values (json.cc's fromJson); on anything else (a syntax error, invalid
// UTF-8, a float out of range, a byte order mark) it gives up and the
// caller parses again with nlohmann, whose error messages Nix 2.8 prints.
#include "json_parse.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "builtins.h"
#include "gc_support.h"
#include "kiln/common/encoding.h"

namespace kiln::eval {

namespace {

class FastJsonParser {
 public:
  FastJsonParser(EvalState& st, std::string_view text)
      : st_(st), p_(text.data()), end_(text.data() + text.size()) {}

  bool parse(Value& root);

 private:
  // An open array or object: where its value goes and where its elements
  // start in items_ / members_.
  struct Frame {
    Value* target;
    size_t base;
    bool object;
  };

  void skipSpace() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool scalar(Value& v);
  bool number(Value& v);
  bool literal(const char* word, size_t n) {
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, word, n) != 0) return false;
    p_ += n;
    return true;
  }
  bool string(std::string_view& out);
  bool escape();
  bool utf8Sequence();
  bool hex4(unsigned& cp);
  bool key();
  bool open(Value*& target);
  void close(const Frame& f);

  EvalState& st_;
  const char* p_;
  const char* end_;
  std::string buf_;  // a string with escapes, unescaped
  std::vector<Frame> frames_;
  // Elements of the open arrays and members of the open objects, innermost
  // last; scanned by the collector (their values are referred to from
  // nowhere else until their container is made).
  TracedVector<Value*, 32> items_;
  TracedVector<Attr, 32> members_;
};

// Whether a string byte ends the plain run (quote, backslash, control or
// non-ASCII byte).
constexpr auto kStringSpecial = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = true;
  for (int c = 0x80; c < 0x100; ++c) t[c] = true;
  t['"'] = t['\\'] = true;
  return t;
}();

bool FastJsonParser::hex4(unsigned& cp) {
  if (end_ - p_ < 4) return false;
  cp = 0;
  for (int i = 0; i < 4; ++i) {
    char c = *p_++;
    unsigned d;
    if (c >= '0' && c <= '9')
      d = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      d = static_cast<unsigned>(c - 'A' + 10);
    else
      return false;
    cp = cp << 4 | d;
  }
  return true;
}

// After a backslash: appends the escaped character to buf_ (UTF-8).
bool FastJsonParser::escape() {
  if (p_ == end_) return false;
  switch (*p_++) {
    case '"':
      buf_ += '"';
      return true;
    case '\\':
      buf_ += '\\';
      return true;
    case '/':
      buf_ += '/';
      return true;
    case 'b':
      buf_ += '\b';
      return true;
    case 'f':
      buf_ += '\f';
      return true;
    case 'n':
      buf_ += '\n';
      return true;
    case 'r':
      buf_ += '\r';
      return true;
    case 't':
      buf_ += '\t';
      return true;
    case 'u':
      break;
    default:
      return false;
  }
  unsigned cp;
  if (!hex4(cp)) return false;
  if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // a lone low surrogate
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    unsigned lo;
    if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
    p_ += 2;
    if (!hex4(lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
  }
  appendUtf8(buf_, cp);
  return true;
}

// Skips one well-formed UTF-8 sequence of two to four bytes, as nlohmann's
// lexer checks them (RFC 3629: no overlong forms, no surrogates, nothing
// above U+10FFFF).
bool FastJsonParser::utf8Sequence() {
  auto b = [&](ptrdiff_t i) { return static_cast<unsigned char>(p_[i]); };
  auto cont = [&](ptrdiff_t i, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return i < end_ - p_ && b(i) >= lo && b(i) <= hi;
  };
  unsigned c = b(0);
  int n;
  if (c >= 0xC2 && c <= 0xDF)
    n = cont(1) ? 2 : 0;
  else if (c == 0xE0)
    n = cont(1, 0xA0) && cont(2) ? 3 : 0;
  else if (c == 0xED)
    n = cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  else if (c >= 0xE1 && c <= 0xEF)
    n = cont(1) && cont(2) ? 3 : 0;
  else if (c == 0xF0)
    n = cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  else if (c >= 0xF1 && c <= 0xF3)
    n = cont(1) && cont(2) && cont(3) ? 4 : 0;
  else if (c == 0xF4)
    n = cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  else
    n = 0;
  p_ += n;
  return n != 0;
}

// A string literal, p_ at its opening quote. `out` views the text itself
// when the string has no escapes, else buf_.
bool FastJsonParser::string(std::string_view& out) {
  const char* start = ++p_;
  bool escaped = false;
  for (;;) {
    while (p_ != end_ && !kStringSpecial[static_cast<unsigned char>(*p_)]) ++p_;
    if (p_ == end_) return false;
    unsigned char c = static_cast<unsigned char>(*p_);
    if (c == '"') break;
    if (c < 0x20) return false;
    if (c >= 0x80) {
      const char* from = p_;
      if (!utf8Sequence()) return false;
      if (escaped) buf_.append(from, static_cast<size_t>(p_ - from));
      continue;
    }
    // A backslash: from here on the string is built in buf_.
    if (!escaped) {
      escaped = true;
      buf_.assign(start, static_cast<size_t>(p_ - start));
    }
    ++p_;
    if (!escape()) return false;
    start = p_;
    // Copy the plain run that follows in one go.
    const char* run = p_;
    while (p_ != end_ && !kStringSpecial[static_cast<unsigned char>(*p_)]) ++p_;
    buf_.append(run, static_cast<size_t>(p_ - run));
  }
  out = escaped ? std::string_view(buf_) : std::string_view(start, static_cast<size_t>(p_ - start));
  ++p_;  // the closing quote
  return true;
}

// A number, as nlohmann's lexer reads it: an integer that fits int64_t
// (negative) or uint64_t (otherwise; made an int64_t as json.cc does), else
// a double from strtod, which must be finite.
bool FastJsonParser::number(Value& v) {
  const char* start = p_;
  bool negative = *p_ == '-';
  if (negative) ++p_;
  auto digit = [&] { return p_ != end_ && *p_ >= '0' && *p_ <= '9'; };
  if (!digit()) return false;
  uint64_t n = 0;
  bool overflow = false;
  if (*p_ == '0') {
    ++p_;
  } else {
    for (; digit(); ++p_) {
      unsigned d = static_cast<unsigned>(*p_ - '0');
      if (n > (UINT64_MAX - d) / 10) overflow = true;
      n = n * 10 + d;
    }
  }
  bool isFloat = false;
  if (p_ != end_ && *p_ == '.') {
    ++p_;
    if (!digit()) return false;
    while (digit()) ++p_;
    isFloat = true;
  }
  if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
    ++p_;
    if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
    if (!digit()) return false;
    while (digit()) ++p_;
    isFloat = true;
  }
  if (!isFloat && !overflow) {
    if (!negative) {
      v.mkInt(static_cast<int64_t>(n));
      return true;
    }
    if (n <= uint64_t{1} << 63) {
      v.mkInt(static_cast<int64_t>(0 - n));
      return true;
    }
  }
  std::string token(start, p_);  // strtod needs a terminated copy
  double d = std::strtod(token.c_str(), nullptr);
  if (!std::isfinite(d)) return false;  // nlohmann's "number overflow"
  v.mkFloat(d);
  return true;
}

bool FastJsonParser::scalar(Value& v) {
  switch (*p_) {
    case '"': {
      std::string_view s;
      if (!string(s)) return false;
      st_.mkString(v, s);
      return true;
    }
    case 't':
      if (!literal("true", 4)) return false;
      v.mkBool(true);
      return true;
    case 'f':
      if (!literal("false", 5)) return false;
      v.mkBool(false);
      return true;
    case 'n':
      if (!literal("null", 4)) return false;
      v.mkNull();
      return true;
    default:
      return number(v);
  }
}

// An object member's key and colon; its value is left to parse.
bool FastJsonParser::key() {
  skipSpace();
  if (p_ == end_ || *p_ != '"') return false;
  std::string_view k;
  if (!string(k)) return false;
  skipSpace();
  if (p_ == end_ || *p_ != ':') return false;
  ++p_;
  members_.push_back(Attr{st_.sym(k), kNoPos, st_.heap().allocValue()});
  return true;
}

// p_ after `[` or `{`: an empty container is made at once; otherwise a
// frame is opened and `target` becomes its first element's value.
bool FastJsonParser::open(Value*& target) {
  bool object = p_[-1] == '{';
  skipSpace();
  if (p_ != end_ && *p_ == (object ? '}' : ']')) {
    ++p_;
    if (object)
      target->mkAttrs(st_.heap().allocBindings(0));
    else
      st_.mkList(*target, 0);
    return true;
  }
  frames_.push_back(Frame{target, object ? members_.size() : items_.size(), object});
  if (object) {
    if (!key()) return false;
    target = members_.back().value;
  } else {
    items_.push_back(st_.heap().allocValue());
    target = items_.back();
  }
  return true;
}

// Makes the container of the innermost frame from its elements.
void FastJsonParser::close(const Frame& f) {
  if (!f.object) {
    size_t n = items_.size() - f.base;
    st_.mkList(*f.target, n);
    for (size_t i = 0; i < n; ++i) f.target->list.elems[i] = items_[f.base + i];
    items_.resize(f.base);
    return;
  }
  // In symbol order; of equal names the last wins (as in nlohmann's
  // document, which json.cc's fromJson reads).
  Attr* b = members_.data() + f.base;
  Attr* e = members_.data() + members_.size();
  std::stable_sort(b, e, [](const Attr& x, const Attr& y) { return x.name < y.name; });
  uint32_t unique = 0;
  for (Attr* a = b; a != e; ++a)
    if (a + 1 == e || a[1].name != a->name) ++unique;
  Bindings* out = st_.heap().allocBindings(unique);
  for (Attr* a = b; a != e; ++a)
    if (a + 1 == e || a[1].name != a->name) out->push(a->name, a->value);
  f.target->mkAttrs(out);
  members_.resize(f.base);
}

bool FastJsonParser::parse(Value& root) {
  if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) return false;
  Value* target = &root;
  for (;;) {
    skipSpace();
    if (p_ == end_) return false;
    if (*p_ == '[' || *p_ == '{') {
      ++p_;
      size_t depth = frames_.size();
      if (!open(target)) return false;
      if (frames_.size() > depth) continue;  // parse its first element
    } else if (!scalar(*target)) {
      return false;
    }
    // A value is complete: close what ends here, then find the next one.
    for (;;) {
      skipSpace();
      if (frames_.empty()) return p_ == end_;
      if (p_ == end_) return false;
      Frame f = frames_.back();
      if (*p_ == (f.object ? '}' : ']')) {
        ++p_;
        frames_.pop_back();
        close(f);
        continue;
      }
      if (*p_ != ',') return false;
      ++p_;
      if (f.object) {
        if (!key()) return false;
        target = members_.back().value;
      } else {
        items_.push_back(st_.heap().allocValue());
        target = items_.back();
      }
      break;
    }
  }
}

}  // namespace

bool parseJsonFast(EvalState& st, std::string_view text, Value& v) {
  return FastJsonParser(st, text).parse(v);
}

}  // namespace kiln::eval
