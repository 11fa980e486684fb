#include "kiln/store/signature.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

#include "kiln/common/encoding.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"

namespace kiln::store {
namespace {

constexpr size_t kKeyBytes = 32;
constexpr size_t kSigBytes = 64;

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

const unsigned char* u8(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

PkeyPtr privateKeyFromSeed(std::string_view seed) {
  PkeyPtr k(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, u8(seed),
                                         seed.size()));
  if (!k) throw Error("OpenSSL cannot load an Ed25519 private key");
  return k;
}

std::string publicFromSeed(std::string_view seed) {
  auto k = privateKeyFromSeed(seed);
  std::string pub(kKeyBytes, '\0');
  size_t len = pub.size();
  if (EVP_PKEY_get_raw_public_key(
          k.get(), reinterpret_cast<unsigned char*>(pub.data()), &len) != 1 ||
      len != kKeyBytes)
    throw Error("OpenSSL cannot derive an Ed25519 public key");
  return pub;
}

/// Throws FormatError (prefixed with `what`) unless `name` is a usable key
/// name: non-empty, printable ASCII without spaces or ':'.
void checkKeyName(std::string_view name, std::string_view what) {
  if (name.empty())
    throw FormatError(std::string(what) + " has an empty key name");
  for (unsigned char c : name)
    if (c <= ' ' || c >= 0x7f || c == ':')
      throw FormatError(
          std::string(what) + " '" + std::string(name) +
          "' has a key name with a space, ':' or control character");
}

/// Splits `<name>:<base64>` and decodes it into `size` bytes. Key material
/// never appears in errors; with `quoteText` (signatures) the text does.
std::pair<std::string, std::string> splitNamed(std::string_view text,
                                               size_t size,
                                               std::string_view what,
                                               bool quoteText) {
  while (!text.empty() && isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  while (!text.empty() && isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  auto colon = text.find(':');
  std::string name(text.substr(0, colon));
  auto bad = [&](const std::string& why) {
    std::string shown = quoteText ? std::string(text) : name;
    return FormatError(std::string(what) +
                       (shown.empty() ? "" : " '" + shown + "'") + " " + why);
  };
  if (colon == std::string_view::npos) {
    name.clear();
    throw bad("is not of the form <name>:<base64>");
  }
  checkKeyName(name, what);
  std::string bytes;
  try {
    bytes = base64Decode(text.substr(colon + 1));
  } catch (const FormatError& e) {
    throw bad(std::string("has bad base64") +
              (quoteText ? std::string(": ") + e.what() : ""));
  }
  if (bytes.size() != size)
    throw bad(
        "holds " + std::to_string(bytes.size()) + " bytes instead of " +
        std::to_string(size) +
        (bytes.size() == 64 && size == 32 ? " (is it a secret key?)" : ""));
  return {std::move(name), std::move(bytes)};
}

}  // namespace

PublicKey::PublicKey(std::string name, std::string key)
    : name_(std::move(name)), key_(std::move(key)) {
  if (key_.size() != kKeyBytes)
    throw FormatError("public key '" + name_ + "' is not 32 bytes");
}

PublicKey PublicKey::parse(std::string_view text) {
  auto [name, key] = splitNamed(text, kKeyBytes, "public key", false);
  return PublicKey(std::move(name), std::move(key));
}

std::string PublicKey::toString() const {
  return name_ + ":" + base64Encode(key_);
}

bool PublicKey::verifyRaw(std::string_view data, std::string_view sig) const {
  if (sig.size() != kSigBytes) return false;
  PkeyPtr k(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, u8(key_),
                                        key_.size()));
  if (!k) return false;  // not a point on the curve
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) throw Error("OpenSSL cannot allocate a digest context");
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, k.get()) != 1)
    return false;
  return EVP_DigestVerify(ctx.get(), u8(sig), sig.size(), u8(data),
                          data.size()) == 1;
}

SecretKey SecretKey::parse(std::string_view text) {
  auto [name, bytes] = splitNamed(text, 2 * kKeyBytes, "secret key", false);
  std::string seed = bytes.substr(0, kKeyBytes);
  std::string pub = bytes.substr(kKeyBytes);
  if (publicFromSeed(seed) != pub)
    throw FormatError("secret key '" + name +
                      "' is corrupt: its public half does not match its seed");
  return SecretKey(std::move(name), std::move(seed), std::move(pub));
}

SecretKey SecretKey::generate(std::string_view name) {
  checkKeyName(name, "new key");
  std::string seed(kKeyBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(seed.data()),
                 static_cast<int>(seed.size())) != 1)
    throw Error("OpenSSL's random generator failed");
  auto pub = publicFromSeed(seed);
  return SecretKey(std::string(name), std::move(seed), std::move(pub));
}

std::string SecretKey::toString() const {
  return name_ + ":" + base64Encode(seed_ + pub_);
}

PublicKey SecretKey::toPublicKey() const { return PublicKey(name_, pub_); }

std::string SecretKey::sign(std::string_view data) const {
  auto k = privateKeyFromSeed(seed_);
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) throw Error("OpenSSL cannot allocate a digest context");
  std::string sig(kSigBytes, '\0');
  size_t len = sig.size();
  if (EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, k.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()),
                     &len, u8(data), data.size()) != 1 ||
      len != kSigBytes)
    throw Error("OpenSSL failed to sign with key '" + name_ + "'");
  return name_ + ":" + base64Encode(sig);
}

Signature Signature::parse(std::string_view text) {
  auto [name, bytes] = splitNamed(text, kSigBytes, "signature", true);
  return Signature{std::move(name), std::move(bytes)};
}

void PublicKeys::add(PublicKey key) {
  auto name = key.name();
  keys_.insert_or_assign(std::move(name), std::move(key));
}

bool PublicKeys::verify(std::string_view data, std::string_view sig) const {
  Signature s;
  try {
    s = Signature::parse(sig);
  } catch (const FormatError&) {
    return false;
  }
  auto it = keys_.find(s.keyName);
  return it != keys_.end() && it->second.verifyRaw(data, s.bytes);
}

std::string pathFingerprint(const StoreDir& dir, const StorePath& path,
                            const Hash& narHash, uint64_t narSize,
                            const StorePathSet& refs) {
  if (narHash.algo() != HashAlgo::kSha256)
    throw Error("cannot fingerprint '" + dir.printPath(path) +
                "': its NAR hash is not sha256");
  std::string fp = "1;" + dir.printPath(path) + ";" + narHash.toNix32() + ";" +
                   std::to_string(narSize) + ";";
  bool first = true;
  for (auto& r : refs) {
    if (!first) fp += ",";
    fp += dir.printPath(r);
    first = false;
  }
  return fp;
}

SecretKey readSecretKeyFile(const std::string& path) {
  try {
    return SecretKey::parse(readFile(path));
  } catch (const FormatError& e) {
    throw FormatError("secret key file '" + path + "': " + e.what());
  }
}

PublicKey readPublicKeyFile(const std::string& path) {
  try {
    return PublicKey::parse(readFile(path));
  } catch (const FormatError& e) {
    throw FormatError("public key file '" + path + "': " + e.what());
  }
}

}  // namespace kiln::store
