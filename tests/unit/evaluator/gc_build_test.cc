// The collector kiln links (cmake/KilnLibgc.cmake): Debian's libgc 8.2.2
// source built with mark bits, not Debian's build with mark bytes.
#include <gc/gc.h>
#include <gtest/gtest.h>

#include <cstdint>

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

}  // namespace
}  // namespace kiln::eval
