// Parsing a large file on two threads: the split's guess, its second
// thread, and the main parser's side (see parse_split.h).
#include "parse_split.h"

#include <cstdio>
#include <cstdlib>

namespace kiln::eval {

namespace {

bool isBlank(char c) { return c == ' ' || c == '\t'; }

// The end of the attribute name at `p` (an identifier that is no keyword,
// or a "string" without escapes or interpolation), or 0.
size_t nameEnd(std::string_view text, size_t p) {
  size_t n = text.size();
  if (p >= n) return 0;
  if (text[p] == '"') {
    for (size_t q = p + 1; q < n; ++q) {
      char c = text[q];
      if (c == '"') return q + 1;
      if (c == '\\' || c == '$' || c == '\n') return 0;
    }
    return 0;
  }
  if (!isIdStart(text[p])) return 0;
  size_t q = p + 1;
  while (q < n && isIdChar(text[q])) ++q;
  return isKeyword(text.substr(p, q - p)) ? 0 : q;
}

// The end of `name(.name)*` at `p`, or 0.
size_t pathEnd(std::string_view text, size_t p) {
  size_t e = nameEnd(text, p);
  while (e && e < text.size() && text[e] == '.') e = nameEnd(text, e + 1);
  return e;
}

}  // namespace

size_t guessSplitOffset(std::string_view text) {
  const size_t n = text.size();
  const size_t limit = n / 4 * 3;
  for (size_t p = text.find('\n', n / 2); p != std::string_view::npos && p < limit;
       p = text.find('\n', p + 1)) {
    size_t name = p + 1;
    while (name < n && isBlank(text[name])) ++name;
    size_t e = pathEnd(text, name);
    if (!e) continue;
    while (e < n && isBlank(text[e])) ++e;
    if (e + 1 < n && text[e] == '=' && text[e + 1] != '=') return name;
  }
  return kNoSplit;
}

ParseSplit::ParseSplit(EvalState& state, const std::string& text, uint32_t origin,
                       const std::string& basePath, size_t offset)
    : state_(state),
      text_(text),
      offset_(offset),
      helper_(std::make_unique<Parser>(state, text, origin, basePath)),
      origin_(origin) {
  if (!state.arena.shared()) {  // not yet threaded evaluation: one parser alone so far
    state.arena.setShared(true);
    state.symbols.setShared(true);
    madeShared_ = true;
  }
  // The parser recurses up to kMaxNesting levels, as on the evaluation's
  // large stack; untouched stack costs only address space.
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t{256} << 20);
  running_ = pthread_create(&thread_, &attr, &ParseSplit::run, this) == 0;
  pthread_attr_destroy(&attr);
}

ParseSplit::~ParseSplit() {
  cancel_.store(true, std::memory_order_relaxed);
  join();
  for (ExprAttrs* a : result_.open) {  // not taken
    a->attrs.release();
    a->dynamicAttrs.release();
  }
  helper_.reset();
  static const bool report = std::getenv("KILN_EVAL_CPU_TIMES") != nullptr;
  if (report)
    std::fprintf(stderr, "kiln parse split: %s at byte %zu of %zu: %s\n",
                 std::string(state_.positions.origin(origin_).path).c_str(), offset_,
                 text_.size(), taken_ ? "used" : result_.ok ? "not reached" : "failed");
  if (madeShared_) {
    state_.arena.setShared(false);
    state_.symbols.setShared(false);
  }
}

void* ParseSplit::run(void* self) {
  auto* s = static_cast<ParseSplit*>(self);
  try {
    s->helper_->parseSplitPart(s->offset_, s->result_, s->cancel_);
  } catch (...) {  // a wrong guess, a syntax error, cancelled: serial from here
    s->result_.ok = false;
  }
  return nullptr;
}

void ParseSplit::join() {
  if (running_) pthread_join(thread_, nullptr);
  running_ = false;
}

SplitResult& ParseSplit::wait() {
  join();
  return result_;
}

void Parser::splitAt(size_t offset) {
  if (offset == 0 || offset >= lex_.text().size()) return;
  split_ = std::make_unique<ParseSplit>(state_, lex_.text(), origin_, basePath_, offset);
}

void Parser::parseSplitPart(size_t offset, SplitResult& out, const std::atomic<bool>& cancel) {
  cancel_ = &cancel;
  lex_.setQuiet();
  lex_.restartAt(offset);
  parseBindList(nullptr, Tok::kEof);
  const Token& t = lex_.peek();
  out.terminator = t.t;
  out.end = t.start;
  out.maxDepth = maxDepth_;
  out.binds = std::move(pending_);
  out.open = std::move(open_);
  open_.clear();
  out.ok = true;
}

void Parser::recordBind(const AttrPath& path, Expr* e, PosIdx p, bool inherit, bool inherited) {
  PendingBind& b = pending_.emplace_back();
  b.path.assign(path.begin(), path.end());
  b.e = e;
  b.pos = p;
  b.inherit = inherit;
  b.inherited = inherited;
}

bool Parser::takeSplit(ExprAttrs* attrs, Tok terminator, size_t at) {
  std::unique_ptr<ParseSplit> split = std::move(split_);  // one chance
  if (at != split->offset()) return false;  // passed it elsewhere: not a binding start
  SplitResult& r = split->wait();
  // Its bindings are what this parser would parse from here, unless it
  // ended where this list does not, or would nest deeper than allowed.
  if (!r.ok || r.terminator != terminator || depth_ + r.maxDepth > kMaxNesting) return false;
  open_.insert(open_.end(), r.open.begin(), r.open.end());
  r.open.clear();
  for (PendingBind& b : r.binds) {  // in source order, as serially
    if (b.inherit)
      addInherit(attrs, b.path[0], b.pos, b.e, b.inherited);
    else
      addAttr(attrs, b.path, b.e, b.pos);
  }
  lex_.restartAt(r.end);
  split->markTaken();
  splitTaken_ = true;
  return true;
}

}  // namespace kiln::eval
