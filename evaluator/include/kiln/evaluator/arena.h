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
    if (shared_) return;  // the tail stays (another thread may own the chunk's end)
    if (static_cast<char*>(p) + oldSize != cur_ || newSize > oldSize) return;
    cur_ -= oldSize - newSize;
    left_ += oldSize - newSize;
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

 private:
  void* allocateSlow(size_t size, size_t align);
  void* allocateShared(size_t size, size_t align);
  /// A new chunk of `n` bytes (under mu_ when shared).
  char* newChunk(size_t n);
  void addDestructor(void* p, void (*fn)(void*));
  static uint64_t nextId();

  std::vector<std::pair<std::unique_ptr<char[]>, size_t>> chunks_;  // memory, size
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

}  // namespace kiln::eval
