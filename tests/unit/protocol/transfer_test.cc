#include "kiln/protocol/transfer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <random>

namespace kiln::protocol {
namespace {

using ::testing::HasSubstr;

const store::StorePath kPath("0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a-data");

std::string randomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

TransferHeader headerFor(const std::string& nar) {
  TransferHeader h;
  h.stepId = 1;
  h.info.path = kPath;
  h.info.narHash = hashString(HashAlgo::kSha256, nar);
  h.info.narSize = nar.size();
  return h;
}

// What the receiving store saw: committed NARs and discards.
struct Store {
  std::map<uint64_t, std::string> committed;
  std::vector<std::string> discarded;
  size_t open = 0, maxOpen = 0;
};

class MemoryTarget : public TransferTarget {
 public:
  explicit MemoryTarget(Store& s) : store_(s) {
    store_.maxOpen = std::max(store_.maxOpen, ++store_.open);
  }
  ~MemoryTarget() override { --store_.open; }
  void write(std::string_view d) override { buf_.append(d); }
  void commit(const TransferHeader& h) override {
    store_.committed[h.transferId] = buf_;
  }
  void discard(const std::string& reason) noexcept override {
    store_.discarded.push_back(reason);
  }

 private:
  Store& store_;
  std::string buf_;
};

// Two endpoints joined by queues that carry encoded frames; `corrupt`
// may alter frames on the way from A to B.
struct Link {
  std::deque<Frames> toB, toA;
  std::function<void(Frames&)> corrupt;
  Store storeA, storeB;
  std::vector<TransferOutcome> receivedA, receivedB;
  TransferOptions options;
  std::unique_ptr<TransferEndpoint> a, b;

  explicit Link(TransferOptions o = {}) : options(o) {
    a = make(toB, storeA, receivedA);
    b = make(toA, storeB, receivedB);
  }
  std::unique_ptr<TransferEndpoint> make(
      std::deque<Frames>& out, Store& store,
      std::vector<TransferOutcome>& received) {
    return std::make_unique<TransferEndpoint>(
        [&out](Message&& m) { out.push_back(encode(m)); },
        [&store](const TransferHeader&, bool) {
          return std::make_unique<MemoryTarget>(store);
        },
        [&received](const TransferOutcome& o) { received.push_back(o); },
        options);
  }
  size_t chunksToB() const {
    size_t n = 0;
    for (auto& f : toB) n += decodeHeader(f[0]).second == MessageType::kChunk;
    return n;
  }
  // Delivers everything B sent first (credits), so that A sends as much as
  // it may before B consumes anything: the worst case for flow control.
  void run(size_t* maxInFlight = nullptr) {
    while (!toA.empty() || !toB.empty()) {
      while (!toA.empty()) {
        auto f = std::move(toA.front());
        toA.pop_front();
        EXPECT_TRUE(a->handle(decode(f)));
      }
      if (maxInFlight) *maxInFlight = std::max(*maxInFlight, chunksToB());
      if (toB.empty()) break;
      auto f = std::move(toB.front());
      toB.pop_front();
      if (corrupt) corrupt(f);
      EXPECT_TRUE(b->handle(decode(f)));
    }
  }
};

TEST(Transfer, SeveralMegabytesArriveIntactWithinTheWindow) {
  TransferOptions o;
  o.chunkSize = 64 << 10;
  o.window = 4;
  Link link(o);
  auto nar = randomBytes(3 << 20 | 12345, 1);
  std::vector<TransferOutcome> sent;
  auto id = link.a->startSend(
      false, headerFor(nar), std::make_unique<StringSource>(nar),
      [&](const TransferOutcome& r) { sent.push_back(r); });
  size_t maxInFlight = 0;
  link.run(&maxInFlight);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(sent[0].ok) << sent[0].error;
  EXPECT_EQ(link.storeB.committed.at(id), nar);
  ASSERT_EQ(link.receivedB.size(), 1u);
  EXPECT_TRUE(link.receivedB[0].ok);
  EXPECT_LE(maxInFlight, o.window);
  EXPECT_GE(maxInFlight, 2u);
  EXPECT_EQ(link.a->outgoingCount(), 0u);
  EXPECT_EQ(link.b->incomingCount(), 0u);
}

TEST(Transfer, SenderNeverExceedsItsCredit) {
  std::deque<Message> sentMsgs;
  TransferOptions o;
  o.chunkSize = 1000;
  TransferEndpoint sender(
      [&](Message&& m) { sentMsgs.push_back(std::move(m)); }, nullptr, nullptr,
      o);
  auto nar = randomBytes(100000, 2);
  auto h = headerFor(nar);
  h.outputName = "out";
  auto id =
      sender.startSend(true, h, std::make_unique<StringSource>(nar), nullptr);
  auto chunks = [&] {
    size_t n = 0;
    for (auto& m : sentMsgs) n += std::holds_alternative<Chunk>(m);
    return n;
  };
  EXPECT_EQ(chunks(), 0u);  // nothing before the receiver grants credit
  ASSERT_TRUE(std::holds_alternative<UploadOutput>(sentMsgs.front()));
  sender.handle(Credit{id, 3});
  EXPECT_EQ(chunks(), 3u);
  sender.handle(Credit{id, 5});
  EXPECT_EQ(chunks(), 8u);
  sender.handle(Credit{id, 1000});
  EXPECT_EQ(chunks(), 100u);  // and never beyond the NAR's size
}

TEST(Transfer, CorruptedChunkIsRefusedAndARetrySucceeds) {
  Link link;
  auto nar = randomBytes(1 << 20, 3);
  int flipped = 0;
  link.corrupt = [&](Frames& f) {
    if (decodeHeader(f[0]).second == MessageType::kChunk && flipped++ == 2)
      f[2][100] ^= 1;
  };
  std::vector<TransferOutcome> sent;
  auto done = [&](const TransferOutcome& r) { sent.push_back(r); };
  auto id = link.a->startSend(false, headerFor(nar),
                              std::make_unique<StringSource>(nar), done);
  link.run();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_FALSE(sent[0].ok);
  EXPECT_THAT(sent[0].error, HasSubstr("NAR hash mismatch: expected sha256:"));
  EXPECT_THAT(sent[0].error, HasSubstr(kPath.baseName()));
  EXPECT_EQ(link.storeB.committed.count(id), 0u);
  ASSERT_EQ(link.storeB.discarded.size(), 1u);

  auto id2 = link.a->startSend(false, headerFor(nar),
                               std::make_unique<StringSource>(nar), done);
  link.run();
  EXPECT_NE(id2, id);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_TRUE(sent[1].ok) << sent[1].error;
  EXPECT_EQ(link.storeB.committed.at(id2), nar);
}

TEST(Transfer, ShortSourceAbortsOnBothSides) {
  Link link;
  auto nar = randomBytes(5000, 4);
  auto h = headerFor(nar);
  h.info.narSize = 9000;  // the source holds less than announced
  std::vector<TransferOutcome> sent;
  link.a->startSend(false, h, std::make_unique<StringSource>(nar),
                    [&](const TransferOutcome& r) { sent.push_back(r); });
  link.run();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_THAT(
      sent[0].error,
      HasSubstr("the NAR ended after 5000 bytes, but its size is 9000"));
  ASSERT_EQ(link.receivedB.size(), 1u);
  EXPECT_THAT(link.receivedB[0].error, HasSubstr("the sender aborted"));
  EXPECT_EQ(link.storeB.discarded.size(), 1u);
  EXPECT_TRUE(link.storeB.committed.empty());
}

TEST(Transfer, ReceiverChecksOrderSizeAndDuplicates) {
  std::vector<Message> out;
  Store store;
  std::vector<TransferOutcome> received;
  TransferEndpoint rx([&](Message&& m) { out.push_back(std::move(m)); },
                      [&](const TransferHeader&, bool) {
                        return std::make_unique<MemoryTarget>(store);
                      },
                      [&](const TransferOutcome& o) { received.push_back(o); });
  auto nar = randomBytes(100, 5);
  PathData pd{headerFor(nar)};
  pd.transferId = 5;
  rx.handle(pd);
  rx.handle(pd);  // same id again
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(std::get<Credit>(out[0]).chunks, TransferOptions{}.window);
  EXPECT_EQ(std::get<Ack>(out[1]).error, "duplicate transfer id");
  rx.handle(Chunk{5, 1, "x"});
  ASSERT_EQ(received.size(), 1u);
  EXPECT_THAT(received[0].error, HasSubstr("chunk 1 arrived, expected 0"));

  pd.transferId = 6;
  rx.handle(pd);
  rx.handle(Chunk{6, 0, nar + "extra"});
  ASSERT_EQ(received.size(), 2u);
  EXPECT_THAT(received[1].error,
              HasSubstr("more data than the announced NAR size of 100"));
  EXPECT_EQ(store.discarded.size(), 2u);
  EXPECT_EQ(store.open, 0u);
}

TEST(Transfer, RefusalReachesTheSender) {
  Link link;
  link.b = std::make_unique<TransferEndpoint>(
      [&](Message&& m) { link.toA.push_back(encode(m)); },
      [](const TransferHeader&, bool) -> std::unique_ptr<TransferTarget> {
        throw Error("disk full");
      },
      nullptr);
  auto nar = randomBytes(10, 6);
  auto h = headerFor(nar);
  EXPECT_THROW(
      link.a->startSend(true, h, std::make_unique<StringSource>(nar), nullptr),
      FormatError);  // an upload names its output
  EXPECT_EQ(link.a->outgoingCount(), 0u);
  h.outputName = "out";
  std::vector<TransferOutcome> sent;
  link.a->startSend(true, h, std::make_unique<StringSource>(nar),
                    [&](const TransferOutcome& r) { sent.push_back(r); });
  link.run();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].error, "the receiver refused the transfer: disk full");
}

TEST(Transfer, IncomingTransfersBeyondTheLimitWait) {
  TransferOptions o;
  o.maxActiveIncoming = 1;
  o.chunkSize = 4096;
  Link link(o);
  std::vector<std::string> nars;
  for (unsigned i = 0; i < 3; ++i)
    nars.push_back(randomBytes(50000 + i, 10 + i));
  int ok = 0;
  for (auto& nar : nars)
    link.a->startSend(false, headerFor(nar),
                      std::make_unique<StringSource>(nar),
                      [&](const TransferOutcome& r) { ok += r.ok; });
  link.run();
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(link.storeB.committed.size(), 3u);
  EXPECT_EQ(link.storeB.maxOpen, 1u);
}

TEST(Transfer, IdleTransfersExpireAndAbortAllFailsEverything) {
  Link link;
  auto nar = randomBytes(1 << 20, 7);
  std::vector<TransferOutcome> sent;
  link.a->startSend(false, headerFor(nar), std::make_unique<StringSource>(nar),
                    [&](const TransferOutcome& r) { sent.push_back(r); });
  // Deliver the header and the credit, but no chunk.
  link.b->handle(decode(link.toB.front()));
  link.toB.pop_front();
  link.a->handle(decode(link.toA.front()));
  link.toA.pop_front();
  auto later = TransferEndpoint::Clock::now() + std::chrono::minutes(6);
  link.b->expireIdle(later);
  ASSERT_EQ(link.receivedB.size(), 1u);
  EXPECT_THAT(link.receivedB[0].error, HasSubstr("no progress for 300000 ms"));
  link.a->abortAll("connection lost");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].error, "connection lost");
  EXPECT_EQ(link.a->outgoingCount(), 0u);
}

}  // namespace
}  // namespace kiln::protocol
