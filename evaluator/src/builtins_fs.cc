// Filesystem builtins: import, scopedImport, readFile, readDir, pathExists,
// findFile, toFile, filterSource, path.
#include <dirent.h>
#include <sys/stat.h>

#include <cstring>
#include <map>

#include "builtins.h"
#include "corepkgs.h"
#include "kiln/common/file.h"
#include "kiln/store/store_path.h"

namespace kiln::eval {

std::string realisePath(EvalState& st, PosIdx pos, Value& v, bool check) {
  std::string path;
  try {
    Context ctx;
    path = canonPath(coerceToPath(st, pos, v, ctx));
  } catch (EvalError& e) {
    e.addTrace("while realising the context of a path" + st.positions.snippet(pos));
    throw;
  }
  if (!check) return path;
  try {
    return st.checkSourcePath(path);
  } catch (EvalError& e) {
    e.addTrace("while realising the context of path '" + path + "'" + st.positions.snippet(pos));
    throw;
  }
}

namespace {

void primImport(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string path = realisePath(st, pos, *args[0]);
  try {
    st.evalFile(path, v);
  } catch (EvalError& e) {
    e.addTrace("while importing '" + path + "'" + st.positions.snippet(pos));
    throw;
  }
}

void primScopedImport(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceAttrs(st, *args[0], pos);
  std::string path = realisePath(st, pos, *args[1]);
  Env* env = nullptr;
  Expr* e = st.parseWithScope(path, args[0], env);
  e->eval(st, *env, v);
}

void primReadFile(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string path = realisePath(st, pos, *args[0]);
  std::string data;
  try {
    data = kiln::readFile(path);
  } catch (const Error& e) {
    throwError(st, pos, e.what());
  }
  if (data.find('\0') != std::string::npos)
    throwError(st, pos, "the contents of the file '" + path + "' cannot be represented as a Nix string");
  st.mkString(v, data);
}

void primReadDir(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string path = realisePath(st, pos, *args[0]);
  DIR* d = opendir(path.c_str());
  if (!d) throwError(st, pos, "opening directory '" + path + "': " + std::strerror(errno));
  std::vector<std::pair<std::string, const char*>> entries;
  while (dirent* e = readdir(d)) {
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    struct stat s;
    std::string full = path + "/" + e->d_name;
    const char* type = "unknown";
    if (lstat(full.c_str(), &s) == 0) {
      if (S_ISREG(s.st_mode)) type = "regular";
      else if (S_ISDIR(s.st_mode)) type = "directory";
      else if (S_ISLNK(s.st_mode)) type = "symlink";
    }
    entries.push_back({e->d_name, type});
  }
  closedir(d);
  Bindings* b = st.heap().allocBindings(entries.size());
  for (auto& [name, type] : entries) {
    Value* t = st.heap().allocValue();
    st.mkString(*t, type);
    b->push(st.sym(name), t);
  }
  st.mkAttrs(v, b);
}

void primPathExists(EvalState& st, PosIdx pos, Value** args, Value& v) {
  // A path restricted evaluation may not read does not exist (as in Nix):
  // an error would tell that it does.
  std::string path = realisePath(st, pos, *args[0], false);
  try {
    path = st.checkSourcePath(path);
  } catch (const RestrictedPathError&) {
    v.mkBool(false);
    return;
  }
  struct stat s;
  v.mkBool(lstat(path.c_str(), &s) == 0);
}

void primFindFile(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceList(st, *args[0], pos);
  std::string path(forceStringNoCtx(st, *args[1], pos));
  std::vector<std::pair<std::string, std::string>> entries;
  for (size_t i = 0; i < args[0]->list.size; ++i) {
    Value& e = *args[0]->list.elems[i];
    forceAttrs(st, e, pos);
    std::string prefix;
    if (Value* p = e.attrs->get(st.sPrefix)) prefix = forceStringNoCtx(st, *p, pos);
    Value* dirV = e.attrs->get(st.sPath);
    if (!dirV) throwError(st, pos, "attribute 'path' missing");
    Context ctx;
    entries.push_back({prefix, coerceToString(st, pos, *dirV, ctx, false, false)});
  }
  st.mkPath(v, st.checkSourcePath(st.findFileIn(entries, path, pos)));
}

void primToFile(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string name(forceStringNoCtx(st, *args[0], pos));
  Context ctx;
  std::string contents(forceString(st, *args[1], ctx, pos));
  store::StoreDir dir(st.settings.storeDir);
  store::StorePathSet refs;
  for (auto& c : ctx) {
    if (c[0] == '!' || c[0] == '=')
      throwError(st, pos, "in 'toFile': the file '" + name + "' cannot refer to derivation outputs");
    refs.insert(dir.parsePath(c));
  }
  std::string path;
  try {
    path = dir.printPath(dir.makeTextPath(name, hashString(HashAlgo::kSha256, contents), refs));
  } catch (const FormatError& e) {
    throwError(st, pos, e.what());
  }
  if (st.writer().get()) {
    std::set<std::string> refPaths;
    for (auto& r : refs) refPaths.insert(dir.printPath(r));
    std::unique_lock<SpinMutex> memo;
    if (name.size() > 4 && name.ends_with(".drv")) memo = lockDerivationMemo(st);
    st.writer().get()->addText(path, contents, refPaths);
  }
  st.allowPath(path);
  mkStorePathString(st, v, path);
}

std::string addPath(EvalState& st, PosIdx pos, const std::string& source, const std::string& name,
                    Value* filter, bool recursive, std::optional<Hash> expected) {
  std::string path;
  try {
    path = st.checkSourcePath(source);
  } catch (EvalError& e) {
    e.addTrace("while adding path '" + source + "'" + st.positions.snippet(pos));
    throw;
  }
  // The filter's answers while hashing are replayed for the store write,
  // so Nix code never runs inside the store writer (with threads, its lock
  // would be held while the filter forces thunks other threads own) and
  // each entry is asked about once, as Nix does. An entry the hash walk did
  // not see (the tree changed) is left out; the writer's check of the
  // resulting path reports the change.
  std::map<std::string, bool> answers;
  NarFilter f, replay;
  if (filter) {
    f = [&](const std::string& p, const char* type) {
      Value* vp = st.heap().allocValue();
      st.mkString(*vp, p);
      Value* vt = st.heap().allocValue();
      st.mkString(*vt, type);
      Value* vs[2] = {vp, vt};
      Value r;
      callFunction(st, *filter, 2, vs, r, pos);
      return answers[p] = forceBool(st, r, pos);
    };
    replay = [&answers](const std::string& p, const char*) {
      auto it = answers.find(p);
      return it != answers.end() && it->second;
    };
  }
  store::StoreDir dir(st.settings.storeDir);
  std::string out;
  try {
    if (recursive) {
      Hash h = narHashOfPath(path, f);
      if (expected && !(*expected == h))
        throwError(st, pos, "hash mismatch for path '" + path + "'");
      out = dir.printPath(dir.makeFixedOutputPath(name, true, h));
    } else {
      Hash h = hashString(expected ? expected->algo() : HashAlgo::kSha256, kiln::readFile(path));
      if (expected && !(*expected == h))
        throwError(st, pos, "hash mismatch for path '" + path + "'");
      out = dir.printPath(dir.makeFixedOutputPath(name, false, h));
    }
  } catch (const FormatError& e) {
    throwError(st, pos, e.what());
  }
  if (st.writer().get()) {
    try {
      st.writer().get()->addSource(out, path, recursive ? replay : f, recursive);
    } catch (const EvalError&) {
      throw;
    } catch (const Error& e) {
      throwError(st, pos, e.what());
    }
  }
  st.allowPath(out);
  return out;
}

void primFilterSource(EvalState& st, PosIdx pos, Value** args, Value& v) {
  Context pathCtx;
  std::string path = canonPath(coerceToPath(st, pos, *args[1], pathCtx));
  forceFunction(st, *args[0], pos);
  std::string out = addPath(st, pos, path, baseNameOf(path), args[0], true, std::nullopt);
  mkStorePathString(st, v, out);
}

void primPath(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceAttrs(st, *args[0], pos);
  std::string path, name;
  Value* filter = nullptr;
  Context pathCtx;
  bool recursive = true;
  std::optional<Hash> expected;
  for (auto& a : *args[0]->attrs) {
    std::string_view n = st.symbols.name(a.name);
    if (n == "path") path = canonPath(coerceToPath(st, pos, *a.value, pathCtx));
    else if (n == "name") name = forceStringNoCtx(st, *a.value, pos);
    else if (n == "filter") { forceFunction(st, *a.value, pos); filter = a.value; }
    else if (n == "recursive") recursive = forceBool(st, *a.value, pos);
    else if (n == "sha256") expected = Hash::parse(forceStringNoCtx(st, *a.value, pos), HashAlgo::kSha256);
    else throwError(st, pos, "unsupported argument '" + std::string(n) + "' to 'path'");
  }
  if (path.empty()) throwError(st, pos, "'path' required");
  if (name.empty()) name = baseNameOf(path);
  std::string out = addPath(st, pos, path, name, filter, recursive, expected);
  mkStorePathString(st, v, out);
}

constexpr BuiltinDef kDefs[] = {
    {"import", 1, primImport},
    {"scopedImport", 2, primScopedImport},
    {"__readFile", 1, primReadFile},
    {"__readDir", 1, primReadDir},
    {"__pathExists", 1, primPathExists},
    {"__findFile", 2, primFindFile},
    {"__toFile", 2, primToFile},
    {"__filterSource", 2, primFilterSource},
    {"__path", 1, primPath},
};

}  // namespace

void registerFsBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
