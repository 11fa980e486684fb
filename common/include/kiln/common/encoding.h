#pragma once
/// Byte-string encodings used by Nix: base16, nix32 ("base-32"), base64 and
/// JSON string literals.
/// Decoders throw `FormatError` naming the offending input.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

/// Lowercase hexadecimal.
std::string base16Encode(std::string_view bytes);
/// Appends base16Encode(bytes) to `out` (no temporary string).
void appendBase16(std::string& out, std::string_view bytes);
/// Accepts upper and lower case; throws on odd length or a non-hex digit.
std::string base16Decode(std::string_view text);

/// Nix's base-32: alphabet without e, o, t, u; little-endian bit order,
/// most significant digit first. Output length is ceil(8n/5).
std::string nix32Encode(std::string_view bytes);
/// Appends nix32Encode(bytes) to `out` (no temporary string).
void appendNix32(std::string& out, std::string_view bytes);
/// Decodes `text` into exactly `size` bytes; throws on a character outside
/// the alphabet or bits beyond `size` bytes.
std::string nix32Decode(std::string_view text, size_t size);
/// Length of the nix32 encoding of `size` bytes.
constexpr size_t nix32Length(size_t size) { return (size * 8 + 4) / 5; }

/// Standard base64 with '=' padding.
std::string base64Encode(std::string_view bytes);
/// Accepts padded input, and unpadded input when `allowUnpadded`; throws on
/// any other character or a bad length.
std::string base64Decode(std::string_view text, bool allowUnpadded = false);
/// Length of the padded base64 encoding of `size` bytes.
constexpr size_t base64Length(size_t size) { return 4 * ((size + 2) / 3); }

/// For the five bytes Nix's ATerm and JSON writers escape by name (`"`,
/// `\`, newline, carriage return, tab), the letter after the backslash;
/// 0 for every other byte.
inline constexpr std::array<char, 256> kNamedEscapes = [] {
  std::array<char, 256> t{};
  t['"'] = '"';
  t['\\'] = '\\';
  t['\n'] = 'n';
  t['\r'] = 'r';
  t['\t'] = 't';
  return t;
}();

/// Appends the UTF-8 encoding of the code point `cp` (at most U+10FFFF;
/// callers check surrogates) to `out`.
void appendUtf8(std::string& out, uint32_t cp);

/// Appends `s` as a JSON string literal (quotes included) as Nix 2.8 writes
/// it (toJSON, show-derivation): `"`, `\`, \n, \r and \t by name, other
/// bytes below 0x20 as \u00XX (\b and \f too), every other byte as it is
/// (strings need not be UTF-8).
void appendJsonString(std::string& out, std::string_view s);

}  // namespace kiln
