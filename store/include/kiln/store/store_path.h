#pragma once
/// Store paths: `<storeDir>/<32-char nix32 hash>-<name>`, and how Nix derives
/// them from fingerprints (spec §2). The logical store directory is part of
/// every hash and is carried by `StoreDir`; `StorePath` is only the base name.

#include <set>
#include <string>
#include <string_view>

#include "kiln/common/hash.h"

namespace kiln::store {

/// A store object's base name `<hashpart>-<name>`, validated. Value type,
/// ordered by base name (as Nix sorts references).
class StorePath {
 public:
  static constexpr size_t kHashLen = 32;

  /// Parses a base name; throws FormatError if the hash part is not 32
  /// nix32 characters or the name is invalid.
  explicit StorePath(std::string_view baseName);
  /// The same, taking the string (no copy).
  explicit StorePath(std::string&& baseName);
  explicit StorePath(const char* baseName) : StorePath(std::string_view(baseName)) {}

  /// `<hashpart>-<name>`.
  const std::string& baseName() const { return baseName_; }
  std::string_view hashPart() const {
    return std::string_view(baseName_).substr(0, kHashLen);
  }
  std::string_view name() const {
    return std::string_view(baseName_).substr(kHashLen + 1);
  }
  /// Whether the name ends in ".drv".
  bool isDerivation() const;

  auto operator<=>(const StorePath& o) const = default;

 private:
  friend class StoreDir;
  struct Valid {};  // marks a base name its maker has just built valid
  StorePath(std::string&& baseName, Valid) : baseName_(std::move(baseName)) {}
  void check() const;  // throws FormatError as the constructors say
  std::string baseName_;
};

using StorePathSet = std::set<StorePath>;

/// Throws FormatError unless `name` is a valid store path name: 1–211 bytes
/// of [A-Za-z0-9+-._?=], not "." or "..", not starting with ".-" or "..-".
void checkStorePathName(std::string_view name);

/// The logical store directory (default `/nix/store`) and the path
/// computations that depend on it.
class StoreDir {
 public:
  explicit StoreDir(std::string dir = "/nix/store");

  const std::string& dir() const { return dir_; }

  /// Parses a full path `<dir>/<base>`; throws FormatError naming the path
  /// if it is not directly inside this store directory.
  StorePath parsePath(std::string_view full) const;
  /// Whether `full` parses as a store path of this directory.
  bool isStorePath(std::string_view full) const;
  /// `<dir>/<base>`.
  std::string printPath(const StorePath& p) const;
  /// Splits a path inside the store (`/nix/store/abc-x/bin/sh`) into the
  /// store path and the rest; throws FormatError if not inside the store.
  StorePath toStorePath(std::string_view full) const;

  /// makeStorePath(type, innerHash, name): the generic fingerprint rule.
  StorePath makeStorePath(std::string_view type, const Hash& inner,
                          std::string_view name) const;
  /// `text` objects (`builtins.toFile`, `.drv` files): sha256 of contents.
  StorePath makeTextPath(std::string_view name, const Hash& contentSha256,
                         const StorePathSet& refs) const;
  /// `source` objects (recursive sha256 of the NAR).
  StorePath makeSourcePath(std::string_view name, const Hash& narSha256,
                           const StorePathSet& refs, bool selfRef) const;
  /// Fixed-output paths: recursive sha256 is a source path; anything else
  /// uses `output:out` with the `fixed:out:` inner string.
  StorePath makeFixedOutputPath(std::string_view name, bool recursive,
                                const Hash& hash,
                                const StorePathSet& refs = {},
                                bool selfRef = false) const;
  /// Input-addressed derivation output `output` of a derivation named
  /// `drvName` whose (masked) hashDerivationModulo is `drvHash`.
  StorePath makeOutputPath(std::string_view output, const Hash& drvHash,
                           std::string_view drvName) const;

 private:
  std::string makeType(std::string type, const StorePathSet& refs,
                       bool selfRef) const;

  std::string dir_;
};

/// The CA field for a fixed-output object: `fixed:[r:]<algo>:<nix32>`.
std::string makeFixedCa(bool recursive, const Hash& hash);
/// The CA field for a text object: `text:sha256:<nix32>`.
std::string makeTextCa(const Hash& sha256);

}  // namespace kiln::store
