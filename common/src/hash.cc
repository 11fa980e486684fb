#include "kiln/common/hash.h"

// The low-level SHA-256 / SHA-1 / SHA-512 entry points are deprecated in OpenSSL
// 3 but still the direct path to the assembly block functions; see
// hashString.
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

// A digest of `n` bytes at `in` into `out` through the low-level functions.
template <class Ctx, int (*Init)(Ctx*), int (*Update)(Ctx*, const void*, size_t),
          int (*Final)(unsigned char*, Ctx*)>
void oneShot(const unsigned char* in, size_t n, unsigned char* out) {
  Ctx c;
  Init(&c);
  Update(&c, in, n);
  Final(out, &c);
}

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
  auto* in = reinterpret_cast<const unsigned char*>(data.data());
  // One-shot digests of short strings (store paths, derivation hashes) are
  // dominated by EVP_Digest's per-call context allocation and provider
  // setup; the low-level functions hash on the stack.
  switch (algo) {
    case HashAlgo::kSha256:
      oneShot<SHA256_CTX, SHA256_Init, SHA256_Update, SHA256_Final>(in, data.size(), h.data());
      return h;
    case HashAlgo::kSha1:
      oneShot<SHA_CTX, SHA1_Init, SHA1_Update, SHA1_Final>(in, data.size(), h.data());
      return h;
    case HashAlgo::kSha512:
      oneShot<SHA512_CTX, SHA512_Init, SHA512_Update, SHA512_Final>(in, data.size(), h.data());
      return h;
    case HashAlgo::kMd5: break;
  }
  unsigned len = 0;
  if (!EVP_Digest(data.data(), data.size(), h.data(), &len, evpFor(algo), nullptr))
    throw Error("cannot compute " + std::string(hashAlgoName(algo)));
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

// SHA-1/256/512 stream through the low-level functions as hashString
// does: the first EVP digest of a process loads OpenSSL 3's default
// provider, ~2 MB resident that an evaluation hashing paths would pay.
struct HashSink::Impl {
  EVP_MD_CTX* ctx = nullptr;  // MD5 only
  SHA_CTX sha1;
  SHA256_CTX sha256;
  SHA512_CTX sha512;
};

HashSink::HashSink(HashAlgo algo) : impl_(new Impl), algo_(algo) {
  bool ok = true;
  switch (algo) {
    case HashAlgo::kSha1: ok = SHA1_Init(&impl_->sha1) == 1; break;
    case HashAlgo::kSha256: ok = SHA256_Init(&impl_->sha256) == 1; break;
    case HashAlgo::kSha512: ok = SHA512_Init(&impl_->sha512) == 1; break;
    case HashAlgo::kMd5:
      impl_->ctx = EVP_MD_CTX_new();
      ok = impl_->ctx && EVP_DigestInit_ex(impl_->ctx, evpFor(algo), nullptr);
      break;
  }
  if (!ok) throw Error("cannot initialise " + std::string(hashAlgoName(algo)));
}

HashSink::~HashSink() { EVP_MD_CTX_free(impl_->ctx); }

void HashSink::update(std::string_view data) {
  count_ += data.size();
  switch (algo_) {
    case HashAlgo::kSha1: SHA1_Update(&impl_->sha1, data.data(), data.size()); break;
    case HashAlgo::kSha256: SHA256_Update(&impl_->sha256, data.data(), data.size()); break;
    case HashAlgo::kSha512: SHA512_Update(&impl_->sha512, data.data(), data.size()); break;
    case HashAlgo::kMd5: EVP_DigestUpdate(impl_->ctx, data.data(), data.size()); break;
  }
}

Hash HashSink::finish() {
  Hash h(algo_);
  switch (algo_) {
    case HashAlgo::kSha1: SHA1_Final(h.data(), &impl_->sha1); break;
    case HashAlgo::kSha256: SHA256_Final(h.data(), &impl_->sha256); break;
    case HashAlgo::kSha512: SHA512_Final(h.data(), &impl_->sha512); break;
    case HashAlgo::kMd5: {
      unsigned len = 0;
      EVP_DigestFinal_ex(impl_->ctx, h.data(), &len);
      break;
    }
  }
  return h;
}

}  // namespace kiln
