// EvalState's parsing entry points, file evaluation (with its cache), the
// search path (<nixpkgs>) and the large-stack thread evaluation runs on.
#include <pthread.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <iostream>

#include "eval_parts.h"
#include "corepkgs.h"
#include "gc_support.h"
#include "kiln/common/file.h"
#include "kiln/evaluator/eval_state.h"
#include "kiln/evaluator/eval_stats.h"
#include "parser.h"

namespace kiln::eval {

Expr* EvalState::parse(std::string text, const std::string& path, const std::string& basePath,
                       const StaticEnv& env, std::string_view* originPath) {
  // Threads parse concurrently: a parser touches only its own source's
  // positions, the symbol table (locked) and its thread's arena cursor.
  auto owned = std::make_shared<const std::string>(std::move(text));
  // Error snippets need the source; a file is read again for one (as Nix
  // does) instead of being kept for the whole evaluation: a package set
  // of 50,000 files would keep 65 MB of text. Only sources that cannot be
  // read again (-E, stdin, corepkgs) are kept.
  bool keep = !path.starts_with("/") || corepkgsFile(path);
  uint32_t origin = positions.addOrigin(path, owned, keep);
  if (originPath) *originPath = positions.origin(origin).path;
  size_t arenaBefore = heap().counts() ? arena.bytesReserved() : 0;  // KILN_EVAL_STATS
  Parser p(*this, *owned, origin, basePath);
  Expr* e = p.parseAll();
  e->bindVars(*this, env);
  if (heap().counts()) heap().countParseBytes(arena.bytesReserved() - arenaBefore);
  return e;
}

Expr* EvalState::parseExprFromString(std::string text, const std::string& basePath,
                                     const std::string& origin) {
  return parse(std::move(text), origin, basePath, builtins().staticBaseEnv());
}

static std::string resolveNixFile(const std::string& path) {
  if (corepkgsFile(path)) return path;
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    throw EvalError("getting status of '" + path + "': " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return path + "/default.nix";
  return path;
}

Expr* EvalState::parseExprFromFile(const std::string& path) {
  return parseFile(resolveNixFile(path), nullptr);
}

Expr* EvalState::parseFile(const std::string& file, std::string_view* originPath) {
  if (const char* builtin = corepkgsFile(file))
    return parse(builtin, file, "/", builtins().staticBaseEnv(), originPath);
  std::string text;
  try {
    text = kiln::readFile(file);
  } catch (const Error& e) {
    throw EvalError(e.what());
  }
  return parse(std::move(text), file, dirNameOf(file), builtins().staticBaseEnv(), originPath);
}

void EvalState::evalFile(const std::string& path, Value& v) {
  // Checked before and after adding default.nix (it may be a symlink).
  std::string file = canonPath(checkSourcePath(resolveNixFile(checkSourcePath(path))));
  Value* cached = files().findImport(file);
  if (!cached) {
    // Parsed without the lock (threads parse different files at once); of
    // two threads that parsed the same file, the first to add it wins.
    std::string_view key;
    Expr* e = parseFile(resolveNixFile(file), &key);
    if (key != file) key = arena.copyString(file);  // a default.nix that is a directory
    cached = files().addImport(key, [&] {
      Value* v = heap().allocPermanentValue();  // the cache is not scanned
      v->mkThunk(builtins().baseEnv(), e);
      return v;
    });
  }
  try {
    forceValue(*cached, kNoPos);
  } catch (EvalError& e) {
    e.addTrace("while evaluating the file '" + file + "':");
    throw;
  }
  v = *cached;
}

std::optional<std::string> resolveSearchPath(const std::string& prefix, const std::string& dir,
                                             std::string_view path) {
  std::string candidate;
  if (prefix.empty()) {
    candidate = dir + "/" + std::string(path);
  } else if (path == prefix) {
    candidate = dir;
  } else if (path.size() > prefix.size() && path.substr(0, prefix.size()) == prefix &&
             path[prefix.size()] == '/') {
    candidate = dir + std::string(path.substr(prefix.size()));
  } else {
    return std::nullopt;
  }
  if (!kiln::pathExists(candidate)) return std::nullopt;
  return canonPath(absPath(candidate));
}

std::string EvalState::findFile(std::string_view path, PosIdx pos) {
  return findFileIn(searchPathEntries, path, pos);
}

std::string EvalState::findFileIn(const std::vector<std::pair<std::string, std::string>>& entries,
                                  std::string_view path, PosIdx pos) {
  for (auto& [prefix, dir] : entries) {
    bool applies = prefix.empty() || path == prefix ||
                   (path.starts_with(prefix) && path[prefix.size()] == '/');
    if (applies && !kiln::pathExists(dir)) {  // as Nix: warned once, then skipped
      auto lock = lockIfThreaded(warnedMutex_);
      if (missingEntriesWarned_.insert(dir).second)
        std::cerr << "warning: Nix search path entry '" << dir << "' does not exist, ignoring\n";
      continue;
    }
    if (auto found = resolveSearchPath(prefix, dir, path)) return *found;
  }
  if (path.substr(0, 4) == "nix/") return kCorepkgsPrefix + std::string(path.substr(4));
  if (settings.pureEval)
    throw ThrownError("cannot look up '<" + std::string(path) +
                      ">' in pure evaluation mode (use '--impure' to override)" +
                      positions.snippet(pos));
  throw ThrownError("file '" + std::string(path) +
                    "' was not found in the Nix search path (add it using $NIX_PATH or -I)" +
                    positions.snippet(pos));
}

namespace {
struct ThreadArgs {
  const std::function<void()>* fn;
  std::exception_ptr error;
};
void* threadMain(void* p) {
  auto* a = static_cast<ThreadArgs*>(p);
  try {
    (*a->fn)();
  } catch (...) {
    a->error = std::current_exception();
  }
  return nullptr;
}
}  // namespace

void runWithLargeStack(const std::function<void()>& fn, size_t stackBytes) {
  initGarbageCollector();  // on this (main) thread; the new one registers itself
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stackBytes);
  ThreadArgs args{&fn, nullptr};
  pthread_t t;
  int rc = pthread_create(&t, &attr, threadMain, &args);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    fn();
    return;
  }
  pthread_join(t, nullptr);
  if (args.error) std::rethrow_exception(args.error);
}

Expr* EvalState::parseWithScope(const std::string& path, Value* scope, Env*& envOut) {
  std::string file = resolveNixFile(path);
  std::string text;
  try {
    text = kiln::readFile(file);
  } catch (const Error& e) {
    throw EvalError(e.what());
  }
  Bindings* b = scope->attrs;
  Env& env = heap().allocEnv(b->size);
  env.up = builtins().baseEnv();
  auto* senv = arena.make<StaticEnv>();
  senv->up = &builtins().staticBaseEnv();
  uint32_t i = 0;
  for (const Attr& a : *b) {
    senv->vars.push_back({a.name, i});
    env.values[i++] = a.value;
  }
  senv->sort();
  Expr* e = parse(std::move(text), file, dirNameOf(file), *senv);
  envOut = &env;
  return e;
}

}  // namespace kiln::eval
