// derivationStrict: turns a derivation's attributes into a `.drv` record
// (spec §3.2-3.5), names it and its outputs, and hands the ATerm to the
// StoreWriter.
#include <algorithm>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "builtins.h"
#include "gc_support.h"
#include "kiln/common/encoding.h"
#include "kiln/store/derivation.h"

namespace kiln::eval {

namespace {

using store::Derivation;
using store::StorePath;

// What "=" contexts need of a derivation made by this evaluation: its
// input derivations and sources (base names) and output names, as
// NULL-terminated arrays in the EvalState's arena (100,000s of these are
// kept; separate heap vectors and strings cost memory and teardown time).
struct MadeDrv {
  const char* baseName;  // the arena copy inputs of later derivations share
  const char** inputDrvs;
  const char** inputSrcs;
  const char** outputs;
};

// Shared by every record with no inputs of a kind, or with the one
// output "out" (most derivations): never written.
const char* kNoStrings[] = {nullptr};
const char* kOutOnly[] = {"out", nullptr};

// A NULL-terminated arena array of the texts of `r`'s elements: for each,
// the arena copy `known` gives (a text already kept, shared), or else an
// arena copy of `text` of it.
template <class Range, class Text, class Known>
const char** arenaStrings(Arena& arena, const Range& r, Text&& text,
                          Known&& known) {
  if (std::empty(r)) return kNoStrings;
  const char** out = arena.makeArray<const char*>(std::size(r) + 1);
  size_t i = 0;
  for (auto& x : r) {
    const char* k = known(x);
    out[i++] = k ? k : arena.copyString(text(x));
  }
  out[i] = nullptr;
  return out;
}

// `made` maps a base name to its MadeDrv; `known` gives the arena copy of
// a base name already kept (inputs made by this evaluation), to share it,
// and `knownSrc` that of an input source's base name (inside the text of
// the context entry it came from).
template <class Known, class KnownSrc>
MadeDrv makeMadeDrv(Arena& arena, const char* baseName, const Derivation& d,
                    Known&& known, KnownSrc&& knownSrc) {
  auto none = [](auto&) -> const char* { return nullptr; };
  const char** inputs = arenaStrings(
      arena, d.inputDrvs,
      [](auto& kv) -> std::string_view { return kv.first.baseName(); },
      [&](auto& kv) -> const char* { return known(kv.first.baseName()); });
  const char** srcs = arenaStrings(
      arena, d.inputSrcs,
      [](const StorePath& p) -> std::string_view { return p.baseName(); },
      knownSrc);
  const bool outOnly = d.outputs.size() == 1 && d.outputs.begin()->first == "out";
  return {baseName, inputs, srcs,
          outOnly ? kOutOnly
                  : arenaStrings(
                        arena, d.outputs,
                        [](auto& kv) -> std::string_view { return kv.first; },
                        none)};
}

// What `derivation` needs besides DrvState: the builtins it applies and
// the constant values every result shares. Looked up on first use.
struct WrapperState {
  Value* strictFn = nullptr;  // derivationStrict
  Value* getAttrFn = nullptr;
  Value* drvPathSel = nullptr;  // getAttr "drvPath"
  Value* typeValue = nullptr;   // "derivation"
  Value* outName = nullptr;     // "out", the default output
  Symbol sDrvAttrs;
  std::unordered_map<uint32_t, Value*> outputSel;  // getAttr <output>
  Value* lazyListFn = nullptr;  // first output's set -> `all` (primLazyList)
};

// Hashes of the derivations made by this evaluation are memoised in
// `cache` as they are made, so read-only mode needs no store and the
// records themselves need not be kept.
struct DrvState : BuiltinState {
  DrvState(const std::string& storeDir, Arena& arena)
      : arena(arena),
        dir(storeDir),
        fileLoader(store::fileDrvLoader(dir, storeDir)),
        cache(dir, [this](const StorePath& p) { return fileLoader(p); }) {
    // The hash memo's key of a `.drv` is the base name inside the arena
    // text "=<store dir>/<base name>", which is also the `=` context of
    // its drvPath string and, after the '=', that string (eqPathOf).
    cache.keepKeysWith([this](std::string_view base) {
      const char* eq = makeContextEntry(this->arena, {"=", dir.dir(), "/", base});
      return std::string_view(eq + dir.dir().size() + 2, base.size());
    });
  }
  // "=<drvPath>" of a `.drv` whose memo key (cache.keptKey) is `key`.
  const char* eqPathOf(std::string_view key) const {
    return key.data() - dir.dir().size() - 2;
  }
  // The record of a derivation made by this evaluation, or nullptr.
  const MadeDrv* find(std::string_view baseName) {
    uint32_t* tag = cache.tagOf(baseName);
    return tag && *tag != store::DrvHashCache::kNoTag ? &made[*tag] : nullptr;
  }
  MadeDrv info(const StorePath& p) {
    if (const MadeDrv* m = find(p.baseName())) return *m;
    auto none = [](auto&&) -> const char* { return nullptr; };
    return makeMadeDrv(arena, nullptr, fileLoader(p), none, none);
  }
  Arena& arena;
  store::StoreDir dir;
  store::DrvLoader fileLoader;
  /// Records of the derivations made so far; the hash memo's entry of each
  /// holds its index (its tag), so one lookup finds the hash and the record.
  std::deque<MadeDrv> made;
  store::DrvHashCache cache;
  WrapperState wrapper;
  /// Held around every use of the hash memo and the records when threads
  /// evaluate (DrvHashCache::addDerivation takes it itself).
  SpinMutex mu;  // short sections entered per derivation by every thread
};

DrvState& drvState(EvalState& st) {
  std::unique_ptr<BuiltinState>& state = st.builtins().derivationState();
  if (!state) state = std::make_unique<DrvState>(st.settings.storeDir, st.arena);
  return static_cast<DrvState&>(*state);
}

}  // namespace

std::unique_lock<SpinMutex> lockDerivationMemo(EvalState& st) {
  if (!st.threads().active()) return {};
  return std::unique_lock<SpinMutex>(drvState(st).mu);
}

namespace {

// The base name of input source `p` inside the text of the context entry
// it came from ("/nix/store/<base name>", an arena copy that lives as long
// as the state), or nullptr: a derivation's record then needs no copy of
// it (toFile's and copied paths' names, ~50 bytes a derivation).
const char* sourceInContext(const DrvState& ds, const Context& ctx,
                            const StorePath& p) {
  // Entries against "<store dir>/<base name>", without making that string.
  const std::string_view dir = ds.dir.dir(), base = p.baseName();
  auto compare = [&](std::string_view e) {
    if (int c = e.substr(0, dir.size()).compare(dir)) return c;
    e.remove_prefix(std::min(e.size(), dir.size()));
    if (int c = e.substr(0, 1).compare("/")) return c;
    return e.substr(1).compare(base);
  };
  auto it =
      std::lower_bound(ctx.begin(), ctx.end(), 0,
                       [&](std::string_view e, int) { return compare(e) < 0; });
  if (it == ctx.end() || compare(*it) != 0) return nullptr;
  return it->data() + dir.size() + 1;
}

// Every path a `.drv` refers to, itself included (for "=" contexts).
void drvClosure(DrvState& ds, const StorePath& drvPath, store::StorePathSet& out) {
  if (!out.insert(drvPath).second) return;
  MadeDrv d = ds.info(drvPath);
  for (const char** s = d.inputSrcs; *s; ++s) out.insert(StorePath(*s));
  for (const char** in = d.inputDrvs; *in; ++in) drvClosure(ds, StorePath(*in), out);
}

struct Collected {
  std::vector<std::string> outputs{"out"};
  bool outputsGiven = false;
  std::optional<std::string> outputHash, outputHashAlgo, outputHashMode;
  bool contentAddressed = false;
};

void setOutputs(EvalState& st, PosIdx pos, Collected& c, const std::vector<std::string>& names) {
  c.outputs.clear();
  for (auto& n : names) {
    if (std::find(c.outputs.begin(), c.outputs.end(), n) != c.outputs.end())
      throwError(st, pos, "duplicate derivation output '" + n + "'");
    if (n == "drv") throwError(st, pos, "invalid derivation output name 'drv'");
    c.outputs.push_back(n);
  }
  if (c.outputs.empty()) throwError(st, pos, "derivation cannot have an empty set of outputs");
}

// Nix's tokenizeString with its default separators (" \t\n\r"; not
// isspace's, which also split at '\v' and '\f').
std::vector<std::string> splitSpaces(std::string_view s) {
  constexpr std::string_view kSeparators = " \t\n\r";
  std::vector<std::string> out;
  for (size_t p = s.find_first_not_of(kSeparators); p != std::string_view::npos;) {
    size_t end = std::min(s.find_first_of(kSeparators, p), s.size());
    out.emplace_back(s.substr(p, end - p));
    p = s.find_first_not_of(kSeparators, end);
  }
  return out;
}

// One attribute into env (or __json), args, and the special fields.
void addAttr(EvalState& st, const Attr& a, Derivation& drv, Context& ctx, Collected& c,
             std::string* json, bool& firstJson) {
  std::string_view key = st.symbols.name(a.name);
  PosIdx pos = a.pos;
  if (a.name == st.sContentAddressed) {
    c.contentAddressed = forceBool(st, *a.value, pos);
    if (json) return;
  }
  if (a.name == st.sArgs) {
    forceList(st, *a.value, pos);
    for (size_t i = 0; i < a.value->list.size; ++i)
      drv.args.push_back(coerceToString(st, pos, *a.value->list.elems[i], ctx, true));
    return;
  }
  if (json) {
    if (a.name == st.sStructuredAttrs) return;
    if (!firstJson) *json += ',';
    firstJson = false;
    appendJsonString(*json, key);
    *json += ':';
    printValueAsJSON(st, true, *a.value, pos, *json, ctx);
    if (a.name == st.sBuilder) {
      drv.builder = forceString(st, *a.value, ctx, pos);
    } else if (a.name == st.sSystem) {
      drv.platform = forceStringNoCtx(st, *a.value, pos);
    } else if (a.name == st.sOutputHash) {
      c.outputHash = std::string(forceStringNoCtx(st, *a.value, pos));
    } else if (a.name == st.sOutputHashAlgo) {
      c.outputHashAlgo = std::string(forceStringNoCtx(st, *a.value, pos));
    } else if (a.name == st.sOutputHashMode) {
      c.outputHashMode = std::string(forceStringNoCtx(st, *a.value, pos));
    } else if (a.name == st.sOutputs) {
      forceList(st, *a.value, pos);
      std::vector<std::string> names;
      for (size_t i = 0; i < a.value->list.size; ++i)
        names.emplace_back(forceStringNoCtx(st, *a.value->list.elems[i], pos));
      setOutputs(st, pos, c, names);
    }
    return;
  }
  std::string s = coerceToString(st, pos, *a.value, ctx, true);
  if (a.name == st.sBuilder) drv.builder = s;
  else if (a.name == st.sSystem) drv.platform = s;
  else if (a.name == st.sOutputHash) c.outputHash = s;
  else if (a.name == st.sOutputHashAlgo) c.outputHashAlgo = s;
  else if (a.name == st.sOutputHashMode) c.outputHashMode = s;
  else if (a.name == st.sOutputs) setOutputs(st, pos, c, splitSpaces(s));
  // Attributes come in name order: each new key goes at the end.
  drv.env.insert_or_assign(drv.env.end(), std::string(key), std::move(s));
}

// Context entries become inputSrcs and inputDrvs. The records `=` entries
// need are read holding `memoMutex` (when threads share them).
void addInputs(DrvState& ds, const Context& ctx, Derivation& drv, SpinMutex* memoMutex) {
  for (auto& c : ctx) {
    if (c[0] == '=') {
      auto lock = memoMutex ? std::unique_lock<SpinMutex>(*memoMutex) : std::unique_lock<SpinMutex>();
      store::StorePathSet refs;
      drvClosure(ds, ds.dir.parsePath(c.substr(1)), refs);
      for (auto& r : refs) {
        drv.inputSrcs.insert(r);
        if (r.isDerivation())
          for (const char** o = ds.info(r).outputs; *o; ++o) drv.inputDrvs[r].insert(*o);
      }
    } else if (c[0] == '!') {
      size_t bang = c.find('!', 1);
      drv.inputDrvs[ds.dir.parsePath(c.substr(bang + 1))].insert(std::string(c.substr(1, bang - 1)));
    } else {
      drv.inputSrcs.insert(ds.dir.parsePath(c));
    }
  }
}

void setOutputRecords(EvalState& st, PosIdx pos, Derivation& drv, const Collected& c) {
  if (c.outputHash) {
    if (c.outputs.size() != 1 || c.outputs[0] != "out")
      throwError(st, pos, "multiple outputs are not supported in fixed-output derivations");
    drv.outputs["out"] = store::makeFixedOutput(*c.outputHash, c.outputHashAlgo.value_or(""),
                                                c.outputHashMode.value_or("flat"));
    return;
  }
  for (auto& o : c.outputs) {
    store::DerivationOutput out;
    if (c.contentAddressed) {
      std::string mode = c.outputHashMode.value_or("recursive");
      out.hashAlgo = (mode == "recursive" ? "r:" : "") + c.outputHashAlgo.value_or("sha256");
    }
    drv.outputs[o] = out;
  }
}

// Hands the .drv to the store writer with the references Nix registers
// (input derivations and input sources) and the known output paths.
void writeDerivation(StoreWriter& w, const store::StoreDir& dir, const std::string& path,
                     const Derivation& drv, const std::string& aterm) {
  std::set<std::string> refs;
  for (auto& p : drv.inputSrcs) refs.insert(dir.printPath(p));
  for (auto& [p, _] : drv.inputDrvs) refs.insert(dir.printPath(p));
  std::map<std::string, std::string> outputs;
  for (auto& [name, out] : drv.outputs)
    if (out.path) outputs.emplace(name, dir.printPath(*out.path));
  w.addDerivation(path, aterm, refs, outputs);
}

void primDerivationStrict(EvalState& st, PosIdx pos, Value** args, Value& v) {
  forceAttrs(st, *args[0], pos);
  Bindings* attrs = args[0]->attrs;
  const Attr* nameA = attrs->find(st.sName);
  if (!nameA) throwError(st, pos, "required attribute 'name' missing");
  Value* nameV = nameA->value;
  std::string drvName(forceStringNoCtx(st, *nameV, pos));
  // Like Nix, errors about the derivation as a whole point at its name
  // (`derivation` forces derivationStrict lazily, from wherever outPath or
  // drvPath is needed, so `pos` may say little).
  if (nameA->pos != kNoPos) pos = nameA->pos;
  bool ignoreNulls = false;
  if (Value* n = attrs->get(st.sIgnoreNulls)) ignoreNulls = forceBool(st, *n, pos);
  std::optional<std::string> json;
  if (Value* sa = attrs->get(st.sStructuredAttrs); sa && forceBool(st, *sa, pos)) json.emplace();
  Derivation drv;
  drv.name = drvName;
  // One env entry per attribute (less `args`, `__ignoreNulls`), plus the
  // outputs' (usually `out`, an attribute already) and `__json`: one array.
  drv.env.reserve(attrs->size + 2);
  Context ctx;
  Collected c;
  bool firstJson = true;
  if (json) *json += '{';
  for (const Attr* a : sortedByName(st, attrs)) {
    if (a->name == st.sIgnoreNulls) continue;
    try {
      if (ignoreNulls) {
        st.forceValue(*a->value, a->pos);
        if (a->value->type == VType::kNull) continue;
      }
      addAttr(st, *a, drv, ctx, c, json ? &*json : nullptr, firstJson);
    } catch (EvalError& e) {
      e.addTrace("while evaluating the attribute '" + std::string(st.symbols.name(a->name)) +
                 "' of the derivation '" + drvName + "'" + st.positions.snippet(nameA->pos));
      throw;
    }
  }
  if (json) {
    *json += '}';
    drv.env["__json"] = std::move(*json);
  }
  if (drv.builder.empty()) throwError(st, pos, "required attribute 'builder' missing");
  if (drv.platform.empty()) throwError(st, pos, "required attribute 'system' missing");
  DrvState& ds = drvState(st);
  // Threads share the hash memo and the records under ds.mu, held only to
  // read and add them: the ATerms are printed and hashed unlocked.
  SpinMutex* memoMutex = st.threads().active() ? &ds.mu : nullptr;
  auto drvLock = [memoMutex] {
    return memoMutex ? std::unique_lock<SpinMutex>(*memoMutex) : std::unique_lock<SpinMutex>();
  };
  std::optional<StorePath> drvPath;
  thread_local std::string aterm;  // reused: no buffer per derivation
  uint32_t* tag = nullptr;
  std::string_view memoKey;  // the memo's kept base name, in "=<drvPath>"
  std::vector<uint32_t> inputTags;  // of drv.inputDrvs, from the hash memo
  try {
    store::checkDerivationName(drvName);
    addInputs(ds, ctx, drv, memoMutex);
    setOutputRecords(st, pos, drv, c);
    for (auto& [o, _] : drv.outputs) drv.env[o] = "";
    drvPath = ds.cache.addDerivation(drv, aterm, &tag, &inputTags, memoMutex, &memoKey);
  } catch (const EvalError&) {
    throw;
  } catch (const Error& e) {
    throwError(st, pos, std::string(e.what()) + " (in derivation '" + drvName + "')");
  }
  std::string drvPathS = ds.dir.printPath(*drvPath);
  if (st.settings.logInstantiations)  // Nix's chatty-level line (-vv)
    std::cerr << "instantiated '" << drvName << "' -> '" << drvPathS << "'\n";
  // One arena copy of "=<drvPath>" (the memo's key is in it) serves as the
  // drvPath string's context, the string itself (after the '=') and the
  // record's base name.
  const char* eqPath;
  const char* drvPathC;
  {
    auto held = drvLock();  // the writer reads the memo; the record is added
    eqPath = ds.eqPathOf(memoKey);
    drvPathC = eqPath + 1;
    if (st.writer().get()) {
      st.writer().get()->useDerivationHashes(&ds.cache);
      writeDerivation(*st.writer().get(), ds.dir, drvPathS, drv, aterm);
    }
    if (*tag == store::DrvHashCache::kNoTag) {
      *tag = static_cast<uint32_t>(ds.made.size());
      size_t i = 0;
      ds.made.push_back(makeMadeDrv(
          st.arena, drvPathC + ds.dir.dir().size() + 1, drv,
          [&](std::string_view) -> const char* {
            uint32_t t = inputTags[i++];
            return t == store::DrvHashCache::kNoTag ? nullptr
                                                    : ds.made[t].baseName;
          },
          [&](const StorePath& p) { return sourceInContext(ds, ctx, p); }));
    }
  }
  Bindings* b = st.heap().allocBindings(1 + drv.outputs.size());
  Value* dv = st.heap().allocValue();
  dv->mkString(drvPathC, singleContext(eqPath));
  b->push(st.sDrvPath, dv);
  for (auto& [o, out] : drv.outputs) {
    // env holds what the output's value is: its path, placeholder or "".
    Value* ov = st.heap().allocValue();
    const char* outEntry = makeContextEntry(st.arena, {"!", o, "!", drvPathS});
    ov->mkString(st.arena.copyString(drv.env.at(o)), singleContext(outEntry));
    b->push(st.sym(o), ov);
  }
  st.mkAttrs(v, b);
}

// Returns its argument unchanged: applied to a value, a thunk of it.
void primSame(EvalState& st, PosIdx pos, Value** args, Value& v) {
  st.forceValue(*args[0], pos);
  v = *args[0];
}

// A list's elements as unevaluated applications, as `all` is in Nix's
// derivation.nix (`map (x: x.value) outputsList`): printed unforced, as
// Nix, `all` shows <CODE> and its elements [ <CODE> ].
// The primop `primSame` as a value (shared by every EvalState).
Value* samePrimOp() {
  static const PrimOp kSame{"derivation-output", 1, primSame, 0};
  static Value same = [] {
    Value s;
    s.mkPrimOp(&kSame);
    return s;
  }();
  return &same;
}

// `v` unevaluated: an application that gives it when forced.
Value* lazily(EvalState& st, Value* v) {
  Value* app = st.heap().allocValue();
  app->mkApp(samePrimOp(), v);
  return app;
}

// `all` of a derivation whose first output's set is args[0]: each output's
// attribute (in `outputs` order), unevaluated. Made when `all` is forced,
// from the set, instead of a list kept with every derivation. As in Nix
// (`map (x: x.value) outputsList`), forcing an element forces that output's
// attribute too.
void primLazyList(EvalState& st, PosIdx pos, Value** args, Value& v) {
  const WrapperState& ws = drvState(st).wrapper;  // made by primDerivation
  const Bindings& set = *args[0]->attrs;          // a set primDerivation made
  const Value* outs = set.get(ws.sDrvAttrs)->attrs->get(st.sOutputs);
  const size_t n = outs ? outs->list.size : 1;
  st.mkList(v, n);
  for (size_t i = 0; i < n; ++i) {
    Symbol name = st.sym(outs ? outs->list.elems[i]->sv() : ws.outName->sv());
    v.list.elems[i] = lazily(st, set.get(name));
  }
}

WrapperState& wrapperState(EvalState& st) {
  WrapperState& ws = drvState(st).wrapper;
  if (ws.strictFn) return ws;
  ws.strictFn = st.builtins().lookup("derivationStrict");
  ws.getAttrFn = st.builtins().lookup("getAttr");
  // Kept in this (unscanned) state: permanent, not collectable.
  Value* drvPathName = st.heap().allocPermanentValue();
  st.mkString(*drvPathName, "drvPath");
  ws.drvPathSel = st.heap().allocPermanentValue();
  ws.drvPathSel->mkPrimOpApp(ws.getAttrFn, drvPathName);
  ws.typeValue = st.heap().allocPermanentValue();
  st.mkString(*ws.typeValue, "derivation");
  ws.outName = st.heap().allocPermanentValue();
  st.mkString(*ws.outName, "out");
  ws.sDrvAttrs = st.sym("drvAttrs");
  ws.lazyListFn = st.heap().allocPermanentValue();
  ws.lazyListFn->mkPrimOp(st.arena.make<PrimOp>(PrimOp{"derivation-all", 1, primLazyList, 0}));
  return ws;
}

// `base` overlaid with `extras` (a later extra wins over an earlier one with
// the same name, and every extra over `base`): a layer on `base` whatever
// its size (the derivation's attributes stay live as `drvAttrs`, so a flat
// copy of a fetcher's eight would only duplicate them).
Bindings* overlay(EvalState& st, const Bindings& base, TracedVector<Attr>& extras) {
  std::stable_sort(extras.begin(), extras.end(),
                   [](const Attr& a, const Attr& b) { return a.name < b.name; });
  size_t n = 0;  // keep the last of equal names
  for (size_t j = 0; j < extras.size(); ++j)
    if (j + 1 == extras.size() || extras[j + 1].name != extras[j].name) extras[n++] = extras[j];
  return layerBindings(st, base, extras.data(), extras.data() + n);
}

// `derivation attrs`: the value Nix's derivation.nix returns, built
// directly instead of by evaluating that wrapper (which made four
// intermediate sets and a dozen thunks per derivation). For each output o
// (from `outputs`, default ["out"]), a set: attrs // { <every output> =
// its set; all = [ the sets ]; drvAttrs = attrs; } // { outPath =
// getAttr o strict; drvPath = strict.drvPath; type = "derivation";
// outputName = o; } where strict = derivationStrict attrs (left lazy); the
// result is the first output's set. Like the wrapper, this forces attrs,
// the outputs list and each output name.
void primDerivation(EvalState& st, PosIdx pos, Value** args, Value& v) {
  WrapperState& ws = wrapperState(st);
  Value* attrs = args[0];
  forceAttrs(st, *attrs, pos);
  TracedVector<Value*> names;
  if (Value* outs = attrs->attrs->get(st.sOutputs)) {
    forceList(st, *outs, pos);
    for (size_t i = 0; i < outs->list.size; ++i) {
      forceStringNoCtx(st, *outs->list.elems[i], pos);
      names.push_back(outs->list.elems[i]);
    }
  } else {
    names.push_back(ws.outName);
  }
  if (names.empty()) throwError(st, pos, "list index 0 is out of bounds");
  Value* strict = st.heap().allocValue();
  strict->mkApp(ws.strictFn, attrs);
  TracedVector<Value*> sets(names.size());  // each output's set
  std::vector<Symbol> syms;
  for (size_t i = 0; i < names.size(); ++i) {
    sets[i] = st.heap().allocValue();
    syms.push_back(st.sym(names[i]->sv()));
  }
  Value* allLazy = st.heap().allocValue();  // unevaluated until used, as in Nix
  allLazy->mkApp(ws.lazyListFn, sets[0]);
  // Each output's attribute, shared by every output's set: the first is
  // the result itself; the others stay unevaluated until used, as Nix's
  // listToAttrs values.
  TracedVector<Value*> outputAttr(names.size());
  for (size_t j = 0; j < names.size(); ++j)
    outputAttr[j] = j == 0 ? sets[0] : lazily(st, sets[j]);
  for (size_t i = 0; i < names.size(); ++i) {
    TracedVector<Attr> extras;
    // listToAttrs keeps the first of equal names: add them last-to-first.
    for (size_t j = names.size(); j-- > 0;) extras.push_back({syms[j], kNoPos, outputAttr[j]});
    extras.push_back({st.sAll, kNoPos, allLazy});
    extras.push_back({ws.sDrvAttrs, kNoPos, attrs});
    Value* sel = st.threads().withSharedLock([&] {
      Value*& s = ws.outputSel[syms[i].id];
      if (!s) {
        s = st.heap().allocPermanentValue();
        s->mkPrimOpApp(ws.getAttrFn, names[i]);
      }
      return s;
    });
    Value* outPath = st.heap().allocValue();
    outPath->mkApp(sel, strict);
    Value* drvPath = st.heap().allocValue();
    drvPath->mkApp(ws.drvPathSel, strict);
    extras.push_back({st.sOutPath, kNoPos, outPath});
    extras.push_back({st.sDrvPath, kNoPos, drvPath});
    extras.push_back({st.sType, kNoPos, ws.typeValue});
    extras.push_back({st.sOutputName, kNoPos, names[i]});
    sets[i]->mkAttrs(overlay(st, *attrs->attrs, extras));
  }
  v = *sets[0];
}

constexpr BuiltinDef kDefs[] = {
    {"derivationStrict", 1, primDerivationStrict},
    {"derivation", 1, primDerivation},
};

}  // namespace

void registerDerivationBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

void prepareBuiltinsForThreads(EvalState& state) { wrapperState(state); }

bool isDerivationBuiltin(const Value& v) {
  return v.type == VType::kPrimOp && v.primOp->fn == primDerivation;
}

}  // namespace kiln::eval
