#pragma once
// EvalState's file and import cache: the values of the files it imported
// and the store paths of the sources it copied (coerced paths, `path`
// values interpolated into strings). Evaluator-internal:
// EvalState::files().

#include <array>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "kiln/evaluator/value.h"

namespace kiln::eval {

/// The imports and copied sources of one EvalState. Locks are taken only
/// while shared (threaded evaluation: setShared).
class FileCache {
 public:
  /// Whether threads share the cache from now on.
  void setShared(bool shared) { shared_ = shared; }
  /// The value of the imported file `file` (a canonical path), or nullptr.
  Value* findImport(std::string_view file);
  /// Adds `file`'s value made by `make` (called under the shard's lock,
  /// evaluating nothing) unless another thread added it first; returns the
  /// one cached. `file` must stay valid as long as the cache (a path kept
  /// in the state's positions or arena): no second copy is made.
  Value* addImport(std::string_view file, const std::function<Value*()>& make);
  /// The store path the source `path` was copied to: remembered, or made
  /// by `copy` (under the cache's lock, evaluating nothing) and remembered.
  std::string copiedSource(const std::string& path, const std::function<std::string()>& copy);

 private:
  /// Imported files' values by path, in shards by the path's hash, each
  /// with its own lock (used only while threaded): threads import
  /// thousands of files at once, and one lock around one map was the most
  /// contended of threaded evaluation's own.
  struct alignas(64) Shard {
    std::mutex mu;
    std::unordered_map<std::string_view, Value*> files;
  };
  static constexpr size_t kShards = 16;
  Shard& shardOf(std::string_view file) {
    return shards_[std::hash<std::string_view>{}(file) % kShards];
  }
  std::unique_lock<std::mutex> lockIfShared(std::mutex& m) const {
    return shared_ ? std::unique_lock<std::mutex>(m) : std::unique_lock<std::mutex>();
  }
  std::array<Shard, kShards> shards_;
  std::mutex sourcesMutex_;
  std::map<std::string, std::string> sources_;  // source path -> store path
  bool shared_ = false;
};

}  // namespace kiln::eval
