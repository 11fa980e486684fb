// LocalStore: writing an add's temporary tree and verifying it on the same
// bytes: NAR hash and size, the CA field (path and content hash) and, for a
// `.drv`, its contents (checked by the batch).
#include <optional>

#include "kiln/store/content_check.h"
#include "kiln/store/derivation.h"
#include "kiln/store/nar.h"
#include "local_store_impl.h"

namespace kiln::store {
namespace {

/// Writes to two sinks.
class PairSink : public Sink {
 public:
  PairSink(Sink& a, Sink* b) : a_(a), b_(b) {}
  void write(std::string_view d) override {
    a_.write(d);
    if (b_) b_->write(d);
  }

 private:
  Sink& a_;
  Sink* b_;
};

/// Watches a restore: hashes the single file for a flat/text CA field and
/// keeps the single file's bytes for a `.drv`.
class AddObserver : public NarVisitor {
 public:
  AddObserver(std::optional<SingleFileHasher>& hasher, std::string* contents,
              const std::string& what)
      : hasher_(hasher), contents_(contents), what_(what) {}
  void createDirectory(const std::string& p) override {
    notAFile();
    if (hasher_) hasher_->createDirectory(p);
  }
  void createSymlink(const std::string& p, const std::string& t) override {
    notAFile();
    if (hasher_) hasher_->createSymlink(p, t);
  }
  void createRegularFile(const std::string& p, bool x, uint64_t n) override {
    if (contents_ && n > kMaxDerivationSize)
      throw FormatError("derivation '" + what_ + "' is larger than " +
                        std::to_string(kMaxDerivationSize) + " bytes");
    if (contents_) contents_->reserve(n);
    if (hasher_) hasher_->createRegularFile(p, x, n);
  }
  void receiveContents(std::string_view d) override {
    if (contents_) contents_->append(d);
    if (hasher_) hasher_->receiveContents(d);
  }

 private:
  void notAFile() {
    if (contents_)
      throw FormatError("derivation '" + what_ +
                        "' is not a single regular file");
  }
  std::optional<SingleFileHasher>& hasher_;
  std::string* contents_;
  const std::string& what_;
};

}  // namespace

std::string LocalStore::Impl::writeTemp(const ValidPathInfo& info, Source& nar,
                                        bool fsyncEach,
                                        const TempChecks& checks) {
  std::string full = storeDir.printPath(info.path);
  std::optional<ContentAddress> ca;
  if (checks.verifyCa && !info.ca.empty()) ca = ContentAddress::parse(info.ca);
  std::optional<SingleFileHasher> fileHasher;
  std::optional<HashingSink> narCaHasher;  // recursive, not sha256
  if (ca && ca->method != CaMethod::kRecursive)
    fileHasher.emplace(ca->hash.algo(), ca->method == CaMethod::kText);
  else if (ca && ca->hash.algo() != HashAlgo::kSha256)
    narCaHasher.emplace(ca->hash.algo());
  if (checks.fileContents) checks.fileContents->clear();

  std::string tmp = tempPathFor(info.path);
  PathGuard guard(tmp);
  HashingSink hasher(HashAlgo::kSha256);
  PairSink both(hasher, narCaHasher ? &*narCaHasher : nullptr);
  TeeSource tee(nar, both);
  AddObserver observer(fileHasher, checks.fileContents, full);
  try {
    restorePath(tmp, tee, NarLimits(), observer);
  } catch (const FormatError& e) {
    if (std::string_view(e.what()).find(full) != std::string_view::npos) throw;
    throw FormatError("NAR of '" + full + "': " + e.what());
  }
  char extra;
  if (nar.read(&extra, 1) != 0)
    throw FormatError("trailing data after the NAR of '" + full + "'");
  auto [hash, size] = hasher.finish();
  if (hash != info.narHash || size != info.narSize)
    throw HashMismatchError(
        "NAR of '" + full + "' does not match its metadata: expected " +
        info.narHash.toNix32() + " (" + std::to_string(info.narSize) +
        " bytes), got " + hash.toNix32() + " (" + std::to_string(size) +
        " bytes)");
  if (ca) {
    // A self-referencing object is hashed with its own hash part masked
    // (spec §2); kiln does not recompute that form: such paths are only
    // trusted through signatures (see BinaryCacheReader::checkTrusted).
    bool selfRef = info.references.count(info.path) != 0;
    Hash actual = fileHasher    ? fileHasher->finish()
                  : narCaHasher ? narCaHasher->finish().first
                                : hash;
    if (!selfRef || ca->method != CaMethod::kRecursive)
      checkContentAddress(storeDir, info.path, info.references, *ca, actual);
  }
  canonicaliseTree(tmp, fsyncEach);
  guard.dismiss();
  return tmp;
}

}  // namespace kiln::store
