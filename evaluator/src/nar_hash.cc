// NAR hashing of source trees through the store's NAR writer.
#include <sys/stat.h>

#include "builtins.h"
#include "kiln/common/stream.h"
#include "kiln/store/nar.h"

namespace kiln::eval {

Hash narHashOfPath(const std::string& path, const NarFilter& filter) {
  HashingSink sink(HashAlgo::kSha256);
  store::NarPathFilter f;
  if (filter)
    f = [&](const std::string& p) {
      struct stat st;
      const char* type = "unknown";
      if (lstat(p.c_str(), &st) == 0)
        type = S_ISREG(st.st_mode) ? "regular" : S_ISDIR(st.st_mode) ? "directory"
               : S_ISLNK(st.st_mode) ? "symlink" : "unknown";
      return filter(p, type);
    };
  try {
    store::dumpPath(path, sink, f);
  } catch (const EvalError&) {
    throw;
  } catch (const Error& e) {
    throw EvalError(e.what());
  }
  return sink.finish().first;
}

}  // namespace kiln::eval
