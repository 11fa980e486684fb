// API tokens: making, hashing, storing and checking them (tokens.h).
#include "kiln/scheduler/tokens.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <regex>

#include "kiln/common/encoding.h"
#include "kiln/common/hash.h"
#include "kiln/scheduler/requests.h"
#include "kiln/scheduler/state_db.h"
#include "state_rows.h"

namespace kiln::scheduler {

using nlohmann::json;

namespace {

constexpr const char* kCols =
    "id, key_id, name, scope, salt, hash, created, revoked";
constexpr size_t kMaxName = 200;

std::string randomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()),
                 static_cast<int>(raw.size())) != 1)
    throw Error("OpenSSL's random generator failed to make a token");
  return base16Encode(raw);
}

bool isHex(std::string_view s, size_t size) {
  if (s.size() != size) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

TokenRow readRow(const SqlStmt& s) {
  TokenRow r;
  r.id = s.getInt(0);
  r.keyId = s.getStr(1);
  r.name = s.getStr(2);
  r.scope = parseTokenScope(s.getStr(3)).value_or(TokenScope::kRead);
  r.salt = s.getStr(4);
  r.hash = s.getStr(5);
  r.createdMs = s.getInt(6);
  r.revokedMs = s.getInt(7);
  return r;
}

json tokenJson(const TokenRow& t) {
  return {{"id", t.id},
          {"keyId", t.keyId},
          {"name", t.name},
          {"scope", std::string(tokenScopeName(t.scope))},
          {"createdMs", t.createdMs},
          {"revokedMs", t.revokedMs}};
}

json createToken(StateDb& db, const Clock& clock, const json& a) {
  TokenRow t;
  auto scope = parseTokenScope(strArg(a, "scope"));
  if (!scope)
    throw SchedulerStateError("scope must be read, operate or admin, not '" +
                              strArg(a, "scope") + "'");
  t.scope = *scope;
  t.keyId = strArg(a, "keyId");
  t.salt = strArg(a, "salt");
  t.hash = strArg(a, "hash");
  t.name = strArg(a, "name");
  if (!isHex(t.keyId, 16) || !isHex(t.salt, 32) || !isHex(t.hash, 64))
    throw SchedulerStateError(
        "keyId, salt and hash must be 16, 32 and 64 lowercase hex digits");
  if (t.name.size() > kMaxName)
    throw SchedulerStateError("token name longer than 200 bytes");
  t.createdMs = clock.nowMs();
  t.id = TokenStore(db).add(t);
  return tokenJson(t);
}

}  // namespace

std::string_view tokenScopeName(TokenScope scope) {
  switch (scope) {
    case TokenScope::kRead:
      return "read";
    case TokenScope::kOperate:
      return "operate";
    case TokenScope::kAdmin:
      return "admin";
  }
  return "read";
}

std::optional<TokenScope> parseTokenScope(std::string_view name) {
  for (auto s : {TokenScope::kRead, TokenScope::kOperate, TokenScope::kAdmin})
    if (tokenScopeName(s) == name) return s;
  return std::nullopt;
}

std::string hashTokenSecret(std::string_view salt, std::string_view secret) {
  std::string data(salt);
  data += secret;
  return hashString(HashAlgo::kSha256, data).toHex();
}

NewToken generateToken() {
  NewToken t;
  t.keyId = randomHex(8);
  t.salt = randomHex(16);
  t.secret = "kiln_" + t.keyId + "_" + randomHex(32);
  t.hash = hashTokenSecret(t.salt, t.secret);
  return t;
}

TokenStore::TokenStore(StateDb& db) : db_(db.db()) {}

int64_t TokenStore::add(const TokenRow& t) {
  if (byKey(t.keyId))
    throw SchedulerStateError("a token with key id " + t.keyId +
                              " already exists");
  return detail::insertedId(
      db_.prepare("INSERT INTO api_tokens (key_id, name, scope, salt, hash, "
                  "created) "
                  "VALUES (?, ?, ?, ?, ?, ?) RETURNING id")
          .bind(t.keyId)
          .bind(t.name)
          .bind(std::string(tokenScopeName(t.scope)))
          .bind(t.salt)
          .bind(t.hash)
          .bind(t.createdMs));
}

std::vector<TokenRow> TokenStore::list() {
  auto s = db_.prepare(std::string("SELECT ") + kCols +
                       " FROM api_tokens ORDER BY id LIMIT 10000");
  std::vector<TokenRow> out;
  while (s.step()) out.push_back(readRow(s));
  return out;
}

bool TokenStore::revoke(int64_t id, int64_t nowMs) {
  db_.prepare("UPDATE api_tokens SET revoked = ? WHERE id = ? AND revoked = 0")
      .bind(nowMs)
      .bind(id)
      .exec();
  return db_.changes() > 0;
}

std::optional<TokenRow> TokenStore::byKey(const std::string& keyId) {
  auto s = db_.prepare(std::string("SELECT ") + kCols +
                       " FROM api_tokens WHERE key_id = ?");
  s.bind(keyId);
  if (!s.step()) return std::nullopt;
  return readRow(s);
}

std::optional<TokenScope> TokenStore::check(std::string_view token) {
  // "kiln_" + 16 hex + "_" + 64 hex.
  if (token.size() != 86 || token.substr(0, 5) != "kiln_" || token[21] != '_' ||
      !isHex(token.substr(5, 16), 16) || !isHex(token.substr(22), 64))
    return std::nullopt;
  auto row = byKey(std::string(token.substr(5, 16)));
  if (!row || row->revokedMs != 0 || row->hash.size() != 64)
    return std::nullopt;
  std::string h = hashTokenSecret(row->salt, token);
  if (CRYPTO_memcmp(h.data(), row->hash.data(), h.size()) != 0)
    return std::nullopt;
  return row->scope;
}

void addTokenRequests(RequestTable& t, StateDb& db, const Clock& clock) {
  t.set({"token-create",
         "store an API token's salted hash (kiln token create makes it)",
         {{"scope", ArgType::kString, true, "read, operate or admin"},
          {"keyId", ArgType::kString, true, "16 hex digits"},
          {"salt", ArgType::kString, true, "32 hex digits"},
          {"hash", ArgType::kString, true, "hex SHA-256 of salt || secret"},
          {"name", ArgType::kString, false, "what the token is for"}},
         [&db, &clock](const json& a) { return createToken(db, clock, a); }});
  t.set({"token-list",
         "API tokens (never their secrets)",
         {},
         [&db](const json&) {
           json out = json::array();
           for (auto& row : TokenStore(db).list())
             out.push_back(tokenJson(row));
           return out;
         }});
  t.set({"token-revoke",
         "revoke an API token",
         {{"id", ArgType::kInt, true, "the token's id (kiln token list)"}},
         [&db, &clock](const json& a) {
           int64_t id = intArg(a, "id");
           if (!TokenStore(db).revoke(id, clock.nowMs()))
             throw SchedulerStateError("no unrevoked token with id " +
                                       std::to_string(id));
           return json{{"id", id}, {"revoked", true}};
         }});
}

}  // namespace kiln::scheduler
