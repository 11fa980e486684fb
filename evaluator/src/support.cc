// Arena, symbol table, position table and path canonicalisation.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <optional>
#include <sstream>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "gc_support.h"
#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

Arena::~Arena() {
  for (auto it = dtors_.rbegin(); it != dtors_.rend(); ++it) it->second(it->first);
  if (scanned_)
    for (auto& [c, n] : chunks_) GC_remove_roots(c.get(), c.get() + n);
}

// 4 MiB chunks hold at least one aligned 2 MiB range: a huge page.
constexpr size_t kChunk = 4 << 20;
// A scanned arena's first chunk; each next one doubles, up to kChunk.
constexpr size_t kFirstScannedChunk = 256 << 10;

size_t Arena::nextChunkSize() const {
  // A scanned chunk is a root range, counted whole (used or not) in the
  // roots whose size libgc adds, halved, to what may be allocated between
  // collections, and read at each marking: the permanent arena uses a few
  // hundred KiB of a package set's first 4 MiB.
  if (!scanned_) return kChunk;
  return std::min(kChunk, kFirstScannedChunk << std::min<size_t>(chunks_.size(), 4));
}

void Arena::ChunkFree::operator()(char* p) const {
  if (mapped)
    ::munmap(p, mapped);
  else
    delete[] p;
}

char* Arena::newChunk(size_t n) {
  // Scanned memory starts zeroed: no stale words that look like pointers. A
  // fresh mapping is zero and takes no memory until touched, where clearing
  // malloc's block made the whole chunk resident (4 MiB for the permanent
  // arena, of which a package set uses well under 1; docs/evaluator.md,
  // "Where the memory goes").
  std::unique_ptr<char[], ChunkFree> memory;
  if (scanned_) {
    void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    memory = std::unique_ptr<char[], ChunkFree>(static_cast<char*>(m), ChunkFree{n});
  } else {
    memory = std::unique_ptr<char[], ChunkFree>(new char[n], ChunkFree{});
  }
  char* c = memory.get();
  if (n >= kChunk) adviseHugePages(c, n);  // before the first touch
  chunks_.emplace_back(std::move(memory), n);
  reserved_ += n;
  if (scanned_) {
    initGarbageCollector();
    GC_add_roots(c, c + n);
  }
  return c;
}

void* Arena::allocateSlow(size_t size, size_t align) {
  const size_t n = nextChunkSize();
  if (size + align > n / 4) {
    uintptr_t p = reinterpret_cast<uintptr_t>(newChunk(size + align));
    p = (p + align - 1) & ~(uintptr_t(align) - 1);
    return reinterpret_cast<void*>(p);
  }
  cur_ = newChunk(n);
  left_ = n;
  return allocate(size, align);
}

uint64_t Arena::nextId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

void Arena::addDestructor(void* p, void (*fn)(void*)) {
  if (!shared_) {
    dtors_.push_back({p, fn});
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  dtors_.push_back({p, fn});
}

namespace {
// A thread's own chunk of a shared arena (a few arenas per thread at once).
struct ArenaCursor {
  uint64_t arena = 0;
  char* cur = nullptr;
  size_t left = 0;
};
thread_local ArenaCursor tCursors[4];
thread_local unsigned tNextCursor = 0;
}  // namespace

void* Arena::allocateShared(size_t size, size_t align) {
  ArenaCursor* c = nullptr;
  for (ArenaCursor& x : tCursors)
    if (x.arena == id_) c = &x;
  if (!c) {
    c = &tCursors[tNextCursor++ % 4];
    *c = ArenaCursor{id_, nullptr, 0};
  }
  size_t pad = (align - (reinterpret_cast<uintptr_t>(c->cur) & (align - 1))) & (align - 1);
  if (c->cur && pad + size <= c->left) {
    char* p = c->cur + pad;
    c->cur = p + size;
    c->left -= pad + size;
    return p;
  }
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = nextChunkSize();
  if (size + align > n / 4) {
    uintptr_t p = reinterpret_cast<uintptr_t>(newChunk(size + align));
    return reinterpret_cast<void*>((p + align - 1) & ~(uintptr_t(align) - 1));
  }
  c->cur = newChunk(n);
  c->left = n;
  pad = (align - (reinterpret_cast<uintptr_t>(c->cur) & (align - 1))) & (align - 1);
  char* p = c->cur + pad;
  c->cur = p + size;
  c->left -= pad + size;
  return p;
}

void Arena::shrinkLastShared(void* p, size_t oldSize, size_t newSize) {
  for (ArenaCursor& c : tCursors)
    if (c.arena == id_)  // this thread's chunk: no other thread allocates from it
      return shrinkTail(c.cur, c.left, p, oldSize, newSize);
}

namespace {

// The names this thread interned last, direct-mapped by hash: a parser
// interns the same few names (`lib`, `stdenv`, `pname`, formals) over and
// over, and finding them here reads one small, hot array instead of the
// table's slot and the name's view, which a large table keeps out of the
// first-level cache. `serial` tells tables apart (one thread may parse for
// several states); a name's text never moves while its table lives.
struct RecentSymbol {
  const char* text = nullptr;
  uint32_t hash = 0;
  uint32_t len = 0;
  uint32_t id = 0;
  uint64_t serial = 0;  // 0: empty
};
constexpr size_t kRecentSymbols = 512;
thread_local RecentSymbol tRecent[kRecentSymbols];

uint64_t nextSymbolTableSerial() {
  static std::atomic<uint64_t> next{1};  // 0 marks an empty entry
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

SymbolTable::SymbolTable()
    : serial_(nextSymbolTableSerial()), table_(std::make_unique<Table>(1024)) {
  current_.store(table_.get());
  chunks_.reserve(size_t{1} << (32 - kChunkBits));
  chunks_.emplace_back(new std::string_view[size_t{1} << kChunkBits]);
  chunks_[0][0] = "<no symbol>";
  count_ = 1;
}

void SymbolTable::setShared(bool shared) {
  std::lock_guard<SpinMutex> lock(mu_);
  shared_ = shared;
  if (!shared) retired_.clear();  // no thread probes them any more
}

uint32_t SymbolTable::find(const Table& t, uint32_t hash, std::string_view name) const {
  for (size_t i = hash & t.mask;; i = (i + 1) & t.mask) {
    uint64_t slot = t.slots[i].load(std::memory_order_acquire);
    if (slot == 0) return 0;
    auto id = static_cast<uint32_t>(slot);
    if (static_cast<uint32_t>(slot >> 32) == hash && this->name(Symbol{id}) == name) return id;
  }
}

Symbol SymbolTable::intern(std::string_view name) {
  auto h = static_cast<uint32_t>(std::hash<std::string_view>()(name));
  RecentSymbol& r = tRecent[h & (kRecentSymbols - 1)];
  if (r.serial == serial_ && r.hash == h && r.len == name.size() &&
      std::memcmp(r.text, name.data(), name.size()) == 0)
    return Symbol{r.id};
  Symbol s = internUncached(name, h);
  if (name.size() <= UINT32_MAX)
    r = {this->name(s).data(), h, static_cast<uint32_t>(name.size()), s.id, serial_};
  return s;
}

Symbol SymbolTable::internUncached(std::string_view name, uint32_t h) {
  if (!shared_) return internLocked(name, h);
  if (uint32_t id = find(*current_.load(std::memory_order_acquire), h, name)) return Symbol{id};
  std::lock_guard<SpinMutex> lock(mu_);
  return internLocked(name, h);
}

Symbol SymbolTable::internLocked(std::string_view name, uint32_t h) {
  if (uint32_t id = find(*table_, h, name)) return Symbol{id};
  if (count_ == UINT32_MAX) throw EvalError("too many distinct names (symbols)");
  const char* copy = arena_.copyString(name);
  uint32_t id = count_;
  if ((id & kChunkMask) == 0) chunks_.emplace_back(new std::string_view[size_t{1} << kChunkBits]);
  chunks_[id >> kChunkBits][id & kChunkMask] = std::string_view(copy, name.size());
  count_ = id + 1;
  if (2 * size_t{count_} > table_->mask + 1) grow();
  size_t i = h & table_->mask;
  while (table_->slots[i].load(std::memory_order_relaxed) != 0) i = (i + 1) & table_->mask;
  table_->slots[i].store((uint64_t{h} << 32) | id, std::memory_order_release);
  return Symbol{id};
}

void SymbolTable::grow() {
  auto bigger = std::make_unique<Table>(2 * (table_->mask + 1));
  for (size_t j = 0; j <= table_->mask; ++j) {
    uint64_t slot = table_->slots[j].load(std::memory_order_relaxed);
    if (slot == 0) continue;
    size_t i = (slot >> 32) & bigger->mask;
    while (bigger->slots[i].load(std::memory_order_relaxed) != 0) i = (i + 1) & bigger->mask;
    bigger->slots[i].store(slot, std::memory_order_relaxed);
  }
  current_.store(bigger.get(), std::memory_order_release);
  if (shared_) retired_.push_back(std::move(table_));
  table_ = std::move(bigger);
}

PosTable::PosTable(PosIdx limit) : limit_(limit) {
  chunks_.reserve((uint64_t(limit) + 1) / (kChunkMask + 1) + 2);
  construct(0, {"«none»", nullptr, 0, 0, LineTable::make("", lineTables_)});
  count_.store(1, std::memory_order_release);
}

PosTable::~PosTable() {
  for (uint32_t i = count_.load(std::memory_order_acquire); i-- > 0;)
    chunks_[i >> kChunkBits].get()[i & kChunkMask].~Origin();
}

Origin& PosTable::construct(uint32_t n, Origin o) {
  if ((n & kChunkMask) == 0)
    chunks_.emplace_back(static_cast<Origin*>(::operator new(sizeof(Origin) << kChunkBits)));
  return *new (chunks_[n >> kChunkBits].get() + (n & kChunkMask)) Origin(std::move(o));
}

uint32_t PosTable::addOrigin(std::string path, std::shared_ptr<const std::string> source,
                             bool keepText) {
  // Built before the lock: it reads the whole source.
  std::vector<uint8_t> lines = LineTable::encode(*source);
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t n = count_.load(std::memory_order_relaxed);
  const Origin& last = at(n - 1);
  uint64_t base = uint64_t(last.base) + last.size + 1;
  if (base + source->size() > limit_)
    throw EvalError("the sources of this evaluation exceed 2 GiB ('" + path + "')");
  Origin& o = construct(n, {std::move(path), nullptr, static_cast<PosIdx>(base),
                            static_cast<uint32_t>(source->size()),
                            LineTable::place(lines, lineTables_)});
  if (keepText) o.text = std::move(source);
  count_.store(n + 1, std::memory_order_release);
  return n;
}

Pos PosTable::get(PosIdx p) const {
  // The last origin (from 1) whose range starts at or before p.
  uint32_t lo = 1, hi = count_.load(std::memory_order_acquire);
  while (lo < hi) {  // first origin starting after p
    uint32_t mid = lo + (hi - lo) / 2;
    if (p < at(mid).base)
      hi = mid;
    else
      lo = mid + 1;
  }
  if (lo == 1) return {};
  const Origin& o = at(lo - 1);
  uint32_t offset = p - o.base;
  auto [line, start] = LineTable::find(o.lines, offset);
  return {lo - 1, line, offset - start + 1};
}

std::string PosTable::show(PosIdx p) const {
  if (p == kNoPos) return "«none»";
  Pos pos = get(p);
  std::string file = origin(pos.origin).path;
  if (file == "«string»") file = "(string)";
  return file + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column);
}

namespace {

// The text of 1-based line `n` of `text`, or nullopt past the end. Like
// Nix 2.8, a file's last line counts only if a newline ends it (strings
// given with -E have no such condition).
std::optional<std::string_view> lineOf(const std::string& text, uint32_t n, bool needNewline) {
  size_t start = 0;
  for (uint32_t l = 1; l < n; ++l) {
    start = text.find('\n', start);
    if (start == std::string::npos) return std::nullopt;
    ++start;
  }
  if (start >= text.size()) return std::nullopt;
  size_t end = text.find('\n', start);
  if (end == std::string::npos && needNewline) return std::nullopt;
  std::string_view line(text.data() + start, (end == std::string::npos ? text.size() : end) - start);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// One source line as Nix 2.8 prints it: the number right-aligned in 13
// columns, "| " and the text ("|" alone for an empty line).
void codeLine(std::ostream& out, uint32_t n, std::string_view text) {
  std::string num = std::to_string(n);
  out << "\n" << std::string(13 - std::min<size_t>(13, num.size()), ' ') << num << "|";
  if (!text.empty()) out << " " << text;
}

}  // namespace

std::string PosTable::snippet(PosIdx p) const {
  if (p == kNoPos) return "";
  Pos pos = get(p);
  const Origin& o = origin(pos.origin);
  std::ostringstream out;
  out << "\n\n       at " << o.path << ":" << pos.line << ":" << pos.column << ":\n";
  std::shared_ptr<const std::string> text = o.text;
  if (!text && o.path.starts_with("/")) {
    // Large files are not kept in memory: read the file again, as Nix does.
    try {
      text = std::make_shared<const std::string>(kiln::readFile(o.path));
    } catch (const Error&) {
    }
  }
  bool file = !o.path.starts_with("«");  // not «string» / «stdin»
  auto line = text ? lineOf(*text, pos.line, file) : std::nullopt;
  if (!line) return out.str();
  // As Nix does: the line before, the line with a caret under the column,
  // and the line after (where they exist).
  if (pos.line > 1)
    if (auto before = lineOf(*text, pos.line - 1, file)) codeLine(out, pos.line - 1, *before);
  codeLine(out, pos.line, *line);
  out << "\n" << std::string(13, ' ') << "| " << std::string(pos.column > 0 ? pos.column - 1 : 0, ' ')
      << "^";
  if (auto after = lineOf(*text, pos.line + 1, file)) codeLine(out, pos.line + 1, *after);
  return out.str();
}

void canonPathInto(std::string_view path, std::string& out) {
  out.clear();
  out.reserve(path.size() + 1);
  size_t i = 0;
  const size_t n = path.size();
  while (i < n) {
    while (i < n && path[i] == '/') ++i;
    if (i >= n) break;
    size_t j = i;
    while (j < n && path[j] != '/') ++j;
    std::string_view seg = path.substr(i, j - i);
    if (seg == ".") {
    } else if (seg == "..") {
      size_t slash = out.rfind('/');
      out.erase(slash == std::string::npos ? 0 : slash);
    } else {
      out += '/';
      out += seg;
    }
    i = j;
  }
  if (out.empty()) out = "/";
}

std::string canonPath(std::string_view path) {
  std::string out;
  canonPathInto(path, out);
  return out;
}

}  // namespace kiln::eval
