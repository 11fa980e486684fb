// Loopback tests over real ZeroMQ sockets on 127.0.0.1 (ephemeral ports):
// CURVE admission, version refusal, and NAR transfers end to end.
#include "kiln/protocol/transport.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <atomic>
#include <random>
#include <thread>

#include "kiln/common/file.h"
#include "kiln/protocol/transfer.h"
#include "test_support.h"

namespace kiln::protocol {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr auto kDeadline = 20s;

Hello hello(const std::string& id) {
  Hello h;
  h.workerId = id;
  h.systems = {"x86_64-linux"};
  return h;
}

struct Farm {
  CurveKeyPair schedKeys = generateKeyPair();
  CurveKeyPair workerKeys = generateKeyPair();
  std::unique_ptr<Server> server;

  explicit Farm(bool plaintext = false, size_t maxMessage = kMaxBodyFrame) {
    ServerOptions o;
    o.bind = "tcp://127.0.0.1:*";
    o.maxMessageBytes = maxMessage;
    o.insecurePlaintext = plaintext;
    o.keys = schedKeys;
    o.allowed.add(workerKeys.publicKey, "builder-1");
    server = std::make_unique<Server>(o);
  }
  std::unique_ptr<Client> client(const CurveKeyPair& keys,
                                 bool plaintext = false) {
    ClientOptions o;
    o.connect = server->endpoint();
    o.insecurePlaintext = plaintext;
    o.keys = keys;
    o.serverPublicKey = schedKeys.publicKey;
    o.linger = 0ms;
    return std::make_unique<Client>(o);
  }
};

TEST(Transport, AllowedKeyJoinsOverCurve) {
  Farm farm;
  EXPECT_THAT(farm.server->endpoint(), HasSubstr("tcp://127.0.0.1:"));
  auto client = farm.client(farm.workerKeys);
  ASSERT_TRUE(client->send(hello("builder-1")));
  auto got = farm.server->receive(kDeadline);
  ASSERT_TRUE(got);
  EXPECT_EQ(std::get<Hello>(got->msg), hello("builder-1"));
  EXPECT_EQ(got->user, "builder-1");
  ASSERT_TRUE(farm.server->send(got->peer, Welcome{"sched", 1000, 1 << 18, {}}));
  auto reply = client->receive(kDeadline);
  ASSERT_TRUE(reply);
  EXPECT_EQ(std::get<Welcome>(*reply).schedulerId, "sched");
  EXPECT_TRUE(client->connected());
  EXPECT_EQ(client->handshakeError(), "");
  EXPECT_FALSE(farm.server->send("no-such-peer", Bye{}));
}

extern "C" void onTestAlarm(int) {}

// SIGTERM to a daemon interrupts its wait: receive() returns (nullopt) so
// the loop sees its stop flag, instead of throwing "Interrupted system
// call" (which made `kiln worker` exit 1 on SIGTERM).
TEST(Transport, ASignalEndsAWaitWithoutAnError) {
  struct sigaction sa {}, old{};
  sa.sa_handler = onTestAlarm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: poll fails with EINTR
  ASSERT_EQ(sigaction(SIGALRM, &sa, &old), 0);
  Farm farm;
  auto client = farm.client(farm.workerKeys);
  for (int side = 0; side < 2; side++) {
    itimerval t{};
    t.it_value.tv_usec = 100000;
    ASSERT_EQ(setitimer(ITIMER_REAL, &t, nullptr), 0);
    auto start = std::chrono::steady_clock::now();
    if (side == 0)
      EXPECT_NO_THROW(EXPECT_FALSE(farm.server->receive(30s)));
    else
      EXPECT_NO_THROW(EXPECT_FALSE(client->receive(30s)));
    EXPECT_LT(std::chrono::steady_clock::now() - start, 25s) << side;
  }
  sigaction(SIGALRM, &old, nullptr);
}

// Signals may land while the thread is inside any ZeroMQ call, not only
// the poll: a send or a non-blocking receive whose internal command check
// is interrupted fails with EINTR too. Neither side may turn that into an
// error (a worker stopped by SIGTERM right after its Welcome exited 1).
TEST(Transport, ASignalStormDuringSendsAndReceivesIsNoError) {
  struct sigaction sa {}, old{};
  sa.sa_handler = onTestAlarm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  ASSERT_EQ(sigaction(SIGALRM, &sa, &old), 0);
  Farm farm;
  auto client = farm.client(farm.workerKeys);
  ASSERT_TRUE(client->send(hello("builder-1")));
  auto first = farm.server->receive(kDeadline);
  ASSERT_TRUE(first);
  std::atomic<bool> done{false};
  pthread_t target = pthread_self();
  std::thread storm([&] {
    while (!done.load()) {
      pthread_kill(target, SIGALRM);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
  size_t got = 0;
  auto until = std::chrono::steady_clock::now() + 1s;
  try {
    while (std::chrono::steady_clock::now() < until) {
      client->send(hello("builder-1"));
      client->connected();
      client->receive(0ms);
      farm.server->send(first->peer, Bye{"x"});
      if (auto r = farm.server->receive(0ms)) {
        EXPECT_EQ(std::get<Hello>(r->msg), hello("builder-1"));  // intact
        got++;
      }
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "after " << got << " messages: " << e.what();
  }
  done = true;
  storm.join();
  sigaction(SIGALRM, &old, nullptr);
  EXPECT_GT(got, 0u);
}

// A readable wake descriptor ends the wait at once (the scheduler polls its
// registrar's eventfd with the socket); messages still come first.
TEST(Transport, AReadableWakeFdEndsTheWait) {
  Farm farm(true);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  AutoCloseFD rd(fds[0]), wr(fds[1]);
  EXPECT_FALSE(farm.server->receive(20ms, rd.get()));  // not readable: times out
  ASSERT_EQ(write(wr.get(), "x", 1), 1);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(farm.server->receive(30s, rd.get()));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 25s);
  auto client = farm.client({}, true);
  ASSERT_TRUE(client->send(hello("builder-1")));
  std::optional<Received> got;
  ASSERT_TRUE(test::pollUntil(
      [&] { return bool(got = farm.server->receive(10ms, rd.get())); },
      kDeadline));
  EXPECT_EQ(std::get<Hello>(got->msg), hello("builder-1"));
}

TEST(Transport, UnknownKeyIsRefused) {
  Farm farm;
  auto stranger = farm.client(generateKeyPair());
  stranger->send(hello("intruder"));
  ASSERT_TRUE(test::pollUntil(
      [&] { return !stranger->handshakeError().empty(); }, kDeadline));
  EXPECT_THAT(stranger->handshakeError(),
              HasSubstr("refused this worker's key (ZAP status 400)"));
  EXPECT_GE(farm.server->refusedConnections(), 1u);
  EXPECT_FALSE(stranger->connected());
  EXPECT_FALSE(farm.server->receive(0ms));  // nothing got through
}

TEST(Transport, PlaintextClientCannotJoinACurveServer) {
  Farm farm;
  auto plain = farm.client({}, true);
  plain->send(hello("plain"));
  ASSERT_TRUE(test::pollUntil([&] { return !plain->handshakeError().empty(); },
                              kDeadline));
  EXPECT_THAT(plain->handshakeError(), HasSubstr("CURVE"));
  EXPECT_FALSE(farm.server->receive(0ms));
}

TEST(Transport, PlaintextOnlyWhenBothSidesAskForIt) {
  Farm farm(true);
  auto client = farm.client({}, true);
  client->send(hello("dev"));
  auto got = farm.server->receive(kDeadline);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->user, "");
  EXPECT_EQ(std::get<Hello>(got->msg).workerId, "dev");
}

// What the server answers a Hello of protocol `version` with; it never
// hands that Hello to the scheduler.
Refused refusalOfVersion(uint16_t version) {
  Farm farm;
  auto client = farm.client(farm.workerKeys);
  client->sendRaw(encode(hello("w"), version));
  std::optional<Message> reply;
  auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!reply && std::chrono::steady_clock::now() < deadline) {
    EXPECT_FALSE(farm.server->receive(10ms));
    reply = client->receive(10ms);
  }
  EXPECT_EQ(farm.server->droppedMessages(), 1u);
  if (!reply) throw Error("no answer to a Hello of protocol " +
                          std::to_string(version));
  return std::get<Refused>(*reply);
}

TEST(Transport, WrongProtocolVersionIsRefusedWithAMessage) {
  auto refused = refusalOfVersion(kProtocolVersion + 1);
  EXPECT_EQ(refused.schedulerVersion, kProtocolVersion);
  EXPECT_EQ(refused.reason,
            versionMismatchText(kProtocolVersion, kProtocolVersion + 1));
  EXPECT_THAT(refused.reason,
              HasSubstr("scheduler speaks protocol 5, this worker speaks 6"));
}

// A worker of the previous protocol (4: it takes the Ack of a StepResult
// before the result is durable) is turned away with a reason it can print,
// telling it to upgrade.
TEST(Transport, AProtocol4WorkerIsToldToUpgrade) {
  auto refused = refusalOfVersion(4);
  EXPECT_EQ(refused.schedulerVersion, 5u);
  EXPECT_EQ(refused.reason,
            "scheduler speaks protocol 5, this worker speaks 4: upgrade the "
            "worker so that both speak the same protocol");
}

TEST(Transport, MalformedMessagesAreDroppedAndTheConnectionLives) {
  Farm farm;
  auto client = farm.client(farm.workerKeys);
  client->sendRaw({"garbage"});
  auto truncated = encode(hello("w"));
  truncated[1].resize(3);
  client->sendRaw(truncated);
  client->send(hello("w"));
  auto got = farm.server->receive(kDeadline);
  ASSERT_TRUE(got);
  EXPECT_EQ(std::get<Hello>(got->msg).workerId, "w");
  EXPECT_EQ(farm.server->droppedMessages(), 2u);
}

// A worker sending a message above the server's limit is disconnected by
// ZeroMQ before the message is buffered; another worker is still served.
TEST(Transport, AMessageAboveTheLimitDropsOnlyItsConnection) {
  Farm farm(false, 64 << 10);
  auto big = farm.client(farm.workerKeys);
  auto small = farm.client(farm.workerKeys);
  ASSERT_TRUE(small->send(hello("small")));
  auto got = farm.server->receive(kDeadline);
  ASSERT_TRUE(got);
  EXPECT_EQ(std::get<Hello>(got->msg).workerId, "small");
  // A log piece of 100 KiB: valid (data frames may be 4 MiB), but above
  // this server's limit of 64 KiB.
  ASSERT_TRUE(big->send(LogChunk{1, std::string(100 << 10, 'x')}));
  ASSERT_TRUE(small->send(Heartbeat{0.5, 1, {}}));
  // The small worker's heartbeat arrives; the big message never does
  // (whatever else arrives is drained until the server has been quiet
  // for a moment).
  bool beat = false;
  for (auto m = farm.server->receive(kDeadline); m;
       m = farm.server->receive(beat ? 300ms : kDeadline)) {
    if (std::holds_alternative<Heartbeat>(m->msg)) beat = true;
    EXPECT_FALSE(std::holds_alternative<LogChunk>(m->msg))
        << "the message above the limit arrived";
  }
  EXPECT_TRUE(beat);
}

TEST(Transport, WorkerReconnectsWhenTheSchedulerComesBack) {
  Farm farm;
  auto client = farm.client(farm.workerKeys);
  client->send(hello("w"));
  ASSERT_TRUE(farm.server->receive(kDeadline));
  auto endpoint = farm.server->endpoint();
  farm.server.reset();
  ASSERT_TRUE(test::pollUntil([&] { return !client->connected(); }, kDeadline));
  ServerOptions o;
  o.bind = endpoint;
  o.keys = farm.schedKeys;
  o.allowed.add(farm.workerKeys.publicKey, "builder-1");
  farm.server = std::make_unique<Server>(o);
  client->send(hello("w-again"));
  auto got = farm.server->receive(kDeadline);
  ASSERT_TRUE(got);
  EXPECT_EQ(std::get<Hello>(got->msg).workerId, "w-again");
  EXPECT_TRUE(test::pollUntil([&] { return client->connected(); }, kDeadline));
}

// A store that keeps committed NARs in memory.
class MemTarget : public TransferTarget {
 public:
  explicit MemTarget(std::map<uint64_t, std::string>& done) : done_(done) {}
  void write(std::string_view d) override { buf_.append(d); }
  void commit(const TransferHeader& h) override {
    done_[h.transferId] = std::move(buf_);
  }
  void discard(const std::string&) noexcept override {}

 private:
  std::map<uint64_t, std::string>& done_;
  std::string buf_;
};

TEST(Transport, UploadOfSeveralMegabytesArrivesIntactAndCorruptionIsRefused) {
  Farm farm;
  auto client = farm.client(farm.workerKeys);
  client->send(hello("builder-1"));
  auto first = farm.server->receive(kDeadline);
  ASSERT_TRUE(first);
  auto peer = first->peer;

  std::map<uint64_t, std::string> stored;
  std::vector<TransferOutcome> outcomes;
  TransferEndpoint sched(
      [&](Message&& m) { ASSERT_TRUE(farm.server->send(peer, m)); },
      [&](const TransferHeader&, bool upload) {
        EXPECT_TRUE(upload);
        return std::make_unique<MemTarget>(stored);
      },
      nullptr);
  int corruptChunk = 5;
  TransferEndpoint worker(
      [&](Message&& m) {
        if (auto* c = std::get_if<Chunk>(&m);
            c && c->seq == uint64_t(corruptChunk))
          c->data[0] ^= 0x40;
        ASSERT_TRUE(client->send(m));
      },
      nullptr, nullptr);

  std::mt19937 rng(9);
  std::string nar(5 << 20, '\0');
  for (auto& c : nar) c = static_cast<char>(rng());
  UploadOutput up;
  up.stepId = 3;
  up.outputName = "out";
  up.info.path = store::StorePath("0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a-big");
  up.info.narHash = hashString(HashAlgo::kSha256, nar);
  up.info.narSize = nar.size();
  auto upload = [&] {
    worker.startSend(true, up, std::make_unique<StringSource>(nar),
                     [&](const TransferOutcome& o) { outcomes.push_back(o); });
  };
  auto pumpUntil = [&](size_t n) {
    auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (outcomes.size() < n && std::chrono::steady_clock::now() < deadline) {
      if (auto r = farm.server->receive(1ms)) {
        EXPECT_TRUE(sched.handle(r->msg));
      }
      if (auto m = client->receive(1ms)) {
        EXPECT_TRUE(worker.handle(*m));
      }
    }
    return outcomes.size() == n;
  };

  upload();
  ASSERT_TRUE(pumpUntil(1));
  EXPECT_FALSE(outcomes[0].ok);
  EXPECT_THAT(outcomes[0].error, HasSubstr("NAR hash mismatch"));
  EXPECT_TRUE(stored.empty());

  corruptChunk = -1;
  upload();
  ASSERT_TRUE(pumpUntil(2));
  EXPECT_TRUE(outcomes[1].ok) << outcomes[1].error;
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_TRUE(stored.begin()->second == nar);
}

TEST(Keys, FilesRoundTripAndAreChecked) {
  TempDir dir;
  auto keys = generateKeyPair();
  EXPECT_EQ(publicKeyOf(keys.secretKey), keys.publicKey);
  writeKeyPair(keys, dir.path(), "sched");
  EXPECT_THROW(writeKeyPair(keys, dir.path(), "sched"), Error);
  auto back = readSecretKeyFile(dir.path() + "/sched.key");
  EXPECT_EQ(back.publicKey, keys.publicKey);
  EXPECT_EQ(back.secretKey, keys.secretKey);
  EXPECT_EQ(readKeyFile(dir.path() + "/sched.pub"), keys.publicKey);
  ::chmod((dir.path() + "/sched.key").c_str(), 0644);
  EXPECT_THROW(readSecretKeyFile(dir.path() + "/sched.key"), Error);
  writeFile(dir.path() + "/bad.pub", "tooshort\n");
  try {
    readKeyFile(dir.path() + "/bad.pub");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_THAT(
        e.what(),
        HasSubstr("bad.pub:1: a CurveZMQ key is 40 Z85 characters, got 8"));
  }
}

TEST(Keys, AllowListParsesNamesCommentsAndRejectsJunk) {
  auto a = generateKeyPair().publicKey, b = generateKeyPair().publicKey;
  auto list = AllowList::parse(
      "# workers\n" + a + " builder-1\n\n" + b + "   # unnamed\n", "allow");
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(*list.find(a), "builder-1");
  EXPECT_EQ(*list.find(b), b);
  EXPECT_EQ(list.find(generateKeyPair().publicKey), nullptr);
  try {
    AllowList::parse(a + "\n" + a + "\n", "allow");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_THAT(e.what(), HasSubstr("allow:2: key listed twice"));
  }
  EXPECT_THROW(AllowList::parse("not-a-key\n", "allow"), FormatError);
  EXPECT_THROW(AllowList::parse(a + " name extra\n", "allow"), FormatError);
  // Z85 has '#': a key may start with it and is not taken for a comment.
  std::string hashKey = "#" + a.substr(1);
  auto h = AllowList::parse(
      hashKey + " w # comment\n#a-comment-line with words\n", "allow");
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(*h.find(hashKey), "w");
}

}  // namespace
}  // namespace kiln::protocol
