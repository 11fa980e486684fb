// The collector kiln links (cmake/KilnLibgc.cmake): Debian's libgc 8.2.2
// source built with mark bits, not Debian's build with mark bytes.
#include <gc/gc.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/evaluator/eval_state.h"

namespace kiln::eval {
namespace {

// The collector's own memory besides its heap (block headers, the heap's
// section table, mark stacks): what it obtained from the system minus the
// heap.
size_t collectorScratchBytes() {
  return GC_get_obtained_from_os_bytes() - GC_get_heap_size();
}

// Allocates `count` objects of one 4 KiB block each (atomic: neither
// cleared nor touched, so they take address space, not memory) and
// returns how much the collector's scratch memory grew meanwhile.
size_t scratchGrowthForBlocks(size_t count) {
  constexpr size_t kObjectBytes = 4000;  // with libgc's extra byte: a block
  size_t before = collectorScratchBytes();
  for (size_t i = 0; i < count; ++i)
    if (!GC_MALLOC_ATOMIC(kObjectBytes)) return 0;
  return collectorScratchBytes() - before;
}

TEST(GcBuild, BlockHeadersHoldMarkBitsNotMarkBytes) {
  // Each block the collector hands out gets a header from its scratch
  // memory: with mark bytes (Debian's libgc1: USE_MARK_BYTES, one byte per
  // 16-byte granule) ~330 bytes, with mark bits ~100. Headers of blocks
  // freed earlier are reused first, so a first batch drains those; the
  // heap is grown beforehand (growing it while counting would put its old
  // section table into the heap). Scratch memory comes in 256 KiB pieces:
  // ~32 bytes per block over the second batch.
  initGarbageCollector();
  constexpr size_t kBlocks = 8192;
  GC_disable();
  ASSERT_NE(GC_expand_hp((2 * kBlocks + 1024) * 4096), 0);
  scratchGrowthForBlocks(kBlocks);
  size_t perBlock = scratchGrowthForBlocks(kBlocks) / kBlocks;
  GC_enable();
  EXPECT_GT(perBlock, 60u) << "no header per block measured";
  EXPECT_LT(perBlock, 200u) << "block headers of " << perBlock
                            << " bytes: libgc built with mark bytes";
}

TEST(GcBuild, MidSizedObjectsTakeTheSmallestClassThatHoldsThem) {
  // initGarbageCollector makes the classes of 384-2,047 bytes first
  // (shapeSizeClasses): the largest size of each count of objects a 4 KiB
  // block holds, 9 down to 2 (but 7). Left to libgc, the first request of a
  // size makes its class an eighth larger and then as large as the same count
  // of objects allows: a first 920-byte object made a class of 1,344
  // bytes (3 a block), where 4 of 1,024 fit.
  initGarbageCollector();
  // The collector adds a byte to each object: a request of 1,023 bytes
  // still fits 1,024.
  const std::vector<std::pair<size_t, size_t>> sizes = {
      {400, 448},   {520, 672},   {600, 672},   {700, 800},  {920, 1024},
      {1023, 1024}, {1024, 1344}, {1100, 1344}, {1500, 2048}};
  for (auto [request, size] : sizes) {
    EXPECT_EQ(GC_size(GC_MALLOC_ATOMIC(request)), size)
        << "atomic, " << request << " bytes";
    EXPECT_EQ(GC_size(GC_MALLOC(request)), size)
        << "scanned, " << request << " bytes";
  }
  const std::vector<size_t> classes = {448, 512, 672, 800, 1024, 1344, 2048};
  EXPECT_EQ(shapeSizeClasses(), classes);
}

}  // namespace
}  // namespace kiln::eval
