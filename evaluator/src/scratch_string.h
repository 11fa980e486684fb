#pragma once
// Scratch buffers for building one string value before it is copied into
// the arena.

#include <memory>
#include <string>
#include <vector>

namespace kiln::eval {

/// A std::string leased from a per-thread pool for the lifetime of this
/// object and returned to it (emptied, capacity kept) afterwards, so that
/// building a string in a loop (`acc + "x"`, interpolation,
/// concatStringsSep) neither grows a fresh buffer each time nor maps and
/// unmaps large ones. Leases nest (a part being evaluated may build
/// strings of its own); each holds its own buffer.
class ScratchString {
 public:
  ScratchString() {
    auto& pool = freeList();
    if (pool.empty()) {
      s_ = std::make_unique<std::string>();
    } else {
      s_ = std::move(pool.back());
      pool.pop_back();
    }
  }
  ~ScratchString() {
    s_->clear();
    freeList().push_back(std::move(s_));
  }
  ScratchString(const ScratchString&) = delete;
  ScratchString& operator=(const ScratchString&) = delete;
  /// The buffer, empty when leased.
  std::string& str() { return *s_; }

 private:
  static std::vector<std::unique_ptr<std::string>>& freeList() {
    static thread_local std::vector<std::unique_ptr<std::string>> pool;
    return pool;
  }
  std::unique_ptr<std::string> s_;
};

}  // namespace kiln::eval
