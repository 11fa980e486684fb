// Recursive-descent parser for Nix expressions (see parser.h).
#include "parser.h"

#include <cstdlib>

#include "parse_split.h"

namespace kiln::eval {

namespace {

struct DepthGuard {
  int& d;
  DepthGuard(int& depth, int& maxDepth, Lexer& lex, size_t at) : d(depth) {
    if (++d > kMaxNesting) lex.error(at, "expression nesting too deep (more than 3000 levels)");
    if (d > maxDepth) maxDepth = d;
  }
  ~DepthGuard() { --d; }
};

// Binary operator precedence (higher binds tighter), Nix 2.8's table.
int binPrec(Tok t) {
  switch (t) {
    case Tok::kImpl: return 1;
    case Tok::kOr: return 2;
    case Tok::kAnd: return 3;
    case Tok::kEq: case Tok::kNEq: return 4;
    case Tok::kLt: case Tok::kGt: case Tok::kLeq: case Tok::kGeq: return 5;
    case Tok::kUpdate: return 6;
    case Tok::kPlus: case Tok::kMinus: return 8;
    case Tok::kStar: case Tok::kSlash: return 9;
    case Tok::kConcat: return 10;
    case Tok::kQuestion: return 11;
    default: return 0;
  }
}
constexpr int kNotPrec = 7;
constexpr int kNegPrec = 12;
bool rightAssoc(Tok t) { return t == Tok::kImpl || t == Tok::kUpdate || t == Tok::kConcat; }
bool nonAssoc(int prec) { return prec == 4 || prec == 5 || prec == 11; }

}  // namespace

Parser::Parser(EvalState& state, const std::string& text, uint32_t origin, std::string basePath)
    : state_(state), lex_(state, text, origin), origin_(origin), basePath_(std::move(basePath)) {}

Parser::~Parser() {
  for (ExprAttrs* a : open_) {
    a->attrs.release();
    a->dynamicAttrs.release();
  }
}

Expr* Parser::parseAll() {
  if (!split_ && state_.settings.parseThreads >= 2 && lex_.text().size() >= kParseSplitBytes)
    if (size_t at = guessSplitOffset(lex_.text()); at != kNoSplit) splitAt(at);
  Expr* e = parseExpr();
  if (lex_.peek().t != Tok::kEof) unexpected(lex_.peek());
  split_.reset();  // never reached at a binding start: given up
  finishSets();
  return e;
}

ExprAttrs* Parser::newAttrs(PosIdx pos) {
  // Cannot throw after the make. Grown geometrically: reserving one more
  // reallocated the whole list for every set, quadratic in a file's sets
  // (a third of the serial start of gen-pkgset 50,000, whose
  // all-packages.nix has one `{ }` per package).
  if (open_.size() == open_.capacity()) open_.reserve(2 * open_.size() + 16);
  auto* a = state_.arena.make<ExprAttrs>();
  a->pos = pos;
  open_.push_back(a);
  return a;
}

void Parser::finishSets() {
  for (ExprAttrs* a : open_) {
    a->attrs.finish(state_.arena);
    a->dynamicAttrs.finish(state_.arena);
  }
  open_.clear();
  index_.clear();
}

ExprAttrs::AttrDef* Parser::find(ExprAttrs* attrs, Symbol s) {
  constexpr size_t kLinearLimit = 16;
  auto& defs = attrs->attrs;
  if (defs.size() <= kLinearLimit) {
    for (auto& a : defs)
      if (a.name == s) return &a;
    return nullptr;
  }
  SetIndex& index = index_[attrs];  // indexes the definitions added since
  for (size_t i = index.size(); i < defs.size(); ++i)
    index.add(defs[i].name.id, static_cast<uint32_t>(i));
  int64_t i = index.find(s.id);
  return i < 0 ? nullptr : &defs[i];
}

namespace {
size_t slotOf(uint32_t id, size_t mask) { return (id * 0x9E3779B1u) & mask; }
}  // namespace

void SetIndex::add(uint32_t id, uint32_t i) {
  if ((count_ + 1) * 2 > slots_.size()) {  // at most half full
    std::vector<uint64_t> old = std::move(slots_);
    slots_.assign(std::max<size_t>(64, old.size() * 2), 0);
    count_ = 0;
    for (uint64_t e : old)
      if (e) add(static_cast<uint32_t>(e >> 32) - 1, static_cast<uint32_t>(e));
  }
  size_t mask = slots_.size() - 1;
  size_t k = slotOf(id, mask);
  while (slots_[k]) k = (k + 1) & mask;
  slots_[k] = (uint64_t(id) + 1) << 32 | i;
  ++count_;
}

int64_t SetIndex::find(uint32_t id) const {
  if (slots_.empty()) return -1;
  size_t mask = slots_.size() - 1;
  uint64_t want = uint64_t(id) + 1;
  for (size_t k = slotOf(id, mask); slots_[k]; k = (k + 1) & mask)
    if (slots_[k] >> 32 == want) return static_cast<uint32_t>(slots_[k]);
  return -1;
}

void Parser::unexpected(const Token& t) {
  lex_.error(t.start, std::string("syntax error, unexpected ") + tokenName(t.t));
}

Token Parser::expect(Tok t) {
  const Token& n = lex_.peek();
  if (n.t != t)
    lex_.error(n.start, std::string("syntax error, unexpected ") + tokenName(n.t) +
                            ", expecting " + tokenName(t));
  return lex_.next();
}

Expr* Parser::var(const char* name, PosIdx pos) {
  auto* v = state_.arena.make<ExprVar>();
  v->name = state_.sym(name);
  v->pos = pos;
  return v;
}

Expr* Parser::call(const char* fn, const std::vector<Expr*>& args, PosIdx pos) {
  return ExprCall::make(state_.arena, pos, var(fn, pos), args);
}

ExprConst* Parser::str(std::string_view s, PosIdx pos) {
  auto* c = state_.arena.make<ExprConst>();
  c->v.mkString(state_.arena.copyString(s), s.size(), nullptr);
  c->pos = pos;
  return c;
}

Expr* Parser::parseExpr() {
  DepthGuard g(depth_, maxDepth_, lex_, lex_.peek().start);
  return parseFunction();
}

Expr* Parser::parseFunction() {
  const Token& t = lex_.peek();
  size_t start = t.start;
  if (t.t == Tok::kId) {
    Tok t1 = lex_.peek(1).t;
    if (t1 == Tok::kColon) {
      Token id = lex_.next();
      lex_.next();
      auto* l = state_.arena.make<ExprLambda>();
      l->pos = lex_.posAt(start);
      l->arg = state_.sym(id.text);
      l->body = parseFunction();
      return l;
    }
    if (t1 == Tok::kAt) {
      Token id = lex_.next();
      lex_.next();
      expect(Tok::kLBrace);
      return parseLambdaWithFormals(start, state_.sym(id.text));
    }
  }
  if (t.t == Tok::kLBrace) {
    Tok t1 = lex_.peek(1).t;
    bool formals = false;
    if (t1 == Tok::kEllipsis) {
      formals = true;
    } else if (t1 == Tok::kRBrace) {
      Tok t2 = lex_.peek(2).t;
      formals = t2 == Tok::kColon || t2 == Tok::kAt;
    } else if (t1 == Tok::kId) {
      Tok t2 = lex_.peek(2).t;
      formals = t2 == Tok::kComma || t2 == Tok::kQuestion || t2 == Tok::kRBrace;
    }
    if (formals) {
      lex_.next();
      return parseLambdaWithFormals(start, Symbol{});
    }
  }
  if (t.t == Tok::kAssert || t.t == Tok::kWith) {
    bool isAssert = t.t == Tok::kAssert;
    lex_.next();
    Expr* cond = parseExpr();
    expect(Tok::kSemi);
    Expr* body = parseFunction();
    if (isAssert) {
      auto* a = state_.arena.make<ExprAssert>();
      a->pos = lex_.posAt(start);
      a->cond = cond;
      a->body = body;
      return a;
    }
    auto* w = state_.arena.make<ExprWith>();
    w->pos = lex_.posAt(start);
    w->attrs = cond;
    w->body = body;
    return w;
  }
  if (t.t == Tok::kLet && lex_.peek(1).t != Tok::kLBrace) {
    lex_.next();
    ExprAttrs* binds = parseBinds(Tok::kIn);
    expect(Tok::kIn);
    if (!binds->dynamicAttrs.empty())
      lex_.error(start, "dynamic attributes not allowed in let");
    auto* l = state_.arena.make<ExprLet>();
    l->pos = lex_.posAt(start);
    l->attrs = binds;
    l->body = parseFunction();
    return l;
  }
  return parseIf();
}

Expr* Parser::parseLambdaWithFormals(size_t start, Symbol arg) {
  // The '{' has been consumed.
  Formals* formals = parseFormals();
  expect(Tok::kRBrace);
  if (!arg && lex_.peek().t == Tok::kAt) {
    lex_.next();
    arg = state_.sym(expect(Tok::kId).text);
  }
  expect(Tok::kColon);
  auto* l = state_.arena.make<ExprLambda>();
  l->pos = lex_.posAt(start);
  l->arg = arg;
  l->formals = formals;
  for (size_t i = 0; i < formals->formals.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (formals->formals[i].name == formals->formals[j].name)
        lex_.error(start, "duplicate formal function argument '" +
                              std::string(state_.symbols.name(formals->formals[i].name)) + "'");
    if (arg && formals->formals[i].name == arg)
      lex_.error(start, "duplicate formal function argument '" +
                            std::string(state_.symbols.name(arg)) + "'");
  }
  std::sort(formals->formals.begin(), formals->formals.end(),
            [](const Formal& a, const Formal& b) { return a.name < b.name; });
  l->body = parseFunction();
  return l;
}

Formals* Parser::parseFormals() {
  auto* f = state_.arena.make<Formals>();
  ScratchVec<Formal> formals;
  while (true) {
    const Token& t = lex_.peek();
    if (t.t == Tok::kEllipsis) {
      lex_.next();
      f->ellipsis = true;
      break;
    }
    if (t.t != Tok::kId) break;
    Token id = lex_.next();
    Formal formal{lex_.posAt(id.start), state_.sym(id.text), nullptr};
    if (lex_.peek().t == Tok::kQuestion) {
      lex_.next();
      formal.def = parseExpr();
    }
    formals.push_back(formal);
    if (lex_.peek().t != Tok::kComma) break;
    lex_.next();
  }
  f->formals = toArena(formals);
  return f;
}

Expr* Parser::parseIf() {
  const Token& t = lex_.peek();
  if (t.t != Tok::kIf) return parseOp(1);
  size_t start = t.start;
  lex_.next();
  auto* e = state_.arena.make<ExprIf>();
  e->pos = lex_.posAt(start);
  e->cond = parseExpr();
  expect(Tok::kThen);
  e->then = parseExpr();
  expect(Tok::kElse);
  e->else_ = parseExpr();
  return e;
}

Expr* Parser::parseOp(int minPrec) {
  DepthGuard g(depth_, maxDepth_, lex_, lex_.peek().start);
  const Token& first = lex_.peek();
  size_t start = first.start;
  PosIdx pos = lex_.posAt(start);
  Expr* lhs;
  if (first.t == Tok::kNot) {
    lex_.next();
    auto* n = state_.arena.make<ExprOpNot>();
    n->pos = pos;
    n->e = parseOp(kNotPrec + 1);
    lhs = n;
  } else if (first.t == Tok::kMinus) {
    lex_.next();
    auto* zero = state_.arena.make<ExprConst>();
    zero->v.mkInt(0);
    lhs = call("__sub", {zero, parseOp(kNegPrec + 1)}, pos);
  } else {
    lhs = parseApp();
  }
  while (true) {
    const Token& opTok = lex_.peek();
    int prec = binPrec(opTok.t);
    if (prec == 0 || prec < minPrec) return lhs;
    // A prefix '!' binds looser than '+': `!a + b` is `!(a + b)`, which the
    // recursion above already handled; here only ops >= minPrec continue.
    Tok op = opTok.t;
    PosIdx opPos = lex_.posAt(opTok.start);
    lex_.next();
    if (op == Tok::kQuestion) {
      auto* h = state_.arena.make<ExprOpHasAttr>();
      h->pos = opPos;
      h->e = lhs;
      AttrPath path = parseAttrPath();
      h->pathItems = arenaArray(state_.arena, path.data(), path.size(), h->nPath);
      lhs = h;
    } else {
      // Where the right operand starts: a `+` error about it points there.
      PosIdx rhsPos = lex_.posAt(lex_.peek().start);
      Expr* rhs = parseOp(rightAssoc(op) ? prec : prec + 1);
      auto bin = [&](ExprBinOp::Op o) {
        auto* b = state_.arena.make<ExprBinOp>();
        b->pos = opPos;
        b->op = o;
        b->e1 = lhs;
        b->e2 = rhs;
        return b;
      };
      auto notE = [&](Expr* e) {
        auto* n = state_.arena.make<ExprOpNot>();
        n->pos = opPos;
        n->e = e;
        return n;
      };
      switch (op) {
        case Tok::kImpl: lhs = bin(ExprBinOp::kImpl); break;
        case Tok::kOr: lhs = bin(ExprBinOp::kOr); break;
        case Tok::kAnd: lhs = bin(ExprBinOp::kAnd); break;
        case Tok::kEq: lhs = bin(ExprBinOp::kEq); break;
        case Tok::kNEq: lhs = bin(ExprBinOp::kNEq); break;
        case Tok::kUpdate: lhs = bin(ExprBinOp::kUpdate); break;
        case Tok::kConcat: lhs = bin(ExprBinOp::kConcatLists); break;
        case Tok::kLt: lhs = call("__lessThan", {lhs, rhs}, opPos); break;
        case Tok::kGt: lhs = call("__lessThan", {rhs, lhs}, opPos); break;
        case Tok::kLeq: lhs = notE(call("__lessThan", {rhs, lhs}, opPos)); break;
        case Tok::kGeq: lhs = notE(call("__lessThan", {lhs, rhs}, opPos)); break;
        case Tok::kMinus: lhs = call("__sub", {lhs, rhs}, opPos); break;
        case Tok::kStar: lhs = call("__mul", {lhs, rhs}, opPos); break;
        case Tok::kSlash: lhs = call("__div", {lhs, rhs}, opPos); break;
        case Tok::kPlus: {
          auto* c = state_.arena.make<ExprConcatStrings>();
          c->pos = opPos;
          StringPart parts[] = {exprPart(pos, lhs), exprPart(rhsPos, rhs)};
          c->parts.assign(state_.arena, parts, 2);
          lhs = c;
          break;
        }
        default: unexpected(opTok);
      }
    }
    if (nonAssoc(prec) && binPrec(lex_.peek().t) == prec) unexpected(lex_.peek());
  }
}

bool Parser::startsSimple(size_t n) {
  switch (lex_.peek(n).t) {
    case Tok::kId: case Tok::kInt: case Tok::kFloat: case Tok::kStrOpen:
    case Tok::kIndStrOpen: case Tok::kPath: case Tok::kHPath: case Tok::kSPath:
    case Tok::kUri: case Tok::kPathStart: case Tok::kHPathStart: case Tok::kLParen:
    case Tok::kLBrace: case Tok::kLBracket: case Tok::kRec:
      return true;
    case Tok::kLet:
      return lex_.peek(n + 1).t == Tok::kLBrace;
    default:
      return false;
  }
}

ExprCall* ExprCall::make(Arena& arena, PosIdx pos, Expr* fun, std::span<Expr* const> args) {
  auto* c = arena.makeWithItems<ExprCall, Expr*>(args.size());
  c->pos = pos;
  c->fun = fun;
  c->nArgs = static_cast<uint32_t>(args.size());
  std::copy(args.begin(), args.end(), c->argItems());
  return c;
}

Expr* Parser::parseApp() {
  size_t start = lex_.peek().start;
  Expr* f = parseSelect();
  if (!startsSimple(0)) return f;
  PosIdx pos = lex_.posAt(start);
  ScratchVec<Expr*, 4> args;
  while (startsSimple(0)) args.push_back(parseSelect());
  return ExprCall::make(state_.arena, pos, f, {args.data(), args.size()});
}

Expr* Parser::selectOfVar(Expr* e, PosIdx pos, const AttrPath& path, Expr* def) {
  if (e != lastVar_ || e->pos != pos || def || path.size() != 1 || !path[0].symbol)
    return nullptr;
  lastVar_ = nullptr;
  const Symbol name = static_cast<ExprVar*>(e)->name;
  state_.arena.shrinkLast(e, sizeof(ExprVar), 0);  // when nothing came after it
  auto* s = state_.arena.make<ExprSelectVar>();
  s->pos = pos;
  s->name = name;
  s->attr = path[0].symbol;
  return s;
}

Expr* Parser::parseSelect() {
  size_t start = lex_.peek().start;
  Expr* e = parseSimple();
  const Token& t = lex_.peek();
  if (t.t == Tok::kDot) {
    lex_.next();
    PosIdx pos = lex_.posAt(start);
    AttrPath path = parseAttrPath();
    Expr* def = nullptr;
    if (lex_.peek().t == Tok::kOrKw) {
      lex_.next();
      def = parseSelect();
    }
    if (Expr* fused = selectOfVar(e, pos, path, def)) return fused;
    auto* s = state_.arena.make<ExprSelect>();
    s->pos = pos;
    s->e = e;
    s->setPath(state_.arena, {path.data(), path.size()}, def);
    return s;
  }
  if (t.t == Tok::kOrKw) {
    // `f or` applies f to a variable named "or" (legacy Nixpkgs usage).
    PosIdx p = lex_.posAt(t.start);
    lex_.next();
    Expr* orVar = var("or", p);
    return ExprCall::make(state_.arena, lex_.posAt(start), e, {&orVar, 1});
  }
  return e;
}

AttrPath Parser::parseAttrPath() {
  AttrPath path;
  while (true) {
    AttrName n;
    if (!parseAttr(n)) unexpected(lex_.peek());
    path.push_back(n);
    if (lex_.peek().t != Tok::kDot) return path;
    lex_.next();
  }
}

bool Parser::parseAttr(AttrName& out) {
  const Token& t = lex_.peek();
  if (t.t == Tok::kId || t.t == Tok::kOrKw) {
    out.symbol = state_.sym(lex_.next().text);
    return true;
  }
  if (t.t == Tok::kStrOpen) {
    lex_.next();
    Expr* e = parseString();
    if (auto* c = exprAs<ExprConst>(e)) {
      out.symbol = state_.sym(c->v.str.s);
    } else {
      out.expr = e;
    }
    return true;
  }
  if (t.t == Tok::kDollarCurly) {
    lex_.next();
    out.expr = parseExpr();
    expect(Tok::kRBrace);
    return true;
  }
  return false;
}

ExprAttrs* Parser::parseBinds(Tok terminator) {
  ExprAttrs* attrs = newAttrs(lex_.posAt(lex_.peek().start));
  parseBindList(attrs, terminator);
  return attrs;
}

void Parser::parseBindList(ExprAttrs* attrs, Tok terminator) {
  while (true) {
    const Token& t = lex_.peek();
    if (!attrs) {  // a split's helper, at its own level
      if (t.t == Tok::kRBrace || t.t == Tok::kIn) return;
      if (cancel_->load(std::memory_order_relaxed)) throw ParseError("split cancelled");
    } else if (t.t == terminator) {
      return;
    }
    if (split_ && t.start >= split_->offset()) {
      takeSplit(attrs, terminator, t.start);
      continue;  // the next binding, or what follows the helper's
    }
    if (t.t == Tok::kInherit) {
      lex_.next();
      Expr* from = nullptr;
      if (lex_.peek().t == Tok::kLParen) {
        lex_.next();
        from = parseExpr();
        expect(Tok::kRParen);
      }
      while (lex_.peek().t != Tok::kSemi) {
        size_t at = lex_.peek().start;
        AttrName n;
        if (!parseAttr(n)) unexpected(lex_.peek());
        if (!n.symbol) lex_.error(at, "dynamic attributes not allowed in inherit");
        PosIdx p = lex_.posAt(at);
        Expr* e;
        if (from) {
          auto* s = state_.arena.make<ExprSelect>();
          s->pos = p;
          s->e = from;
          s->setPath(state_.arena, {&n, 1}, nullptr);
          e = s;
        } else {
          auto* v = state_.arena.make<ExprVar>();
          v->pos = p;
          v->name = n.symbol;
          e = v;
        }
        addInherit(attrs, n, p, e, from == nullptr);
      }
      lex_.next();
      continue;
    }
    size_t at = t.start;
    if (t.t != Tok::kId && t.t != Tok::kOrKw && t.t != Tok::kStrOpen && t.t != Tok::kDollarCurly)
      unexpected(t);
    AttrPath path = parseAttrPath();
    PosIdx p = lex_.posAt(at);
    expect(Tok::kAssign);
    Expr* e = parseExpr();
    expect(Tok::kSemi);
    if (auto* l = exprAs<ExprLambda>(e); l && path.size() == 1 && path[0].symbol)
      l->name = path[0].symbol;
    if (attrs)
      addAttr(attrs, path, e, p);
    else
      recordBind(path, e, p, false, false);
  }
}

void Parser::addInherit(ExprAttrs* attrs, const AttrName& n, PosIdx p, Expr* e, bool inherited) {
  if (!attrs) {
    AttrPath path{n};
    recordBind(path, e, p, true, inherited);
    return;
  }
  if (auto* prev = find(attrs, n.symbol)) dupAttr({n}, p, prev->pos);
  attrs->attrs.pushMalloc({n.symbol, p, inherited, e});
}

std::string Parser::showAttrPath(const AttrPath& path) {
  std::string s;
  for (auto& n : path) {
    if (!s.empty()) s += '.';
    s += n.symbol ? std::string(state_.symbols.name(n.symbol)) : "\"${...}\"";
  }
  return s;
}

void Parser::dupAttr(const AttrPath& path, PosIdx pos, PosIdx prev) {
  throw ParseError("attribute '" + showAttrPath(path) + "' already defined at " +
                   state_.positions.show(prev) + state_.positions.snippet(pos));
}

void Parser::addAttr(ExprAttrs* attrs, AttrPath& path, Expr* e, PosIdx pos) {
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    if (path[i].symbol) {
      ExprAttrs::AttrDef* j = find(attrs, path[i].symbol);
      if (j) {
        auto* nested = j->inherited ? nullptr : exprAs<ExprAttrs>(j->e);
        if (!nested) dupAttr(path, pos, j->pos);
        attrs = nested;
      } else {
        ExprAttrs* nested = newAttrs(pos);
        attrs->attrs.pushMalloc({path[i].symbol, pos, false, nested});
        attrs = nested;
      }
    } else {
      ExprAttrs* nested = newAttrs(pos);
      attrs->dynamicAttrs.pushMalloc({path[i].expr, nested, pos});
      attrs = nested;
    }
  }
  AttrName& last = path.back();
  if (last.symbol) {
    ExprAttrs::AttrDef* j = find(attrs, last.symbol);
    if (j) {
      auto* ae = exprAs<ExprAttrs>(e);
      auto* jAttrs = j->inherited ? nullptr : exprAs<ExprAttrs>(j->e);
      if (!ae || !jAttrs) dupAttr(path, pos, j->pos);
      for (auto& ad : ae->attrs) {
        if (auto* j2 = find(jAttrs, ad.name)) dupAttr({AttrName{ad.name, nullptr}}, ad.pos, j2->pos);
        jAttrs->attrs.pushMalloc(ad);
      }
      for (auto& dd : ae->dynamicAttrs) jAttrs->dynamicAttrs.pushMalloc(dd);
    } else {
      attrs->attrs.pushMalloc({last.symbol, pos, false, e});
    }
  } else {
    attrs->dynamicAttrs.pushMalloc({last.expr, e, pos});
  }
}

}  // namespace kiln::eval
