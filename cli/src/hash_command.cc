// `kiln hash-string`: hashes its argument; a quick check of the hash
// encodings (the store issue adds `kiln store hash` for trees).
#include <boost/program_options.hpp>
#include <iostream>

#include "cli_common.h"
#include "command.h"
#include "kiln/common/hash.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

int hashString(const std::vector<std::string>& args) {
  po::options_description opts("Usage: kiln hash-string [--type ALGO] [--format F] STRING\n\nOptions");
  std::string type = "sha256", format = "nix32";
  opts.add_options()("help,h", "show this help")(
      "type", po::value(&type), "md5, sha1, sha256 (default) or sha512")(
      "format", po::value(&format), "base16, nix32 (default), base64 or sri");
  std::vector<std::string> strings;
  po::variables_map vm;
  if (auto rc = parseCommandLine("hash-string", opts, strings, 1, args, vm)) return *rc;
  const std::string& input = strings[0];
  auto algo = parseHashAlgo(type);
  if (!algo) {
    std::cerr << "kiln hash-string: unknown hash type '" << type << "'\n";
    return kExitUsage;
  }
  HashFormat f;
  if (format == "base16") f = HashFormat::kBase16;
  else if (format == "nix32") f = HashFormat::kNix32;
  else if (format == "base64") f = HashFormat::kBase64;
  else if (format == "sri") f = HashFormat::kSri;
  else {
    std::cerr << "kiln hash-string: unknown format '" << format << "'\n";
    return kExitUsage;
  }
  std::cout << kiln::hashString(*algo, input).to(f, f == HashFormat::kSri) << "\n";
  return kExitOk;
}

RegisterCommand reg("hash-string", "hash a string (md5/sha1/sha256/sha512)",
                    hashString);

}  // namespace
}  // namespace kiln::cli
