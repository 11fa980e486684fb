#include "kiln/common/encoding.h"

#include <array>
#include <cstring>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "kiln/common/error.h"

namespace kiln {
namespace {

constexpr char kHex[] = "0123456789abcdef";
constexpr char kNix32[] = "0123456789abcdfghijklmnpqrsvwxyz";
constexpr char kBase64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Each byte's digit value in a base (-1: not a digit): one load per
// character instead of range tests or a search of the alphabet (a
// derivation decodes its fixed output's hash and parses store paths).
struct DigitTable {
  int8_t value[256];
};

constexpr DigitTable hexDigits() {
  DigitTable t{};
  for (int c = 0; c < 256; ++c)
    t.value[c] = c >= '0' && c <= '9'   ? static_cast<int8_t>(c - '0')
                 : c >= 'a' && c <= 'f' ? static_cast<int8_t>(c - 'a' + 10)
                 : c >= 'A' && c <= 'F' ? static_cast<int8_t>(c - 'A' + 10)
                                        : int8_t{-1};
  return t;
}

constexpr DigitTable nix32Digits() {
  DigitTable t{};
  for (int c = 0; c < 256; ++c) t.value[c] = -1;
  for (int i = 0; i < 32; ++i) t.value[static_cast<unsigned char>(kNix32[i])] = static_cast<int8_t>(i);
  return t;
}

constexpr DigitTable kHexDigits = hexDigits();
constexpr DigitTable kNix32Digits = nix32Digits();

int hexValue(char c) { return kHexDigits.value[static_cast<unsigned char>(c)]; }

int nix32Value(char c) { return kNix32Digits.value[static_cast<unsigned char>(c)]; }

int base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

// Each byte's two hex digits: one table load and one 2-byte store a byte
// (a derivation writes its output paths' and inputs' hashes in hex).
constexpr auto kHexPairs = [] {
  std::array<char, 512> t{};
  for (int c = 0; c < 256; ++c) {
    t[2 * c] = kHex[c >> 4];
    t[2 * c + 1] = kHex[c & 15];
  }
  return t;
}();

void appendBase16(std::string& out, std::string_view bytes) {
  size_t at = out.size();
  out.resize(at + bytes.size() * 2);
  char* w = out.data() + at;
  size_t i = 0;
#ifdef __SSE2__
  // 16 bytes a step: each nibble plus '0', plus 39 more ('a' - '0' - 10)
  // for those above 9, high and low nibbles interleaved into 32 digits.
  const __m128i low4 = _mm_set1_epi8(0x0f), nine = _mm_set1_epi8(9),
                zero = _mm_set1_epi8('0'), gap = _mm_set1_epi8('a' - '0' - 10);
  auto digits = [&](__m128i n) {
    return _mm_add_epi8(_mm_add_epi8(n, zero), _mm_and_si128(_mm_cmpgt_epi8(n, nine), gap));
  };
  for (; i + 16 <= bytes.size(); i += 16, w += 32) {
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes.data() + i));
    __m128i hi = digits(_mm_and_si128(_mm_srli_epi16(b, 4), low4));
    __m128i lo = digits(_mm_and_si128(b, low4));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(w), _mm_unpacklo_epi8(hi, lo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(w + 16), _mm_unpackhi_epi8(hi, lo));
  }
#endif
  for (; i < bytes.size(); ++i, w += 2)
    std::memcpy(w, &kHexPairs[2 * static_cast<unsigned char>(bytes[i])], 2);
}

std::string base16Encode(std::string_view bytes) {
  std::string out;
  appendBase16(out, bytes);
  return out;
}

std::string base16Decode(std::string_view text) {
  if (text.size() % 2)
    throw FormatError("invalid base-16 string '" + std::string(text) +
                      "': odd length");
  std::string out(text.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = hexValue(text[2 * i]), lo = hexValue(text[2 * i + 1]);
    if (hi < 0 || lo < 0)
      throw FormatError("invalid base-16 string '" + std::string(text) +
                        "': bad digit");
    out[i] = static_cast<char>(hi << 4 | lo);
  }
  return out;
}

void appendNix32(std::string& out, std::string_view bytes) {
  // Digit k (the first written is the last) is bits 5k..5k+4 of the bytes
  // read as a little-endian number, zero above it. Written from the top:
  // `acc`'s low `have` bits are the next ones, read a byte at a time, then
  // (a store path's 20 bytes, a SHA-256's last 30) five bytes, eight
  // digits, at a time once what is left starts at a byte boundary.
  const size_t len = nix32Length(bytes.size());
  size_t at = out.size();
  out.resize(at + len);
  char* w = out.data() + at;
  auto byte = [&](size_t i) -> uint64_t { return static_cast<unsigned char>(bytes[i]); };
  size_t idx = bytes.size(), left = len;
  unsigned have = static_cast<unsigned>(5 * len - 8 * bytes.size());  // zero bits on top
  uint64_t acc = 0;
  // 5 * left == have + 8 * idx throughout: once left is a multiple of 8,
  // `have` (at most 7 after a digit) is 0 and idx a multiple of 5.
  for (; left % 8 != 0; --left) {
    if (have < 5) {
      acc = acc << 8 | byte(--idx);
      have += 8;
    }
    have -= 5;
    *w++ = kNix32[(acc >> have) & 31];
  }
  for (; left > 0; left -= 8, idx -= 5) {
    uint64_t x = byte(idx - 1) << 32 | byte(idx - 2) << 24 | byte(idx - 3) << 16 |
                 byte(idx - 4) << 8 | byte(idx - 5);
    for (int d = 35; d >= 0; d -= 5) *w++ = kNix32[(x >> d) & 31];
  }
}

std::string nix32Encode(std::string_view bytes) {
  std::string out;
  appendNix32(out, bytes);
  return out;
}

std::string nix32Decode(std::string_view text, size_t size) {
  if (text.size() != nix32Length(size))
    throw FormatError("invalid base-32 string '" + std::string(text) +
                      "': wrong length");
  std::string out(size, '\0');
  size_t len = text.size();
  for (size_t idx = 0; idx < len; ++idx) {
    int digit = nix32Value(text[idx]);
    if (digit < 0)
      throw FormatError("invalid base-32 string '" + std::string(text) +
                        "': bad character '" + std::string(1, text[idx]) + "'");
    size_t k = len - 1 - idx, b = k * 5, i = b / 8, j = b % 8;
    out[i] = static_cast<char>(static_cast<unsigned char>(out[i]) |
                               (digit << j));
    unsigned carry = static_cast<unsigned>(digit) >> (8 - j);
    if (i + 1 < size) {
      out[i + 1] = static_cast<char>(static_cast<unsigned char>(out[i + 1]) |
                                     carry);
    } else if (carry) {
      throw FormatError("invalid base-32 string '" + std::string(text) +
                        "': value out of range");
    }
  }
  return out;
}

std::string base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve(base64Length(bytes.size()));
  unsigned data = 0, bits = 0;
  for (unsigned char c : bytes) {
    data = data << 8 | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kBase64[(data >> bits) & 63]);
    }
  }
  if (bits) out.push_back(kBase64[(data << (6 - bits)) & 63]);
  while (out.size() % 4) out.push_back('=');
  return out;
}

std::string base64Decode(std::string_view text, bool allowUnpadded) {
  auto bad = [&](const char* why) {
    return FormatError("invalid base-64 string '" + std::string(text) +
                       "': " + why);
  };
  size_t end = text.size();
  while (end > 0 && text[end - 1] == '=') --end;
  size_t pad = text.size() - end;
  if (pad > 2) throw bad("too much padding");
  if (pad ? text.size() % 4 : (end % 4 && !allowUnpadded))
    throw bad("wrong length");
  if (end % 4 == 1) throw bad("wrong length");
  std::string out;
  out.reserve(end * 3 / 4);
  unsigned data = 0, bits = 0;
  for (size_t i = 0; i < end; ++i) {
    int v = base64Value(text[i]);
    if (v < 0) throw bad("bad character");
    data = data << 6 | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((data >> bits) & 0xff));
    }
  }
  return out;
}

namespace {

// What appendJsonString writes for each byte: 0 to copy it, else the letter
// after the backslash ('u' for \u00XX).
constexpr auto kJsonEscape = [] {
  std::array<char, 256> t = kNamedEscapes;
  for (int c = 0; c < 0x20; ++c)
    if (!t[c]) t[c] = 'u';
  return t;
}();

}  // namespace

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

void appendJsonString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.reserve(out.size() + s.size() + 2);
  out += '"';
  // Runs without escapes are appended whole.
  const char* run = s.data();
  const char* end = run + s.size();
  for (const char* p = run; p != end; ++p) {
    char e = kJsonEscape[static_cast<unsigned char>(*p)];
    if (!e) continue;
    out.append(run, static_cast<size_t>(p - run));
    run = p + 1;
    if (e == 'u') {
      auto c = static_cast<unsigned char>(*p);
      const char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      out.append(u, 6);
    } else {
      const char named[2] = {'\\', e};
      out.append(named, 2);
    }
  }
  out.append(run, static_cast<size_t>(end - run));
  out += '"';
}

}  // namespace kiln
