#pragma once
// Recursive-descent parser for the Nix language (Nix 2.8 grammar, operator
// precedence and associativity). Produces arena-allocated Expr trees; the
// caller binds variables afterwards.

#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "lexer.h"

namespace kiln::eval {

/// A parser's temporary array: its first N elements need no malloc (most
/// argument lists, attribute paths and string parts are short).
template <class T, size_t N = 8>
using ScratchVec = boost::container::small_vector<T, N>;

/// Symbol id to definition index, for one large set being parsed: open
/// addressing in one array (a node-based map allocated per attribute).
class SetIndex {
 public:
  size_t size() const { return count_; }
  /// Adds `id` (not yet present) at definition index `i`.
  void add(uint32_t id, uint32_t i);
  /// The definition index of `id`, or -1.
  int64_t find(uint32_t id) const;

 private:
  std::vector<uint64_t> slots_;  // (id + 1) << 32 | index; 0 is empty
  size_t count_ = 0;
};

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
  Expr* makeStringParts(std::span<const StringPart> parts);
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
  /// An arena array with the contents of `v` (a contiguous container).
  template <class C>
  auto toArena(const C& v) {
    ArenaVec<typename C::value_type> a;
    a.assign(state_.arena, v.data(), v.size());
    return a;
  }
  [[noreturn]] void dupAttr(const AttrPath& path, PosIdx pos, PosIdx prev);
  [[noreturn]] void unexpected(const Token& t);
  Token expect(Tok t);
  bool startsSimple(size_t lookahead);
  Expr* call(const char* fn, const std::vector<Expr*>& args, PosIdx pos);
  Expr* var(const char* name, PosIdx pos);
  /// The constant list of `elems`, all ExprConst (parser_simple.cc).
  Expr* constantList(PosIdx pos, std::span<Expr* const> elems);
  ExprConst* str(std::string_view s, PosIdx pos);
  std::string showAttrPath(const AttrPath& path);

  EvalState& state_;
  Lexer lex_;
  std::string basePath_;
  int depth_ = 0;
  /// Sets whose arrays are still malloc'd (see newAttrs).
  std::vector<ExprAttrs*> open_;
  /// Scratch for path literals (joined, then canonicalised).
  std::string pathJoined_, pathCanon_;
  /// Lookup indexes of large sets, by set: symbol id to position.
  std::unordered_map<const ExprAttrs*, SetIndex> index_;
  /// The string constants that are list elements in this file, by text:
  /// one node serves every element with the same text (shareListLiteral).
  std::unordered_map<std::string_view, ExprConst*> listLiterals_;
  /// `e`, a list element just parsed, or an equal string constant made
  /// for an earlier element of this file, whose node is reused (the new
  /// one given back to the arena when it was its last allocation). A
  /// list element's own position is never shown (a constant cannot fail),
  /// so sharing it loses nothing; elsewhere a constant's position appears
  /// in errors (`if "x" then …`), so only list elements are shared.
  Expr* shareListLiteral(Expr* e);
};

}  // namespace kiln::eval
