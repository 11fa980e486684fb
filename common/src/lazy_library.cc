#include "kiln/common/lazy_library.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>

#include "kiln/common/error.h"

namespace kiln {

void* lazySymbol(const char* soname, const char* symbol) {
  static std::mutex mu;
  static std::map<std::string, void*> handles;  // opened once, never closed
  std::lock_guard<std::mutex> lock(mu);
  void*& handle = handles[soname];
  if (!handle) {
    handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      throw Error(std::string("cannot load ") + soname + ": " + dlerror());
  }
  // From the library's own tree: never a stub of the same name in kiln.
  void* p = dlsym(handle, symbol);
  if (!p) throw Error(std::string("cannot find ") + symbol + " in " + soname);
  return p;
}

}  // namespace kiln
