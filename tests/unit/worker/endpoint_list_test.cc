// EndpointList: parsing `--connect` lists and the round-robin rotation
// with a pause between full rounds (docs/worker.md, "Fail-over").
#include "kiln/worker/endpoint_list.h"

#include <gtest/gtest.h>

#include "kiln/common/error.h"

namespace kiln::worker {
namespace {

using namespace std::chrono_literals;
using Endpoints = std::vector<std::string>;

TEST(EndpointList, ParsesRepeatedAndCommaSeparatedEndpointsInOrder) {
  EXPECT_EQ(EndpointList::parse({"tcp://a:1"}), Endpoints{"tcp://a:1"});
  EXPECT_EQ(EndpointList::parse({"tcp://a:1, tcp://b:2", "ipc:///run/s"}),
            (Endpoints{"tcp://a:1", "tcp://b:2", "ipc:///run/s"}));
  EXPECT_EQ(EndpointList::parse({"tcp://[::1]:7470,"}),
            Endpoints{"tcp://[::1]:7470"});
}

TEST(EndpointList, RefusesEmptyMalformedAndRepeatedEndpoints) {
  EXPECT_THROW(EndpointList::parse({}), Error);
  EXPECT_THROW(EndpointList::parse({" , "}), Error);
  EXPECT_THROW(EndpointList::parse({"sched.example.org:7470"}), Error);
  EXPECT_THROW(EndpointList::parse({"tcp://a"}), Error);
  EXPECT_THROW(EndpointList::parse({"tcp://:7470"}), Error);
  EXPECT_THROW(EndpointList::parse({"tcp://a:70000"}), Error);
  EXPECT_THROW(EndpointList::parse({"tcp://a:1", "tcp://a:1"}), Error);
  EXPECT_THROW(EndpointList({}), Error);
}

// `moves` calls of next(), each as "ENDPOINT" or "ENDPOINT+PAUSEms".
std::string trail(EndpointList& l, int moves) {
  std::string out;
  for (int i = 0; i < moves; ++i) {
    auto pause = l.next();
    out += (out.empty() ? "" : " ") + l.current();
    if (pause.count()) out += "+" + std::to_string(pause.count()) + "ms";
  }
  return out;
}

TEST(EndpointList, MovesRoundRobinAndPausesBeforeEachFullRound) {
  EndpointList l({"a", "b", "c"}, 100ms, 350ms);
  EXPECT_EQ(l.current(), "a");
  // Back to the first after a round without an answer: a pause, doubled
  // each round up to the ceiling.
  EXPECT_EQ(trail(l, 12), "b c a+100ms b c a+200ms b c a+350ms b c a+350ms");
}

TEST(EndpointList, AnAnswerStartsTheNextRoundThereWithTheFirstPause) {
  EndpointList l({"a", "b", "c"}, 100ms, 10s);
  EXPECT_EQ(trail(l, 4), "b c a+100ms b");
  l.answered();
  // "b" is lost: "c" and "a" are tried at once, "b" again after a pause.
  EXPECT_EQ(trail(l, 3), "c a b+100ms");
}

TEST(EndpointList, ASingleEndpointPausesBeforeEveryTry) {
  EndpointList l({"a"}, 100ms, 10s);
  EXPECT_EQ(trail(l, 3), "a+100ms a+200ms a+400ms");
  EXPECT_EQ(l.size(), 1u);
}

}  // namespace
}  // namespace kiln::worker
