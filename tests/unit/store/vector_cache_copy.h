#pragma once
// A writable copy of one of the vector binary caches, for tests that
// corrupt it.
#include <filesystem>
#include <string>

#include "kiln/common/file.h"
#include "kiln/store/narinfo.h"
#include "test_support.h"

namespace kiln::store {

/// A writable copy of a vector cache.
class CacheCopy {
 public:
  explicit CacheCopy(const std::string& name) {
    root_ = tmp_.path() + "/" + name;
    std::filesystem::copy(test::vectorPath("cache/" + name), root_,
                          std::filesystem::copy_options::recursive);
    for (auto& e : std::filesystem::recursive_directory_iterator(root_))
      std::filesystem::permissions(e.path(),
                                   std::filesystem::perms::owner_write,
                                   std::filesystem::perm_options::add);
    std::filesystem::permissions(root_, std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::add);
  }
  std::string file(const StorePath& p) const {
    return root_ + "/" + narInfoFileName(p);
  }
  /// Replaces the value of `key` in `p`'s narinfo.
  void setField(const StorePath& p, const std::string& key,
                const std::string& value) {
    auto text = readFile(file(p));
    auto at = text.find(key + ": ");
    if (at == std::string::npos) {
      text += key + ": " + value + "\n";
    } else {
      auto eol = text.find('\n', at);
      text.replace(at, eol - at, key + ": " + value);
    }
    writeFile(file(p), text);
  }
  void removeField(const StorePath& p, const std::string& key) {
    auto text = readFile(file(p));
    auto at = text.find(key + ": ");
    text.erase(at, text.find('\n', at) - at + 1);
    writeFile(file(p), text);
  }
  std::string field(const StorePath& p, const std::string& key) {
    auto text = readFile(file(p));
    auto at = text.find(key + ": ") + key.size() + 2;
    return text.substr(at, text.find('\n', at) - at);
  }
  const std::string& root() const { return root_; }

 private:
  TempDir tmp_;
  std::string root_;
};

}  // namespace kiln::store
