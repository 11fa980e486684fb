#include "kiln/store/narinfo.h"

#include <charconv>
#include <map>

#include "kiln/common/error.h"
#include "kiln/store/content_address.h"
#include "kiln/store/signature.h"

namespace kiln::store {
namespace {

uint64_t parseSize(std::string_view key, std::string_view v) {
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size())
    throw FormatError(std::string(key) + " '" + std::string(v) +
                      "' is not a non-negative integer");
  return n;
}

Hash parseSha256(std::string_view key, std::string_view v) {
  if (v.find(':') == std::string_view::npos)
    throw FormatError(std::string(key) + " '" + std::string(v) +
                      "' lacks its 'sha256:' prefix");
  try {
    return Hash::parse(v, HashAlgo::kSha256);
  } catch (const FormatError& e) {
    throw FormatError(std::string(key) + ": " + e.what());
  }
}

void checkCompression(std::string_view v) {
  if (v.empty()) throw FormatError("Compression is empty");
  for (char c : v)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
      throw FormatError("Compression '" + std::string(v) +
                        "' has an unexpected character");
}

void checkUrl(std::string_view v) {
  if (v.empty()) throw FormatError("URL is empty");
  for (unsigned char c : v)
    if (c < ' ' || c == 0x7f)
      throw FormatError("URL contains a control character");
}

/// Splits the text into key → value lines, rejecting malformed lines and
/// duplicate keys (Sig lines are collected separately).
std::multimap<std::string, std::string> splitLines(std::string_view text) {
  std::multimap<std::string, std::string> kv;
  size_t pos = 0, lineNo = 0;
  while (pos < text.size()) {
    ++lineNo;
    auto eol = text.find('\n', pos);
    if (eol == std::string_view::npos)
      throw FormatError("line " + std::to_string(lineNo) +
                        " does not end in a newline");
    auto line = text.substr(pos, eol - pos);
    pos = eol + 1;
    auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0)
      throw FormatError("line " + std::to_string(lineNo) +
                        " is not 'Key: value'");
    std::string key(line.substr(0, colon));
    auto value = line.substr(colon + 1);
    if (value.starts_with(' ')) value.remove_prefix(1);
    if (key != "Sig" && kv.count(key))
      throw FormatError("key '" + key + "' appears twice");
    kv.emplace(std::move(key), std::string(value));
  }
  return kv;
}

void parseField(NarInfo& ni, const StoreDir& dir, const std::string& key,
                const std::string& v) {
  if (key == "StorePath") {
    ni.path = dir.parsePath(v);
  } else if (key == "URL") {
    checkUrl(v);
    ni.url = v;
  } else if (key == "Compression") {
    checkCompression(v);
    ni.compression = v;
  } else if (key == "FileHash") {
    ni.fileHash = parseSha256(key, v);
  } else if (key == "FileSize") {
    ni.fileSize = parseSize(key, v);
  } else if (key == "NarHash") {
    ni.narHash = parseSha256(key, v);
  } else if (key == "NarSize") {
    ni.narSize = parseSize(key, v);
    if (ni.narSize == 0) throw FormatError("NarSize is 0");
  } else if (key == "References") {
    std::string_view rest(v);
    while (!rest.empty()) {
      auto sp = rest.find(' ');
      auto word = rest.substr(0, sp);
      if (!word.empty()) ni.references.insert(StorePath(word));
      if (sp == std::string_view::npos) break;
      rest.remove_prefix(sp + 1);
    }
  } else if (key == "Deriver") {
    if (v != "unknown-deriver") {
      StorePath d(v);
      if (!d.isDerivation())
        throw FormatError("Deriver '" + v + "' is not a .drv");
      ni.deriver = d;
    }
  } else if (key == "System") {
    ni.system = v;
  } else if (key == "Sig") {
    Signature::parse(v);
    ni.sigs.insert(v);
  } else if (key == "CA") {
    ContentAddress::parse(v);
    ni.ca = v;
  }
  // Any other key is ignored, as Nix does.
}

}  // namespace

NarInfo NarInfo::parse(const StoreDir& dir, std::string_view text,
                       std::string_view whence) {
  NarInfo ni;
  ni.compression = "bzip2";
  try {
    auto kv = splitLines(text);
    for (const char* req : {"StorePath", "URL", "NarHash", "NarSize"})
      if (!kv.count(req))
        throw FormatError(std::string("required field '") + req +
                          "' is missing");
    for (auto& [k, v] : kv) parseField(ni, dir, k, v);
  } catch (const FormatError& e) {
    throw FormatError("NAR info file '" + std::string(whence) +
                      "' is corrupt: " + e.what());
  }
  return ni;
}

std::string NarInfo::render(const StoreDir& dir) const {
  if (!fileHash || !fileSize)
    throw Error("narinfo of '" + dir.printPath(path) +
                "' lacks FileHash or FileSize");
  if (fileHash->algo() != HashAlgo::kSha256 ||
      narHash.algo() != HashAlgo::kSha256)
    throw Error("narinfo of '" + dir.printPath(path) +
                "' has a hash that is not sha256");
  std::string s;
  s += "StorePath: " + dir.printPath(path) + "\n";
  s += "URL: " + url + "\n";
  s += "Compression: " + compression + "\n";
  s += "FileHash: " + fileHash->toNix32() + "\n";
  s += "FileSize: " + std::to_string(*fileSize) + "\n";
  s += "NarHash: " + narHash.toNix32() + "\n";
  s += "NarSize: " + std::to_string(narSize) + "\n";
  s += "References:";
  for (auto& r : references) s += " " + r.baseName();
  if (references.empty()) s += " ";
  s += "\n";
  if (deriver) s += "Deriver: " + deriver->baseName() + "\n";
  if (!system.empty()) s += "System: " + system + "\n";
  for (auto& sig : sigs) s += "Sig: " + sig + "\n";
  if (!ca.empty()) s += "CA: " + ca + "\n";
  return s;
}

std::string narInfoFileName(const StorePath& path) {
  return std::string(path.hashPart()) + ".narinfo";
}

}  // namespace kiln::store
