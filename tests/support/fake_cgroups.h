#pragma once
// Fakes of the control-group seams (kiln/worker/cgroups.h): an in-memory
// cgroup file system for the v1/v2 logic, and a Cgroups whose groups the
// test drives (usage counters, kills) for the build runner.

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kiln/common/error.h"
#include "kiln/worker/cgroups.h"
#include "kiln/worker/limit_watch.h"

namespace kiln::testing {

/// Files and directories in memory; every write is logged.
class FakeCgroupSystem : public worker::CgroupSystem {
 public:
  std::optional<std::string> read(const std::string& path) override {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  }
  void write(const std::string& path, const std::string& value) override {
    if (failWrites.count(path)) throw SysError("writing " + path, EINVAL);
    writes.push_back(path + "=" + value);
    files[path] = value;
  }
  void makeDir(const std::string& path) override { dirs.insert(path); }
  bool removeDir(const std::string& path) override {
    if (busyRemovals > 0) {
      --busyRemovals;
      return false;
    }
    dirs.erase(path);
    removed.push_back(path);
    return true;
  }
  void kill(pid_t pid) override { killed.push_back(pid); }
  std::vector<std::string> subdirs(const std::string& dir) override {
    std::vector<std::string> out;
    for (auto& d : dirs)
      if (d.size() > dir.size() + 1 &&
          d.compare(0, dir.size() + 1, dir + "/") == 0 &&
          d.find('/', dir.size() + 1) == std::string::npos)
        out.push_back(d.substr(dir.size() + 1));
    return out;
  }
  bool exists(pid_t pid) override { return alive.count(pid) > 0; }
  void pause() override { ++pauses; }

  std::map<std::string, std::string> files;
  std::set<std::string> dirs;
  std::set<std::string> failWrites;
  std::set<pid_t> alive;  ///< exists()
  std::vector<std::string> writes, removed;
  std::vector<pid_t> killed;
  int busyRemovals = 0, pauses = 0;
};

/// What a FakeCgroups' groups share with the test.
struct FakeGroupState {
  std::mutex mu;
  worker::CgroupUsage usage;  ///< what usage() returns
  std::vector<std::string> created, destroyed;
  std::vector<worker::CgroupLimits> limits;
  int kills = 0;
};

/// Groups that only report what the test sets.
class FakeCgroups : public worker::Cgroups {
 public:
  std::string describe() const override { return "fake"; }
  std::unique_ptr<worker::BuildCgroup> create(
      const std::string& name, const worker::CgroupLimits& limits) override {
    std::lock_guard lock(state->mu);
    state->created.push_back(name);
    state->limits.push_back(limits);
    return std::make_unique<Group>(state, name);
  }
  size_t sweep() override { return 0; }
  std::shared_ptr<FakeGroupState> state = std::make_shared<FakeGroupState>();

 private:
  class Group : public worker::BuildCgroup {
   public:
    Group(std::shared_ptr<FakeGroupState> s, std::string name)
        : s_(std::move(s)), name_(std::move(name)) {}
    ~Group() override {
      std::lock_guard lock(s_->mu);
      s_->destroyed.push_back(name_);
    }
    std::vector<std::string> procsFiles() const override {
      return {"/fake/" + name_ + "/cgroup.procs"};
    }
    worker::CgroupUsage usage() override {
      std::lock_guard lock(s_->mu);
      return s_->usage;
    }
    void killAll() override {
      std::lock_guard lock(s_->mu);
      ++s_->kills;
    }

   private:
    std::shared_ptr<FakeGroupState> s_;
    std::string name_;
  };
};

/// A directory "size" the test sets.
class FakeDirectorySize : public worker::DirectorySize {
 public:
  uint64_t measure(const std::string&, uint64_t) override {
    ++calls;
    return bytes;
  }
  uint64_t bytes = 0;
  int calls = 0;
};

}  // namespace kiln::testing
