// The shared models of the costlier pages (web/src/model_cache.h).
#include "model_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "kiln/common/error.h"

namespace kiln::web {
namespace {

using namespace std::chrono_literals;

TEST(ModelCache, MakesAPageOncePerTtlAndSharesIt) {
  FakeClock clock(WallTime(std::chrono::milliseconds(1'700'000'000'000)));
  ModelCache cache(clock, 1000ms);
  int made = 0;
  auto make = [&] { return nlohmann::json{{"n", ++made}}; };
  EXPECT_EQ(cache.get("/eval/1", make)["n"], 1);
  clock.advance(999ms);
  EXPECT_EQ(cache.get("/eval/1", make)["n"], 1);  // shared
  EXPECT_EQ(cache.get("/eval/2", make)["n"], 2);  // another page
  clock.advance(1ms);
  EXPECT_EQ(cache.get("/eval/1", make)["n"], 3);  // stale: made again
  clock.advance(-5s);  // the wall clock stepped back: not trusted
  EXPECT_EQ(cache.get("/eval/1", make)["n"], 4);
}

TEST(ModelCache, ConcurrentRequestsOfOnePageMakeItOnce) {
  FakeClock clock(WallTime(std::chrono::milliseconds(1'700'000'000'000)));
  ModelCache cache(clock, 1000ms);
  std::atomic<int> made{0};
  std::vector<std::thread> threads;
  std::vector<nlohmann::json> got(8);
  for (size_t i = 0; i < got.size(); i++)
    threads.emplace_back([&, i] {
      got[i] = cache.get("/eval/1/compare", [&] {
        return nlohmann::json{{"n", ++made}};
      });
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(made.load(), 1);
  for (auto& g : got) EXPECT_EQ(g["n"], 1);
}

TEST(ModelCache, FailuresAreNotKeptAndTheSizeIsBounded) {
  FakeClock clock(WallTime(std::chrono::milliseconds(1'700'000'000'000)));
  ModelCache cache(clock, 1000ms, 4);
  EXPECT_THROW(
      cache.get("/build/9",
                []() -> nlohmann::json { throw Error("no such build"); }),
      Error);
  EXPECT_EQ(cache.get("/build/9", [] { return nlohmann::json(1); }), 1);
  for (int i = 0; i < 10; i++)
    cache.get("/build/" + std::to_string(i), [] { return nlohmann::json(0); });
  EXPECT_LE(cache.size(), 4u);
}

}  // namespace
}  // namespace kiln::web
