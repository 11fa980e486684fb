#include "output_scan.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "kiln/common/file.h"
#include "kiln/common/stream.h"
#include "kiln/store/nar.h"
#include "kiln/store/content_check.h"
#include "kiln/store/refs.h"

namespace kiln::worker {

namespace {

/// Passes bytes on while counting them against a limit shared by outputs.
class LimitSink : public Sink {
 public:
  LimitSink(Sink& inner, uint64_t& total, uint64_t limit)
      : inner_(inner), total_(total), limit_(limit) {}
  void write(std::string_view data) override {
    total_ += data.size();
    if (limit_ && total_ > limit_)
      throw OutputLimitExceeded(
          "the outputs' NAR size exceeds the output limit of " +
          std::to_string(limit_) + " bytes");
    inner_.write(data);
  }

 private:
  Sink& inner_;
  uint64_t& total_;
  uint64_t limit_;
};

/// Hash of a flat fixed output: the bytes of one regular file.
std::optional<Hash> hashFlatFile(const std::string& path, HashAlgo algo) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) throwSysError("stat '" + path + "'");
  if (!S_ISREG(st.st_mode)) return std::nullopt;
  AutoCloseFD fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) throwSysError("opening '" + path + "'");
  FdSource src(fd.get());
  HashingSink h(algo);
  src.drainInto(h);
  return h.finish().first;
}

}  // namespace

ScannedOutput scanOutput(const std::string& physicalPath,
                         const store::StorePathSet& candidates,
                         const store::DerivationOutput* fixed,
                         uint64_t& totalNarBytes, uint64_t limit) {
  // One pass over the NAR: sha256, references and, for a recursive fixed
  // output of another algorithm, its content hash (store::NarScanSink).
  std::optional<store::ContentAddress> ca;
  std::optional<HashAlgo> extra;
  if (fixed) {
    ca = store::fixedOutputCa(*fixed);
    if (ca->method == store::CaMethod::kRecursive &&
        ca->hash.algo() != HashAlgo::kSha256)
      extra = ca->hash.algo();
  }
  store::NarScanSink scan(candidates, extra);
  LimitSink limited(scan, totalNarBytes, limit);
  store::dumpPath(physicalPath, limited);
  store::NarScan r = scan.finish();

  ScannedOutput out;
  out.narHash = r.narHash;
  out.narSize = r.narSize;
  out.references = std::move(r.references);
  if (ca) {
    if (ca->method != store::CaMethod::kRecursive)
      out.contentHash = hashFlatFile(physicalPath, ca->hash.algo());
    else if (r.recursiveHash)
      out.contentHash = r.recursiveHash;
    else
      out.contentHash = out.narHash;
  }
  return out;
}

void checkFixedOutputSpec(const store::StoreDir& storeDir,
                          const store::StorePath& drvPath,
                          const store::DerivationOutput& fixed) {
  try {
    store::fixedOutputCa(fixed);
  } catch (const FormatError& e) {
    throw FormatError("fixed-output derivation '" +
                      storeDir.printPath(drvPath) + "': " + e.what());
  }
}

std::string checkFixedOutput(const store::StoreDir& storeDir,
                             const store::StorePath& drvPath,
                             const store::DerivationOutput& fixed,
                             const ScannedOutput& scanned) {
  auto what = "fixed-output derivation '" + storeDir.printPath(drvPath) + "'";
  if (!scanned.contentHash)
    return what + ": a flat fixed output must be a single regular file";
  Hash wanted = store::fixedOutputCa(fixed).hash;
  if (!(wanted == *scanned.contentHash))
    return "hash mismatch in " + what + ": wanted " +
           wanted.to(HashFormat::kSri) + ", got " +
           scanned.contentHash->to(HashFormat::kSri);
  if (!scanned.references.empty())
    return what + " must not reference store paths, but references '" +
           storeDir.printPath(*scanned.references.begin()) + "'";
  return "";
}

}  // namespace kiln::worker
