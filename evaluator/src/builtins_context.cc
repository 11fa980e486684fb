// String context builtins.
#include <map>

#include "builtins.h"

namespace kiln::eval {

namespace {

void primDiscardContext(EvalState& st, PosIdx pos, Value** args, Value& v) {
  Context ctx;
  std::string s = coerceToString(st, pos, *args[0], ctx);
  st.mkString(v, s);
}

void primHasContext(EvalState& st, PosIdx pos, Value** args, Value& v) {
  Context ctx;
  forceString(st, *args[0], ctx, pos);
  v.mkBool(!ctx.empty());
}

void primDiscardOutputDependency(EvalState& st, PosIdx pos, Value** args, Value& v) {
  Context ctx;
  std::string s = coerceToString(st, pos, *args[0], ctx);
  Context out;
  for (auto& c : ctx) addContext(st, out, c[0] == '=' ? c.substr(1) : c);
  st.mkString(v, s, out);
}

struct Info {
  bool path = false;
  bool allOutputs = false;
  std::vector<std::string> outputs;
};

void primGetContext(EvalState& st, PosIdx pos, Value** args, Value& v) {
  Context ctx;
  forceString(st, *args[0], ctx, pos);
  std::map<std::string, Info> infos;
  for (auto& c : ctx) {
    if (c[0] == '=') {
      infos[std::string(c.substr(1))].allOutputs = true;
    } else if (c[0] == '!') {
      size_t bang = c.find('!', 1);
      infos[std::string(c.substr(bang + 1))].outputs.emplace_back(c.substr(1, bang - 1));
    } else {
      infos[std::string(c)].path = true;
    }
  }
  Bindings* b = st.heap().allocBindings(infos.size());
  for (auto& [path, info] : infos) {
    Bindings* ib = st.heap().allocBindings(3);
    if (info.path) ib->push(st.sPath, &st.vTrue);
    if (info.allOutputs) ib->push(st.sym("allOutputs"), &st.vTrue);
    if (!info.outputs.empty()) {
      Value* l = st.heap().allocValue();
      st.mkList(*l, info.outputs.size());
      for (size_t i = 0; i < info.outputs.size(); ++i) {
        l->list.elems[i] = st.heap().allocValue();
        st.mkString(*l->list.elems[i], info.outputs[i]);
      }
      ib->push(st.sOutputs, l);
    }
    Value* iv = st.heap().allocValue();
    st.mkAttrs(*iv, ib);
    b->push(st.sym(path), iv);
  }
  st.mkAttrs(v, b);
}

void primAppendContext(EvalState& st, PosIdx pos, Value** args, Value& v) {
  Context ctx;
  std::string s(forceString(st, *args[0], ctx, pos));
  forceAttrs(st, *args[1], pos);
  Symbol sAllOutputs = st.sym("allOutputs");
  for (auto& a : *args[1]->attrs) {
    std::string path(st.symbols.name(a.name));
    if (path.rfind(st.settings.storeDir + "/", 0) != 0)
      throwError(st, pos, "context key '" + path + "' is not a store path");
    forceAttrs(st, *a.value, pos);
    if (Value* p = a.value->attrs->get(st.sPath); p && forceBool(st, *p, pos)) addContext(st, ctx, path);
    if (Value* all = a.value->attrs->get(sAllOutputs); all && forceBool(st, *all, pos)) {
      if (path.size() < 4 || path.compare(path.size() - 4, 4, ".drv") != 0)
        throwError(st, pos, "tried to add all-outputs context of " + path + ", which is not a derivation, to a string");
      addContext(st, ctx, "=" + path);
    }
    if (Value* outs = a.value->attrs->get(st.sOutputs)) {
      forceList(st, *outs, pos);
      for (size_t i = 0; i < outs->list.size; ++i)
        addContext(st, ctx, "!" + std::string(forceStringNoCtx(st, *outs->list.elems[i], pos)) + "!" + path);
    }
  }
  st.mkString(v, s, ctx);
}

constexpr BuiltinDef kDefs[] = {
    {"__unsafeDiscardStringContext", 1, primDiscardContext},
    {"__hasContext", 1, primHasContext},
    {"__unsafeDiscardOutputDependency", 1, primDiscardOutputDependency},
    {"__getContext", 1, primGetContext},
    {"__appendContext", 2, primAppendContext},
};

}  // namespace

void registerContextBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
