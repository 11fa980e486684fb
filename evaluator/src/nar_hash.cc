// NAR hashing of source trees through the store's NAR writer.
#include <sys/stat.h>

#include "builtins.h"
#include "kiln/common/stream.h"
#include "kiln/store/nar.h"

namespace kiln::eval {

std::function<bool(const std::string&)> narFilterOf(const PathFilter& filter) {
  if (!filter) return {};
  return [filter](const std::string& p) {
    struct stat st;
    const char* type = "unknown";
    if (lstat(p.c_str(), &st) == 0)
      type = S_ISREG(st.st_mode) ? "regular" : S_ISDIR(st.st_mode) ? "directory"
             : S_ISLNK(st.st_mode) ? "symlink" : "unknown";
    return filter(p, type);
  };
}

Hash narHashOfPath(const std::string& path, const NarFilter& filter) {
  HashingSink sink(HashAlgo::kSha256);
  try {
    store::dumpPath(path, sink, narFilterOf(filter));
  } catch (const EvalError&) {
    throw;
  } catch (const Error& e) {
    throw EvalError(e.what());
  }
  return sink.finish().first;
}

}  // namespace kiln::eval
