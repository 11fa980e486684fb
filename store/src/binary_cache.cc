// BinaryCacheWriter and BinaryCacheReader.
#include "kiln/store/binary_cache.h"

#include "kiln/common/encoding.h"
#include "kiln/common/error.h"
#include "kiln/store/compression.h"
#include "kiln/store/content_address.h"
#include "kiln/store/nar.h"

namespace kiln::store {
namespace {

/// The decompressed NAR of one narinfo, verified before its last byte is
/// handed out (see BinaryCacheReader::narSource).
class VerifiedNarSource : public Source {
 public:
  VerifiedNarSource(const StoreDir& dir, NarInfo info,
                    std::unique_ptr<Source> file,
                    const DecompressionLimits& limits)
      : info_(std::move(info)),
        what_("NAR of '" + dir.printPath(info_.path) + "' (" + info_.url + ")"),
        file_(std::move(file)),
        fileHasher_(HashAlgo::kSha256),
        fileTee_(*file_, fileHasher_),
        nar_(makeDecompressionSource(info_.compression, fileTee_, limits)),
        narHasher_(HashAlgo::kSha256) {}

  size_t read(char* d, size_t len) override {
    if (delivered_ == info_.narSize) return 0;
    len = std::min<uint64_t>(len, info_.narSize - delivered_);
    size_t n;
    try {
      n = nar_->read(d, len);
    } catch (const FormatError& e) {
      throw FormatError(what_ + ": " + e.what());
    }
    if (n == 0)
      throw FormatError(what_ + " is truncated: it has " +
                        std::to_string(delivered_) + " bytes, NarSize says " +
                        std::to_string(info_.narSize));
    narHasher_.update({d, n});
    delivered_ += n;
    if (delivered_ == info_.narSize) finalCheck();
    return n;
  }

 private:
  void finalCheck() {
    char extra;
    try {
      if (nar_->read(&extra, 1) != 0)
        throw FormatError("it is longer than NarSize " +
                          std::to_string(info_.narSize));
      char buf[4096];
      while (fileTee_.read(buf, sizeof buf) != 0) {
      }
    } catch (const FormatError& e) {
      throw FormatError(what_ + ": " + e.what());
    }
    auto [fileHash, fileSize] = fileHasher_.finish();
    if (info_.fileSize && *info_.fileSize != fileSize)
      throw FormatError(what_ + " has " + std::to_string(fileSize) +
                        " bytes, FileSize says " +
                        std::to_string(*info_.fileSize));
    if (info_.fileHash && !(*info_.fileHash == fileHash))
      throw FormatError(what_ + " has hash " + fileHash.toNix32() +
                        ", FileHash says " + info_.fileHash->toNix32());
    auto narHash = narHasher_.finish();
    if (!(narHash == info_.narHash))
      throw FormatError(what_ + " has NAR hash " + narHash.toNix32() +
                        ", NarHash says " + info_.narHash.toNix32());
  }

  NarInfo info_;
  std::string what_;
  std::unique_ptr<Source> file_;
  HashingSink fileHasher_;
  TeeSource fileTee_;  // file_ → fileHasher_
  std::unique_ptr<Source> nar_;
  HashSink narHasher_;
  uint64_t delivered_ = 0;
};

}  // namespace

// ------------------------------------------------------------------ writer

BinaryCacheWriter::BinaryCacheWriter(CacheStorage& storage, StoreDir storeDir,
                                     CacheWriteOptions options)
    : storage_(storage),
      storeDir_(std::move(storeDir)),
      opts_(std::move(options)) {
  checkCompression(opts_.compression);
}

void BinaryCacheWriter::init() {
  if (auto existing = storage_.get("nix-cache-info")) {
    auto ci = CacheInfo::parse(*existing, storage_.uri() + "/nix-cache-info");
    if (ci.storeDir != storeDir_.dir())
      throw Error("binary cache '" + storage_.uri() + "' is for store '" +
                  ci.storeDir + "', not '" + storeDir_.dir() + "'");
    return;
  }
  CacheInfo ci;
  ci.storeDir = storeDir_.dir();
  if (opts_.wantMassQuery) ci.wantMassQuery = ci.hasWantMassQuery = true;
  if (opts_.priority) {
    ci.priority = *opts_.priority;
    ci.hasPriority = true;
  }
  storage_.put("nix-cache-info", ci.render());
}

bool BinaryCacheWriter::hasPath(const StorePath& path) {
  return storage_.exists(narInfoFileName(path));
}

NarInfo BinaryCacheWriter::addPath(NarInfo meta,
                                   const std::function<void(Sink&)>& dump) {
  auto up = storage_.upload();
  HashingSink fileHasher(HashAlgo::kSha256);
  TeeSink fileTee(*up, fileHasher);
  auto compressor =
      makeCompressionSink(opts_.compression, fileTee, opts_.compressionLevel);
  HashingSink narHasher(HashAlgo::kSha256);
  TeeSink narTee(*compressor, narHasher);
  dump(narTee);
  compressor->finish();
  auto [narHash, narSize] = narHasher.finish();
  auto printed = storeDir_.printPath(meta.path);
  if (!(narHash == meta.narHash) || narSize != meta.narSize)
    throw Error("NAR of '" + printed + "' hashes to " + narHash.toNix32() +
                " (" + std::to_string(narSize) +
                " bytes), but its metadata says " + meta.narHash.toNix32() +
                " (" + std::to_string(meta.narSize) +
                " bytes); not publishing it");
  auto [fileHash, fileSize] = fileHasher.finish();
  meta.compression = opts_.compression;
  meta.fileHash = fileHash;
  meta.fileSize = fileSize;
  meta.url = "nar/" + fileHash.to(HashFormat::kNix32, false) + ".nar" +
             compressionExtension(opts_.compression);
  // Identical content may already be there (another path, an earlier run).
  if (!storage_.exists(meta.url)) up->commit(meta.url);
  if (opts_.signingKey)
    meta.sigs.insert(opts_.signingKey->sign(pathFingerprint(
        storeDir_, meta.path, meta.narHash, meta.narSize, meta.references)));
  if (opts_.writeListing) writeListing(meta);
  storage_.put(narInfoFileName(meta.path), meta.render(storeDir_));
  return meta;
}

void BinaryCacheWriter::writeListing(const NarInfo& info) {
  auto file = storage_.open(info.url);
  if (!file) throw Error("cache lost '" + info.url + "' while listing it");
  auto nar = makeDecompressionSource(info.compression, *file);
  storage_.put(std::string(info.path.hashPart()) + ".ls", narListing(*nar));
}

void BinaryCacheWriter::addLog(const StorePath& drv, std::string_view log) {
  if (!drv.isDerivation())
    throw Error("'" + drv.baseName() +
                "' is not a derivation; cannot store its log");
  storage_.put("log/" + drv.baseName(), log);
}

// ------------------------------------------------------------------ reader

BinaryCacheReader::BinaryCacheReader(CacheStorage& storage, StoreDir storeDir)
    : storage_(storage), storeDir_(std::move(storeDir)) {}

CacheInfo BinaryCacheReader::init() {
  auto text = storage_.get("nix-cache-info");
  if (!text) return CacheInfo{storeDir_.dir()};
  auto ci = CacheInfo::parse(*text, storage_.uri() + "/nix-cache-info");
  if (ci.storeDir != storeDir_.dir())
    throw Error("binary cache '" + storage_.uri() +
                "' is for Nix stores with prefix '" + ci.storeDir + "', not '" +
                storeDir_.dir() + "'");
  return ci;
}

std::optional<NarInfo> BinaryCacheReader::queryNarInfo(const StorePath& path) {
  auto rel = narInfoFileName(path);
  auto text = storage_.get(rel);
  if (!text) return std::nullopt;
  auto whence = storage_.uri() + "/" + rel;
  auto ni = NarInfo::parse(storeDir_, *text, whence);
  if (ni.path != path)
    throw FormatError("NAR info file '" + whence +
                      "' is corrupt: it describes '" +
                      storeDir_.printPath(ni.path) + "', not '" +
                      storeDir_.printPath(path) + "'");
  checkCacheRelPath(ni.url);
  return ni;
}

bool BinaryCacheReader::hasValidSignature(const NarInfo& info,
                                          const PublicKeys& keys) const {
  if (keys.empty() || info.sigs.empty()) return false;
  auto fp = pathFingerprint(storeDir_, info.path, info.narHash, info.narSize,
                            info.references);
  for (auto& sig : info.sigs)
    if (keys.verify(fp, sig)) return true;
  return false;
}

std::unique_ptr<Source> BinaryCacheReader::narSource(const NarInfo& info) {
  checkCacheRelPath(info.url);
  auto file = storage_.open(info.url);
  if (!file)
    throw Error("binary cache '" + storage_.uri() + "' lacks '" + info.url +
                "', the NAR of '" + storeDir_.printPath(info.path) + "'");
  return std::make_unique<VerifiedNarSource>(storeDir_, info, std::move(file),
                                             limits_);
}

std::optional<std::string> BinaryCacheReader::getLog(const StorePath& drv) {
  return storage_.get("log/" + drv.baseName());
}

}  // namespace kiln::store
