// XML output (builtins.toXML, --xml) in Nix's schema.
#include <set>
#include <sstream>

#include "builtins.h"
#include "print.h"

namespace kiln::eval {

namespace {

std::string escape(std::string_view s) {
  std::string r;
  for (char c : s) {
    if (c == '"') r += "&quot;";
    else if (c == '<') r += "&lt;";
    else if (c == '>') r += "&gt;";
    else if (c == '&') r += "&amp;";
    else if (c == '\n') r += "&#xA;";
    else if (c == '\r') r += "&#xD;";
    else if (c == '\t') r += "&#x9;";
    else r += c;
  }
  return r;
}

using XmlAttrs = std::map<std::string, std::string>;

struct XmlPrinter {
  EvalState& st;
  bool strict;
  bool location;
  std::ostream& out;
  Context& ctx;
  std::set<std::string> drvsSeen;
  int depth = 1;

  void indent() { out << std::string(depth * 2, ' '); }
  void open(const char* tag, const XmlAttrs& attrs = {}, bool empty = false) {
    indent();
    out << '<' << tag;
    for (auto& [k, v] : attrs) out << ' ' << k << "=\"" << escape(v) << '"';
    out << (empty ? " />\n" : ">\n");
    if (!empty) ++depth;
  }
  void close(const char* tag) {
    --depth;
    indent();
    out << "</" << tag << ">\n";
  }
  void posAttrs(XmlAttrs& a, PosIdx pos) {
    if (!location || pos == kNoPos) return;
    Pos p = st.positions.get(pos);
    a["path"] = st.positions.origin(p.origin).path;
    a["line"] = std::to_string(p.line);
    a["column"] = std::to_string(p.column);
  }
  void attrs(Bindings* b) {
    for (const Attr* a : sortedByName(st, b)) {
      XmlAttrs xa{{"name", std::string(st.symbols.name(a->name))}};
      posAttrs(xa, a->pos);
      open("attr", xa);
      print(*a->value);
      close("attr");
    }
  }
  void print(Value& v) {
    if (strict) st.forceValue(v, kNoPos);
    switch (v.type) {
      case VType::kInt: open("int", {{"value", std::to_string(v.integer)}}, true); break;
      case VType::kFloat: open("float", {{"value", showFloat(v.fpoint)}}, true); break;
      case VType::kBool: open("bool", {{"value", v.boolean ? "true" : "false"}}, true); break;
      case VType::kNull: open("null", {}, true); break;
      case VType::kString:
        copyContext(v, ctx);
        open("string", {{"value", v.str.s}}, true);
        break;
      case VType::kPath: open("path", {{"value", v.path}}, true); break;
      case VType::kAttrs:
        if (isDerivation(st, v)) {
          XmlAttrs xa;
          Value* drvPath = v.attrs->get(st.sDrvPath);
          std::string dp;
          if (drvPath) {
            if (strict) st.forceValue(*drvPath, kNoPos);
            if (drvPath->type == VType::kString) xa["drvPath"] = dp = drvPath->str.s;
          }
          if (Value* o = v.attrs->get(st.sOutPath)) {
            if (strict) st.forceValue(*o, kNoPos);
            if (o->type == VType::kString) xa["outPath"] = o->str.s;
          }
          open("derivation", xa);
          if (!dp.empty() && !drvsSeen.insert(dp).second) open("repeated", {}, true);
          else attrs(v.attrs);
          close("derivation");
        } else {
          open("attrs");
          attrs(v.attrs);
          close("attrs");
        }
        break;
      case VType::kList:
        open("list");
        for (size_t i = 0; i < v.list.size; ++i) print(*v.list.elems[i]);
        close("list");
        break;
      case VType::kLambda: {
        XmlAttrs xa;
        ExprLambda* l = v.lambda.fun;
        posAttrs(xa, l->pos);
        open("function", xa);
        if (l->formals) {
          XmlAttrs pa;
          if (l->arg) pa["name"] = st.symbols.name(l->arg);
          if (l->formals->ellipsis) pa["ellipsis"] = "1";
          open("attrspat", pa);
          std::vector<std::string> names;
          for (auto& f : l->formals->formals) names.emplace_back(st.symbols.name(f.name));
          std::sort(names.begin(), names.end());
          for (auto& n : names) open("attr", {{"name", n}}, true);
          close("attrspat");
        } else {
          open("varpat", {{"name", std::string(st.symbols.name(l->arg))}}, true);
        }
        close("function");
        break;
      }
      default:
        open("unevaluated", {}, true);
        break;
    }
  }
};

}  // namespace

void printValueAsXML(EvalState& state, bool strict, bool location, Value& v, std::ostream& out,
                     Context& ctx) {
  out << "<?xml version='1.0' encoding='utf-8'?>\n<expr>\n";
  XmlPrinter p{state, strict, location, out, ctx, {}, 1};
  p.print(v);
  out << "</expr>\n";
}

namespace {

void primToXML(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::ostringstream out;
  Context ctx;
  printValueAsXML(st, true, false, *args[0], out, ctx);
  st.mkString(v, out.str(), ctx);
}

constexpr BuiltinDef kDefs[] = {
    {"__toXML", 1, primToXML},
};

}  // namespace

void registerXmlBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
