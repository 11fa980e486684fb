#include "kiln/common/hash.h"

// The low-level SHA-256 / SHA-1 / SHA-512 entry points are deprecated in OpenSSL
// 3 but still the direct path to the assembly block functions; see Digest.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstring>

#include "kiln/common/encoding.h"
#include "kiln/common/error.h"

namespace kiln {
namespace {

// The digest implementations, fetched once: with OpenSSL 3 every
// EVP_DigestInit with EVP_sha256() and friends fetches the algorithm again
// (a locked lookup), which dominated hashing many short strings. Fetched
// objects are immutable and shared by all threads; they live until exit.
const EVP_MD* evpFor(HashAlgo algo) {
  static const EVP_MD* const fetched[] = {
      EVP_MD_fetch(nullptr, "MD5", nullptr), EVP_MD_fetch(nullptr, "SHA1", nullptr),
      EVP_MD_fetch(nullptr, "SHA256", nullptr), EVP_MD_fetch(nullptr, "SHA512", nullptr)};
  const EVP_MD* md = fetched[static_cast<size_t>(algo)];
  if (!md) throw Error("cannot initialise " + std::string(hashAlgoName(algo)));
  return md;
}

// One digest in progress, for hashString (on the stack) and HashSink.
// SHA-1/256/512 go through OpenSSL's low-level functions: no EVP context
// allocated and set up per digest (that dominated hashing many short
// strings: store paths, derivation hashes), and no provider loaded (OpenSSL
// 3's first EVP digest loads its default provider, ~2 MB resident that an
// evaluation would pay). MD5 alone uses EVP.
class Digest {
 public:
  explicit Digest(HashAlgo algo) : algo_(algo) {
    bool ok = true;
    switch (algo) {
      case HashAlgo::kSha1: ok = SHA1_Init(&sha1_) == 1; break;
      case HashAlgo::kSha256: ok = SHA256_Init(&sha256_) == 1; break;
      case HashAlgo::kSha512: ok = SHA512_Init(&sha512_) == 1; break;
      case HashAlgo::kMd5:
        md5_ = EVP_MD_CTX_new();
        ok = md5_ && EVP_DigestInit_ex(md5_, evpFor(algo), nullptr);
        break;
    }
    if (!ok) throw Error("cannot initialise " + std::string(hashAlgoName(algo)));
  }
  ~Digest() { EVP_MD_CTX_free(md5_); }
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;

  void update(const void* data, size_t n) {
    switch (algo_) {
      case HashAlgo::kSha1: SHA1_Update(&sha1_, data, n); break;
      case HashAlgo::kSha256: SHA256_Update(&sha256_, data, n); break;
      case HashAlgo::kSha512: SHA512_Update(&sha512_, data, n); break;
      case HashAlgo::kMd5: EVP_DigestUpdate(md5_, data, n); break;
    }
  }
  /// Writes the digest to `out`; false when OpenSSL fails.
  bool finish(unsigned char* out) {
    unsigned len = 0;
    switch (algo_) {
      case HashAlgo::kSha1: return SHA1_Final(out, &sha1_) == 1;
      case HashAlgo::kSha256: return SHA256_Final(out, &sha256_) == 1;
      case HashAlgo::kSha512: return SHA512_Final(out, &sha512_) == 1;
      case HashAlgo::kMd5: return EVP_DigestFinal_ex(md5_, out, &len) == 1;
    }
    return false;
  }

 private:
  HashAlgo algo_;
  EVP_MD_CTX* md5_ = nullptr;  // MD5 only
  union {
    SHA_CTX sha1_;
    SHA256_CTX sha256_;
    SHA512_CTX sha512_;
  };
};

}  // namespace

std::string_view hashAlgoName(HashAlgo algo) {
  switch (algo) {
    case HashAlgo::kMd5: return "md5";
    case HashAlgo::kSha1: return "sha1";
    case HashAlgo::kSha256: return "sha256";
    case HashAlgo::kSha512: return "sha512";
  }
  return "sha256";
}

std::optional<HashAlgo> parseHashAlgo(std::string_view name) {
  if (name == "md5") return HashAlgo::kMd5;
  if (name == "sha1") return HashAlgo::kSha1;
  if (name == "sha256") return HashAlgo::kSha256;
  if (name == "sha512") return HashAlgo::kSha512;
  return std::nullopt;
}

size_t hashSize(HashAlgo algo) {
  switch (algo) {
    case HashAlgo::kMd5: return 16;
    case HashAlgo::kSha1: return 20;
    case HashAlgo::kSha256: return 32;
    case HashAlgo::kSha512: return 64;
  }
  return 32;
}

Hash::Hash(HashAlgo algo) : algo_(algo) {}

Hash::Hash(HashAlgo algo, std::string_view digest) : algo_(algo) {
  if (digest.size() != hashSize(algo))
    throw FormatError("digest of " + std::to_string(digest.size()) +
                      " bytes is not a valid " +
                      std::string(hashAlgoName(algo)) + " hash");
  std::memcpy(bytes_.data(), digest.data(), digest.size());
}

Hash Hash::parseBare(std::string_view text, HashAlgo algo) {
  size_t n = hashSize(algo);
  try {
    if (text.size() == 2 * n) return Hash(algo, base16Decode(text));
    if (text.size() == nix32Length(n)) return Hash(algo, nix32Decode(text, n));
    if (text.size() == base64Length(n)) return Hash(algo, base64Decode(text));
  } catch (const FormatError& e) {
    throw FormatError("invalid " + std::string(hashAlgoName(algo)) +
                      " hash '" + std::string(text) + "': " + e.what());
  }
  throw FormatError("hash '" + std::string(text) + "' has wrong length for " +
                    std::string(hashAlgoName(algo)) + " hash");
}

Hash Hash::parse(std::string_view text, std::optional<HashAlgo> algo) {
  auto colon = text.find(':');
  auto dash = text.find('-');
  bool sri = colon == std::string_view::npos && dash != std::string_view::npos;
  auto sep = sri ? dash : colon;
  if (sep == std::string_view::npos) {
    if (!algo)
      throw FormatError("hash '" + std::string(text) +
                        "' does not include a type");
    return parseBare(text, *algo);
  }
  auto name = text.substr(0, sep);
  auto parsed = parseHashAlgo(name);
  if (!parsed)
    throw FormatError("unknown hash algorithm '" + std::string(name) +
                      "' in '" + std::string(text) + "'");
  if (algo && *algo != *parsed)
    throw FormatError("hash '" + std::string(text) + "' should have type '" +
                      std::string(hashAlgoName(*algo)) + "'");
  auto digest = text.substr(sep + 1);
  if (!sri) return parseBare(digest, *parsed);
  try {
    return Hash(*parsed, base64Decode(digest, /*allowUnpadded=*/true));
  } catch (const FormatError& e) {
    throw FormatError("invalid SRI hash '" + std::string(text) +
                      "': " + e.what());
  }
}

std::string Hash::to(HashFormat format, bool withAlgo) const {
  std::string prefix(hashAlgoName(algo_));
  switch (format) {
    case HashFormat::kBase16:
      return (withAlgo ? prefix + ":" : "") + base16Encode(bytes());
    case HashFormat::kNix32:
      return (withAlgo ? prefix + ":" : "") + nix32Encode(bytes());
    case HashFormat::kBase64:
      return (withAlgo ? prefix + ":" : "") + base64Encode(bytes());
    case HashFormat::kSri:
      return prefix + "-" + base64Encode(bytes());
  }
  return {};
}

bool Hash::operator<(const Hash& o) const {
  if (algo_ != o.algo_) return algo_ < o.algo_;
  return bytes() < o.bytes();
}

Hash hashString(HashAlgo algo, std::string_view data) {
  Hash h(algo);
  Digest d(algo);
  d.update(data.data(), data.size());
  if (!d.finish(h.data())) throw Error("cannot compute " + std::string(hashAlgoName(algo)));
  return h;
}

void foldHashInto(const Hash& hash, std::span<char> out) {
  std::fill(out.begin(), out.end(), '\0');
  auto in = hash.bytes();
  for (size_t i = 0; i < in.size(); ++i)
    out[i % out.size()] = static_cast<char>(out[i % out.size()] ^ in[i]);
}

std::string foldHash(const Hash& hash, size_t size) {
  std::string out(size, '\0');
  foldHashInto(hash, out);
  return out;
}

struct HashSink::Impl {
  explicit Impl(HashAlgo algo) : digest(algo) {}
  Digest digest;
};

HashSink::HashSink(HashAlgo algo) : impl_(new Impl(algo)), algo_(algo) {}

HashSink::~HashSink() = default;

void HashSink::update(std::string_view data) {
  count_ += data.size();
  impl_->digest.update(data.data(), data.size());
}

Hash HashSink::finish() {
  Hash h(algo_);
  impl_->digest.finish(h.data());
  return h;
}

}  // namespace kiln
