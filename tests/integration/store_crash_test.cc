// Crash safety of `kiln store add`: a SIGKILL in the middle of adding a
// large tree leaves the store valid (the path absent or complete, never
// registered half-written), `kiln store verify` agrees, and adding again
// succeeds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <utility>

#include "kiln/common/file.h"
#include "kiln/store/local_store.h"
#include "kiln/store/nar.h"
#include "test_support.h"

extern char** environ;

namespace kiln::store {
namespace {

// 50 files of 4 MiB in 5 folders (200 MiB), each with distinct contents.
void makeBigTree(const std::string& root) {
  std::string block(4 << 20, '\0');
  for (int d = 0; d < 5; ++d) {
    std::string dir = root + "/d" + std::to_string(d);
    createDirs(dir);
    for (int f = 0; f < 10; ++f) {
      for (size_t i = 0; i < block.size(); i += 64)
        block[i] = static_cast<char>(d * 31 + f * 7 + i / 64);
      writeFile(dir + "/f" + std::to_string(f), block);
    }
  }
}

bool tempExists(const std::string& physicalRoot) {
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(physicalRoot, ec))
    if (e.path().filename().string().starts_with(kStoreTempPrefix)) return true;
  return false;
}

pid_t spawnKiln(const std::vector<std::string>& args, const std::string& out = "/dev/null") {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// Polls (for up to two minutes) until `ready` holds, then SIGKILLs `pid`
// and reaps it. Returns whether `ready` held and whether the kill is what
// ended the process.
std::pair<bool, bool> killWhen(pid_t pid, const std::function<bool()>& ready) {
  bool held = test::pollUntil(ready, std::chrono::seconds(120));
  ::kill(pid, SIGKILL);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return {held, false};
  return {held, WIFSIGNALED(status)};
}

TEST(StoreCrash, KillDuringAddLeavesStoreConsistent) {
  TempDir dir("kiln-crash");
  std::string tree = dir.path() + "/big", state = dir.path() + "/state";
  makeBigTree(tree);
  std::string kiln = test::kilnBinary();
  // Create the store first so that the temporary's appearance is the add.
  ASSERT_EQ(test::run({kiln, "store", "verify", "--state-dir", state}).exitCode, 0);
  StorePath expected = [&] {
    HashingSink h(HashAlgo::kSha256);
    dumpPath(tree, h);
    return StoreDir().makeSourcePath("big", h.finish().first, {}, false);
  }();

  pid_t pid = spawnKiln({kiln, "store", "add", "--state-dir", state, tree});
  ASSERT_GT(pid, 0);
  auto [appeared, killed] = killWhen(pid, [&] { return tempExists(state + "/store"); });
  ASSERT_TRUE(appeared) << "the add never created its temporary";
  ASSERT_TRUE(killed) << "the add finished before it was killed";

  {
    LocalStore store(state);
    if (store.isValid(expected)) {
      EXPECT_TRUE(store.verify().problems.empty());
    } else {
      // Absent: no registration and nothing under the final name.
      EXPECT_FALSE(pathExists(store.physicalPath(expected)));
    }
    EXPECT_TRUE(tempExists(store.physicalRoot()));  // the dead add's leftover
  }
  auto verify = test::run({kiln, "store", "verify", "--state-dir", state});
  EXPECT_EQ(verify.exitCode, 0) << verify.out << verify.err;

  auto again = test::run({kiln, "store", "add", "--state-dir", state, tree});
  ASSERT_EQ(again.exitCode, 0) << again.err;
  EXPECT_EQ(again.out, StoreDir().printPath(expected) + "\n");
  verify = test::run({kiln, "store", "verify", "--json", "--state-dir", state});
  EXPECT_EQ(verify.exitCode, 0) << verify.out;
  EXPECT_NE(verify.out.find("\"checked\": 1"), std::string::npos) << verify.out;
  // The collector removes the stale temporary (and the unrooted path).
  auto gc = test::run({kiln, "store", "gc", "--json", "--state-dir", state});
  EXPECT_EQ(gc.exitCode, 0);
  EXPECT_NE(gc.out.find("\"junkRemoved\": 1"), std::string::npos) << gc.out;
  EXPECT_FALSE(tempExists(state + "/store"));
}

// `kiln eval` writes in batches (LocalStore::Batch): a SIGKILL after one
// batch was committed and while the next is being written leaves every
// registered path complete, every job line it printed naming a valid .drv,
// and the dead batch's temporaries as junk; evaluating again completes.
TEST(StoreCrash, KillDuringEvaluationLeavesStoreConsistent) {
  TempDir dir("kiln-crash-eval");
  std::string coll = dir.path() + "/coll", state = dir.path() + "/state";
  auto gen = test::run({"python3", test::sharedDir() + "/bench/gen-collection.py", "10000", coll});
  ASSERT_EQ(gen.exitCode, 0) << gen.err;
  std::string kiln = test::kilnBinary();
  ASSERT_EQ(test::run({kiln, "store", "verify", "--state-dir", state}).exitCode, 0);
  std::vector<std::string> evalArgs = {kiln, "eval", "--json", "--state-dir", state,
                                       coll + "/default.nix"};
  std::string out = dir.path() + "/jobs.json";
  pid_t pid = spawnKiln(evalArgs, out);
  ASSERT_GT(pid, 0);
  size_t committed = 0;
  auto [midway, killed] = killWhen(pid, [&] {
    LocalStore store(state);
    committed = store.queryAllValidPaths().size();
    return committed > 0 && tempExists(state + "/store");
  });
  ASSERT_TRUE(midway) << "never saw a committed batch and the next one in progress";
  ASSERT_TRUE(killed) << "the evaluation finished before it was killed";
  {
    LocalStore store(state);
    EXPECT_GE(store.queryAllValidPaths().size(), committed);
    EXPECT_LT(store.queryAllValidPaths().size(), 10000u);
    auto v = store.verify();
    EXPECT_TRUE(v.problems.empty()) << v.problems.front().detail;
    auto lines = test::nonEmptyLines(readFile(out));
    // The kill may cut the last line short; it names nothing whole.
    if (!lines.empty() && !lines.back().ends_with("}")) lines.pop_back();
    for (auto& line : lines) {
      auto at = line.find("\"drvPath\":\"");
      ASSERT_NE(at, std::string::npos) << line;
      auto path = line.substr(at + 11, line.find('"', at + 11) - at - 11);
      EXPECT_TRUE(store.isValid(store.parsePath(path))) << path;
    }
    EXPECT_TRUE(tempExists(store.physicalRoot()));  // the dead batch's leftovers
  }
  auto again = test::run(evalArgs);
  ASSERT_EQ(again.exitCode, 0) << again.err;
  EXPECT_EQ(test::nonEmptyLines(again.out).size(), 10000u);
  auto verify = test::run({kiln, "store", "verify", "--json", "--state-dir", state});
  EXPECT_EQ(verify.exitCode, 0) << verify.out;
  EXPECT_NE(verify.out.find("\"checked\": 10000"), std::string::npos) << verify.out;
  auto gc = test::run({kiln, "store", "gc", "--json", "--state-dir", state});
  EXPECT_EQ(gc.exitCode, 0);
  EXPECT_FALSE(tempExists(state + "/store"));
}

}  // namespace
}  // namespace kiln::store
