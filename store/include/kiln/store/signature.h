#pragma once
/// Ed25519 signing keys in Nix's file format and the signatures binary
/// caches carry (spec §7.3). Pure Ed25519 through OpenSSL 3.
///
/// Secret key file: `<name>:<base64 of seed(32) ‖ public key(32)>`; public
/// key file: `<name>:<base64 of 32 bytes>`; neither ends in a newline.
/// A signature is `<name>:<base64 of 64 bytes>`.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "kiln/common/hash.h"
#include "kiln/store/store_path.h"

namespace kiln::store {

/// A named Ed25519 public key. Value type.
class PublicKey {
 public:
  /// Parses `<name>:<base64 of 32 bytes>` (surrounding whitespace is
  /// ignored); throws FormatError saying what is wrong.
  static PublicKey parse(std::string_view text);
  PublicKey(std::string name, std::string key);

  const std::string& name() const { return name_; }
  /// The 32 raw key bytes.
  const std::string& key() const { return key_; }
  /// `<name>:<base64>`, the file contents.
  std::string toString() const;
  /// Whether `sig` (64 raw bytes) is a valid signature of `data`.
  bool verifyRaw(std::string_view data, std::string_view sig) const;

 private:
  std::string name_, key_;
};

/// A named Ed25519 secret key (seed and public half). Value type holding
/// secret material: do not log it.
class SecretKey {
 public:
  /// Parses `<name>:<base64 of 64 bytes>`; throws FormatError for a bad
  /// name, bad base64, wrong length, or a public half that does not belong
  /// to the seed.
  static SecretKey parse(std::string_view text);
  /// Makes a fresh key from the system's random generator.
  static SecretKey generate(std::string_view name);

  const std::string& name() const { return name_; }
  /// `<name>:<base64 of seed ‖ public>`, the file contents.
  std::string toString() const;
  /// The matching public key (same name).
  PublicKey toPublicKey() const;
  /// Signs `data`; returns `<name>:<base64 signature>`.
  std::string sign(std::string_view data) const;

 private:
  SecretKey(std::string name, std::string seed, std::string pub)
      : name_(std::move(name)), seed_(std::move(seed)), pub_(std::move(pub)) {}
  std::string name_, seed_, pub_;
};

/// A signature split into key name and the 64 raw bytes.
struct Signature {
  std::string keyName;
  std::string bytes;
  /// Parses `<name>:<base64 of 64 bytes>`; throws FormatError.
  static Signature parse(std::string_view text);
};

/// Trusted public keys, looked up by name.
class PublicKeys {
 public:
  /// Adds `key`; a second key of the same name replaces the first.
  void add(PublicKey key);
  bool empty() const { return keys_.empty(); }
  /// Whether `sig` (`<name>:<base64>`) is a valid signature of `data` by the
  /// trusted key of that name. A malformed signature or unknown name is
  /// simply not valid.
  bool verify(std::string_view data, std::string_view sig) const;

 private:
  std::map<std::string, PublicKey, std::less<>> keys_;
};

/// The string a store path's signature covers:
/// `1;<full path>;<NarHash sha256:nix32>;<NarSize>;<full reference paths,
/// sorted, comma-joined>`. Throws Error if `narHash` is not sha256.
std::string pathFingerprint(const StoreDir& dir, const StorePath& path,
                            const Hash& narHash, uint64_t narSize,
                            const StorePathSet& refs);

/// Reads a key file written by generateKeyFiles / nix-store
/// --generate-binary-cache-key; throws SysError or FormatError naming the
/// file.
SecretKey readSecretKeyFile(const std::string& path);
PublicKey readPublicKeyFile(const std::string& path);

}  // namespace kiln::store
