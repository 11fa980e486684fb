#pragma once
// The API tokens a `kiln serve` configuration declares (`[[token]]`), kept
// in the scheduler's state: each token's secret lives in a file of the
// operator's (made on first start when missing), the state keeps only its
// salted hash, as for `kiln token create`.

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "farm_config.h"
#include "kiln/scheduler/tokens.h"

namespace kiln::cli {

/// The state's name of the declared token `name` ("config:NAME"); tokens
/// of other names (`kiln token create`) are never touched.
std::string declaredTokenName(const std::string& name);

/// The secret of `t`: the first line of t.secretFile, which must be a
/// token (`kiln_<16 hex>_<64 hex>`, as `kiln token create` prints); when
/// the file does not exist, a new token is made and written there (mode
/// 0600; its folder must exist). Throws Error naming the file otherwise.
std::string declaredTokenSecret(const ConfiguredToken& t);

/// Requests that make the state's tokens match the declared ones.
struct TokenPlan {
  /// (kind, arguments) of token-create / token-revoke, in order.
  std::vector<std::pair<std::string, nlohmann::json>> requests;
  std::vector<std::string> changes;   ///< one line per token added/revoked
  std::vector<std::string> problems;  ///< declared tokens not kept
};

/// Plans, from the declared tokens with their secrets and the state's
/// rows: a token-create (salt from `newSalt`) for a secret the state does
/// not know; nothing for one stored with the same hash, name and scope; a
/// token-revoke plus a problem for one whose scope changed (a token's
/// scope is fixed: a new secret is needed) and a problem for one revoked
/// or whose hash differs; a token-revoke for each unrevoked "config:*"
/// token no longer declared.
TokenPlan planTokens(
    const std::vector<std::pair<ConfiguredToken, std::string>>& declared,
    const std::vector<scheduler::TokenRow>& rows,
    const std::function<std::string()>& newSalt);

}  // namespace kiln::cli
