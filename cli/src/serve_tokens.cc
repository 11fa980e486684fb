// The declared API tokens of `kiln serve` (serve_tokens.h).
#include "serve_tokens.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "kiln/common/error.h"
#include "kiln/common/file.h"

namespace kiln::cli {
namespace {

bool isLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

// "kiln_" + 16 hex + "_" + 64 hex, as scheduler::generateToken makes.
bool validSecret(std::string_view s) {
  return s.size() == 86 && s.substr(0, 5) == "kiln_" && s[21] == '_' &&
         isLowerHex(s.substr(5, 16)) && isLowerHex(s.substr(22));
}

// Writes a new token's secret to `path`, which must not exist.
std::string makeSecretFile(const std::string& path) {
  std::string secret = scheduler::generateToken().secret;
  AutoCloseFD fd(::open(path.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                        0600));
  if (!fd) throwSysError("creating the token secret file '" + path + "'");
  writeAll(fd.get(), secret + "\n");
  return secret;
}

}  // namespace

std::string declaredTokenName(const std::string& name) {
  return "config:" + name;
}

std::string declaredTokenSecret(const ConfiguredToken& t) {
  const std::string& f = t.secretFile;
  AutoCloseFD fd(::open(f.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd && errno == ENOENT) return makeSecretFile(f);
  if (!fd) throwSysError("reading the token secret file '" + f + "'");
  char buf[256];
  ssize_t n = ::read(fd.get(), buf, sizeof buf);
  if (n < 0) throwSysError("reading the token secret file '" + f + "'");
  std::string text(buf, static_cast<size_t>(n));
  std::string secret = text.substr(0, text.find_first_of("\r\n"));
  if (!validSecret(secret))
    throw Error("token " + t.name + ": " + f +
                " does not hold a token (kiln_<16 hex>_<64 hex> on its first "
                "line, as `kiln token create` prints); delete it to have one "
                "made");
  return secret;
}

TokenPlan planTokens(
    const std::vector<std::pair<ConfiguredToken, std::string>>& declared,
    const std::vector<scheduler::TokenRow>& rows,
    const std::function<std::string()>& newSalt) {
  TokenPlan plan;
  std::set<std::string> kept;  // key ids of declared tokens
  for (auto& [t, secret] : declared) {
    std::string keyId = secret.substr(5, 16), name = declaredTokenName(t.name);
    auto row = std::find_if(rows.begin(), rows.end(),
                            [&](auto& r) { return r.keyId == keyId; });
    kept.insert(keyId);
    if (row == rows.end()) {
      std::string salt = newSalt();
      plan.requests.push_back(
          {"token-create",
           {{"scope", t.scope},
            {"name", name},
            {"keyId", keyId},
            {"salt", salt},
            {"hash", scheduler::hashTokenSecret(salt, secret)}}});
      plan.changes.push_back("added token " + t.name + " (" + t.scope + ")");
    } else if (row->revokedMs != 0) {
      plan.problems.push_back("token " + t.name + ": the secret in " +
                              t.secretFile + " was revoked; delete the file " +
                              "to have a new one made");
    } else if (scheduler::hashTokenSecret(row->salt, secret) != row->hash) {
      plan.problems.push_back("token " + t.name + ": key id " + keyId + " of " +
                              t.secretFile + " belongs to another " +
                              "token (" + row->name + "); not used");
    } else if (row->name != name) {
      plan.problems.push_back("token " + t.name + ": its secret is stored as " +
                              row->name + " (a token's name is fixed); it " +
                              "keeps working under that name");
    } else if (scheduler::tokenScopeName(row->scope) != t.scope) {
      plan.requests.push_back({"token-revoke", {{"id", row->id}}});
      plan.problems.push_back(
          "token " + t.name + ": its scope changed from " +
          std::string(scheduler::tokenScopeName(row->scope)) + " to " +
          t.scope + "; a token's scope is fixed, so it is revoked: delete " +
          t.secretFile + " to have a new secret made");
    }
  }
  std::string prefix = declaredTokenName("");
  for (auto& r : rows)
    if (r.revokedMs == 0 && r.name.rfind(prefix, 0) == 0 &&
        !kept.count(r.keyId)) {
      plan.requests.push_back({"token-revoke", {{"id", r.id}}});
      plan.changes.push_back("revoked token " + r.name.substr(prefix.size()) +
                             " (no longer declared)");
    }
  return plan;
}

}  // namespace kiln::cli
