// The strict ATerm parser for `.drv` files (spec §3.1). Accepts exactly the
// canonical form Nix writes, so that printing a parsed derivation gives back
// the same bytes; everything else is a FormatError naming the byte offset.
#include <sys/stat.h>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/store/derivation.h"

namespace kiln::store {
namespace {

/// Cursor over the input with error reporting.
class AtermParser {
 public:
  AtermParser(std::string_view text, std::string_view what)
      : s_(text), what_(what.empty() ? "derivation" : what) {}

  [[noreturn]] void fail(const std::string& problem, size_t at) const {
    throw FormatError(std::string(what_) + ": " + problem + " at byte " +
                      std::to_string(at));
  }
  [[noreturn]] void fail(const std::string& problem) const {
    fail(problem, pos_);
  }

  size_t pos() const { return pos_; }
  bool atEnd() const { return pos_ >= s_.size(); }

  std::string describeNext() const {
    if (atEnd()) return "end of input";
    unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c >= 0x20 && c < 0x7f) return "'" + std::string(1, s_[pos_]) + "'";
    static const char* kHex = "0123456789abcdef";
    return std::string("byte 0x") + kHex[c >> 4] + kHex[c & 15];
  }

  void expect(char c) {
    if (atEnd() || s_[pos_] != c)
      fail(std::string(atEnd() ? "unexpected end of input"
                               : "unexpected token") +
           ": expected '" + std::string(1, c) + "', found " + describeNext());
    ++pos_;
  }

  void expectWord(std::string_view word) {
    for (char c : word) expect(c);
  }

  /// After a list element: true if another follows (consumes ','), false at
  /// the closing ']' (consumed).
  bool nextInList() {
    if (!atEnd() && s_[pos_] == ',') {
      ++pos_;
      return true;
    }
    expect(']');
    return false;
  }

  /// Parses `[` elem {`,` elem} `]` calling `elem` for each.
  template <typename F>
  void list(F&& elem) {
    expect('[');
    if (!atEnd() && s_[pos_] == ']') {
      ++pos_;
      return;
    }
    do elem();
    while (nextInList());
  }

  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (atEnd()) fail("unexpected end of input inside a string");
      char c = s_[pos_];
      if (c == '"') break;
      if (c == '\n' || c == '\r' || c == '\t')
        fail(
            "unescaped control character in a string (Nix writes it as an "
            "escape)");
      if (c == '\\') {
        if (pos_ + 1 >= s_.size())
          fail("unexpected end of input inside an escape");
        char e = s_[pos_ + 1];
        switch (e) {
          case '"':
            out += '"';
            break;
          case '\\':
            out += '\\';
            break;
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          default:
            ++pos_;
            fail("invalid escape sequence: '\\' followed by " + describeNext());
        }
        pos_ += 2;
        continue;
      }
      out += c;
      ++pos_;
    }
    ++pos_;
    return out;
  }

 private:
  std::string_view s_;
  std::string_view what_;
  size_t pos_ = 0;
};

/// Checks that `key` sorts strictly after the previous key of a collection.
void checkAscending(AtermParser& p, std::optional<std::string>& prev,
                    const std::string& key, const char* what, size_t at) {
  if (prev && !(*prev < key))
    p.fail(std::string(*prev == key ? "duplicate " : "unsorted ") + what +
               " '" + key + "'",
           at);
  prev = key;
}

StorePath parseStorePathAt(AtermParser& p, const StoreDir& sd,
                           const std::string& s, const char* what, size_t at) {
  try {
    return sd.parsePath(s);
  } catch (const FormatError& e) {
    p.fail(std::string("invalid ") + what + ": " + e.what(), at);
  }
}

bool isLowerHex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

/// Validates the (path, hashAlgo, hash) combination of one output.
void checkOutputTuple(AtermParser& p, const std::string& name,
                      const DerivationOutput& o, size_t at) {
  auto bad = [&](const std::string& why) {
    p.fail("output '" + name + "' " + why, at);
  };
  if (o.hashAlgo.empty()) {
    if (!o.hash.empty()) bad("has a hash but no hash algorithm");
    return;
  }
  std::string_view algoName = o.hashAlgo;
  if (algoName.starts_with("r:")) algoName.remove_prefix(2);
  auto algo = parseHashAlgo(algoName);
  if (!algo) bad("has unknown hash algorithm '" + o.hashAlgo + "'");
  if (o.hash.empty()) {
    if (o.path) bad("has a path and a hash algorithm but no hash");
    return;
  }
  if (!o.path) bad("has a hash but no path");
  if (o.hash.size() != 2 * hashSize(*algo) || !isLowerHex(o.hash))
    bad("has hash '" + o.hash + "' that is not lowercase base16 " +
        std::string(hashAlgoName(*algo)));
}

void checkOutputName(AtermParser& p, const std::string& name, size_t at) {
  if (name.empty()) p.fail("empty output name", at);
  if (name == "drv") p.fail("output name 'drv' is not allowed", at);
  try {
    checkStorePathName(name);
  } catch (const FormatError& e) {
    p.fail(std::string("invalid output name: ") + e.what(), at);
  }
}

void parseOutputs(AtermParser& p, const StoreDir& sd, Derivation& drv) {
  std::optional<std::string> prev;
  p.list([&] {
    size_t at = p.pos();
    p.expect('(');
    std::string name = p.string();
    checkOutputName(p, name, at);
    checkAscending(p, prev, name, "output", at);
    p.expect(',');
    size_t pathAt = p.pos();
    std::string path = p.string();
    DerivationOutput o;
    if (!path.empty())
      o.path = parseStorePathAt(p, sd, path, "output path", pathAt);
    p.expect(',');
    o.hashAlgo = p.string();
    p.expect(',');
    o.hash = p.string();
    p.expect(')');
    checkOutputTuple(p, name, o, at);
    drv.outputs.emplace(std::move(name), std::move(o));
  });
  if (drv.outputs.empty()) p.fail("derivation has no outputs");
}

void parseInputDrvs(AtermParser& p, const StoreDir& sd, Derivation& drv) {
  std::optional<std::string> prev;
  p.list([&] {
    size_t at = p.pos();
    p.expect('(');
    std::string path = p.string();
    checkAscending(p, prev, path, "input derivation", at);
    StorePath sp = parseStorePathAt(p, sd, path, "input derivation", at);
    if (!sp.isDerivation())
      p.fail("input derivation '" + path + "' does not end in .drv", at);
    p.expect(',');
    std::set<std::string> outs;
    std::optional<std::string> prevOut;
    p.list([&] {
      size_t outAt = p.pos();
      std::string o = p.string();
      checkOutputName(p, o, outAt);
      checkAscending(p, prevOut, o, "input output name", outAt);
      outs.insert(std::move(o));
    });
    p.expect(')');
    drv.inputDrvs.emplace(std::move(sp), std::move(outs));
  });
}

void parseInputSrcs(AtermParser& p, const StoreDir& sd, Derivation& drv) {
  std::optional<std::string> prev;
  p.list([&] {
    size_t at = p.pos();
    std::string path = p.string();
    checkAscending(p, prev, path, "input source", at);
    drv.inputSrcs.insert(parseStorePathAt(p, sd, path, "input source", at));
  });
}

void parseEnv(AtermParser& p, Derivation& drv) {
  std::optional<std::string> prev;
  p.list([&] {
    size_t at = p.pos();
    p.expect('(');
    std::string key = p.string();
    checkAscending(p, prev, key, "environment variable", at);
    p.expect(',');
    std::string value = p.string();
    p.expect(')');
    drv.env.emplace(std::move(key), std::move(value));
  });
}

}  // namespace

Derivation parseDerivation(const StoreDir& storeDir, std::string_view text,
                           std::string_view name, std::string_view what) {
  AtermParser p(text, what);
  if (text.size() > kMaxDerivationSize)
    p.fail("input of " + std::to_string(text.size()) +
               " bytes exceeds the derivation size limit of " +
               std::to_string(kMaxDerivationSize),
           0);
  Derivation drv;
  drv.name = name;
  p.expectWord("Derive(");
  parseOutputs(p, storeDir, drv);
  p.expect(',');
  parseInputDrvs(p, storeDir, drv);
  p.expect(',');
  parseInputSrcs(p, storeDir, drv);
  p.expect(',');
  drv.platform = p.string();
  p.expect(',');
  drv.builder = p.string();
  p.expect(',');
  p.list([&] { drv.args.push_back(p.string()); });
  p.expect(',');
  parseEnv(p, drv);
  p.expect(')');
  if (!p.atEnd())
    p.fail("trailing garbage after the derivation (" +
           std::to_string(text.size() - p.pos()) + " bytes)");
  return drv;
}

Derivation readDerivationFile(const StoreDir& storeDir,
                              const std::string& file) {
  struct stat st;
  if (stat(file.c_str(), &st) != 0)
    throwSysError("reading derivation '" + file + "'");
  if (static_cast<uint64_t>(st.st_size) > kMaxDerivationSize)
    throw FormatError(
        "derivation '" + file + "' is " + std::to_string(st.st_size) +
        " bytes, more than the limit of " + std::to_string(kMaxDerivationSize));
  std::string base = baseNameOf(file);
  if (!base.ends_with(".drv"))
    throw FormatError("derivation file '" + file + "' does not end in .drv");
  std::string name = base.substr(0, base.size() - 4);
  if (name.size() > StorePath::kHashLen && name[StorePath::kHashLen] == '-')
    name = name.substr(StorePath::kHashLen + 1);
  return parseDerivation(storeDir, readFile(file), name, file);
}

}  // namespace kiln::store
