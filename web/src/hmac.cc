// HMAC-SHA256 and constant-time comparison (hmac.h).
#include "hmac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "kiln/common/encoding.h"
#include "kiln/common/error.h"

namespace kiln::web {

std::string hmacSha256Hex(std::string_view key, std::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(message.data()),
            message.size(), mac, &len))
    throw Error("HMAC-SHA256 failed");
  return base16Encode(std::string_view(reinterpret_cast<char*>(mac), len));
}

bool constantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char da[SHA256_DIGEST_LENGTH], db[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(a.data()), a.size(), da);
  SHA256(reinterpret_cast<const unsigned char*>(b.data()), b.size(), db);
  return CRYPTO_memcmp(da, db, sizeof da) == 0;
}

}  // namespace kiln::web
