#include "kiln/common/lazy_library.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>

#include "kiln/common/error.h"

namespace kiln {

void* lazySymbol(const char* soname, const char* symbol) {
  // Never destroyed: a thread still running at exit (a listener shutting
  // down) may make its first call of a function after static destructors
  // ran; with static objects that call crashed on the destroyed map.
  static auto* mu = new std::mutex;
  static auto* handles = new std::map<std::string, void*>;  // opened once, never closed
  std::lock_guard<std::mutex> lock(*mu);
  void*& handle = (*handles)[soname];
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
