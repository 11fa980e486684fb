// Free space of file systems (disk_space.h).
#include "kiln/common/disk_space.h"

#include <sys/statvfs.h>

#include "kiln/common/error.h"

namespace kiln {

uint64_t RealDiskSpace::available(const std::string& path) const {
  struct statvfs st {};
  if (statvfs(path.c_str(), &st) != 0)
    throwSysError("asking the free space of '" + path + "'");
  return uint64_t(st.f_bavail) * st.f_frsize;
}

const RealDiskSpace& RealDiskSpace::instance() {
  static const RealDiskSpace real;
  return real;
}

}  // namespace kiln
