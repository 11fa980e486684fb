// Primary expressions: literals, strings, indented strings, paths, sets,
// lists and parenthesised expressions (see parser.h).
#include <array>
#include <cstdlib>

#include "parser.h"

namespace kiln::eval {

namespace {

std::string homeDir() {
  const char* h = std::getenv("HOME");
  return h ? h : "/";
}

// The bytes parseString stops at: all others are copied as they stand.
constexpr auto kStringSpecial = [] {
  std::array<bool, 256> t{};
  for (unsigned char c : {'"', '\\', '$', '\r'}) t[c] = true;
  return t;
}();

bool isStringSpecial(char c) { return kStringSpecial[static_cast<unsigned char>(c)]; }

}  // namespace

Expr* Parser::parseSimple() {

  Token t = lex_.peek();
  PosIdx pos = lex_.posAt(t.start);
  switch (t.t) {
    case Tok::kId: {
      lex_.next();
      if (t.text == "__curPos") {
        auto* p = state_.arena.make<ExprPos>();
        p->pos = pos;
        return p;
      }
      auto* v = state_.arena.make<ExprVar>();
      v->pos = pos;
      v->name = state_.sym(t.text);
      lastVar_ = v;
      return v;
    }
    case Tok::kInt: {
      lex_.next();
      auto* c = state_.arena.make<ExprConst>();
      c->pos = pos;
      c->v.mkInt(t.i);
      return c;
    }
    case Tok::kFloat: {
      lex_.next();
      auto* c = state_.arena.make<ExprConst>();
      c->pos = pos;
      c->v.mkFloat(t.f);
      return c;
    }
    case Tok::kStrOpen:
      lex_.next();
      return parseString();
    case Tok::kIndStrOpen:
      lex_.next();
      return parseIndString();
    case Tok::kPath:
    case Tok::kHPath: {
      lex_.next();
      std::string_view p = t.text;
      if (p.size() > 1 && p.back() == '/')
        lex_.error(t.start, "path '" + std::string(p) + "' has a trailing slash");
      std::string& full = pathJoined_;  // no allocation once grown
      if (t.t == Tok::kHPath) {
        full = homeDir();
        full += p.substr(1);
      } else if (p[0] == '/') {
        full = p;
      } else {
        full = basePath_;
        full += '/';
        full += p;
      }
      canonPathInto(full, pathCanon_);
      auto* c = state_.arena.make<ExprConst>();
      c->pos = pos;
      c->v.mkPath(state_.arena.copyString(pathCanon_));
      return c;
    }
    case Tok::kPathStart:
    case Tok::kHPathStart:
      lex_.next();
      return parsePathInterp(t);
    case Tok::kSPath: {
      lex_.next();
      std::string_view inner = t.text.substr(1, t.text.size() - 2);
      return call("__findFile", {var("__nixPath", pos), str(inner, pos)}, pos);
    }
    case Tok::kUri:
      lex_.next();
      return str(t.text, pos);
    case Tok::kLParen: {
      lex_.next();
      Expr* e = parseExpr();
      expect(Tok::kRParen);
      return e;
    }
    case Tok::kLet: {
      lex_.next();
      expect(Tok::kLBrace);
      ExprAttrs* attrs = parseBinds(Tok::kRBrace);
      expect(Tok::kRBrace);
      attrs->recursive = true;
      auto* s = state_.arena.make<ExprSelect>();
      s->pos = pos;
      s->e = attrs;
      AttrName body{state_.sBody, nullptr};
      s->setPath(state_.arena, {&body, 1}, nullptr);
      return s;
    }
    case Tok::kRec:
    case Tok::kLBrace: {
      lex_.next();
      if (t.t == Tok::kRec) expect(Tok::kLBrace);
      ExprAttrs* attrs = parseBinds(Tok::kRBrace);
      expect(Tok::kRBrace);
      attrs->recursive = t.t == Tok::kRec;
      attrs->pos = pos;
      return attrs;
    }
    case Tok::kLBracket: {
      lex_.next();
      ScratchVec<Expr*, 16> elems;
      bool constant = true;
      while (lex_.peek().t != Tok::kRBracket) {
        if (!startsSimple(0)) unexpected(lex_.peek());
        elems.push_back(shareListLiteral(parseSelect()));
        constant = constant && exprAs<ExprConst>(elems.back());
      }
      lex_.next();
      if (constant) return constantList(pos, {elems.data(), elems.size()});
      auto* l = state_.arena.make<ExprList>();
      l->pos = pos;
      l->elemItems.assign(state_.arena, elems.data(), elems.size(), l->nElems);
      return l;
    }
    default:
      unexpected(t);
  }
}

// A list literal of constants only (strings, numbers, paths) is made once,
// here: every evaluation shares its array (ExprConstList), so the lists a
// package set keeps (word lists, flags, platforms) are not copied into the
// collector's heap each time, and lists rebuilt in loops (a replaceStrings
// table of 26 letters) allocate nothing.
Expr* Parser::constantList(PosIdx pos, std::span<Expr* const> elems) {
  auto* l = state_.arena.makeWithItems<ExprConstList, Value*>(elems.size());
  l->pos = pos;
  l->size = static_cast<uint32_t>(elems.size());
  Value** values = l->elems();
  for (size_t i = 0; i < elems.size(); ++i) values[i] = &static_cast<ExprConst*>(elems[i])->v;
  return l;
}

// gen-strings 50,000 has 1.25 million word literals in lists, of 50
// distinct words: a 40-byte node each, and the copy of its text that
// textPart made just before it (~9 bytes).
Expr* Parser::shareListLiteral(Expr* e) {
  auto* c = exprAs<ExprConst>(e);
  if (!c || c->v.type != VType::kString) return e;
  auto [it, added] = listLiterals_.try_emplace(c->v.sv(), c);
  if (added) return c;
  std::string_view text = c->v.sv();
  state_.arena.shrinkLast(c, sizeof(ExprConst), 0);  // only if nothing came after it
  // The text with its NUL and the node's alignment padding, when it lies
  // right before the node in the same chunk (the cursor is then at the
  // node only if the node was given back).
  auto* node = reinterpret_cast<const char*>(c);
  if (text.data() < node && size_t(node - text.data()) - (text.size() + 1) < alignof(ExprConst))
    state_.arena.shrinkLast(const_cast<char*>(text.data()), node - text.data(), 0);
  return it->second;
}

StringPart Parser::textPart(PosIdx pos, std::string_view text) {
  StringPart p;
  p.pos = pos;
  p.literal = true;
  p.text = state_.arena.copyString(text);
  p.textLen = text.size() < StringPart::kLongText ? static_cast<uint16_t>(text.size())
                                                 : StringPart::kLongText;
  return p;
}

Expr* Parser::makeStringParts(std::span<const StringPart> parts) {
  if (parts.empty()) return str("", kNoPos);
  if (parts.size() == 1 && parts[0].literal) {
    auto* c = state_.arena.make<ExprConst>();
    c->v.mkString(parts[0].text, parts[0].literalText().size(), nullptr);
    c->pos = parts[0].pos;
    return c;
  }
  if (parts.size() == 1)
    if (auto* c = exprAs<ExprConst>(parts[0].expr); c && c->v.type == VType::kString)
      return c;
  auto* cs = state_.arena.make<ExprConcatStrings>();
  cs->pos = parts[0].pos;
  cs->forceString = true;
  cs->parts = toArena(parts);
  return cs;
}

// After the opening '"': literal runs with escapes and ${...}. A run
// without escapes is copied from the source as it stands; `lit` collects
// only runs that have them.
Expr* Parser::parseString() {
  const std::string& s = lex_.text();
  const size_t n = s.size();
  ScratchVec<StringPart, 4> parts;
  std::string lit;  // the run so far, up to `from`, when it had escapes
  size_t litStart = lex_.cursor();
  size_t p = litStart, from = litStart;  // [from, p) is unescaped source
  auto flush = [&] {
    std::string_view tail(s.data() + from, p - from);
    if (lit.empty()) {
      if (!tail.empty()) parts.push_back(textPart(lex_.posAt(litStart), tail));
    } else {
      lit += tail;
      parts.push_back(textPart(lex_.posAt(litStart), lit));
      lit.clear();
    }
  };
  auto escape = [&](char c, size_t width) {  // replaces `width` source bytes
    lit.append(s, from, p - from);
    lit += c;
    p += width;
    from = p;
  };
  while (true) {
    while (p < n && !isStringSpecial(s[p])) ++p;  // a run of plain bytes
    if (p >= n) lex_.error(p, "syntax error, unexpected end of file, expecting '\"'");
    char c = s[p];
    if (c == '"') break;
    if (c == '\\') {
      if (p + 1 >= n) lex_.error(p, "syntax error, unexpected end of file");
      char e = s[p + 1];
      escape(e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e, 2);
    } else if (c == '$' && p + 1 < n && s[p + 1] == '{') {
      flush();
      size_t at = p;
      lex_.setCursor(p + 2);
      Expr* e = parseExpr();
      expect(Tok::kRBrace);
      parts.push_back(exprPart(lex_.posAt(at), e));
      p = from = litStart = lex_.cursor();
    } else if (c == '$' && p + 1 < n && s[p + 1] != '"' && s[p + 1] != '\\') {
      p += 2;  // `$x` is itself
    } else if (c == '\r') {
      escape('\n', (p + 1 < n && s[p + 1] == '\n') ? 2 : 1);
    } else {
      ++p;
    }
  }
  flush();
  lex_.setCursor(p + 1);
  return makeStringParts({parts.data(), parts.size()});
}

// After the opening "''": indented string with ''$, ''', ''\x escapes.
Expr* Parser::parseIndString() {
  const std::string& s = lex_.text();
  const size_t n = s.size();
  // Literal runs take part in indentation stripping; escapes and lone
  // quote/dollar tokens do not (like interpolations).
  struct Part {
    PosIdx pos;
    Expr* expr;       // null for literal
    std::string lit;
    bool indent;
  };
  ScratchVec<Part, 4> parts;
  auto addLit = [&](size_t at, std::string text, bool indent) {
    parts.push_back({lex_.posAt(at), nullptr, std::move(text), indent});
  };
  size_t p = lex_.cursor();
  while (true) {
    if (p >= n) lex_.error(p, "syntax error, unexpected end of file, expecting IND_STRING_CLOSE");
    char c = s[p];
    char next = p + 1 < n ? s[p + 1] : 0;
    if (c == '\'' && next == '\'') {
      if (p + 2 < n && s[p + 2] == '$') {
        addLit(p, "$", false);
        p += 3;
      } else if (p + 2 < n && s[p + 2] == '\'') {
        addLit(p, "''", false);
        p += 3;
      } else if (p + 2 < n && s[p + 2] == '\\') {
        if (p + 3 >= n) lex_.error(p, "syntax error, unexpected end of file");
        char e = s[p + 3];
        std::string lit = e == 'n' ? "\n" : e == 'r' ? "\r" : e == 't' ? "\t" : std::string(1, e);
        addLit(p, lit, false);
        p += 4;
      } else {
        p += 2;
        break;
      }
    } else if (c == '$' && next == '{') {
      size_t at = p;
      lex_.setCursor(p + 2);
      Expr* e = parseExpr();
      expect(Tok::kRBrace);
      parts.push_back({lex_.posAt(at), e, {}, false});
      p = lex_.cursor();
    } else if ((c == '\'' && (next == '$' || next == 0)) ||
               (c == '$' && (next == '\'' || next == 0))) {
      // A lone quote (before '$' or at the end of input) or a lone dollar
      // is a one-character literal; the scan below stops at both, so they
      // must consume input here or the loop would never advance.
      addLit(p, std::string(1, c), false);
      ++p;
    } else {
      size_t q = p;
      std::string lit;
      while (q < n) {
        size_t run = q;  // bytes other than quotes and dollars, copied whole
        while (run < n && s[run] != '\'' && s[run] != '$') ++run;
        lit.append(s, q, run - q);
        q = run;
        if (q == n) break;
        char d = s[q];
        char dn = q + 1 < n ? s[q + 1] : 0;
        if (d == '\'' && (dn == '\'' || dn == '$' || dn == 0)) break;
        if (d == '$' && (dn == '{' || dn == '\'' || dn == 0)) break;
        lit += d;  // a quote or dollar that starts nothing, and the next byte
        lit += dn;
        q += 2;
      }
      addLit(p, std::move(lit), true);
      p = q;
    }
  }
  lex_.setCursor(p);

  // Strip the smallest indentation of non-empty lines.
  size_t minIndent = 1000000, curIndent = 0;
  bool atStart = true;
  for (auto& part : parts) {
    if (!part.indent) {
      if (atStart) {
        atStart = false;
        minIndent = std::min(minIndent, curIndent);
      }
      continue;
    }
    const std::string& lit = part.lit;
    for (size_t k = 0; k < lit.size(); ++k) {
      char c = lit[k];
      if (atStart) {
        if (c == ' ') {
          ++curIndent;
        } else if (c == '\n') {
          curIndent = 0;
        } else {
          atStart = false;
          minIndent = std::min(minIndent, curIndent);
        }
      } else {
        k = lit.find('\n', k);  // the rest of the line counts for nothing
        if (k == std::string::npos) break;
        atStart = true;
        curIndent = 0;
      }
    }
  }
  ScratchVec<StringPart> out;
  std::string acc;
  PosIdx accPos = kNoPos;
  atStart = true;
  size_t dropped = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    auto& part = parts[i];
    if (part.expr) {
      atStart = false;
      dropped = 0;
      if (!acc.empty()) out.push_back(textPart(accPos, acc));
      acc.clear();
      out.push_back(exprPart(part.pos, part.expr));
      continue;
    }
    if (!part.indent) {
      atStart = false;
      dropped = 0;
      if (acc.empty()) accPos = part.pos;
      acc += part.lit;
      continue;
    }
    std::string s2;
    const std::string& lit = part.lit;
    for (size_t k = 0; k < lit.size();) {
      if (!atStart) {  // copied whole up to and with the end of the line
        size_t nl = lit.find('\n', k);
        size_t end = nl == std::string::npos ? lit.size() : nl + 1;
        s2.append(lit, k, end - k);
        k = end;
        atStart = nl != std::string::npos;
        continue;
      }
      char c = lit[k++];
      if (c == ' ') {
        if (dropped++ >= minIndent) s2 += c;
      } else if (c == '\n') {
        dropped = 0;
        s2 += c;
      } else {
        atStart = false;
        dropped = 0;
        s2 += c;
      }
    }
    if (i + 1 == parts.size()) {
      size_t nl = s2.find_last_of('\n');
      if (nl != std::string::npos && s2.find_first_not_of(' ', nl + 1) == std::string::npos)
        s2 = s2.substr(0, nl + 1);
    }
    if (acc.empty()) accPos = part.pos;
    acc += s2;
  }
  if (!acc.empty()) out.push_back(textPart(accPos, acc));
  return makeStringParts({out.data(), out.size()});
}

// An interpolated path: `./a/${b}/c`. The start token holds the first
// literal segment; the cursor is at "${".
Expr* Parser::parsePathInterp(const Token& start) {
  const std::string& s = lex_.text();
  const size_t n = s.size();
  std::string first(start.text);
  std::string full;
  if (start.t == Tok::kHPathStart) full = homeDir() + first.substr(1);
  else if (first[0] == '/') full = first;
  else full = basePath_ + "/" + first;
  bool slash = !full.empty() && full.back() == '/';
  full = canonPath(full);
  if (slash && full != "/") full += '/';
  ScratchVec<StringPart, 4> parts;
  PosIdx pos = lex_.posAt(start.start);
  auto* c = state_.arena.make<ExprConst>();
  c->pos = pos;
  c->v.mkPath(state_.arena.copyString(full));
  parts.push_back(exprPart(pos, c));
  size_t p = lex_.cursor();
  std::string lastLit = first;
  while (true) {
    if (p + 1 < n && s[p] == '$' && s[p + 1] == '{') {
      size_t at = p;
      lex_.setCursor(p + 2);
      Expr* e = parseExpr();
      expect(Tok::kRBrace);
      parts.push_back(exprPart(lex_.posAt(at), e));
      p = lex_.cursor();
      lastLit.clear();
      continue;
    }
    size_t q = p;
    while (q < n && (isPathChar(s[q]) || s[q] == '/')) ++q;
    if (q == p) break;
    lastLit = s.substr(p, q - p);
    parts.push_back(textPart(lex_.posAt(p), lastLit));
    p = q;
  }
  if (!lastLit.empty() && lastLit.back() == '/')
    lex_.error(p, "path has a trailing slash");
  lex_.setCursor(p);
  auto* cs = state_.arena.make<ExprConcatStrings>();
  cs->pos = pos;
  cs->forceString = false;
  cs->parts = toArena(parts);
  return cs;
}

}  // namespace kiln::eval
