#pragma once
// Recursive-descent parser for the Nix language (Nix 2.8 grammar, operator
// precedence and associativity). Produces arena-allocated Expr trees; the
// caller binds variables afterwards.

#include <atomic>
#include <memory>
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

/// The deepest expression nesting the parser accepts.
constexpr int kMaxNesting = 3000;

class ParseSplit;
struct SplitResult;

/// A binding a split's helper parsed, added by the main parser in source
/// order (parse_split.h).
struct PendingBind {
  AttrPath path;  ///< one name for an inherited one
  Expr* e = nullptr;
  PosIdx pos = kNoPos;
  bool inherit = false;    ///< from `inherit`
  bool inherited = false;  ///< `inherit x;` (no source): AttrDef::inherited
};

class Parser {
 public:
  Parser(EvalState& state, const std::string& text, uint32_t origin, std::string basePath);
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;
  /// Frees the malloc'd attribute arrays of a parse that threw.
  ~Parser();
  /// Parses a whole file/expression; throws ParseError. With
  /// EvalSettings::parseThreads >= 2, a file of kParseSplitBytes or more
  /// is split in two at a guessed binding start (parse_split.cc).
  Expr* parseAll();
  /// Starts parsing bindings from `offset` on a second thread, to be
  /// used if this parse reaches it at a binding start (parseAll guesses
  /// an offset itself; tests choose one).
  void splitAt(size_t offset);
  /// Whether a split's bindings were used (tests).
  bool splitTaken() const { return splitTaken_; }

 private:
  friend class ParseSplit;  // runs the second thread's part
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
  /// The bindings up to `terminator` into `attrs`; for a split's helper
  /// (attrs null) up to a '}' or `in`, recorded in pending_.
  void parseBindList(ExprAttrs* attrs, Tok terminator);
  /// At a binding-list start at or past the split's offset: adds the
  /// helper's bindings if it parsed from exactly here (returns true).
  bool takeSplit(ExprAttrs* attrs, Tok terminator, size_t at);
  /// Adds an inherited name, or records it (the helper).
  void addInherit(ExprAttrs* attrs, const AttrName& n, PosIdx p, Expr* e, bool inherited);
  /// The helper: records a binding parsed, for the main parser to add.
  void recordBind(const AttrPath& path, Expr* e, PosIdx p, bool inherit, bool inherited);
  /// The helper's run: the bindings from `offset` (parse_split.cc).
  void parseSplitPart(size_t offset, SplitResult& out, const std::atomic<bool>& cancel);
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
  uint32_t origin_;
  std::string basePath_;
  int depth_ = 0;
  /// The deepest nesting reached (a split's helper starts at 0).
  int maxDepth_ = 0;
  /// A split's helper: its recorded bindings and its cancel flag.
  std::vector<PendingBind> pending_;
  const std::atomic<bool>* cancel_ = nullptr;
  bool splitTaken_ = false;
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
  /// The variable parseSimple made last (an identifier), until a select
  /// of it is fused (selectOfVar).
  ExprVar* lastVar_ = nullptr;
  /// `e` selected by `path` (with `def` after `or`) as one ExprSelectVar
  /// when `e` is the variable just parsed, starting at `pos` as the
  /// select does, and the path one static name without a default (the
  /// variable's node given back to the arena when it was its last
  /// allocation); nullptr otherwise.
  Expr* selectOfVar(Expr* e, PosIdx pos, const AttrPath& path, Expr* def);
  /// The second thread's parse, until taken or given up (declared last,
  /// so destroyed first: its thread is joined before the rest goes).
  std::unique_ptr<ParseSplit> split_;
};

}  // namespace kiln::eval
