#include "root_pool.h"

namespace kiln::sandbox_linux {

std::unique_ptr<RootDir> RootPool::take(const std::string& key,
                                        const std::string& scratchDir) {
  {
    std::lock_guard lock(mu_);
    auto it = idle_.find(key);
    if (it != idle_.end() && !it->second.empty()) {
      auto root = std::move(it->second.back());
      it->second.pop_back();
      return root;
    }
  }
  return std::make_unique<RootDir>(scratchDir);
}

void RootPool::give(const std::string& key, std::unique_ptr<RootDir> root,
                    const std::vector<std::string>& writable) {
  try {
    for (auto& dir : writable) {
      if (dir.compare(0, root->path().size() + 1, root->path() + "/") != 0)
        return;  // not below the root: drop the root (its destructor)
      emptyDir(dir);
    }
  } catch (...) {
    return;  // the root goes with `root`
  }
  std::lock_guard lock(mu_);
  auto& roots = idle_[key];
  if (roots.size() < maxIdle_) roots.push_back(std::move(root));
}

size_t RootPool::idle() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (auto& [key, roots] : idle_) n += roots.size();
  return n;
}

}  // namespace kiln::sandbox_linux
