// Trust decisions for paths read from a binary cache, and NAR listings.
#include <nlohmann/json.hpp>

#include "kiln/common/error.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/content_address.h"
#include "kiln/store/nar.h"

namespace kiln::store {
namespace {

/// Counts the bytes a parser has consumed (for narOffset).
class CountingSource : public Source {
 public:
  explicit CountingSource(Source& in) : in_(in) {}
  size_t read(char* d, size_t len) override {
    size_t n = in_.read(d, len);
    count_ += n;
    return n;
  }
  uint64_t count() const { return count_; }

 private:
  Source& in_;
  uint64_t count_ = 0;
};

/// Builds Nix's `.ls` JSON: keys in Nix's order (type, size, executable,
/// narOffset; type, entries; type, target), entries in archive order.
class ListingBuilder : public NarVisitor {
 public:
  using Json = nlohmann::ordered_json;
  explicit ListingBuilder(const CountingSource& counter) : counter_(counter) {}

  void createDirectory(const std::string& path) override {
    auto& node = nodeAt(path);
    node["type"] = "directory";
    node["entries"] = Json::object();
  }
  void createRegularFile(const std::string& path, bool executable,
                         uint64_t size) override {
    auto& node = nodeAt(path);
    node["type"] = "regular";
    node["size"] = size;
    if (executable) node["executable"] = true;
    node["narOffset"] = counter_.count();
  }
  void receiveContents(std::string_view) override {}
  void createSymlink(const std::string& path,
                     const std::string& target) override {
    auto& node = nodeAt(path);
    node["type"] = "symlink";
    node["target"] = target;
  }
  std::string render() const {
    Json doc;
    doc["version"] = 1;
    doc["root"] = root_;
    // Names and targets are bytes: invalid UTF-8 becomes U+FFFD (Nix
    // writes such bytes raw, which is not JSON) instead of throwing.
    return doc.dump(-1, ' ', false, Json::error_handler_t::replace);
  }

 private:
  /// The JSON node for `path` ("" = root, "a/b" = entries a → entries b).
  Json& nodeAt(const std::string& path) {
    Json* node = &root_;
    size_t pos = 0;
    while (pos < path.size()) {
      auto slash = path.find('/', pos);
      if (slash == std::string::npos) slash = path.size();
      node = &(*node)["entries"][path.substr(pos, slash - pos)];
      pos = slash + 1;
    }
    return *node;
  }
  const CountingSource& counter_;
  Json root_ = Json::object();
};

}  // namespace

void BinaryCacheReader::checkTrusted(const NarInfo& info,
                                     const CacheTrust& trust) {
  if (!trust.requireSigs || hasValidSignature(info, trust.keys)) return;
  auto printed = storeDir_.printPath(info.path);
  if (info.ca.empty())
    throw Error(
        "cannot import '" + printed + "' from '" + storage_.uri() +
        "': it lacks a valid signature by a trusted key" +
        (trust.keys.empty() ? " (no trusted public keys were given)" : ""));
  auto ca = ContentAddress::parse(info.ca);
  auto refs = info.references;
  if (refs.erase(info.path))
    throw Error("cannot import '" + printed +
                "': it is self-referencing and content-addressed, and lacks "
                "a valid signature by a trusted key");
  auto expected = ca.makePath(storeDir_, info.path.name(), refs, false);
  if (expected != info.path)
    throw Error("cannot import '" + printed + "': its CA field '" + info.ca +
                "' gives the path '" + storeDir_.printPath(expected) +
                "', and it lacks a valid signature by a trusted key");
  // The content is not read here: LocalStore checks the CA field against
  // the very bytes it registers (a read here and another at the import
  // could see different files).
}

std::string narListing(Source& nar) {
  CountingSource counter(nar);
  ListingBuilder builder(counter);
  parseNar(counter, builder);
  return builder.render();
}

}  // namespace kiln::store
