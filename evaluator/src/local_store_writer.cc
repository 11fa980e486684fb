// Adds derivations, toFile texts and sources to kiln's LocalStore.
#include "kiln/evaluator/local_store_writer.h"

#include <map>
#include <mutex>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/stream.h"
#include "kiln/store/nar.h"

namespace kiln::eval {

namespace {

// The store calls a source filter once while hashing (on the evaluating
// thread) and once while copying (on a helper thread). The Nix filter may
// only run on the evaluating thread, so its answers are recorded there and
// replayed on the other; an entry never seen there (the tree changed) is
// left out and the store's hash check reports the change.
class RecordedFilter {
 public:
  explicit RecordedFilter(const PathFilter& filter)
      : filter_(narFilterOf(filter)), owner_(std::this_thread::get_id()) {}
  bool operator()(const std::string& path) {
    std::lock_guard lock(mutex_);
    if (std::this_thread::get_id() == owner_) return answers_[path] = filter_(path);
    auto it = answers_.find(path);
    return it != answers_.end() && it->second;
  }

 private:
  std::function<bool(const std::string&)> filter_;
  std::thread::id owner_;
  std::mutex mutex_;
  std::map<std::string, bool> answers_;
};

}  // namespace

LocalStoreWriter::LocalStoreWriter(store::LocalStore& store, size_t batchSize,
                                   std::function<void()> onCommit)
    : store_(store), batch_(store), batchSize_(batchSize), onCommit_(std::move(onCommit)) {}

void LocalStoreWriter::flush() {
  if (batch_.size() == 0) return;
  batch_.commit();
  if (onCommit_) onCommit_();
}

void LocalStoreWriter::commitIfFull() {
  if (batch_.size() >= batchSize_) flush();
}

void LocalStoreWriter::expectPath(const store::StorePath& got, const std::string& expected,
                                  const std::string& what) const {
  if (store_.printPath(got) != expected)
    throw Error(what + " was added to the store as '" + store_.printPath(got) +
                "', not as '" + expected + "' (did it change during the evaluation?)");
}

store::StorePath LocalStoreWriter::checkedAddText(const std::string& path,
                                                  const std::string& contents,
                                                  const std::set<std::string>& references) {
  store::StorePath want = store_.parsePath(path);
  store::StorePathSet refs;
  for (auto& r : references) refs.insert(store_.parsePath(r));
  size_t before = batch_.size();
  store::StorePath got = batch_.addText(want.name(), contents, refs);
  expectPath(got, path, "'" + path + "'");
  if (batch_.size() > before) ++written_;
  return got;
}

void LocalStoreWriter::addText(const std::string& path, const std::string& contents,
                               const std::set<std::string>& references) {
  checkedAddText(path, contents, references);
  commitIfFull();
}

void LocalStoreWriter::addDerivation(const std::string& path, const std::string& contents,
                                     const std::set<std::string>& references,
                                     const std::map<std::string, std::string>& outputs) {
  size_t before = written_;
  store::StorePath drv = checkedAddText(path, contents, references);
  if (written_ != before && !outputs.empty()) {
    std::map<std::string, store::StorePath> outs;
    for (auto& [name, out] : outputs) outs.emplace(name, store_.parsePath(out));
    batch_.registerDerivationOutputs(drv, outs);
  }
  commitIfFull();
}

void LocalStoreWriter::addSource(const std::string& path, const std::string& fsPath,
                                 const PathFilter& filter, bool recursive) {
  store::StorePath want = store_.parsePath(path);
  if (batch_.queued(want)) return;
  store_.addTempRoot(want);
  if (store_.isValid(want)) return;
  if (recursive) {
    RecordedFilter recorded(filter);
    store::NarPathFilter f;
    if (filter) f = [&](const std::string& p) { return recorded(p); };
    expectPath(batch_.addPath(fsPath, want.name(), f), path, "'" + fsPath + "'");
  } else {
    // A flat file: addressed by the sha256 of its bytes, stored as a plain
    // (non-executable) file.
    std::string contents = readFile(fsPath);
    Hash h = hashString(HashAlgo::kSha256, contents);
    store::ValidPathInfo info(store_.storeDir().makeFixedOutputPath(want.name(), false, h));
    expectPath(info.path, path, "'" + fsPath + "'");
    StringSink nar;
    store::dumpString(contents, nar);
    info.narHash = hashString(HashAlgo::kSha256, nar.s);
    info.narSize = nar.s.size();
    info.ca = store::makeFixedCa(false, h);
    StringSource src(nar.s);
    batch_.addFromNar(info, src);
  }
  ++written_;
  commitIfFull();
}

}  // namespace kiln::eval
