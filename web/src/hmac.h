#pragma once
// Signatures of webhooks (api_eval.cc's push webhook, forge_events.cc's
// forge webhooks): HMAC-SHA256 through OpenSSL and comparisons that take
// the same time whatever the bytes.

#include <string>
#include <string_view>

namespace kiln::web {

/// The lower-case hex HMAC-SHA256 of `message` under `key`.
std::string hmacSha256Hex(std::string_view key, std::string_view message);

/// Whether `a` and `b` are equal, in time independent of their bytes (and,
/// by comparing their SHA-256 digests, of where they first differ and of
/// the secret's length).
bool constantTimeEquals(std::string_view a, std::string_view b);

}  // namespace kiln::web
