// libFuzzer target for the binary-cache reader: the input holds
// nix-cache-info, a narinfo and the NAR file it names (split at
// "\n--8<--\n"); reading, trust checks and streaming the NAR (with
// FileHash/NarHash checks and xz/zstd decoding under the memory limit)
// must succeed or raise kiln::Error, never crash or allocate without bound.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "fuzz_input.h"
#include "kiln/common/error.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/compression.h"

namespace {

using kiln::store::StorePath;

class MemoryStorage : public kiln::store::CacheStorage {
 public:
  std::map<std::string, std::string> files;
  bool exists(const std::string& rel) override { return files.count(rel); }
  std::optional<std::string> get(const std::string& rel) override {
    auto it = files.find(rel);
    if (it == files.end()) return std::nullopt;
    return it->second;
  }
  std::unique_ptr<kiln::Source> open(const std::string& rel) override {
    auto it = files.find(rel);
    if (it == files.end()) return nullptr;
    return std::make_unique<kiln::StringSource>(it->second);
  }
  void put(const std::string&, std::string_view) override {}
  std::unique_ptr<kiln::store::CacheUpload> upload() override {
    return nullptr;
  }
  std::string uri() const override { return "memory://fuzz"; }
};

class NullSink : public kiln::Sink {
 public:
  void write(std::string_view) override {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parts = kiln::fuzz::splitInput(data, size, "\n--8<--\n", 3);
  parts.resize(3);
  const StorePath path("7zzljlcf6mdzr5g1358ry3rlgcm8kbf3-ref-main");
  MemoryStorage storage;
  storage.files["nix-cache-info"] = parts[0];
  storage.files[std::string(path.hashPart()) + ".narinfo"] = parts[1];
  try {
    kiln::store::BinaryCacheReader reader(storage, kiln::store::StoreDir());
    reader.setDecompressionLimits({16u << 20});
    reader.init();
    auto ni = reader.queryNarInfo(path);
    if (!ni) return 0;
    storage.files[ni->url] = parts[2];
    kiln::store::CacheTrust trust;
    trust.requireSigs = false;
    reader.checkTrusted(*ni, trust);
    (void)reader.hasValidSignature(*ni, trust.keys);
    NullSink sink;
    auto nar = reader.narSource(*ni);
    uint64_t total = 0;
    char buf[65536];
    while (size_t n = nar->read(buf, sizeof buf)) {
      total += n;
      if (total > (64u << 20)) break;  // NarSize may claim a lot: stop early
    }
  } catch (const kiln::Error&) {
  }
  return 0;
}
