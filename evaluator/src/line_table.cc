// Compact line tables of sources (see LineTable in position.h).
#include <algorithm>
#include <cstring>

#include "kiln/evaluator/position.h"

namespace kiln::eval {

namespace {

constexpr uint32_t kAnchorEvery = 64;

// Layout: Header, then `anchors` Anchors, then the varint line lengths of
// all lines but the last (which runs to the end of the source).
struct Header {
  uint32_t lines;
  uint32_t anchors;
};
struct Anchor {
  uint32_t start;  // offset of line anchor * kAnchorEvery
  uint32_t at;     // where its length is in the varint stream
};

void putVarint(std::vector<uint8_t>& out, uint32_t n) {
  while (n >= 0x80) {
    out.push_back(static_cast<uint8_t>(n | 0x80));
    n >>= 7;
  }
  out.push_back(static_cast<uint8_t>(n));
}

uint32_t getVarint(const uint8_t*& p) {
  uint32_t n = 0;
  for (int shift = 0;; shift += 7) {
    uint8_t b = *p++;
    n |= uint32_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return n;
  }
}

}  // namespace

const uint8_t* LineTable::make(std::string_view text, Arena& arena) {
  return place(encode(text), arena);
}

const uint8_t* LineTable::place(const std::vector<uint8_t>& table,
                                Arena& arena) {
  auto* p =
      static_cast<uint8_t*>(arena.allocate(table.size(), alignof(Header)));
  std::memcpy(p, table.data(), table.size());
  return p;
}

std::vector<uint8_t> LineTable::encode(std::string_view text) {
  // Reused: growing them for every file cost a dozen allocations each.
  thread_local std::vector<Anchor> anchors;
  thread_local std::vector<uint8_t> stream;
  anchors.clear();
  stream.clear();
  uint32_t lines = 1, start = 0;
  anchors.push_back({0, 0});
  for (size_t i = text.find('\n'); i != std::string_view::npos;
       i = text.find('\n', i + 1)) {
    putVarint(stream, static_cast<uint32_t>(i + 1) - start);
    start = static_cast<uint32_t>(i + 1);
    if (lines++ % kAnchorEvery == 0)
      anchors.push_back({start, static_cast<uint32_t>(stream.size())});
  }
  std::vector<uint8_t> out(sizeof(Header) + sizeof(Anchor) * anchors.size() +
                           stream.size());
  uint8_t* p = out.data();
  Header h{lines, static_cast<uint32_t>(anchors.size())};
  std::memcpy(p, &h, sizeof h);
  std::memcpy(p + sizeof h, anchors.data(), sizeof(Anchor) * anchors.size());
  if (!stream.empty())
    std::memcpy(p + sizeof h + sizeof(Anchor) * anchors.size(), stream.data(),
                stream.size());
  return out;
}

std::pair<uint32_t, uint32_t> LineTable::find(const uint8_t* table,
                                              uint32_t offset) {
  Header h;
  std::memcpy(&h, table, sizeof h);
  const auto* anchors = reinterpret_cast<const Anchor*>(table + sizeof h);
  const uint8_t* stream = table + sizeof h + sizeof(Anchor) * h.anchors;
  // The last anchor at or before `offset` (the first is at 0).
  const Anchor* a = std::upper_bound(anchors, anchors + h.anchors, offset,
                                     [](uint32_t o, const Anchor& x) {
                                       return o < x.start;
                                     }) -
                    1;
  uint32_t line = static_cast<uint32_t>(a - anchors) * kAnchorEvery;  // 0-based
  uint32_t start = a->start;
  const uint8_t* p = stream + a->at;
  while (line + 1 < h.lines) {
    const uint8_t* next = p;
    uint32_t len = getVarint(next);
    if (start + len > offset) break;
    start += len;
    ++line;
    p = next;
  }
  return {line + 1, start};
}

}  // namespace kiln::eval
