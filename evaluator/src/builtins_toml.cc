// builtins.fromTOML: a TOML 1.0 reader (no date/time values, which Nix
// cannot represent either) producing Nix values.
#include <cmath>
#include <map>
#include <memory>

#include "builtins.h"
#include "kiln/common/encoding.h"

namespace kiln::eval {

namespace {

struct TomlNode {
  enum Kind { kTable, kArray, kString, kInt, kFloat, kBool } kind = kTable;
  std::map<std::string, std::unique_ptr<TomlNode>> table;
  std::vector<std::unique_ptr<TomlNode>> array;
  bool arrayOfTables = false;  // created by [[...]]
  std::string str;
  int64_t i = 0;
  double f = 0;
  bool b = false;
};

class TomlParser {
 public:
  explicit TomlParser(std::string_view text) : s_(text) {}

  std::unique_ptr<TomlNode> parse() {
    auto root = std::make_unique<TomlNode>();
    TomlNode* current = root.get();
    while (true) {
      skipWsCommentsNewlines();
      if (p_ >= s_.size()) break;
      if (s_[p_] == '[') {
        bool arrayTable = p_ + 1 < s_.size() && s_[p_ + 1] == '[';
        p_ += arrayTable ? 2 : 1;
        std::vector<std::string> key = parseKey();
        expect(']');
        if (arrayTable) expect(']');
        current = arrayTable ? openArrayTable(root.get(), key) : openTable(root.get(), key);
      } else {
        std::vector<std::string> key = parseKey();
        skipWs();
        expect('=');
        skipWs();
        assign(current, key, parseValue());
      }
      skipWs();
      skipComment();
      if (p_ < s_.size() && s_[p_] != '\n' && s_[p_] != '\r') fail("expected a newline");
    }
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) {
    size_t line = 1;
    for (size_t i = 0; i < p_ && i < s_.size(); ++i) line += s_[i] == '\n';
    throw EvalError("while parsing TOML, line " + std::to_string(line) + ": " + msg);
  }
  void expect(char c) {
    skipWs();
    if (p_ >= s_.size() || s_[p_] != c) fail(std::string("expected '") + c + "'");
    ++p_;
  }
  void skipWs() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t')) ++p_;
  }
  void skipComment() {
    if (p_ < s_.size() && s_[p_] == '#')
      while (p_ < s_.size() && s_[p_] != '\n') ++p_;
  }
  void skipWsCommentsNewlines() {
    while (true) {
      skipWs();
      skipComment();
      if (p_ < s_.size() && (s_[p_] == '\n' || s_[p_] == '\r')) ++p_;
      else return;
    }
  }

  static bool bareChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  }

  std::vector<std::string> parseKey() {
    std::vector<std::string> key;
    while (true) {
      skipWs();
      if (p_ >= s_.size()) fail("expected a key");
      if (s_[p_] == '"') key.push_back(parseBasicString());
      else if (s_[p_] == '\'') key.push_back(parseLiteralString());
      else {
        size_t start = p_;
        while (p_ < s_.size() && bareChar(s_[p_])) ++p_;
        if (start == p_) fail("expected a key");
        key.emplace_back(s_.substr(start, p_ - start));
      }
      skipWs();
      if (p_ < s_.size() && s_[p_] == '.') {
        ++p_;
        continue;
      }
      return key;
    }
  }

  // Descends through tables (taking the last element of arrays of tables).
  TomlNode* descend(TomlNode* t, const std::string& k, bool create) {
    auto it = t->table.find(k);
    if (it == t->table.end()) {
      if (!create) return nullptr;
      auto n = std::make_unique<TomlNode>();
      TomlNode* raw = n.get();
      t->table.emplace(k, std::move(n));
      return raw;
    }
    TomlNode* n = it->second.get();
    if (n->kind == TomlNode::kArray && n->arrayOfTables && !n->array.empty()) return n->array.back().get();
    if (n->kind != TomlNode::kTable) fail("key '" + k + "' is not a table");
    return n;
  }

  TomlNode* openTable(TomlNode* root, const std::vector<std::string>& key) {
    TomlNode* t = root;
    for (auto& k : key) t = descend(t, k, true);
    return t;
  }

  TomlNode* openArrayTable(TomlNode* root, const std::vector<std::string>& key) {
    TomlNode* t = root;
    for (size_t i = 0; i + 1 < key.size(); ++i) t = descend(t, key[i], true);
    auto& slot = t->table[key.back()];
    if (!slot) {
      slot = std::make_unique<TomlNode>();
      slot->kind = TomlNode::kArray;
      slot->arrayOfTables = true;
    }
    if (slot->kind != TomlNode::kArray || !slot->arrayOfTables) fail("key '" + key.back() + "' is not an array of tables");
    slot->array.push_back(std::make_unique<TomlNode>());
    return slot->array.back().get();
  }

  void assign(TomlNode* t, const std::vector<std::string>& key, std::unique_ptr<TomlNode> v) {
    for (size_t i = 0; i + 1 < key.size(); ++i) t = descend(t, key[i], true);
    if (t->table.count(key.back())) fail("duplicate key '" + key.back() + "'");
    t->table.emplace(key.back(), std::move(v));
  }

  void escape(std::string& out) {
    if (p_ >= s_.size()) fail("unterminated escape");
    char e = s_[p_++];
    switch (e) {
      case 'b': out += '\b'; break;
      case 't': out += '\t'; break;
      case 'n': out += '\n'; break;
      case 'f': out += '\f'; break;
      case 'r': out += '\r'; break;
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case 'u':
      case 'U': {
        size_t len = e == 'u' ? 4 : 8;
        if (p_ + len > s_.size()) fail("bad unicode escape");
        uint32_t cp = static_cast<uint32_t>(std::stoul(std::string(s_.substr(p_, len)), nullptr, 16));
        p_ += len;
        appendUtf8(out, cp);
        break;
      }
      default: fail(std::string("bad escape '\\") + e + "'");
    }
  }

  bool startsWith(std::string_view x) const { return s_.substr(p_, x.size()) == x; }

  std::string parseBasicString() {
    std::string out;
    if (startsWith("\"\"\"")) {
      p_ += 3;
      if (startsWith("\r\n")) p_ += 2;
      else if (startsWith("\n")) ++p_;
      while (true) {
        if (p_ >= s_.size()) fail("unterminated string");
        if (startsWith("\"\"\"")) {
          p_ += 3;
          while (p_ < s_.size() && s_[p_] == '"') out += s_[p_++];
          return out;
        }
        char c = s_[p_++];
        if (c == '\\') {
          size_t q = p_;
          while (q < s_.size() && (s_[q] == ' ' || s_[q] == '\t')) ++q;
          if (q < s_.size() && (s_[q] == '\n' || s_[q] == '\r')) {
            p_ = q;
            while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
          } else {
            escape(out);
          }
        } else {
          out += c;
        }
      }
    }
    ++p_;
    while (true) {
      if (p_ >= s_.size() || s_[p_] == '\n') fail("unterminated string");
      char c = s_[p_++];
      if (c == '"') return out;
      if (c == '\\') escape(out);
      else out += c;
    }
  }

  std::string parseLiteralString() {
    if (startsWith("'''")) {
      p_ += 3;
      if (startsWith("\r\n")) p_ += 2;
      else if (startsWith("\n")) ++p_;
      size_t end = s_.find("'''", p_);
      if (end == std::string_view::npos) fail("unterminated string");
      while (end + 3 < s_.size() && s_[end + 3] == '\'') ++end;
      std::string out(s_.substr(p_, end - p_));
      p_ = end + 3;
      return out;
    }
    ++p_;
    size_t end = s_.find('\'', p_);
    if (end == std::string_view::npos || s_.substr(p_, end - p_).find('\n') != std::string_view::npos)
      fail("unterminated string");
    std::string out(s_.substr(p_, end - p_));
    p_ = end + 1;
    return out;
  }

  std::unique_ptr<TomlNode> parseNumber() {
    size_t start = p_;
    while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '+' ||
                              s_[p_] == '-' || s_[p_] == '_' || s_[p_] == '.'))
      ++p_;
    std::string raw(s_.substr(start, p_ - start));
    auto n = std::make_unique<TomlNode>();
    if (raw == "true" || raw == "false") {
      n->kind = TomlNode::kBool;
      n->b = raw == "true";
      return n;
    }
    std::string t;
    for (char c : raw)
      if (c != '_') t += c;
    std::string body = (t[0] == '+' || t[0] == '-') ? t.substr(1) : t;
    if (body == "inf" || body == "nan") {
      n->kind = TomlNode::kFloat;
      n->f = body == "inf" ? INFINITY : NAN;
      if (t[0] == '-') n->f = -n->f;
      return n;
    }
    try {
      if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'o' || t[1] == 'b')) {
        n->kind = TomlNode::kInt;
        n->i = static_cast<int64_t>(std::stoull(t.substr(2), nullptr, t[1] == 'x' ? 16 : t[1] == 'o' ? 8 : 2));
        return n;
      }
      if (t.find_first_of(".eE") != std::string::npos) {
        n->kind = TomlNode::kFloat;
        n->f = std::stod(t);
        return n;
      }
      size_t used = 0;
      n->kind = TomlNode::kInt;
      n->i = std::stoll(t, &used, 10);
      if (used != t.size()) fail("invalid value '" + raw + "'");
    } catch (const std::logic_error&) {
      fail("invalid value '" + raw + "'");
    }
    return n;
  }

  std::unique_ptr<TomlNode> parseValue() {
    skipWs();
    if (p_ >= s_.size()) fail("expected a value");
    char c = s_[p_];
    if (c == '"' || c == '\'') {
      auto n = std::make_unique<TomlNode>();
      n->kind = TomlNode::kString;
      n->str = c == '"' ? parseBasicString() : parseLiteralString();
      return n;
    }
    if (c == '[') {
      ++p_;
      auto n = std::make_unique<TomlNode>();
      n->kind = TomlNode::kArray;
      while (true) {
        skipWsCommentsNewlines();
        if (p_ < s_.size() && s_[p_] == ']') {
          ++p_;
          return n;
        }
        n->array.push_back(parseValue());
        skipWsCommentsNewlines();
        if (p_ < s_.size() && s_[p_] == ',') ++p_;
        else if (p_ >= s_.size() || s_[p_] != ']') fail("expected ',' or ']'");
      }
    }
    if (c == '{') {
      ++p_;
      auto n = std::make_unique<TomlNode>();
      skipWs();
      if (p_ < s_.size() && s_[p_] == '}') {
        ++p_;
        return n;
      }
      while (true) {
        std::vector<std::string> key = parseKey();
        expect('=');
        assign(n.get(), key, parseValue());
        skipWs();
        if (p_ < s_.size() && s_[p_] == ',') {
          ++p_;
          continue;
        }
        expect('}');
        return n;
      }
    }
    return parseNumber();
  }

  std::string_view s_;
  size_t p_ = 0;
};

void toValue(EvalState& st, const TomlNode& n, Value& v) {
  switch (n.kind) {
    case TomlNode::kString: st.mkString(v, n.str); break;
    case TomlNode::kInt: v.mkInt(n.i); break;
    case TomlNode::kFloat: v.mkFloat(n.f); break;
    case TomlNode::kBool: v.mkBool(n.b); break;
    case TomlNode::kArray:
      st.mkList(v, n.array.size());
      for (size_t i = 0; i < n.array.size(); ++i) {
        v.list.elems[i] = st.heap().allocValue();
        toValue(st, *n.array[i], *v.list.elems[i]);
      }
      break;
    case TomlNode::kTable: {
      Bindings* b = st.heap().allocBindings(n.table.size());
      for (auto& [k, child] : n.table) {
        Value* x = st.heap().allocValue();
        toValue(st, *child, *x);
        b->push(st.sym(k), x);
      }
      st.mkAttrs(v, b);
      break;
    }
  }
}

void primFromTOML(EvalState& st, PosIdx pos, Value** args, Value& v) {
  std::string_view text = forceString(st, *args[0], pos);
  std::unique_ptr<TomlNode> root;
  try {
    root = TomlParser(text).parse();
  } catch (const EvalError& e) {
    throwError(st, pos, e.what());
  }
  toValue(st, *root, v);
}

constexpr BuiltinDef kDefs[] = {
    {"fromTOML", 1, primFromTOML},
};

}  // namespace

void registerTomlBuiltins(EvalState& state) { addBuiltins(state, kDefs); }

}  // namespace kiln::eval
