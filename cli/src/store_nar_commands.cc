// `kiln store dump`, `kiln store restore`, `kiln store hash`: NAR archives
// of file system trees on the command line (spec §4).
#include <fcntl.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <iostream>
#include <optional>

#include "cli_common.h"
#include "command.h"
#include "kiln/common/background_sink.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/hash.h"
#include "kiln/common/stream.h"
#include "kiln/store/nar.h"
#include "kiln/store/nar_walker.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;

int storeDump(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln store dump PATH\n\n"
      "Writes the NAR serialisation of PATH (file, directory or symlink) to\n"
      "stdout, like `nix-store --dump`.\n\nOptions");
  opts.add_options()("help,h", "show this help");
  std::vector<std::string> paths;
  po::variables_map vm;
  if (auto rc = parseCommandLine("store dump", opts, paths, 1, args, vm)) return *rc;
  return guarded("store dump", [&] {
    FdSink out(STDOUT_FILENO);
    store::dumpPathAhead(paths[0], out);
    out.flush();
    return kExitOk;
  });
}

int storeRestore(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln store restore PATH\n\n"
      "Reads one NAR from stdin and recreates it at PATH (which must not\n"
      "exist), like `nix-store --restore`. The archive is validated as it is\n"
      "read; on any error PATH is removed. Exit code 3 for a malformed NAR.\n\n"
      "Options");
  opts.add_options()("help,h", "show this help");
  std::vector<std::string> paths;
  po::variables_map vm;
  if (auto rc = parseCommandLine("store restore", opts, paths, 1, args, vm)) return *rc;
  return guarded("store restore", [&] {
    FdSource in(STDIN_FILENO);
    store::restorePath(paths[0], in);
    char extra;
    if (in.read(&extra, 1) != 0) {
      deletePath(paths[0]);
      throw FormatError("trailing data after the NAR on stdin");
    }
    return kExitOk;
  });
}

int storeHash(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln store hash [--type ALGO] [--base16|--base32|--base64|--sri] [--flat] "
      "PATH...\n\n"
      "Prints the hash of the NAR serialisation of each PATH (like `nix-hash`),\n"
      "or with --flat the hash of the file's bytes. Default: sha256, base16.\n\n"
      "Options");
  std::string type = "sha256";
  opts.add_options()("help,h", "show this help")(
      "type", po::value(&type), "md5, sha1, sha256 (default) or sha512")(
      "base16", "print in base16 (default)")("base32", "print in Nix's base-32")(
      "base64", "print in base64")("sri", "print as SRI (ALGO-base64)")(
      "flat", "hash the file contents instead of its NAR");
  std::vector<std::string> paths;
  po::variables_map vm;
  if (auto rc = parseCommandLine("store hash", opts, paths, -1, args, vm)) return *rc;
  auto algo = parseHashAlgo(type);
  if (!algo) {
    std::cerr << "kiln store hash: unknown hash type '" << type << "'\n";
    return kExitUsage;
  }
  if (vm.count("base16") + vm.count("base32") + vm.count("base64") + vm.count("sri") > 1) {
    std::cerr << "kiln store hash: choose at most one output format\n";
    return kExitUsage;
  }
  HashFormat format = vm.count("base32")   ? HashFormat::kNix32
                      : vm.count("base64") ? HashFormat::kBase64
                      : vm.count("sri")    ? HashFormat::kSri
                                           : HashFormat::kBase16;
  bool flat = vm.count("flat") > 0;
  return guarded("store hash", [&] {
    for (auto& path : paths) {
      HashingSink sink(*algo);
      if (flat) {
        AutoCloseFD fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd) throwSysError("opening '" + path + "'");
        FdSource src(fd.get());
        src.drainInto(sink);
      } else {
        // Three threads: one walks the tree (lists, stats, opens), this one
        // reads file contents into the ring, one hashes.
        BackgroundSink bg(sink);
        store::dumpPathAhead(path, bg);
        bg.finish();
      }
      std::cout << sink.finish().first.to(format, format == HashFormat::kSri) << "\n";
    }
    return kExitOk;
  });
}

RegisterCommand regDump("store dump", "write the NAR of a path to stdout", storeDump);
RegisterCommand regRestore("store restore", "recreate a path from a NAR on stdin",
                           storeRestore);
RegisterCommand regHash("store hash", "hash the NAR (or flat bytes) of paths, like nix-hash",
                        storeHash);

}  // namespace
}  // namespace kiln::cli
