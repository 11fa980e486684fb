// `kiln store generate-key`, `copy-to-cache` and `copy-from-cache`: binary
// caches in Nix's file:// layout (docs/formats.md, spec §7).
#include <fcntl.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "command.h"
#include "cli_common.h"
#include "kiln/common/file.h"
#include "kiln/store/cache_copy.h"
#include "kiln/store/signature.h"
#include "store_cli.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;
using namespace kiln::store;

/// Writes `data` to a new file with `mode`; refuses to replace a file.
void writeNewFile(const std::string& path, const std::string& data,
                  mode_t mode) {
  AutoCloseFD fd(
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd) throwSysError("creating key file '" + path + "'");
  writeAll(fd.get(), data);
}

int generateKey(const std::vector<std::string>& args) {
  const std::string name = "store generate-key";
  po::options_description opts(
      "Usage: kiln store generate-key NAME --secret-key-file F "
      "--public-key-file G\n"
      "   or: kiln store generate-key NAME F G\n\n"
      "Makes an Ed25519 signing key pair in Nix's format (like nix-store\n"
      "--generate-binary-cache-key). The secret key file is created with\n"
      "mode 0600; existing files are never replaced.\n\nOptions");
  std::string sk, pk;
  opts.add_options()("help,h", "show this help")(
      "secret-key-file", po::value(&sk), "where to write the secret key")(
      "public-key-file", po::value(&pk), "where to write the public key");
  std::vector<std::string> words;
  po::variables_map vm;
  if (auto rc = parseCommandLine(name, opts, words, 3, args, vm)) return *rc;
  if (words.size() > 1) sk = words[1];
  if (words.size() > 2) pk = words[2];
  if (sk.empty() || pk.empty()) {
    std::cerr << "kiln " << name
              << ": both a secret and a public key file are needed\n"
              << opts;
    return kExitUsage;
  }
  return guarded(name, [&] {
    auto key = SecretKey::generate(words[0]);
    writeNewFile(sk, key.toString(), 0600);
    writeNewFile(pk, key.toPublicKey().toString(), 0644);
    return kExitOk;
  });
}

void printResult(const LocalStore& store, const CopyResult& r, bool json) {
  if (json) {
    nlohmann::json j;
    j["copied"] = nlohmann::json::array();
    for (auto& p : r.copied) j["copied"].push_back(store.printPath(p));
    j["alreadyPresent"] = r.alreadyPresent;
    std::cout << j.dump() << "\n";
    return;
  }
  for (auto& p : r.copied) std::cout << store.printPath(p) << "\n";
}

/// Parses store paths; reports the first one `store` lacks (if `mustBeValid`).
std::optional<StorePathSet> storePaths(LocalStore& store,
                                       const std::string& name,
                                       const std::vector<std::string>& args,
                                       bool mustBeValid) {
  StorePathSet out;
  for (auto& a : args) {
    auto p = resolveStorePath(store, a);
    if (mustBeValid && !store.isValid(p)) {
      std::cerr << "kiln " << name << ": '" << store.printPath(p)
                << "' is not valid in the store\n";
      return std::nullopt;
    }
    out.insert(p);
  }
  return out;
}

int copyToCache(const std::vector<std::string>& args) {
  const std::string name = "store copy-to-cache";
  po::options_description opts(
      "Usage: kiln store copy-to-cache --to file:///DIR [OPTIONS] PATH...\n\n"
      "Publishes the closures of the given store paths in a binary cache in\n"
      "Nix's layout, so that `nix copy --from file:///DIR` can substitute\n"
      "them. Paths the cache already has are skipped.\n\nOptions");
  StoreLocation so;
  std::string to, compression = "xz", skFile;
  int level = -1;
  opts.add_options()("help,h", "show this help")(
      "to", po::value(&to)->required(),
      "the cache: file:///DIR, or s3://BUCKET?endpoint=http://HOST:PORT"
      "[&region=R] (credentials: AWS_ACCESS_KEY_ID and "
      "AWS_SECRET_ACCESS_KEY, or ~/.aws/credentials)")(
      "compression", po::value(&compression), "none, xz (default) or zstd")(
      "compression-level", po::value(&level),
      "codec level (default: xz 6, zstd 3)")(
      "secret-key-file", po::value(&skFile), "sign narinfos with this key")(
      "write-nar-listing", "also write <hash>.ls listings")(
      "public-read",
      "s3:// only: let anyone read the bucket, so that it serves as a plain "
      "HTTP cache (nix copy --from http://HOST:PORT/BUCKET)")(
      "json", "print {\"copied\":[...],\"alreadyPresent\":N}");
  so.addOptions(opts);
  std::vector<std::string> paths;
  po::variables_map vm;
  if (auto rc = parseCommandLine(name, opts, paths, -1, args, vm)) return *rc;
  return guarded(name, [&] {
    std::optional<SecretKey> key;
    if (!skFile.empty()) key = readSecretKeyFile(skFile);
    auto storage = openCacheStorage(to);
    if (vm.count("public-read")) {
      auto* s3 = dynamic_cast<S3CacheStorage*>(storage.get());
      if (!s3) throw Error("--public-read is for s3:// caches, not " + to);
      s3->makePublicRead();
    }
    auto store = so.open();
    auto roots = storePaths(*store, name, paths, true);
    if (!roots) return int(kExitNotFound);
    CacheWriteOptions wo;
    wo.compression = compression;
    wo.compressionLevel = level;
    wo.signingKey = key ? &*key : nullptr;
    wo.writeListing = vm.count("write-nar-listing") > 0;
    BinaryCacheWriter writer(*storage, store->storeDir(), wo);
    printResult(*store, copyClosureToCache(*store, writer, *roots),
                vm.count("json"));
    return int(kExitOk);
  });
}

int copyFromCache(const std::vector<std::string>& args) {
  const std::string name = "store copy-from-cache";
  po::options_description opts(
      "Usage: kiln store copy-from-cache --from file:///DIR [OPTIONS] "
      "PATH...\n\n"
      "Imports the closures of the given store paths from a binary cache.\n"
      "A path is accepted if it is signed by a trusted key, or if it is\n"
      "content-addressed and its CA field reproduces its path and content.\n"
      "Every NAR is checked against FileHash, NarHash and NarSize before it\n"
      "is registered; a corrupt closure leaves the store "
      "unchanged.\n\nOptions");
  StoreLocation so;
  std::string from;
  std::vector<std::string> keyFiles, keys;
  opts.add_options()("help,h", "show this help")(
      "from", po::value(&from)->required(),
      "the cache: file:///DIR, http://HOST[:PORT][/PATH], or "
      "s3://BUCKET?endpoint=http://HOST:PORT[&region=R] (credentials as "
      "for copy-to-cache)")(
      "trusted-public-key-file", po::value(&keyFiles)->composing(),
      "trust signatures by this public key file (repeatable)")(
      "trusted-public-key", po::value(&keys)->composing(),
      "trust this public key, NAME:BASE64 (repeatable)")(
      "no-check-sigs", "accept unsigned paths (like require-sigs = false)")(
      "json", "print {\"copied\":[...],\"alreadyPresent\":N}");
  so.addOptions(opts);
  std::vector<std::string> paths;
  po::variables_map vm;
  if (auto rc = parseCommandLine(name, opts, paths, -1, args, vm)) return *rc;
  return guarded(name, [&] {
    ImportOptions io;
    for (auto& f : keyFiles) io.trust.keys.add(readPublicKeyFile(f));
    for (auto& k : keys) io.trust.keys.add(PublicKey::parse(k));
    io.trust.requireSigs = vm.count("no-check-sigs") == 0;
    auto storage = openCacheStorage(from);
    auto* files = dynamic_cast<FileCacheStorage*>(storage.get());
    if (files && !pathExists(files->root())) {
      std::cerr << "kiln " << name << ": cache directory '" << files->root()
                << "' does not exist\n";
      return int(kExitNotFound);
    }
    auto store = so.open();
    BinaryCacheReader reader(*storage, store->storeDir());
    try {
      auto roots = storePaths(*store, name, paths, false);
      printResult(*store, copyClosureFromCache(reader, *store, *roots, io),
                  vm.count("json"));
    } catch (const CachePathNotFound& e) {
      std::cerr << "kiln " << name << ": " << e.what() << "\n";
      return int(kExitNotFound);
    }
    return int(kExitOk);
  });
}

RegisterCommand regKey("store generate-key",
                       "make an Ed25519 binary-cache signing key pair",
                       generateKey);
RegisterCommand regTo("store copy-to-cache",
                      "publish store path closures in a file:// binary cache",
                      copyToCache);
RegisterCommand regFrom(
    "store copy-from-cache",
    "import store path closures from a file:// binary cache", copyFromCache);

}  // namespace
}  // namespace kiln::cli
