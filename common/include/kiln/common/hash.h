#pragma once
/// Cryptographic hashes (OpenSSL) and their textual forms as Nix prints and
/// parses them: `algo:base16|nix32|base64`, SRI `algo-base64`, bare digests.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kiln {

/// The hash algorithms Nix knows.
enum class HashAlgo : uint8_t { kMd5, kSha1, kSha256, kSha512 };

/// Lowercase name ("md5", "sha1", "sha256", "sha512").
std::string_view hashAlgoName(HashAlgo algo);
/// Parses a lowercase algorithm name; nullopt for anything else.
std::optional<HashAlgo> parseHashAlgo(std::string_view name);
/// Digest size in bytes.
size_t hashSize(HashAlgo algo);

/// How a hash is printed.
enum class HashFormat : uint8_t { kBase16, kNix32, kBase64, kSri };

/// A digest together with its algorithm. Value type.
class Hash {
 public:
  static constexpr size_t kMaxSize = 64;

  /// An all-zero hash of `algo`.
  explicit Hash(HashAlgo algo = HashAlgo::kSha256);
  /// Wraps raw digest bytes; throws FormatError if the size does not match.
  Hash(HashAlgo algo, std::string_view digest);

  /// Parses `algo:digest`, `algo-base64` (SRI) or, when `algo` is given, a
  /// bare digest. The encoding follows from the length. With both a prefix
  /// and `algo`, they must agree. Throws FormatError naming the input.
  static Hash parse(std::string_view text,
                    std::optional<HashAlgo> algo = std::nullopt);
  /// Parses a bare digest of a known algorithm (any encoding, by length).
  static Hash parseBare(std::string_view text, HashAlgo algo);

  HashAlgo algo() const { return algo_; }
  size_t size() const { return hashSize(algo_); }
  std::string_view bytes() const {
    return {reinterpret_cast<const char*>(bytes_.data()), size()};
  }
  const uint8_t* data() const { return bytes_.data(); }
  uint8_t* data() { return bytes_.data(); }

  /// Prints in `format`; `withAlgo` prefixes "algo:" (SRI always has it).
  std::string to(HashFormat format, bool withAlgo = true) const;
  /// "sha256:<nix32>", the form narinfo files use.
  std::string toNix32() const { return to(HashFormat::kNix32); }
  /// Bare base16 digest.
  std::string toHex() const { return to(HashFormat::kBase16, false); }

  bool operator==(const Hash& o) const {
    return algo_ == o.algo_ && bytes() == o.bytes();
  }
  bool operator<(const Hash& o) const;

 private:
  HashAlgo algo_;
  std::array<uint8_t, kMaxSize> bytes_{};
};

/// Hash of a byte string.
Hash hashString(HashAlgo algo, std::string_view data);

/// XOR-folds `hash` into `size` bytes (Nix's compressHash); store paths use
/// 20 bytes.
std::string foldHash(const Hash& hash, size_t size = 20);
/// foldHash into `out` (its size is the folded size), without a string.
void foldHashInto(const Hash& hash, std::span<char> out);

/// Incremental hashing; feed with update(), then finish() once.
class HashSink {
 public:
  explicit HashSink(HashAlgo algo);
  ~HashSink();
  HashSink(const HashSink&) = delete;
  HashSink& operator=(const HashSink&) = delete;

  void update(std::string_view data);
  /// The digest of everything fed so far; the sink cannot be reused.
  Hash finish();
  /// Bytes fed so far.
  uint64_t bytesHashed() const { return count_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  HashAlgo algo_;
  uint64_t count_ = 0;
};

}  // namespace kiln
