// The real CgroupSystem: the cgroup file systems, kill(2), a short sleep.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "kiln/common/clock.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/worker/cgroups.h"

namespace kiln::worker {
namespace {

class RealCgroupSystem : public CgroupSystem {
 public:
  std::optional<std::string> read(const std::string& path) override {
    try {
      return readFile(path);
    } catch (const Error&) {
      return std::nullopt;
    }
  }
  void write(const std::string& path, const std::string& value) override {
    AutoCloseFD fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) throwSysError("opening " + path);
    if (::write(fd.get(), value.data(), value.size()) !=
        static_cast<ssize_t>(value.size()))
      throwSysError("writing '" + value + "' to " + path);
  }
  void makeDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) < 0 && errno != EEXIST)
      throwSysError("creating the control group " + path);
  }
  bool removeDir(const std::string& path) override {
    if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return true;
    if (errno == EBUSY) return false;
    throwSysError("removing the control group " + path);
  }
  void kill(pid_t pid) override { ::kill(pid, SIGKILL); }
  std::vector<std::string> subdirs(const std::string& dir) override {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir.c_str());
    if (!d) return out;
    while (dirent* e = ::readdir(d))
      if (e->d_type == DT_DIR && e->d_name[0] != '.') out.push_back(e->d_name);
    ::closedir(d);
    return out;
  }
  bool exists(pid_t pid) override {
    return ::kill(pid, 0) == 0 || errno == EPERM;
  }
  void pause() override {
    RealClock::instance().sleepFor(std::chrono::milliseconds(5));
  }
};

}  // namespace

std::shared_ptr<CgroupSystem> realCgroupSystem() {
  return std::make_shared<RealCgroupSystem>();
}

}  // namespace kiln::worker
