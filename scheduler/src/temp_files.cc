// Unlinked temporary files (temp_files.h).
#include "temp_files.h"

#include <fcntl.h>
#include <unistd.h>

#include "kiln/common/error.h"

namespace kiln::scheduler {

AutoCloseFD openUnlinkedTemp(const std::string& path) {
  AutoCloseFD fd(
      open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) throwSysError("creating " + path);
  unlink(path.c_str());
  return fd;
}

TempNames::TempNames(std::string dir, std::string tag)
    : prefix_(std::move(dir) + "/" + std::to_string(getpid()) + "-" +
              std::move(tag) + "-") {}

std::string TempNames::next() { return prefix_ + std::to_string(++counter_); }

}  // namespace kiln::scheduler
