#pragma once
/// Bump allocator for the evaluator's AST nodes, environments and values.
///
/// Everything allocated here lives as long as the Arena (in practice, as
/// long as the EvalState): there is no per-object free. Objects with
/// non-trivial destructors made through `make` are destroyed, in reverse
/// order, when the Arena is destroyed. The garbage collector does not see
/// an arena's memory unless it is made `scanned`: then each chunk is a root
/// range, and collectable values its objects point to stay alive.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::eval {

/// Whether the Arena runs T's destructor when it dies: yes for every type
/// that is not trivially destructible, unless specialised to false for a
/// type whose destructor does nothing (an AST node whose only non-trivial
/// part is its virtual destructor), which saves a registration per object.
template <class T>
inline constexpr bool kArenaDestroys = !std::is_trivially_destructible_v<T>;

/// A chunked bump allocator. One thread at a time unless made shared
/// (setShared): then each thread bumps its own chunk and new chunks are
/// taken under a lock.
class Arena {
 public:
  /// A `scanned` arena's chunks are garbage-collector roots.
  explicit Arena(bool scanned = false) : scanned_(scanned), id_(nextId()) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();

  /// Raw, uninitialised storage of `size` bytes aligned to `align`.
  void* allocate(size_t size, size_t align = alignof(std::max_align_t)) {
    if (__builtin_expect(shared_, 0)) return allocateShared(size, align);
    size_t pad = (align - (reinterpret_cast<uintptr_t>(cur_) & (align - 1))) & (align - 1);
    if (pad + size > left_) return allocateSlow(size, align);
    char* p = cur_ + pad;
    cur_ = p + size;
    left_ -= pad + size;
    return p;
  }

  /// Constructs a T in the arena; its destructor runs when the arena dies.
  template <class T, class... A>
  T* make(A&&... a) {
    T* t = new (allocate(sizeof(T), alignof(T))) T(std::forward<A>(a)...);
    if constexpr (kArenaDestroys<T>)
      if (!leftToExit_) addDestructor(t, [](void* x) { static_cast<T*>(x)->~T(); });
    return t;
  }

  /// Constructs a T followed by uninitialised room for `n` Items (an array
  /// that starts at `t + 1`): one allocation for a node and its items. T
  /// must need no destructor from the arena.
  template <class T, class Item>
  T* makeWithItems(size_t n) {
    static_assert(sizeof(T) % alignof(Item) == 0 && !kArenaDestroys<T>);
    return new (allocate(sizeof(T) + sizeof(Item) * n, alignof(T))) T();
  }

  /// For an arena its owner never destroys (left to process exit): stops
  /// recording destructors, which would never run (16 bytes per AST node
  /// that owns a vector). If it is destroyed after all, the heap parts of
  /// objects made from now on leak; nothing else changes.
  void leaveToExit() { leftToExit_ = true; }

  /// A zero-initialised array of `n` trivially destructible T.
  template <class T>
  T* makeArray(size_t n) {
    static_assert(std::is_trivially_destructible_v<T>);
    void* p = allocate(sizeof(T) * (n ? n : 1), alignof(T));
    std::memset(p, 0, sizeof(T) * n);
    return static_cast<T*>(p);
  }

  /// Gives back the tail of the most recent allocation `p` (`oldSize`
  /// bytes, of which `newSize` are kept) when nothing was allocated since;
  /// otherwise does nothing. For arrays allocated at an upper bound.
  void shrinkLast(void* p, size_t oldSize, size_t newSize) {
    if (shared_) return shrinkLastShared(p, oldSize, newSize);
    shrinkTail(cur_, left_, p, oldSize, newSize);
  }
  /// A NUL-terminated copy of `s`.
  const char* copyString(std::string_view s) {
    char* p = static_cast<char*>(allocate(s.size() + 1, 1));
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = 0;
    return p;
  }

  /// Total bytes obtained from the system so far.
  size_t bytesReserved() const { return reserved_; }

  /// Lets several threads allocate at once (each from its own chunk) until
  /// called with false; then only the thread that owned the arena before.
  void setShared(bool shared) { shared_ = shared; }
  /// Whether several threads may allocate at once (setShared).
  bool shared() const { return shared_; }

 private:
  void* allocateSlow(size_t size, size_t align);
  void* allocateShared(size_t size, size_t align);
  /// Gives back the end of the block at `p` if it is the last one before
  /// `cur` (a chunk's cursor and room left).
  static void shrinkTail(char*& cur, size_t& left, void* p, size_t oldSize, size_t newSize) {
    if (static_cast<char*>(p) + oldSize != cur || newSize > oldSize) return;
    cur -= oldSize - newSize;
    left += oldSize - newSize;
  }
  /// shrinkLast on the calling thread's own chunk.
  void shrinkLastShared(void* p, size_t oldSize, size_t newSize);
  /// A new chunk of `n` bytes (under mu_ when shared).
  char* newChunk(size_t n);
  /// The size of the next chunk: 4 MiB, or for a scanned arena 256 KiB
  /// doubling with each chunk up to 4 MiB (under mu_ when shared).
  size_t nextChunkSize() const;
  void addDestructor(void* p, void (*fn)(void*));
  static uint64_t nextId();

  /// Frees a chunk: `delete[]`, or munmap for a scanned arena's.
  struct ChunkFree {
    size_t mapped = 0;  // the mapping's length; 0: from new[]
    void operator()(char* p) const;
  };
  std::vector<std::pair<std::unique_ptr<char[], ChunkFree>, size_t>> chunks_;  // memory, size
  bool scanned_ = false;
  char* cur_ = nullptr;
  size_t left_ = 0;
  size_t reserved_ = 0;
  std::deque<std::pair<void*, void (*)(void*)>> dtors_;  // no doubling
  bool leftToExit_ = false;
  bool shared_ = false;
  uint64_t id_;  // tells this arena's per-thread cursors from a dead one's
  std::mutex mu_;  // chunks_, reserved_ and dtors_ while shared
};

/// A growable array for the AST: one pointer (std::vector is three, and
/// its storage a malloc block with a header and spare capacity). The
/// elements follow an 8-byte header (size, capacity); empty is nullptr.
/// Storage comes from an Arena (exact size, through assign) or, while a
/// parser still adds to it, from malloc (pushMalloc) until moved into an
/// arena with finish() or given back with release(). Never owns memory
/// otherwise: copying copies the pointer.
template <class T>
class ArenaVec {
  static_assert(std::is_trivially_destructible_v<T> &&
                std::is_trivially_copy_constructible_v<T> && alignof(T) <= 8);

 public:
  size_t size() const { return h_ ? h_->size : 0; }
  bool empty() const { return size() == 0; }
  T* begin() { return data(); }
  T* end() { return data() + size(); }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size() - 1]; }

  /// Makes this an exact-size copy of `n` elements at `p` in `arena`.
  void assign(Arena& arena, const T* p, size_t n) {
    if (n == 0) {
      h_ = nullptr;
      return;
    }
    h_ = static_cast<Header*>(arena.allocate(sizeof(Header) + sizeof(T) * n, 8));
    h_->size = h_->capacity = static_cast<uint32_t>(n);
    std::uninitialized_copy_n(p, n, data());
  }
  /// Appends `x`, growing malloc'd storage (see finish and release).
  void pushMalloc(const T& x) {
    if (size() == (h_ ? h_->capacity : 0)) {
      uint32_t cap = h_ ? h_->capacity * 2 : 4;
      auto* h = static_cast<Header*>(std::realloc(h_, sizeof(Header) + sizeof(T) * cap));
      if (!h) throw std::bad_alloc();
      if (!h_) h->size = 0;
      h->capacity = cap;
      h_ = h;
    }
    new (data() + h_->size++) T(x);
  }
  /// Moves malloc'd storage (from pushMalloc) into `arena`, exact size.
  void finish(Arena& arena) {
    Header* old = h_;
    if (old) assign(arena, reinterpret_cast<T*>(old + 1), old->size);
    std::free(old);
  }
  /// Frees malloc'd storage (from pushMalloc) and becomes empty.
  void release() {
    std::free(h_);
    h_ = nullptr;
  }

 private:
  struct alignas(8) Header {
    uint32_t size;
    uint32_t capacity;
  };
  T* data() const { return h_ ? reinterpret_cast<T*>(h_ + 1) : nullptr; }
  Header* h_ = nullptr;
};

}  // namespace kiln::eval
