// Checking content against its declared hash: fixed outputs, CA fields, and
// one-pass scans of NAR bytes (hash, references, recursive content hash).
#include "kiln/store/content_check.h"

#include "stream_channel.h"

namespace kiln::store {

ContentAddress fixedOutputCa(const DerivationOutput& fixed) {
  std::string_view algoName = fixed.hashAlgo;
  ContentAddress ca;
  ca.method = CaMethod::kFlat;
  if (algoName.starts_with("r:")) {
    ca.method = CaMethod::kRecursive;
    algoName.remove_prefix(2);
  }
  if (fixed.hash.empty())
    throw FormatError("output has no declared content hash (not fixed)");
  auto algo = parseHashAlgo(algoName);
  if (!algo)
    throw FormatError("fixed output has unknown hash algorithm '" +
                      fixed.hashAlgo + "'");
  ca.hash = Hash::parse(fixed.hash, *algo);
  return ca;
}

void SingleFileHasher::createDirectory(const std::string&) {
  throw FormatError("a flat or text object must be a single regular file");
}

void SingleFileHasher::createSymlink(const std::string&, const std::string&) {
  throw FormatError("a flat or text object must be a single regular file");
}

void SingleFileHasher::createRegularFile(const std::string&, bool executable,
                                         uint64_t) {
  if (text_ && executable)
    throw FormatError("a text object cannot be executable");
}

Hash contentHashOfNar(Source& nar, CaMethod method, HashAlgo algo,
                      const NarLimits& limits) {
  if (method == CaMethod::kRecursive) {
    HashingSink h(algo);
    TeeSource tee(nar, h);
    NullNarVisitor v;
    parseNar(tee, v, limits);
    return h.finish().first;
  }
  SingleFileHasher v(algo, method == CaMethod::kText);
  parseNar(nar, v, limits);
  return v.finish();
}

std::string checkFixedOutputNar(Source& nar, const DerivationOutput& fixed,
                                std::string_view what,
                                const NarLimits& limits) {
  ContentAddress want = fixedOutputCa(fixed);
  Hash got = contentHashOfNar(nar, want.method, want.hash.algo(), limits);
  if (!(got == want.hash))
    throw ContentMismatchError(
        "hash mismatch in fixed-output " + std::string(what) + ": wanted " +
        want.hash.to(HashFormat::kSri) + ", got " + got.to(HashFormat::kSri));
  return want.render();
}

std::string checkFixedOutputPath(const std::string& path,
                                 const DerivationOutput& fixed,
                                 std::string_view what) {
  // Serialised once, straight into the checker.
  StreamChannel chan([&](Sink& sink) { dumpPath(path, sink); });
  return checkFixedOutputNar(chan.source(), fixed, what);
}

void checkContentAddress(const StoreDir& dir, const StorePath& path,
                         const StorePathSet& refs, const ContentAddress& ca,
                         const Hash& actual) {
  StorePathSet others = refs;
  bool self = others.erase(path) != 0;
  StorePath implied = ca.makePath(dir, path.name(), others, self);
  if (implied != path)
    throw FormatError("the CA field '" + ca.render() + "' of '" +
                      dir.printPath(path) + "' gives the path '" +
                      dir.printPath(implied) + "'");
  if (!(actual == ca.hash))
    throw ContentMismatchError("content of '" + dir.printPath(path) +
                               "' does not match its CA field: wanted " +
                               ca.hash.to(HashFormat::kSri) + ", got " +
                               actual.to(HashFormat::kSri));
}

NarScanSink::NarScanSink(StorePathSet candidates,
                         std::optional<HashAlgo> recursiveAlgo)
    : candidates_(std::move(candidates)),
      sha256_(HashAlgo::kSha256),
      refs_(candidates_) {
  if (recursiveAlgo) extra_.emplace(*recursiveAlgo);
}

void NarScanSink::write(std::string_view data) {
  sha256_.update(data);
  if (extra_) extra_->update(data);
  refs_.write(data);
}

NarScan NarScanSink::finish() {
  NarScan r;
  r.narSize = sha256_.bytesHashed();
  r.narHash = sha256_.finish();
  r.references = selectReferences(candidates_, refs_.found());
  if (extra_) r.recursiveHash = extra_->finish();
  return r;
}

NarScan scanNar(Source& nar, const StorePathSet& candidates,
                std::optional<HashAlgo> recursiveAlgo,
                const NarLimits& limits) {
  NarScanSink scan(candidates, recursiveAlgo);
  TeeSource tee(nar, scan);
  NullNarVisitor v;
  parseNar(tee, v, limits);
  return scan.finish();
}

}  // namespace kiln::store
