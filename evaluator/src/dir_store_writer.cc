// Writes .drv, toFile and source objects under a root directory.
#include "kiln/evaluator/dir_store_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/stream.h"
#include "kiln/store/nar.h"

namespace kiln::eval {

namespace {

// Renames `tmp` to `target`, removing `tmp` if that fails.
void commit(const std::string& tmp, const std::string& target) {
  if (rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    deletePath(tmp);
    throw SysError("writing '" + target + "'", err);
  }
}

}  // namespace

DirStoreWriter::DirStoreWriter(std::string root) : root_(absPath(root)) { createDirs(root_); }

void DirStoreWriter::addText(const std::string& path, const std::string& contents,
                             const std::set<std::string>&) {
  std::string target = root_ + path;
  if (pathExists(target)) return;
  createDirs(dirNameOf(target));
  std::string tmp = target + ".tmp-" + std::to_string(getpid());
  writeFile(tmp, contents);
  if (chmod(tmp.c_str(), 0444) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    throw SysError("writing '" + target + "'", err);
  }
  commit(tmp, target);
  ++written_;
}

void DirStoreWriter::addDerivation(const std::string& path, const std::string& contents,
                                   const std::set<std::string>& references,
                                   const std::map<std::string, std::string>&) {
  addText(path, contents, references);
}

void DirStoreWriter::addSource(const std::string& path, const std::string& fsPath,
                               const PathFilter& filter, bool recursive) {
  std::string target = root_ + path;
  if (pathExists(target)) return;
  createDirs(dirNameOf(target));
  std::string tmp = target + ".tmp-" + std::to_string(getpid());
  if (pathExists(tmp)) deletePath(tmp);
  StringSink nar;
  if (recursive) store::dumpPath(fsPath, nar, narFilterOf(filter));
  else store::dumpString(readFile(fsPath), nar);
  StringSource src(nar.s);
  store::restorePath(tmp, src);
  commit(tmp, target);
  ++written_;
}

}  // namespace kiln::eval
