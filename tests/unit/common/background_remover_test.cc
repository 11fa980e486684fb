#include "kiln/common/background_remover.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <memory>

#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

// A tree with a read-only directory and files, as a build leaves one.
std::string makeTree(const std::string& parent, const std::string& name) {
  std::string root = parent + "/" + name;
  createDirs(root + "/src/obj");
  writeFile(root + "/src/a.c", "int a;");
  writeFile(root + "/src/obj/a.o", "obj");
  EXPECT_EQ(::chmod((root + "/src/obj").c_str(), 0555), 0);
  return root;
}

TEST(BackgroundRemover, RemovesQueuedTreesAndDrainWaitsForThem) {
  TempDir dir("kiln-remover");
  BackgroundRemover remover;
  std::vector<std::string> trees;
  for (int i = 0; i < 5; ++i) {
    trees.push_back(makeTree(dir.path(), "t" + std::to_string(i)));
    remover.remove(trees.back());
  }
  remover.drain();
  for (auto& t : trees) EXPECT_FALSE(pathExists(t)) << t;
  EXPECT_TRUE(pathExists(dir.path()));
}

TEST(BackgroundRemover, DestructionFinishesTheQueueAndMissingPathsAreFine) {
  TempDir dir("kiln-remover");
  std::string a = makeTree(dir.path(), "a");
  std::string b = makeTree(dir.path(), "b");
  {
    auto remover = std::make_unique<BackgroundRemover>();
    remover->remove(dir.path() + "/never-existed");
    remover->remove(a);
    remover->remove(b);
  }
  EXPECT_FALSE(pathExists(a));
  EXPECT_FALSE(pathExists(b));
  BackgroundRemover unused;  // never started: nothing to join
}

}  // namespace
}  // namespace kiln
