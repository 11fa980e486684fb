#include "kiln/store/store_path.h"

#include <array>
#include <cstdint>

#include "kiln/common/encoding.h"
#include "kiln/common/error.h"
#include "kiln/common/hash.h"

namespace kiln::store {
namespace {

constexpr size_t kMaxNameLen = 211;

// Character classes by byte: bit 1 a valid name character, bit 2 a nix32
// digit (0-9, a-z without e, o, t, u). 32 such digits are exactly 160
// bits, so every 32-digit hash part decodes to 20 bytes: checking the
// characters is the whole validation.
constexpr uint8_t kNameChar = 1, kNix32Digit = 2;
constexpr auto kCharClass = [] {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    bool lower = c >= 'a' && c <= 'z', digit = c >= '0' && c <= '9';
    if (lower || digit || (c >= 'A' && c <= 'Z') || c == '+' || c == '-' || c == '.' ||
        c == '_' || c == '?' || c == '=')
      t[c] |= kNameChar;
    if (digit || (lower && c != 'e' && c != 'o' && c != 't' && c != 'u')) t[c] |= kNix32Digit;
  }
  return t;
}();

bool validNameChar(char c) { return kCharClass[static_cast<uint8_t>(c)] & kNameChar; }

// Whether every byte of `s` is of class `cls`: the classes ANDed without a
// branch per byte (every derivation constructs and checks a few dozen
// store paths); the caller finds the offending byte only on failure.
bool allOfClass(std::string_view s, uint8_t cls) {
  uint8_t all = cls;
  for (char c : s) all &= kCharClass[static_cast<uint8_t>(c)];
  return all == cls;
}

}  // namespace

void checkStorePathName(std::string_view name) {
  auto bad = [&](const std::string& why) {
    return FormatError("store path name '" + std::string(name) + "' " + why);
  };
  if (name.empty()) throw FormatError("store path has an empty name");
  if (name.size() > kMaxNameLen)
    throw bad("is longer than " + std::to_string(kMaxNameLen) + " characters");
  if (name == "." || name == "..") throw bad("is not allowed");
  if (name.starts_with(".-") || name.starts_with("..-"))
    throw bad("must not start with '.-' or '..-'");
  if (!allOfClass(name, kNameChar))
    for (char c : name)
      if (!validNameChar(c))
        throw bad("contains illegal character '" + std::string(1, c) + "'");
}

StorePath::StorePath(std::string_view baseName) : baseName_(baseName) { check(); }

StorePath::StorePath(std::string&& baseName) : baseName_(std::move(baseName)) { check(); }

void StorePath::check() const {
  std::string_view baseName = baseName_;
  if (baseName.size() < kHashLen + 2 || baseName[kHashLen] != '-')
    throw FormatError("'" + std::string(baseName) +
                      "' is not a store path base name (<hash>-<name>)");
  if (!allOfClass(baseName.substr(0, kHashLen), kNix32Digit))
    throw FormatError("store path '" + std::string(baseName) +
                      "' has an invalid hash part");
  checkStorePathName(baseName.substr(kHashLen + 1));
}

bool StorePath::isDerivation() const { return name().ends_with(".drv"); }

StoreDir::StoreDir(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty() || dir_[0] != '/')
    throw FormatError("store directory '" + dir_ + "' is not absolute");
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

StorePath StoreDir::parsePath(std::string_view full) const {
  if (full.size() <= dir_.size() + 1 || !full.starts_with(dir_) ||
      full[dir_.size()] != '/')
    throw FormatError("path '" + std::string(full) + "' is not in the Nix store " + dir_);
  auto base = full.substr(dir_.size() + 1);
  if (base.find('/') != std::string_view::npos)
    throw FormatError("path '" + std::string(full) +
                      "' is not a store path (it is inside one)");
  return StorePath(base);
}

bool StoreDir::isStorePath(std::string_view full) const {
  try {
    parsePath(full);
    return true;
  } catch (const FormatError&) {
    return false;
  }
}

std::string StoreDir::printPath(const StorePath& p) const {
  std::string out;
  out.reserve(dir_.size() + 1 + p.baseName().size());
  out.append(dir_).append("/").append(p.baseName());
  return out;
}

StorePath StoreDir::toStorePath(std::string_view full) const {
  if (full.size() <= dir_.size() + 1 || !full.starts_with(dir_) ||
      full[dir_.size()] != '/')
    throw FormatError("path '" + std::string(full) + "' is not in the Nix store " + dir_);
  auto base = full.substr(dir_.size() + 1);
  return StorePath(base.substr(0, base.find('/')));
}

StorePath StoreDir::makeStorePath(std::string_view type, const Hash& inner,
                                  std::string_view name) const {
  checkStorePathName(name);
  // Built in a reused buffer: this runs several times per derivation.
  thread_local std::string fingerprint;
  fingerprint.clear();
  fingerprint.append(type).append(":sha256:");
  appendBase16(fingerprint, inner.bytes());
  fingerprint.append(":").append(dir_).append(":").append(name);
  Hash h = hashString(HashAlgo::kSha256, fingerprint);
  char folded[20];
  foldHashInto(h, folded);
  std::string base;
  base.reserve(StorePath::kHashLen + 1 + name.size());
  appendNix32(base, std::string_view(folded, sizeof folded));
  base.append("-").append(name);
  // Valid by construction: 32 nix32 digits, '-', the name checked above.
  return StorePath(std::move(base), StorePath::Valid{});
}

std::string StoreDir::makeType(std::string type, const StorePathSet& refs,
                               bool selfRef) const {
  for (auto& r : refs) type += ":" + printPath(r);
  if (selfRef) type += ":self";
  return type;
}

StorePath StoreDir::makeTextPath(std::string_view name, const Hash& sha256,
                                 const StorePathSet& refs) const {
  return makeStorePath(makeType("text", refs, false), sha256, name);
}

StorePath StoreDir::makeSourcePath(std::string_view name, const Hash& narSha256,
                                   const StorePathSet& refs,
                                   bool selfRef) const {
  return makeStorePath(makeType("source", refs, selfRef), narSha256, name);
}

StorePath StoreDir::makeFixedOutputPath(std::string_view name, bool recursive,
                                        const Hash& hash,
                                        const StorePathSet& refs,
                                        bool selfRef) const {
  if (recursive && hash.algo() == HashAlgo::kSha256)
    return makeSourcePath(name, hash, refs, selfRef);
  if (!refs.empty() || selfRef)
    throw FormatError("fixed-output path '" + std::string(name) +
                      "' cannot have references");
  std::string inner = "fixed:out:" + std::string(recursive ? "r:" : "") +
                      std::string(hashAlgoName(hash.algo())) + ":" +
                      hash.toHex() + ":";
  return makeStorePath("output:out", hashString(HashAlgo::kSha256, inner), name);
}

StorePath StoreDir::makeOutputPath(std::string_view output, const Hash& drvHash,
                                   std::string_view drvName) const {
  std::string name(drvName);
  if (output != "out") name.append("-").append(output);
  std::string type("output:");
  type.append(output);
  return makeStorePath(type, drvHash, name);
}

std::string makeFixedCa(bool recursive, const Hash& hash) {
  return std::string("fixed:") + (recursive ? "r:" : "") +
         std::string(hashAlgoName(hash.algo())) + ":" +
         hash.to(HashFormat::kNix32, false);
}

std::string makeTextCa(const Hash& sha256) {
  return "text:sha256:" + sha256.to(HashFormat::kNix32, false);
}

}  // namespace kiln::store
