// Writes .drv and toFile objects under a root directory.
#include "kiln/evaluator/dir_store_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "kiln/common/file.h"

namespace kiln::eval {

DirStoreWriter::DirStoreWriter(std::string root) : root_(absPath(root)) { createDirs(root_); }

void DirStoreWriter::addText(const std::string& path, const std::string& contents) {
  std::string target = root_ + path;
  if (pathExists(target)) return;
  createDirs(dirNameOf(target));
  std::string tmp = target + ".tmp-" + std::to_string(getpid());
  writeFile(tmp, contents);
  if (chmod(tmp.c_str(), 0444) != 0 || rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    throw SysError("writing '" + target + "'", err);
  }
  ++written_;
}

}  // namespace kiln::eval
