// Printing values in Nix syntax.
#include <cstdio>
#include <unordered_set>

#include "kiln/evaluator/output.h"
#include "builtins.h"
#include "print.h"

namespace kiln::eval {

void printString(std::ostream& out, std::string_view s, bool everyDollar) {
  out << '"';
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"' || c == '\\') out << '\\' << c;
    else if (c == '\n') out << "\\n";
    else if (c == '\r') out << "\\r";
    else if (c == '\t') out << "\\t";
    else if (c == '$' && (everyDollar || (i + 1 < s.size() && s[i + 1] == '{'))) out << "\\$";
    else out << c;
  }
  out << '"';
}

static bool isKeyword(std::string_view s) {
  static const char* kw[] = {"if", "then", "else", "assert", "with", "let", "in", "rec", "inherit", "or"};
  for (auto* k : kw)
    if (s == k) return true;
  return false;
}

void printAttrName(std::ostream& out, std::string_view s) {
  bool ident = !s.empty() && (std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_');
  for (size_t i = 1; ident && i < s.size(); ++i) {
    char c = s[i];
    ident = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '\'' || c == '-';
  }
  if (ident && !isKeyword(s)) out << s;
  else printString(out, s);
}

std::string showFloat(double d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", d);
  return buf;
}

namespace {

struct Printer {
  EvalState& state;
  std::ostream& out;
  std::unordered_set<const void*> seen;

  void print(Value& v) {
    switch (v.type) {
      case VType::kInt: out << v.integer; break;
      case VType::kFloat: out << showFloat(v.fpoint); break;
      case VType::kBool: out << (v.boolean ? "true" : "false"); break;
      case VType::kNull: out << "null"; break;
      case VType::kString: printString(out, v.str.s); break;
      case VType::kPath: out << v.path; break;
      case VType::kAttrs:
        if (v.attrs->size && !seen.insert(v.attrs).second) {
          out << "«repeated»";
        } else {
          out << "{ ";
          for (const Attr* a : sortedByName(state, v.attrs)) {
            printAttrName(out, state.symbols.name(a->name));
            out << " = ";
            print(*a->value);
            out << "; ";
          }
          out << "}";
        }
        break;
      case VType::kList:
        if (v.list.size && !seen.insert(v.list.elems).second) {
          out << "«repeated»";
        } else {
          out << "[ ";
          for (size_t i = 0; i < v.list.size; ++i) {
            print(*v.list.elems[i]);
            out << " ";
          }
          out << "]";
        }
        break;
      case VType::kLambda: out << "<LAMBDA>"; break;
      case VType::kPrimOp: out << (isDerivationBuiltin(v) ? "<LAMBDA>" : "<PRIMOP>"); break;
      case VType::kPrimOpApp: out << "<PRIMOP-APP>"; break;
      case VType::kThunk: case VType::kApp: out << "<CODE>"; break;
      case VType::kBlackhole: out << "«potential infinite recursion»"; break;
    }
  }
};

}  // namespace

void printValue(EvalState& state, std::ostream& out, Value& v) {
  Printer p{state, out, {}};
  p.print(v);
}

}  // namespace kiln::eval
