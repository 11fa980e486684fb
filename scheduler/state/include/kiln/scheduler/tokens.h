#pragma once
/// API tokens (docs/web.md, "Access"): bearer secrets with a scope that the
/// web checks before a mutation (or, with private reads, any read). The
/// state database keeps each token's SHA-256(salt || secret) with a random
/// per-token salt, never the secret; a token is found by its public key id
/// (part of the secret's text) and compared in constant time. `kiln token`
/// makes the secret and hands the scheduler only the salt and hash, through
/// the request path (`token-create`, `token-list`, `token-revoke`).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/scheduler/sql.h"

namespace kiln {
}  // namespace kiln

namespace kiln::scheduler {

class RequestTable;
class StateDb;

/// What a token may do; each scope includes the ones before it.
enum class TokenScope { kRead = 0, kOperate = 1, kAdmin = 2 };

/// "read", "operate" or "admin".
std::string_view tokenScopeName(TokenScope scope);
/// The scope named `name`, or nullopt.
std::optional<TokenScope> parseTokenScope(std::string_view name);
/// Whether a token of scope `have` may do what needs `need`.
inline bool scopeAllows(TokenScope have, TokenScope need) {
  return static_cast<int>(have) >= static_cast<int>(need);
}

/// A freshly made token: the secret to show once, and what is stored.
struct NewToken {
  std::string secret;  ///< "kiln_<keyId>_<64 hex digits>", shown once
  std::string keyId;   ///< 16 hex digits, public (listings, lookup)
  std::string salt;    ///< 32 hex digits
  std::string hash;    ///< hex SHA-256 of salt || secret
};

/// Makes a token from OpenSSL's random generator (256-bit secret, 128-bit
/// salt). Throws Error if the generator fails.
NewToken generateToken();
/// Hex SHA-256 of `salt` followed by `secret`.
std::string hashTokenSecret(std::string_view salt, std::string_view secret);

/// A stored token (no secret).
struct TokenRow {
  int64_t id = 0;
  std::string keyId;
  std::string name;
  TokenScope scope = TokenScope::kRead;
  std::string salt;
  std::string hash;
  int64_t createdMs = 0;
  int64_t revokedMs = 0;  ///< 0 while valid
};

/// The `api_tokens` table (schema migration 6) of a borrowed state
/// database (a read-only one may check tokens). Not thread-safe, like the
/// database. Throws SqlError; SchedulerStateError for a duplicate key
/// id or malformed row fields.
class TokenStore {
 public:
  /// Works on `db`, which must outlive this object.
  explicit TokenStore(StateDb& db);
  /// Inserts `t` (its id is ignored); returns the new id.
  int64_t add(const TokenRow& t);
  /// Every token, revoked ones too, by id (at most 10,000).
  std::vector<TokenRow> list();
  /// Marks token `id` revoked at `nowMs`; false if there is none or it
  /// already was.
  bool revoke(int64_t id, int64_t nowMs);
  /// The scope of the unrevoked token whose secret is `token`, or nullopt
  /// (unknown, revoked, malformed). Compares hashes in constant time.
  std::optional<TokenScope> check(std::string_view token);

 private:
  std::optional<TokenRow> byKey(const std::string& keyId);
  SqlConnection& db_;
};

/// Adds `token-create` (scope, keyId, salt, hash, name), `token-list` and
/// `token-revoke` (id) to `t`, working on `db` with `clock`'s time; both are
/// borrowed for the table's life.
void addTokenRequests(RequestTable& t, StateDb& db, const Clock& clock);

}  // namespace kiln::scheduler
