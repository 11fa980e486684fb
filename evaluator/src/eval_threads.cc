// Threaded evaluation (docs/evaluator.md, "Threaded evaluation"): claiming
// and publishing thunks through their state word, waiting for thunks other
// threads evaluate, per-thread allocation.
#include "eval_threads.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <thread>

#include "builtins.h"
#include "eval_parts.h"
#include "gc_support.h"
#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {

namespace {

thread_local uint32_t tSlot = 0;  // 0: not an evaluating thread of a threaded state
thread_local uint64_t tWaitNanos = 0;
thread_local uint64_t tLateWakes = 0;
// KILN_EVAL_CPU_TIMES: nanoseconds waited by forcing position (few sites:
// a flat map is enough).
thread_local std::vector<std::pair<uint32_t, uint64_t>> tWaitSites;

#if defined(__SANITIZE_THREAD__)
#define KILN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KILN_TSAN 1
#endif
#endif
#ifdef KILN_TSAN
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

// Claims `v` (casValueState). ThreadSanitizer records every
// compare-exchange as an atomic write, also one that fails
// (tsan_interface_atomic.cpp, AtomicCAS), although a failed one only loads
// ([atomics.types.operations]). A claim fails when another thread claimed
// and published the thunk between this thread's load and its CAS; a thread
// that then reads the published value (its publisher, or one whose acquire
// load saw the final state, then plain reads, as `v = *vAttrs`) has no
// happens-before with the failed CAS, and TSan reported that read as
// racing with it. A successful claim cannot race so: a final value is
// never a thunk again, and a claim succeeds only on a thunk. So under
// TSan the CAS's own access is not recorded (its acquire/release still
// is) and a successful claim is recorded as the atomic write it is, by
// storing the word it just wrote (it is this thread's until it publishes).
bool claimValue(Value& v, uint16_t& expected, uint16_t desired) {
#ifdef KILN_TSAN
  __tsan_ignore_thread_begin();
  bool claimed = casValueState(v, expected, desired);
  __tsan_ignore_thread_end();
  if (claimed) __atomic_store_n(reinterpret_cast<uint16_t*>(&v), desired, __ATOMIC_RELAXED);
  return claimed;
#else
  return casValueState(v, expected, desired);
#endif
}

// Sets kWaitedFlag in the state word of `v` if it is still `expected`
// (casValueState). Under TSan the CAS's own access is not recorded, as in
// claimValue, but unlike a claim a successful one is not recorded as a
// store either: the owner may publish right after it, and a store made
// then would put the blackhole back over the result.
bool flagWaited(Value& v, uint16_t& expected) {
  const auto desired = static_cast<uint16_t>(expected | kWaitedFlag);
#ifdef KILN_TSAN
  __tsan_ignore_thread_begin();
  bool flagged = casValueState(v, expected, desired);
  __tsan_ignore_thread_end();
  return flagged;
#else
  return casValueState(v, expected, desired);
#endif
}

}  // namespace

double cpuSeconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

uint64_t threadWaitNanos() { return tWaitNanos; }

uint64_t threadLateWakes() { return tLateWakes; }

namespace {
std::atomic<int64_t> waitPollMs{50};
}  // namespace

void setWaitPoll(std::chrono::milliseconds poll) {
  waitPollMs.store(poll.count(), std::memory_order_relaxed);
}

std::chrono::milliseconds waitPoll() {
  return std::chrono::milliseconds(waitPollMs.load(std::memory_order_relaxed));
}

bool waitSitesRecorded() {
  static const bool on = std::getenv("KILN_EVAL_CPU_TIMES") != nullptr;
  return on;
}

std::vector<std::pair<uint32_t, uint64_t>> threadWaitSites() {
  auto out = tWaitSites;
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.second > b.second; });
  return out;
}

namespace {
void recordWaitSite(PosIdx pos, uint64_t nanos) {
  for (auto& [p, n] : tWaitSites)
    if (p == pos) {
      n += nanos;
      return;
    }
  if (tWaitSites.size() < 4096) tWaitSites.emplace_back(pos, nanos);
}
}  // namespace

void EvalState::enterThread(uint32_t slot) { ThreadSlots::enter(slot); }

void ThreadSlots::enter(uint32_t slot) {
  if (slot == 0 || slot > kMaxThreads) throw Error("evaluation thread slot out of range");
  tSlot = slot;
}

void ThreadSlots::leave() { tSlot = 0; }

uint32_t ThreadSlots::current() { return tSlot; }

void ThreadSlots::begin(uint32_t threads) {
  if (threads == 0 || threads > kMaxThreads) throw Error("evaluation thread count out of range");
  slotsInUse_ = threads;
  active_ = true;
}

void ThreadSlots::end() {
  active_ = false;
  for (Slot& s : slots_) s.callDepth = 0;
}

uint32_t& ThreadSlots::threadDepth() { return slots_[tSlot].callDepth; }

void EvalState::beginThreads(uint32_t threads) {
  if (threads == 0 || threads > kMaxThreads) throw Error("evaluation thread count out of range");
  prepareBuiltinsForThreads(*this);
  arena.setShared(true);
  permanent.setShared(true);
  symbols.setShared(true);
  files().setShared(true);
  writer().beginThreads();
  heap().beginThreads();
  this->threads().begin(threads);
  // One thread waits for no other's page clearing: no warmer.
  if (threads > 1) startHeapWarmer();
}

void EvalState::endThreads() {
  stopHeapWarmer();
  threads().end();
  arena.setShared(false);
  permanent.setShared(false);
  symbols.setShared(false);
  files().setShared(false);
  writer().endThreads();
  heap().endThreads();
}

void EvalHeap::beginThreads() {
  // The single-thread value block is no longer used: every thread takes
  // values from its own lists (allocValue's fast path finds it empty).
  for (SlotBlocks& b : blocks_) b.next = b.end = nullptr;
  std::fill(std::begin(sized_), std::end(sized_), nullptr);
  std::fill(std::begin(atomicSized_), std::end(atomicSized_), nullptr);
  threaded_ = true;
}

void EvalHeap::endThreads() {
  threaded_ = false;
  for (ThreadLists& t : threads_) {
    for (SlotBlocks& b : t.blocks) b = SlotBlocks();
    std::fill(std::begin(t.sized), std::end(t.sized), nullptr);
  }
}

Value* EvalHeap::allocValueThreaded() {
  if (!collect_) {
    std::lock_guard<std::mutex> lock(sharedMutex_);
    return permanent_.make<Value>();
  }
  return new (takeSlot(threads_[tSlot].blocks[kValueStream], sizeof(Value), kValuesPerBlock))
      Value();
}

void* EvalHeap::allocSizedThreaded(size_t size) {
  const size_t steps = sizedSteps(size);
  return takeFromMany(threads_[tSlot].sized[steps], manyRequestFor(steps * kSizedStep));
}

// Claims the thunk (CAS to a blackhole owned by this thread), evaluates it
// into a temporary and publishes the result; puts the thunk back on error.
void EvalState::forceThunkThreaded(Value& v, PosIdx pos) {
  const uint32_t me = tSlot;
  while (true) {
    uint16_t st = valueState(v);
    auto type = static_cast<VType>(st & 0xff);
    if (type > VType::kBlackhole) return;
    if (type == VType::kBlackhole) {
      if (valueStateOwner(st) == me || me == 0)
        throw InfiniteRecursionError("infinite recursion encountered" + positions.snippet(pos));
      uint64_t before = tWaitNanos;
      bool published = threads().waitFor(v);
      if (waitSitesRecorded()) recordWaitSite(pos, tWaitNanos - before);
      if (!published)
        throw InfiniteRecursionError("infinite recursion encountered" + positions.snippet(pos));
      continue;
    }
    if (!claimValue(v, st, makeValueState(VType::kBlackhole, static_cast<uint8_t>(me))))
      continue;
    // Claimed: the payload is this thread's until it publishes.
    Value tmp;
    Value saved = v;
    try {
      if (type == VType::kThunk) saved.thunk.expr->eval(*this, *saved.thunk.env, tmp);
      else callFunction(*this, *saved.app.left, *saved.app.right, tmp, pos);
      forceValue(tmp, pos);  // a result is never a thunk
    } catch (...) {
      if (publishValueState(v, makeValueState(type)) & kWaitedFlag) threads().wake(v);
      throw;
    }
    // Payload first, then the state word (release).
    std::memcpy(reinterpret_cast<char*>(&v) + 4, reinterpret_cast<char*>(&tmp) + 4,
                sizeof(Value) - 4);
    static_assert(offsetof(Value, strLen) == 4 && offsetof(Value, integer) == 8 &&
                  sizeof(Value) == 24);
    if (publishValueState(v, makeValueState(tmp.type)) & kWaitedFlag) threads().wake(v);
    return;
  }
}

// Whether the waits starting at `owner` lead back to `me`: thread `owner`
// waits for a value owned by another, and so on.
bool ThreadSlots::waitCycle(uint32_t me, uint8_t owner) const {
  for (uint32_t steps = 0; owner != 0 && steps <= kMaxThreads; ++steps) {
    if (owner == me || slots_[owner].awaitsHelpers.load()) return true;
    const Value* w = slots_[owner].waitingFor.load();
    if (!w) return false;
    uint16_t st = valueState(*w);
    if (static_cast<VType>(st & 0xff) != VType::kBlackhole) return false;
    owner = valueStateOwner(st);
  }
  return false;
}

// No lost wake-up, with nothing but the publish's exchange on the path of
// a thunk nobody waits for: a waiter stores what it waits for, then sets
// kWaitedFlag in the blackhole's state word by compare-and-swap (acq_rel;
// also when the flag is set already);
// a publisher (or a put-back) exchanges the state word (acq_rel) and calls
// wake only if the word it replaced carried the flag. Read-modify-writes of
// one word are totally ordered: if the waiter's CAS comes first, the
// exchange returns the flag and, reading from the CAS (release), sees the
// waiter's waitingFor; if the exchange comes first, the CAS fails on the
// published word and the waiter sees the result. wake notifies under the
// waiter's mutex, which the waiter holds from its last check (which sets
// the flag again: the thunk may have been put back and claimed anew
// meanwhile) until it sleeps.
void ThreadSlots::wake(const Value& v) {
  for (uint32_t i = 1; i <= slotsInUse_; ++i) {
    Slot& s = slots_[i];
    if (s.waitingFor.load(std::memory_order_relaxed) != &v) continue;
    std::lock_guard<std::mutex> lock(s.waitMutex);
    s.waitCv.notify_one();
  }
}

namespace {
// Whether `v` is no longer a blackhole; if it still is, flags it as waited
// for first (a publish after this returns false wakes the waiter).
bool publishedOrFlagged(Value& v) {
  static_assert(EvalState::kMaxThreads < (kWaitedFlag >> 8), "owners fit below the flag");
  // Also when another waiter set the flag: the publisher's exchange then
  // reads from this CAS, so it sees this thread's waitingFor too.
  uint16_t st = valueState(v);
  while (static_cast<VType>(st & 0xff) == VType::kBlackhole)
    if (flagWaited(v, st)) return false;
  return true;
}
}  // namespace

bool ThreadSlots::waitFor(Value& v) {
  const uint32_t me = tSlot;
  Slot& slot = slots_[me];
  slot.waitingFor.store(&v);  // before the flag's CAS (publishedOrFlagged)
  struct Clear {
    Slot& s;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~Clear() {
      s.waitingFor.store(nullptr);
      tWaitNanos += std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    }
  } clear{slot};
  auto published = [&] { return publishedOrFlagged(v); };
  int cycleSeen = 0;
  while (!published()) {
    // A cycle read while the chain moves can be momentary; a real one stays.
    if (waitCycle(me, valueStateOwner(valueState(v)))) {
      if (++cycleSeen >= 3) return false;
    } else {
      cycleSeen = 0;
    }
    std::unique_lock<std::mutex> lock(slot.waitMutex);
    if (published()) break;
    const auto poll = cycleSeen ? std::chrono::milliseconds(5) : waitPoll();
    if (slot.waitCv.wait_for(lock, poll) == std::cv_status::timeout && published()) ++tLateWakes;
  }
  return true;
}

}  // namespace kiln::eval
