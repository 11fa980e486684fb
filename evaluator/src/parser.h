#pragma once
// Recursive-descent parser for the Nix language (Nix 2.8 grammar, operator
// precedence and associativity). Produces arena-allocated Expr trees; the
// caller binds variables afterwards.

#include <string>

#include "lexer.h"

namespace kiln::eval {

class Parser {
 public:
  Parser(EvalState& state, const std::string& text, uint32_t origin, std::string basePath);
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
  Expr* makeStringParts(std::vector<std::pair<PosIdx, Expr*>>& parts, bool literalOnly);
  void addAttr(ExprAttrs* attrs, AttrPath& path, Expr* e, PosIdx pos);
  [[noreturn]] void dupAttr(const AttrPath& path, PosIdx pos, PosIdx prev);
  [[noreturn]] void unexpected(const Token& t);
  Token expect(Tok t);
  bool startsSimple(size_t lookahead);
  Expr* call(const char* fn, std::vector<Expr*> args, PosIdx pos);
  Expr* var(const char* name, PosIdx pos);
  ExprConst* str(std::string_view s, PosIdx pos);
  std::string showAttrPath(const AttrPath& path);

  EvalState& state_;
  Lexer lex_;
  std::string basePath_;
  int depth_ = 0;
};

}  // namespace kiln::eval
