// KILN_EVAL_STATS=3: a census of what the collector's heap holds after a
// final collection (eval_stats.h, printLiveCensus): strings by text (how
// many bytes are byte-identical copies, which texts weigh most), context
// arrays by contents, scanned objects by size, and the types of the values
// in value blocks; with KILN_CENSUS_WHO, what keeps chosen strings alive.
// A measuring aid: it reads every live object.
#include "gc_support.h"  // first: GC_THREADS before any libgc header
#include <gc/gc_inline.h>  // GC_I_PTRFREE
#include <gc/gc_mark.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/evaluator/eval_stats.h"
#include "kiln/evaluator/value.h"

// tcmalloc's text statistics (size classes in use), when linked.
extern "C" void MallocExtension_GetStats(char* buffer, int length) __attribute__((weak));

namespace kiln::eval {

namespace {

struct Object {
  const char* p;
  size_t bytes;
  int kind;
};

// Whether an atomic object reads as a NULL-terminated array of pointers
// (a context array) rather than text: every word up to a null one is an
// aligned user-space address (eight characters of text never are).
// Whether the page at `w` is mapped (a pointer-like word may point nowhere).
bool mapped(uintptr_t w) {
  static std::unordered_map<uintptr_t, bool> pages;
  uintptr_t page = w & ~uintptr_t(4095);
  auto it = pages.find(page);
  if (it != pages.end()) return it->second;
  bool ok = msync(reinterpret_cast<void*>(page), 1, MS_ASYNC) == 0;
  pages.emplace(page, ok);
  return ok;
}

bool looksLikeContext(const char* p, size_t bytes) {
  size_t words = bytes / sizeof(uintptr_t);
  if (words == 0) return false;
  for (size_t i = 0; i < words; ++i) {
    uintptr_t w;
    std::memcpy(&w, p + i * sizeof w, sizeof w);
    if (w == 0) return i > 0;
    if (w < 0x10000 || w > 0x7fffffffffffULL || !mapped(w)) return false;
  }
  return false;
}

std::string printable(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c == '\n' ? '|' : (c < 32 ? '?' : c));
  return out;
}

std::string mb(uint64_t bytes) { return std::to_string((bytes + (1 << 19)) >> 20) + " MB"; }

void censusStrings(const std::vector<Object>& atomic, std::ostream& out, const char* p) {
  std::unordered_map<std::string_view, std::pair<uint64_t, uint64_t>> texts;  // count, bytes
  std::map<std::vector<uintptr_t>, uint64_t> contexts;
  std::unordered_map<std::string_view, uint64_t> elementTexts;  // distinct element texts
  std::unordered_map<uintptr_t, bool> elementPtrs;
  uint64_t strBytes = 0, strCount = 0, ctxBytes = 0, ctxCount = 0, ctxEntries = 0;
  for (const Object& o : atomic) {
    if (looksLikeContext(o.p, o.bytes)) {
      std::vector<uintptr_t> v;
      for (const char* const* e = reinterpret_cast<const char* const*>(o.p); *e; ++e) {
        v.push_back(reinterpret_cast<uintptr_t>(*e));
        if (!elementPtrs.emplace(v.back(), true).second) continue;
        ++elementTexts[*e];
      }
      ctxEntries += v.size();
      ++contexts[std::move(v)];
      ++ctxCount;
      ctxBytes += o.bytes;
      continue;
    }
    std::string_view s(o.p, strnlen(o.p, o.bytes));
    auto& t = texts[s];
    ++t.first;
    t.second += o.bytes;
    ++strCount;
    strBytes += o.bytes;
  }
  uint64_t dupBytes = 0, dupCount = 0;
  std::vector<std::pair<uint64_t, std::string_view>> heavy;
  for (auto& [s, t] : texts) {
    if (t.first > 1) {
      dupCount += t.first - 1;
      dupBytes += t.second - t.second / t.first;
    }
    heavy.push_back({t.second, s});
  }
  uint64_t sameTextElems = 0;
  for (auto& [s, n] : elementTexts) sameTextElems += n - 1;
  out << p << "census: strings " << strCount << "/" << mb(strBytes) << ", distinct texts "
      << texts.size() << ", byte-identical copies " << dupCount << "/" << mb(dupBytes) << "\n"
      << p << "census: context arrays " << ctxCount << "/" << mb(ctxBytes) << " (" << ctxEntries
      << " entries), distinct arrays " << contexts.size() << ", distinct entry pointers "
      << elementPtrs.size() << " (texts " << elementTexts.size() << ", " << sameTextElems
      << " pointers to a text another pointer has)\n";
  std::sort(heavy.begin(), heavy.end(), std::greater<>());
  for (size_t i = 0; i < heavy.size() && i < 25; ++i) {
    auto& t = texts[heavy[i].second];
    out << p << "census: text x" << t.first << " " << t.second << " B: "
        << printable(heavy[i].second, 90) << "\n";
  }
  // Texts by length band and prefix (their first 12 characters): what kinds weigh most.
  std::unordered_map<std::string, std::pair<uint64_t, uint64_t>> byPrefix;
  for (auto& [s, t] : texts) {
    auto& b = byPrefix[printable(s, 12)];
    b.first += t.first;
    b.second += t.second;
  }
  std::vector<std::pair<uint64_t, std::string>> prefixes;
  for (auto& [k, b] : byPrefix) prefixes.push_back({b.second, k});
  std::sort(prefixes.begin(), prefixes.end(), std::greater<>());
  for (size_t i = 0; i < prefixes.size() && i < 25; ++i)
    out << p << "census: prefix '" << prefixes[i].second << "' x" << byPrefix[prefixes[i].second].first
        << " " << mb(prefixes[i].first) << "\n";
}

// A value block as EvalHeap hands values out (eval_heap.h,
// kValuesPerBlock): three 24-byte values in one 80-byte object.
constexpr size_t kValueBlock = 80;
constexpr size_t kValuesInBlock = 3;

void censusScanned(const std::vector<Object>& scanned, std::ostream& out, const char* p) {
  std::map<size_t, std::pair<uint64_t, uint64_t>> bySize;
  uint64_t types[16] = {};
  for (const Object& o : scanned) {
    auto& b = bySize[o.bytes];
    ++b.first;
    b.second += o.bytes;
    if (o.bytes != kValueBlock) continue;
    for (size_t i = 0; i < kValuesInBlock; ++i) {
      uint8_t t = static_cast<uint8_t>(o.p[i * sizeof(Value)]);
      ++types[t < 15 ? t : 15];
    }
  }
  std::vector<std::pair<uint64_t, size_t>> heavy;
  for (auto& [size, b] : bySize) heavy.push_back({b.second, size});
  std::sort(heavy.begin(), heavy.end(), std::greater<>());
  out << p << "census: scanned objects by size:";
  for (size_t i = 0; i < heavy.size() && i < 14; ++i)
    out << " " << heavy[i].second << "B x" << bySize[heavy[i].second].first << "="
        << mb(heavy[i].first);
  out << "\n" << p << "census: 80-byte objects' slots as values by type tag (thunk app blackhole "
      << "int float bool null string path attrs list lambda primop primopapp, other):";
  for (uint64_t t : types) out << " " << t;
  out << "\n";
}

// KILN_CENSUS_WHO=<prefix>: what points at the live strings starting with
// <prefix>, then at those referrers, level by level (KILN_WHO_LEVELS, 4):
// at each level, the referring objects by size and by the offset of the
// pointer (in an 80-byte value block, its offset within the value, and the
// value's type tag). A referrer that is a value block counts as the one
// value pointing, not the block; a level with no referrer of its own means
// the objects are kept by their block (a live neighbour).
using Range = std::pair<uintptr_t, size_t>;  // start, bytes

// The range of `ranges` (sorted) that holds address `v`, or nullptr.
const Range* rangeHolding(const std::vector<Range>& ranges, uintptr_t v) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), Range(v, SIZE_MAX));
  if (it == ranges.begin()) return nullptr;
  --it;
  return v < it->first + it->second ? &*it : nullptr;
}

// One level: prints who points into `targets` and returns those referrers.
std::vector<Range> referrers(const std::vector<Range>& targets,
                             const std::vector<Object>& scanned, std::ostream& out) {
  std::map<std::tuple<size_t, size_t, int>, uint64_t> hist;  // size, offset, tag
  std::map<uintptr_t, size_t> next;
  for (const Object& o : scanned) {
    const auto base = reinterpret_cast<uintptr_t>(o.p);
    for (size_t w = 0; w + sizeof(uintptr_t) <= o.bytes; w += sizeof(uintptr_t)) {
      uintptr_t v;
      std::memcpy(&v, o.p + w, sizeof v);
      if ((v >= base && v < base + o.bytes) || !rangeHolding(targets, v)) continue;
      const bool value =
          o.bytes == kValueBlock && w < kValuesInBlock * sizeof(Value);
      const size_t slot = w / sizeof(Value) * sizeof(Value);
      if (value) next[base + slot] = sizeof(Value);
      else next[base] = o.bytes;
      ++hist[{o.bytes, value ? w - slot : w, value ? uint8_t(o.p[slot]) : -1}];
    }
  }
  std::vector<std::pair<uint64_t, std::tuple<size_t, size_t, int>>> heavy;
  for (auto& [k, n] : hist) heavy.push_back({n, k});
  std::sort(heavy.begin(), heavy.end(), std::greater<>());
  for (size_t i = 0; i < heavy.size() && i < 12; ++i) {
    auto [size, offset, tag] = heavy[i].second;
    out << "kiln-eval-stats: who:   size " << size << " offset " << offset;
    if (tag >= 0) out << " type " << tag;
    out << " x" << heavy[i].first << "\n";
  }
  return {next.begin(), next.end()};
}

void whoPoints(const std::vector<Object>& atomic, const std::vector<Object>& scanned,
               std::string_view prefix, std::ostream& out) {
  std::vector<Range> targets;
  for (const Object& o : atomic)
    if (std::string_view(o.p, strnlen(o.p, o.bytes)).starts_with(prefix))
      targets.push_back({reinterpret_cast<uintptr_t>(o.p), o.bytes + 1});
  std::sort(targets.begin(), targets.end());
  const char* levels = getenv("KILN_WHO_LEVELS");
  for (int level = 0, n = levels ? atoi(levels) : 4; level < n && !targets.empty(); ++level) {
    out << "kiln-eval-stats: who: level " << level << ", " << targets.size()
        << " objects, pointed at by:\n";
    targets = referrers(targets, scanned, out);
  }
}

}  // namespace

void printLiveCensus(std::ostream& out) {
  if (MallocExtension_GetStats) {
    std::string buf(1 << 16, '\0');
    MallocExtension_GetStats(buf.data(), int(buf.size()));
    out << std::string_view(buf.c_str()).substr(0, 1200);
  }
  std::vector<Object> atomic, scanned;
  std::pair<std::vector<Object>*, std::vector<Object>*> lists{&atomic, &scanned};
  GC_call_with_alloc_lock(
      [](void* data) -> void* {
        GC_enumerate_reachable_objects_inner(
            [](void* obj, size_t bytes, void* d) {
              auto* l = static_cast<std::pair<std::vector<Object>*, std::vector<Object>*>*>(d);
              int kind = GC_get_kind_and_size(obj, nullptr);
              Object o{static_cast<const char*>(obj), bytes, kind};
              (kind == GC_I_PTRFREE ? l->first : l->second)->push_back(o);
            },
            data);
        return nullptr;
      },
      &lists);
  const char* p = "kiln-eval-stats: ";
  censusStrings(atomic, out, p);
  censusScanned(scanned, out, p);
  if (const char* who = getenv("KILN_CENSUS_WHO")) whoPoints(atomic, scanned, who, out);
}

}  // namespace kiln::eval
