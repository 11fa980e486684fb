// JSON output (builtins.toJSON, --json) and input (builtins.fromJSON).
#include <charconv>
#include <nlohmann/json.hpp>

#include "builtins.h"
#include "json_parse.h"
#include "kiln/common/encoding.h"
#include "print.h"
#include "scratch_string.h"

namespace kiln::eval {

namespace {

void appendInt(std::string& out, int64_t n) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

void printAttrsAsJSON(EvalState& st, bool strict, Value& v, std::string& out, Context& ctx,
                      bool copyToStore) {
  out += '{';
  bool first = true;
  for (const Attr* a : sortedByName(st, v.attrs)) {
    if (!first) out += ',';
    first = false;
    appendJsonString(out, st.symbols.name(a->name));
    out += ':';
    try {
      printValueAsJSON(st, strict, *a->value, a->pos, out, ctx, copyToStore);
    } catch (EvalError& e) {
      e.addTrace("while evaluating attribute '" + std::string(st.symbols.name(a->name)) + "'");
      throw;
    }
  }
  out += '}';
}

}  // namespace

void printValueAsJSON(EvalState& st, bool strict, Value& v, PosIdx pos, std::string& out,
                      Context& ctx, bool copyToStore) {
  if (strict) st.forceValue(v, pos);
  switch (v.type) {
    case VType::kInt:
      appendInt(out, v.integer);
      break;
    case VType::kFloat:
      out += showFloat(v.fpoint);
      break;
    case VType::kBool:
      out += v.boolean ? "true" : "false";
      break;
    case VType::kNull:
      out += "null";
      break;
    case VType::kString:
      copyContext(v, ctx);
      appendJsonString(out, v.sv());
      break;
    case VType::kPath:
      appendJsonString(out, copyToStore ? copyPathToStore(st, ctx, v.path) : std::string(v.path));
      break;
    case VType::kAttrs: {
      if (v.attrs->find(st.sToString)) {
        appendJsonString(out, coerceToString(st, pos, v, ctx, false, false));
        break;
      }
      if (Value* o = v.attrs->get(st.sOutPath)) {
        printValueAsJSON(st, strict, *o, pos, out, ctx, copyToStore);
        break;
      }
      printAttrsAsJSON(st, strict, v, out, ctx, copyToStore);
      break;
    }
    case VType::kList:
      out += '[';
      for (size_t i = 0; i < v.list.size; ++i) {
        if (i) out += ',';
        printValueAsJSON(st, strict, *v.list.elems[i], pos, out, ctx, copyToStore);
      }
      out += ']';
      break;
    default:
      throwError(st, pos, std::string("cannot convert ") + showType(v) + " to JSON");
  }
}

static void fromJson(EvalState& st, const nlohmann::json& j, Value& v) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      v.mkNull();
      break;
    case nlohmann::json::value_t::boolean:
      v.mkBool(j.get<bool>());
      break;
    case nlohmann::json::value_t::number_integer:
      v.mkInt(j.get<int64_t>());
      break;
    case nlohmann::json::value_t::number_unsigned:
      v.mkInt(static_cast<int64_t>(j.get<uint64_t>()));
      break;
    case nlohmann::json::value_t::number_float:
      v.mkFloat(j.get<double>());
      break;
    case nlohmann::json::value_t::string:
      st.mkString(v, j.get_ref<const std::string&>());
      break;
    case nlohmann::json::value_t::array: {
      st.mkList(v, j.size());
      size_t i = 0;
      for (auto& e : j) {
        v.list.elems[i] = st.heap().allocValue();
        fromJson(st, e, *v.list.elems[i++]);
      }
      break;
    }
    case nlohmann::json::value_t::object: {
      Bindings* b = st.heap().allocBindings(j.size());
      for (auto& [k, e] : j.items()) {
        Value* x = st.heap().allocValue();
        fromJson(st, e, *x);
        Symbol s = st.sym(k);
        if (!b->find(s)) {
          b->push(s, x);
          b->sort();
        }
      }
      v.mkAttrs(b);
      break;
    }
    default:
      throw EvalError("unsupported JSON value");
  }
}

void parseJSON(EvalState& st, std::string_view text, Value& v) {
  if (parseJsonFast(st, text, v)) return;
  // Invalid (or with a byte order mark): nlohmann's parser gives the error
  // Nix 2.8 gives.
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw EvalError(std::string("JSON parse error: ") + e.what());
  }
  fromJson(st, j, v);
}

namespace {

void primToJSON(EvalState& st, PosIdx pos, Value** args, Value& v) {
  ScratchString out;
  Context ctx;
  printValueAsJSON(st, true, *args[0], pos, out.str(), ctx);
  st.mkString(v, out.str(), ctx);
}

void primFromJSON(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string_view s = forceStringNoCtx(st, *args[0], pos);
  try {
    parseJSON(st, s, v);
  } catch (EvalError& e) {
    throwError(st, pos, e.what());
  }
}

constexpr BuiltinDef kDefs[] = {
    {"__toJSON", 1, primToJSON},
    {"__fromJSON", 1, primFromJSON},
};

}  // namespace

void registerJsonBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
