// Reference scanning (spec §6).
#include "kiln/store/refs.h"

#include <array>
#include <functional>

#include "kiln/common/background_sink.h"
#include "kiln/common/error.h"

namespace kiln::store {
namespace {

constexpr size_t kHashLen = StorePath::kHashLen;

constexpr std::array<bool, 256> makeNix32Table() {
  std::array<bool, 256> t{};
  for (char c : std::string_view("0123456789abcdfghijklmnpqrsvwxyz"))
    t[static_cast<unsigned char>(c)] = true;
  return t;
}
constexpr std::array<bool, 256> kIsNix32 = makeNix32Table();

inline bool isNix32(char c) { return kIsNix32[static_cast<unsigned char>(c)]; }

}  // namespace

size_t RefScanSink::ViewHash::operator()(std::string_view s) const noexcept {
  return std::hash<std::string_view>()(s);
}

RefScanSink::RefScanSink(const std::set<std::string>& hashParts) {
  for (auto& h : hashParts) add(h);
}

RefScanSink::RefScanSink(const StorePathSet& paths) {
  for (auto& p : paths) add(p.hashPart());
}

void RefScanSink::add(std::string_view h) {
  bool ok = h.size() == kHashLen;
  for (char c : h) ok = ok && isNix32(c);
  if (!ok) throw FormatError("reference candidate '" + std::string(h) +
                             "' is not a 32-character nix32 hash part");
  candidates_.emplace(h);
}

void RefScanSink::check(std::string_view window) {
  auto it = candidates_.find(window);
  if (it != candidates_.end()) found_.insert(*it);
}

// Reports every 32-byte window of nix32 characters in `buf` that starts
// before `maxStart`. Outside runs the search skips ahead: the backward check
// of a window stops at its last non-nix32 byte, and the next window starts
// after it.
void RefScanSink::scan(std::string_view buf, size_t maxStart) {
  const size_t n = buf.size();
  size_t i = 0;
  while (i + kHashLen <= n && i < maxStart) {
    size_t j = i + kHashLen;
    while (j > i && isNix32(buf[j - 1])) --j;
    if (j > i) {
      i = j;
      continue;
    }
    check(buf.substr(i, kHashLen));
    size_t k = i + kHashLen;
    while (k < n && isNix32(buf[k]) && k + 1 - kHashLen < maxStart) {
      check(buf.substr(k + 1 - kHashLen, kHashLen));
      ++k;
    }
    i = k + 1;
  }
}

void RefScanSink::write(std::string_view data) {
  if (candidates_.empty() || data.empty()) return;
  const size_t n = data.size();
  if (!tail_.empty()) {
    // Windows that start in the previous data and end in this one.
    std::string joint = tail_;
    joint.append(data.substr(0, std::min(n, kHashLen - 1)));
    scan(joint, tail_.size());
  }
  scan(data, n);
  size_t run = 0;
  while (run < n && run < kHashLen - 1 && isNix32(data[n - 1 - run])) ++run;
  if (run < n || n >= kHashLen - 1) {
    tail_.assign(data.substr(n - run));
  } else {
    tail_.append(data);
    if (tail_.size() > kHashLen - 1) tail_.erase(0, tail_.size() - (kHashLen - 1));
  }
}

StorePathSet selectReferences(const StorePathSet& candidates,
                              const std::set<std::string>& found) {
  StorePathSet out;
  for (auto& p : candidates)
    if (found.count(std::string(p.hashPart()))) out.insert(p);
  return out;
}

NarHashAndRefs hashAndScanPath(const std::string& path, const StorePathSet& candidates,
                               NarFs& fs) {
  HashingSink hasher(HashAlgo::kSha256);
  RefScanSink scanner(candidates);
  TeeSink tee(hasher, scanner);
  BackgroundSink bg(tee);  // hash + scan on a second thread
  dumpPath(path, bg, {}, fs);
  bg.finish();
  NarHashAndRefs out;
  std::tie(out.narHash, out.narSize) = hasher.finish();
  out.references = selectReferences(candidates, scanner.found());
  return out;
}

}  // namespace kiln::store
