// LocalStore: writing an add's temporary tree (or adopting a finished
// tree) and verifying it on the same bytes: NAR hash and size, the CA field
// (path and content hash) and, for a `.drv`, its contents (checked by the
// batch).
#include <optional>

#include "kiln/store/content_check.h"
#include "kiln/store/derivation.h"
#include "kiln/store/nar.h"
#include "local_store_impl.h"
#include "stream_channel.h"

namespace kiln::store {
namespace {

/// Writes to two sinks.
class PairSink : public Sink {
 public:
  PairSink(Sink& a, Sink* b) : a_(&a), b_(b) {}
  void setSecond(Sink* b) { b_ = b; }
  void write(std::string_view d) override {
    a_->write(d);
    if (b_) b_->write(d);
  }

 private:
  Sink* a_;
  Sink* b_;
};

/// Counts what it is given.
class CountingSink : public Sink {
 public:
  void write(std::string_view d) override { n_ += d.size(); }
  uint64_t count() const { return n_; }

 private:
  uint64_t n_ = 0;
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

// The checks of an add, on the NAR bytes of one pass (a restore or a dump):
// NAR hash and size, the CA field and a `.drv`'s contents.
class AddVerifier {
 public:
  // `verifyCa`, `fileContents`, `verifyNarHash`: as
  // LocalStore::Impl::TempChecks.
  AddVerifier(const StoreDir& storeDir, const ValidPathInfo& info,
              bool verifyCa, std::string* fileContents, bool verifyNarHash)
      : storeDir_(storeDir),
        info_(info),
        full_(storeDir.printPath(info.path)),
        hashNar_(verifyNarHash),
        both_(hashNar_ ? static_cast<Sink&>(hasher_) : counter_, nullptr),
        observer_(fileHasher_, fileContents, full_) {
    if (verifyCa && !info.ca.empty())
      ca_ = ContentAddress::parse(info.ca);
    if (ca_ && ca_->method != CaMethod::kRecursive)
      fileHasher_.emplace(ca_->hash.algo(), ca_->method == CaMethod::kText);
    else if (ca_ && ca_->hash.algo() != HashAlgo::kSha256)
      narCaHasher_.emplace(ca_->hash.algo());
    both_.setSecond(narCaHasher_ ? &*narCaHasher_ : nullptr);
    if (fileContents) fileContents->clear();
  }
  /// Receives the NAR's bytes.
  Sink& sink() { return both_; }
  /// Receives the NAR's structure.
  NarVisitor& observer() { return observer_; }
  const std::string& full() const { return full_; }
  /// Rethrows the FormatError being handled, naming the path.
  [[noreturn]] void rethrowFormat(const FormatError& e) const {
    if (std::string_view(e.what()).find(full_) != std::string_view::npos)
      throw;
    throw FormatError("NAR of '" + full_ + "': " + e.what());
  }
  /// Compares what was seen with `info`; throws HashMismatchError or
  /// ContentMismatchError.
  void finish() {
    if (!hashNar_) {
      if (counter_.count() != info_.narSize)
        throw HashMismatchError("NAR of '" + full_ + "' is " +
                                std::to_string(counter_.count()) +
                                " bytes, not " +
                                std::to_string(info_.narSize));
      return;  // nor its content address: the caller checked it
    }
    auto [hash, size] = hasher_.finish();
    if (hash != info_.narHash || size != info_.narSize)
      throw HashMismatchError(
          "NAR of '" + full_ + "' does not match its metadata: expected " +
          info_.narHash.toNix32() + " (" + std::to_string(info_.narSize) +
          " bytes), got " + hash.toNix32() + " (" + std::to_string(size) +
          " bytes)");
    if (!ca_) return;
    // A self-referencing object is hashed with its own hash part masked
    // (spec §2); kiln does not recompute that form: such paths are only
    // trusted through signatures (see BinaryCacheReader::checkTrusted).
    bool selfRef = info_.references.count(info_.path) != 0;
    Hash actual = fileHasher_    ? fileHasher_->finish()
                  : narCaHasher_ ? narCaHasher_->finish().first
                                 : hash;
    if (!selfRef || ca_->method != CaMethod::kRecursive)
      checkContentAddress(storeDir_, info_.path, info_.references, *ca_,
                          actual);
  }

 private:
  const StoreDir& storeDir_;
  const ValidPathInfo& info_;
  std::string full_;
  std::optional<ContentAddress> ca_;
  std::optional<SingleFileHasher> fileHasher_;
  std::optional<HashingSink> narCaHasher_;  // recursive, not sha256
  bool hashNar_;
  HashingSink hasher_{HashAlgo::kSha256};
  CountingSink counter_;
  PairSink both_;
  AddObserver observer_;
};

}  // namespace

std::string LocalStore::Impl::writeTemp(const ValidPathInfo& info, Source& nar,
                                        bool fsyncEach,
                                        const TempChecks& checks) {
  AddVerifier verify(storeDir, info, checks.verifyCa, checks.fileContents,
                     checks.verifyNarHash);
  std::string tmp = tempPathFor(info.path);
  PathGuard guard(tmp);
  TeeSource tee(nar, verify.sink());
  try {
    restorePath(tmp, tee, NarLimits(), verify.observer());
  } catch (const FormatError& e) {
    verify.rethrowFormat(e);
  }
  char extra;
  if (nar.read(&extra, 1) != 0)
    throw FormatError("trailing data after the NAR of '" + verify.full() +
                      "'");
  verify.finish();
  canonicaliseTree(tmp, fsyncEach);
  guard.dismiss();
  return tmp;
}

void LocalStore::Impl::checkAdopted(const ValidPathInfo& info,
                                    const std::string& tmp, bool fsyncEach,
                                    const TempChecks& checks) {
  AddVerifier verify(storeDir, info, checks.verifyCa, checks.fileContents,
                     checks.verifyNarHash);
  // Made read-only first, so what is checked is what stays. The NAR is
  // dumped on a helper thread and parsed here, as a restore parses it.
  canonicaliseTree(tmp, fsyncEach, /*takeOwnership=*/true);
  StreamChannel chan([&tmp](Sink& sink) { dumpPath(tmp, sink); });
  TeeSource tee(chan.source(), verify.sink());
  try {
    parseNar(tee, verify.observer());
  } catch (const FormatError& e) {
    verify.rethrowFormat(e);
  }
  verify.finish();
}

}  // namespace kiln::store
