#pragma once
/// A hash map from store path base names to values, for DrvHashCache's
/// memo: open addressing over an index of 8-byte slots, items in chunks
/// that never move.

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::store {

/// Base name -> T. Keys are views the caller keeps valid and unchanged as
/// long as the map. An item's address is stable (inserting never moves
/// items), so pointers into it may be held across inserts. A lookup reads
/// one index slot (32 bits of the key's hash and the item's number) and,
/// only when those bits match, the item and its key. No erase.
template <class T>
class BaseNameMap {
 public:
  /// A key and its value.
  struct Item {
    std::string_view key;  ///< the caller's kept copy
    T value{};
  };

  /// The item under `key`, or nullptr.
  Item* find(std::string_view key) {
    if (slots_.empty()) return nullptr;
    uint32_t tag = hashOf(key);
    for (size_t i = tag & mask();; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.item == 0) return nullptr;
      if (s.tag != tag) continue;
      Item& it = item(s.item - 1);
      if (it.key == key) return &it;
    }
  }
  const Item* find(std::string_view key) const {
    return const_cast<BaseNameMap*>(this)->find(key);
  }

  /// Adds `value` under `key`, which must not be in the map yet; returns
  /// the new item.
  Item& insert(std::string_view key, const T& value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    uint32_t n = static_cast<uint32_t>(size_);
    if (n % kChunk == 0) chunks_.push_back(std::make_unique<Item[]>(kChunk));
    Item& it = item(n);
    it.key = key;
    it.value = value;
    ++size_;
    place(hashOf(key), n);
    return it;
  }

  /// Number of items.
  size_t size() const { return size_; }

  /// The hash used: store path base names start with 32 random nix32
  /// characters, so their first 8 bytes, mixed, serve. Its low bits pick
  /// the slot; all 32 are kept in it (no key is read to grow).
  static uint32_t hashOf(std::string_view key) {
    uint64_t h;
    if (key.size() >= sizeof h) {
      std::memcpy(&h, key.data(), sizeof h);
    } else {
      h = std::hash<std::string_view>()(key);
    }
    h ^= h >> 33;  // murmur3's finaliser: every bit reaches the low ones
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return static_cast<uint32_t>(h);
  }

 private:
  static constexpr size_t kChunk = 1024;  // items per chunk
  struct Slot {
    uint32_t tag = 0;   // the key's hashOf
    uint32_t item = 0;  // item number + 1; 0 when the slot is empty
  };
  size_t mask() const { return slots_.size() - 1; }
  Item& item(uint32_t n) { return chunks_[n / kChunk][n % kChunk]; }

  void place(uint32_t tag, uint32_t n) {
    size_t i = tag & mask();
    while (slots_[i].item != 0) i = (i + 1) & mask();
    slots_[i] = Slot{tag, n + 1};
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    for (const Slot& s : old)
      if (s.item != 0) place(s.tag, s.item - 1);
  }

  std::vector<Slot> slots_;  // a power of two, at most half full
  std::vector<std::unique_ptr<Item[]>> chunks_;
  size_t size_ = 0;
};

}  // namespace kiln::store
