// Streaming, validating NAR parser (spec §4).
#include <cstring>
#include <memory>
#include <vector>

#include "kiln/common/error.h"
#include "kiln/store/nar.h"
#include "nar_tokens.h"

namespace kiln::store {
namespace {

constexpr size_t kContentChunk = 256 * 1024;
// Longest keyword token ("executable", "directory"...) plus slack: a longer
// token where a keyword belongs is reported without reading it all.
constexpr size_t kMaxKeyword = 64;

/// A token for an error message: quoted, non-printable bytes escaped, cut.
std::string quote(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > 80) out += "...";
  return out + "'";
}

class Parser {
 public:
  Parser(Source& src, NarVisitor& v, const NarLimits& lim)
      : src_(src), v_(v), lim_(lim) {}

  uint64_t run() {
    expect(nar::kMagic.substr(8, 13), "archive magic");
    parseNode("", 0);
    return pos_;
  }

 private:
  [[noreturn]] void fail(uint64_t at, const std::string& what) {
    throw FormatError("NAR byte " + std::to_string(at) + ": " + what);
  }

  void reserve(uint64_t n, const char* what) {
    if (n > lim_.maxTotalSize || pos_ > lim_.maxTotalSize - n)
      fail(pos_, std::string(what) + " would make the archive larger than the limit of " +
                     std::to_string(lim_.maxTotalSize) + " bytes");
  }

  /// `len` plus its padding; fails for lengths too close to 2^64.
  uint64_t padded(uint64_t len, uint64_t at) {
    if (len > ~uint64_t{0} - 8) fail(at, "length " + std::to_string(len) + " is absurd");
    return len + nar::paddingFor(len);
  }

  void readRaw(char* data, size_t len, const char* what) {
    while (len > 0) {
      size_t n = src_.read(data, len);
      if (n == 0)
        fail(pos_, std::string("archive is truncated: ") + std::to_string(len) +
                       " more byte(s) of " + what + " expected");
      data += n;
      len -= n;
      pos_ += n;
    }
  }

  uint64_t readU64(const char* what) {
    reserve(8, what);
    unsigned char b[8];
    readRaw(reinterpret_cast<char*>(b), 8, what);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | b[i];
    return n;
  }

  void readPadding(uint64_t len, const char* what) {
    size_t p = nar::paddingFor(len);
    if (!p) return;
    char pad[8];
    uint64_t at = pos_;
    readRaw(pad, p, what);
    for (size_t i = 0; i < p; ++i)
      if (pad[i] != 0) fail(at + i, std::string("non-zero padding after ") + what);
  }

  /// Reads a token of at most `max` bytes; `what` names it in errors.
  std::string readString(size_t max, const char* what) {
    uint64_t at = pos_;
    uint64_t len = readU64(what);
    if (len > max)
      fail(at, std::string(what) + " is " + std::to_string(len) +
                   " bytes long, more than the limit of " + std::to_string(max));
    reserve(padded(len, at), what);
    std::string s(static_cast<size_t>(len), '\0');
    readRaw(s.data(), s.size(), what);
    readPadding(len, what);
    return s;
  }

  /// Reads a keyword token; longer tokens are reported without reading.
  std::string readKeyword(const char* expected, uint64_t& at) {
    at = pos_;
    uint64_t len = readU64("token");
    if (len > kMaxKeyword)
      fail(at, std::string("expected ") + expected + ", got a token of " +
                   std::to_string(len) + " bytes");
    reserve(padded(len, at), "token");
    std::string s(static_cast<size_t>(len), '\0');
    readRaw(s.data(), s.size(), "token");
    readPadding(len, "token");
    return s;
  }

  void expect(std::string_view tok, const char* what) {
    uint64_t at;
    std::string expected = quote(tok) + (what ? std::string(" (") + what + ")" : "");
    std::string got = readKeyword(expected.c_str(), at);
    if (got != tok) fail(at, "expected " + expected + ", got " + quote(got));
  }

  void checkName(const std::string& name, uint64_t at) {
    if (name.empty()) fail(at, "empty entry name");
    if (name == "." || name == "..") fail(at, "entry name " + quote(name) + " is not allowed");
    if (name.find('/') != std::string::npos)
      fail(at, "entry name " + quote(name) + " contains '/'");
    if (name.find('\0') != std::string::npos)
      fail(at, "entry name " + quote(name) + " contains a NUL byte");
  }

  void parseNode(const std::string& path, size_t depth) {
    expect("(", "node start");
    expect("type", nullptr);
    uint64_t at;
    std::string type = readKeyword("node type", at);
    if (type == "regular") {
      parseRegular(path);
    } else if (type == "symlink") {
      parseSymlink(path);
    } else if (type == "directory") {
      parseDirectory(path, depth);
      return;  // the directory loop consumed the closing ")"
    } else {
      fail(at, "unknown node type " + quote(type) +
                   " (expected 'regular', 'symlink' or 'directory')");
    }
    expect(")", "node end");
  }

  void parseRegular(const std::string& path) {
    uint64_t at;
    std::string tok = readKeyword("'executable' or 'contents'", at);
    bool executable = false;
    if (tok == "executable") {
      executable = true;
      std::string empty = readKeyword("'' after 'executable'", at);
      if (!empty.empty()) fail(at, "expected '' after 'executable', got " + quote(empty));
      expect("contents", nullptr);
    } else if (tok != "contents") {
      fail(at, "expected 'executable' or 'contents', got " + quote(tok));
    }
    at = pos_;
    uint64_t size = readU64("file size");
    if (size > lim_.maxFileSize)
      fail(at, "file " + quote(path) + " is " + std::to_string(size) +
                   " bytes, more than the limit of " + std::to_string(lim_.maxFileSize));
    reserve(padded(size, at), "file contents");
    v_.createRegularFile(path, executable, size);
    // The buffer grows to the largest chunk needed so far: small archives
    // stay small.
    size_t need = static_cast<size_t>(std::min<uint64_t>(size, kContentChunk));
    if (buf_.size() < need) buf_.resize(need);
    for (uint64_t left = size; left > 0;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(left, kContentChunk));
      readRaw(buf_.data(), n, "file contents");
      v_.receiveContents({buf_.data(), n});
      left -= n;
    }
    readPadding(size, "file contents");
    v_.closeRegularFile();
  }

  void parseSymlink(const std::string& path) {
    expect("target", nullptr);
    uint64_t at = pos_;
    std::string target = readString(lim_.maxTargetLength, "symlink target");
    if (target.empty()) fail(at, "symlink " + quote(path) + " has an empty target");
    if (target.find('\0') != std::string::npos)
      fail(at, "symlink target " + quote(target) + " contains a NUL byte");
    v_.createSymlink(path, target);
  }

  void parseDirectory(const std::string& path, size_t depth) {
    v_.createDirectory(path);
    std::string prev;
    bool first = true;
    for (;;) {
      uint64_t at;
      std::string tok = readKeyword("'entry' or ')'", at);
      if (tok == ")") break;
      if (tok != "entry") fail(at, "expected 'entry' or ')', got " + quote(tok));
      if (depth + 1 > lim_.maxDepth)
        fail(at, "directories nested deeper than the limit of " +
                     std::to_string(lim_.maxDepth));
      expect("(", "entry start");
      expect("name", nullptr);
      at = pos_;
      std::string name = readString(lim_.maxNameLength, "entry name");
      checkName(name, at);
      if (!first && name == prev) fail(at, "duplicate entry " + quote(name));
      if (!first && name < prev)
        fail(at, "entry " + quote(name) + " is not sorted after " + quote(prev));
      expect("node", nullptr);
      parseNode(path.empty() ? name : path + "/" + name, depth + 1);
      expect(")", "entry end");
      prev = std::move(name);
      first = false;
    }
    v_.closeDirectory();
  }

  Source& src_;
  NarVisitor& v_;
  const NarLimits& lim_;
  uint64_t pos_ = 0;
  std::vector<char> buf_;
};

}  // namespace

uint64_t parseNar(Source& source, NarVisitor& visitor, const NarLimits& limits) {
  return Parser(source, visitor, limits).run();
}

uint64_t copyNar(Source& source, Sink& sink, const NarLimits& limits) {
  TeeSource tee(source, sink);
  NullNarVisitor v;
  return parseNar(tee, v, limits);
}

}  // namespace kiln::store
