// `kiln key generate`: makes a CurveZMQ key pair for a scheduler or worker
// (docs/protocol.md, "Security").
#include <boost/program_options.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "command.h"
#include "kiln/common/error.h"
#include "kiln/protocol/keys.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

int keyGenerate(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln key generate [--out DIR] [--name NAME] [--force] "
      "[--json]\n\n"
      "Writes DIR/NAME.key (the secret key, mode 0600) and DIR/NAME.pub (the\n"
      "public key) and prints the public key. A worker's public key goes in\n"
      "the scheduler's allow-list; the scheduler's public key goes to every\n"
      "worker.\n\nOptions");
  std::string out = ".", name = "kiln";
  opts.add_options()("help,h", "show this help")(
      "out", po::value(&out), "directory for the key files (default: .)")(
      "name", po::value(&name), "base name of the key files (default: kiln)")(
      "force", "replace existing key files")("json", "print JSON");
  po::variables_map vm;
  std::vector<std::string> none;
  if (auto rc = parseCommandLine("key generate", opts, none, 0, args, vm, 0)) return *rc;
  if (name.empty() || name.find('/') != std::string::npos) {
    std::cerr << "kiln key generate: --name must be a plain file name\n";
    return kExitUsage;
  }
  return guarded("key generate", [&] {
    auto keys = protocol::generateKeyPair();
    protocol::writeKeyPair(keys, out, name, vm.count("force") > 0);
    if (vm.count("json")) {
      std::cout << nlohmann::json{{"publicKey", keys.publicKey},
                                  {"secretKeyFile", out + "/" + name + ".key"},
                                  {"publicKeyFile", out + "/" + name + ".pub"}}
                       .dump()
                << "\n";
    } else {
      std::cout << keys.publicKey << "\n";
    }
    return kExitOk;
  });
}

RegisterCommand reg("key generate",
                    "make a CurveZMQ key pair for a scheduler or worker",
                    keyGenerate);

}  // namespace
}  // namespace kiln::cli
