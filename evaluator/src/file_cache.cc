// FileCache: an EvalState's imported files and copied sources.
#include "file_cache.h"

namespace kiln::eval {

Value* FileCache::findImport(std::string_view file) {
  Shard& shard = shardOf(file);
  auto lock = lockIfShared(shard.mu);
  auto it = shard.files.find(file);
  return it == shard.files.end() ? nullptr : it->second;
}

Value* FileCache::addImport(std::string_view file, const std::function<Value*()>& make) {
  Shard& shard = shardOf(file);
  auto lock = lockIfShared(shard.mu);
  auto [it, added] = shard.files.emplace(file, nullptr);
  if (added) it->second = make();
  return it->second;
}

std::string FileCache::copiedSource(const std::string& path,
                                    const std::function<std::string()>& copy) {
  auto lock = lockIfShared(sourcesMutex_);
  if (auto it = sources_.find(path); it != sources_.end()) return it->second;
  std::string dst = copy();
  sources_.emplace(path, dst);
  return dst;
}

}  // namespace kiln::eval
