#pragma once
// Recursive-descent parser for the Nix language (Nix 2.8 grammar, operator
// precedence and associativity). Produces arena-allocated Expr trees; the
// caller binds variables afterwards.

#include <string>
#include <unordered_map>
#include <vector>

#include "lexer.h"

namespace kiln::eval {

class Parser {
 public:
  Parser(EvalState& state, const std::string& text, uint32_t origin, std::string basePath);
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;
  /// Frees the malloc'd attribute arrays of a parse that threw.
  ~Parser();
  /// Parses a whole file/expression; throws ParseError.
  Expr* parseAll();

 private:
  Expr* parseExpr();
  Expr* parseFunction();
  Expr* parseIf();
  Expr* parseOp(int minPrec);
  Expr* parseApp();
  Expr* parseSelect();
  Expr* parseSimple();
  Expr* parseLambdaWithFormals(size_t start, Symbol arg);
  Formals* parseFormals();
  ExprAttrs* parseBinds(Tok terminator);
  AttrPath parseAttrPath();
  bool parseAttr(AttrName& out);
  Expr* parseString();
  Expr* parseIndString();
  Expr* parsePathInterp(const Token& start);
  Expr* makeStringParts(std::vector<StringPart>& parts);
  /// A part of a concatenation: literal text (copied into the arena).
  StringPart textPart(PosIdx pos, std::string_view text);
  /// A part of a concatenation: an expression.
  static StringPart exprPart(PosIdx pos, Expr* e) {
    StringPart p;
    p.pos = pos;
    p.expr = e;
    return p;
  }
  void addAttr(ExprAttrs* attrs, AttrPath& path, Expr* e, PosIdx pos);
  /// A new set whose arrays grow in malloc'd memory until finishSets().
  ExprAttrs* newAttrs(PosIdx pos);
  /// Moves every set's arrays into the arena, exact size.
  void finishSets();
  /// The definition of `s` in `attrs` (still being parsed), or nullptr.
  /// Linear for small sets; large ones (10,000-attribute package sets)
  /// use an index built on demand.
  ExprAttrs::AttrDef* find(ExprAttrs* attrs, Symbol s);
  /// An arena array with the contents of `v`.
  template <class T>
  ArenaVec<T> toArena(const std::vector<T>& v) {
    ArenaVec<T> a;
    a.assign(state_.arena, v.data(), v.size());
    return a;
  }
  [[noreturn]] void dupAttr(const AttrPath& path, PosIdx pos, PosIdx prev);
  [[noreturn]] void unexpected(const Token& t);
  Token expect(Tok t);
  bool startsSimple(size_t lookahead);
  Expr* call(const char* fn, const std::vector<Expr*>& args, PosIdx pos);
  Expr* var(const char* name, PosIdx pos);
  ExprConst* str(std::string_view s, PosIdx pos);
  std::string showAttrPath(const AttrPath& path);

  EvalState& state_;
  Lexer lex_;
  std::string basePath_;
  int depth_ = 0;
  /// Sets whose arrays are still malloc'd (see newAttrs).
  std::vector<ExprAttrs*> open_;
  /// Lookup indexes of large sets, by set: symbol id to position.
  std::unordered_map<const ExprAttrs*, std::unordered_map<uint32_t, uint32_t>> index_;
};

}  // namespace kiln::eval
