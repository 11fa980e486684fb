// `kiln token create|list|revoke`: API tokens for the web's mutations and
// private reads (docs/web.md, "Access"). The secret is made here and
// printed once; the scheduler stores only its salt and hash, through the
// request path (applied at once when no scheduler runs).
#include <boost/program_options.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "database_options.h"
#include "kiln/scheduler/service.h"
#include "kiln/scheduler/tokens.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;
using nlohmann::json;

// Parses the common options plus `extra`; fills `stateDir`, `asJson`.
std::optional<int> parseTokenArgs(const std::string& name,
                                  po::options_description& opts,
                                  std::vector<std::string>& paths, int maxPaths,
                                  const std::vector<std::string>& args,
                                  po::variables_map& vm, std::string& stateDir,
                                  DatabaseOptions& database) {
  opts.add_options()("help,h", "show this help")(
      "state-dir", po::value(&stateDir), "the scheduler's state directory")(
      "json", "print JSON");
  database.add(opts);
  if (auto rc =
          parseCommandLine(name, opts, paths, maxPaths, args, vm, maxPaths))
    return rc;
  if (stateDir.empty() && database.url.empty()) {
    std::cerr << "kiln " << name
              << ": give --state-dir DIR|--database URL or --database URL\n"
              << opts;
    return kExitUsage;
  }
  return std::nullopt;
}

int tokenCreate(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln token create --state-dir DIR|--database URL --scope "
      "read|operate|admin "
      "[--name N] [--json]\n\n"
      "Makes an API token and prints its secret (shown only this once). The\n"
      "scheduler keeps only a salted hash of it.\n\nOptions");
  std::string stateDir, scope, name;
  DatabaseOptions database;
  opts.add_options()("scope", po::value(&scope),
                     "read, operate (builds, evaluations) or admin "
                     "(projects, jobsets)")("name", po::value(&name),
                                            "what the token is for (listings)");
  po::variables_map vm;
  std::vector<std::string> none;
  if (auto rc = parseTokenArgs("token create", opts, none, 0, args, vm,
                               stateDir, database))
    return *rc;
  if (!scheduler::parseTokenScope(scope)) {
    std::cerr << "kiln token create: --scope must be read, operate or admin\n";
    return kExitUsage;
  }
  return guarded("token create", [&] {
    auto t = scheduler::generateToken();
    json r = scheduler::submitRequest(database.spec(stateDir), stateDir,
                                      "token-create",
                                      {{"scope", scope},
                                       {"name", name},
                                       {"keyId", t.keyId},
                                       {"salt", t.salt},
                                       {"hash", t.hash}});
    if (vm.count("json")) {
      r["token"] = t.secret;
      std::cout << r.dump() << "\n";
    } else {
      std::cout << t.secret << "\n";
      std::cerr << "token " << r.value("id", 0) << " (" << scope
                << "): keep the secret above, it is not stored\n";
    }
    return kExitOk;
  });
}

int tokenList(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln token list --state-dir DIR|--database URL [--json]\n\n"
      "Lists API tokens: id, scope, key id, state, name (never "
      "secrets).\n\nOptions");
  std::string stateDir;
  DatabaseOptions database;
  po::variables_map vm;
  std::vector<std::string> none;
  if (auto rc = parseTokenArgs("token list", opts, none, 0, args, vm, stateDir,
                               database))
    return *rc;
  return guarded("token list", [&] {
    json r = scheduler::submitRequest(database.spec(stateDir), stateDir,
                                      "token-list", json::object());
    if (vm.count("json")) {
      std::cout << r.dump() << "\n";
      return kExitOk;
    }
    for (auto& t : r)
      std::cout << t.value("id", 0) << "\t" << t.value("scope", "") << "\t"
                << t.value("keyId", "") << "\t"
                << (t.value("revokedMs", 0) ? "revoked" : "valid") << "\t"
                << t.value("name", "") << "\n";
    return kExitOk;
  });
}

int tokenRevoke(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln token revoke --state-dir DIR|--database URL ID [--json]\n\n"
      "Revokes API token ID (from kiln token list): the web refuses it at "
      "once.\n\nOptions");
  std::string stateDir;
  DatabaseOptions database;
  po::variables_map vm;
  std::vector<std::string> ids;
  if (auto rc = parseTokenArgs("token revoke", opts, ids, 1, args, vm, stateDir,
                               database))
    return *rc;
  int64_t id = 0;
  try {
    size_t used = 0;
    id = std::stoll(ids.at(0), &used);
    if (used != ids[0].size() || id <= 0) throw std::invalid_argument("id");
  } catch (const std::exception&) {
    std::cerr << "kiln token revoke: ID must be a positive integer\n";
    return kExitUsage;
  }
  return guarded("token revoke", [&] {
    try {
      json r = scheduler::submitRequest(database.spec(stateDir), stateDir,
                                        "token-revoke", {{"id", id}});
      if (vm.count("json")) std::cout << r.dump() << "\n";
      return kExitOk;
    } catch (const scheduler::SchedulerStateError& e) {
      std::cerr << "kiln token revoke: " << e.what() << "\n";
      return kExitNotFound;
    }
  });
}

RegisterCommand regCreate("token create",
                          "make an API token (read, operate or admin)",
                          tokenCreate);
RegisterCommand regList("token list", "list API tokens", tokenList);
RegisterCommand regRevoke("token revoke", "revoke an API token", tokenRevoke);

}  // namespace
}  // namespace kiln::cli
