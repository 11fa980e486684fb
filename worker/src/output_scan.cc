#include "output_scan.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "kiln/common/file.h"
#include "kiln/common/stream.h"
#include "kiln/store/nar.h"
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

/// Collects several sinks into one.
class FanOutSink : public Sink {
 public:
  void add(Sink& s) { sinks_.push_back(&s); }
  void write(std::string_view data) override {
    for (auto* s : sinks_) s->write(data);
  }

 private:
  std::vector<Sink*> sinks_;
};

struct FixedMode {
  bool recursive = false;
  HashAlgo algo = HashAlgo::kSha256;
};

FixedMode fixedMode(const store::DerivationOutput& fixed) {
  std::string_view a = fixed.hashAlgo;
  FixedMode m;
  if (a.substr(0, 2) == "r:") {
    m.recursive = true;
    a.remove_prefix(2);
  }
  auto algo = parseHashAlgo(a);
  if (!algo)
    throw FormatError("fixed output has unknown hash algorithm '" +
                      fixed.hashAlgo + "'");
  m.algo = *algo;
  return m;
}

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
  HashingSink narHash(HashAlgo::kSha256);
  store::RefScanSink refs(candidates);
  FanOutSink fan;
  fan.add(narHash);
  fan.add(refs);
  std::optional<FixedMode> mode;
  std::optional<HashingSink> caHash;
  if (fixed) {
    mode = fixedMode(*fixed);
    if (mode->recursive && mode->algo != HashAlgo::kSha256) {
      caHash.emplace(mode->algo);
      fan.add(*caHash);
    }
  }
  LimitSink limited(fan, totalNarBytes, limit);
  store::dumpPath(physicalPath, limited);

  ScannedOutput out;
  std::tie(out.narHash, out.narSize) = narHash.finish();
  out.references = store::selectReferences(candidates, refs.found());
  if (mode) {
    if (!mode->recursive)
      out.contentHash = hashFlatFile(physicalPath, mode->algo);
    else if (caHash)
      out.contentHash = caHash->finish().first;
    else
      out.contentHash = out.narHash;
  }
  return out;
}

void checkFixedOutputSpec(const store::StoreDir& storeDir,
                          const store::StorePath& drvPath,
                          const store::DerivationOutput& fixed) {
  try {
    Hash::parseBare(fixed.hash, fixedMode(fixed).algo);
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
  auto mode = fixedMode(fixed);
  Hash wanted = Hash::parseBare(fixed.hash, mode.algo);
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
