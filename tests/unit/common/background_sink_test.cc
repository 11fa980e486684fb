#include "kiln/common/background_sink.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kiln/common/error.h"

namespace kiln {
namespace {

TEST(BackgroundSink, DeliversEveryByteInOrder) {
  StringSink target;
  std::string expected;
  {
    BackgroundSink bg(target, 16, 3);
    for (int i = 0; i < 500; ++i) {
      std::string piece(static_cast<size_t>(i % 37), static_cast<char>('a' + i % 26));
      bg.write(piece);
      expected += piece;
      auto [buf, room] = bg.lend();
      ASSERT_GT(room, 0u);
      size_t n = std::min<size_t>(room, 5);
      std::memset(buf, '0' + i % 10, n);
      bg.commit(n);
      expected.append(n, static_cast<char>('0' + i % 10));
    }
    bg.finish();
    bg.finish();  // idempotent
  }
  EXPECT_EQ(target.s, expected);
}

struct FailingSink : Sink {
  size_t left;
  explicit FailingSink(size_t n) : left(n) {}
  void write(std::string_view d) override {
    if (d.size() > left) throw Error("disk full");
    left -= d.size();
  }
};

TEST(BackgroundSink, TargetErrorsReachTheProducer) {
  FailingSink target(100);
  BackgroundSink bg(target, 64, 2);
  std::string chunk(64, 'x');
  try {
    for (int i = 0; i < 1000; ++i) bg.write(chunk);
    bg.finish();
    FAIL() << "error swallowed";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "disk full");
  }
  EXPECT_THROW(bg.finish(), Error);
}

TEST(BackgroundSink, AbandonedSinkStopsCleanly) {
  StringSink target;
  {
    BackgroundSink bg(target, 8, 2);
    bg.write("0123456789abcdef0123");
  }  // no finish(): the destructor must not hang
  EXPECT_LE(target.s.size(), 16u);
}

}  // namespace
}  // namespace kiln
