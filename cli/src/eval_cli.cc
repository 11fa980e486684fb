// Shared command-line plumbing for the evaluating commands.
#include "eval_cli.h"

#include <malloc.h>

#include <boost/program_options/errors.hpp>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <ostream>

#include "kiln/common/file.h"
#include "kiln/evaluator/dir_store_writer.h"
#include "kiln/evaluator/local_store_writer.h"

namespace kiln::cli {

std::vector<std::string> takeAutoArgs(const std::vector<std::string>& in, AutoArgSpec& spec) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != "--arg" && in[i] != "--argstr") {
      rest.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size())
      throw boost::program_options::error(in[i] + " needs a name and a value");
    (in[i] == "--arg" ? spec.args : spec.argstrs).push_back({in[i + 1], in[i + 2]});
    i += 2;
  }
  return rest;
}

void applyNixEnvironment(eval::EvalSettings& settings) {
  if (const char* sd = std::getenv("NIX_STORE_DIR")) settings.storeDir = sd;
  const char* np = std::getenv("NIX_PATH");
  if (!np) return;
  std::string all = np;
  for (size_t start = 0; start <= all.size();) {
    size_t colon = all.find(':', start);
    if (colon == std::string::npos) colon = all.size();
    if (colon > start) settings.searchPath.push_back(all.substr(start, colon - start));
    start = colon + 1;
  }
}

eval::Bindings* makeAutoArgs(eval::EvalState& st, const AutoArgSpec& spec) {
  std::string cwd = absPath(".");
  eval::Bindings* autoArgs = st.allocBindings(spec.args.size() + spec.argstrs.size());
  for (auto& [name, expr] : spec.args) {
    eval::Value* v = st.allocValue();
    st.mkThunk(*v, st.parseExprFromString(expr, cwd));
    autoArgs->push(st.sym(name), v);
  }
  for (auto& [name, value] : spec.argstrs) {
    eval::Value* v = st.allocValue();
    st.mkString(*v, value);
    autoArgs->push(st.sym(name), v);
  }
  autoArgs->sort();
  return autoArgs;
}

namespace {

// malloc's defaults suit processes that give memory back; an evaluation
// that exits at the end does not, and they cost it page faults and
// kernel locks (docs/evaluator.md, "Parallel evaluation"): each thread's
// malloc heap grew by one mprotect per refill (24,000 a run at gen-pkgset
// 50,000, each taking the address space's lock for writing, which every
// page fault of the other threads waits for), free memory at the top was
// given back and faulted in again, and blocks above the dynamic mmap
// threshold were mapped and unmapped each time. Grow heaps 64 MiB at a
// time, keep what was freed, and serve blocks up to 32 MiB from the heaps.
// KILN_MALLOC_DEFAULTS=1 keeps glibc's defaults (to measure this).
void tuneMallocForEvaluation() {
  if (std::getenv("KILN_MALLOC_DEFAULTS")) return;
  mallopt(M_TOP_PAD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
}

}  // namespace

eval::EvalState& makeProcessEvalState(const eval::EvalSettings& settings) {
  tuneMallocForEvaluation();
  static eval::EvalState* kept = nullptr;
  kept = new eval::EvalState(settings);
  kept->arena.leaveToExit();
  return *kept;
}

void printEvalError(std::ostream& out, const std::string& what, bool showTrace) {
  // EvalError::addTrace separates trace lines with this.
  static const std::string kTrace = "\n\n       … ";
  size_t cut = what.find(kTrace);
  // A message without a position of its own (e.g. infinite recursion
  // through imports) keeps trace lines up to the first with a position.
  // Restricted-mode refusals have no position in Nix either: message alone.
  size_t first = cut;
  bool refusal = what.substr(0, cut).find("forbidden in restricted mode") != std::string::npos ||
                 what.substr(0, cut).find("forbidden in pure eval mode") != std::string::npos;
  while (!refusal && cut != std::string::npos &&
         what.substr(0, cut).find("\n       at ") == std::string::npos)
    cut = what.find(kTrace, cut + kTrace.size());
  if (what.substr(0, cut).find("\n       at ") == std::string::npos)
    cut = first;  // no position anywhere: the message alone, as Nix prints it
  out << "error: ";
  if (showTrace || cut == std::string::npos) {
    out << what << "\n";
    return;
  }
  out << what.substr(0, cut) << "\n(use '--show-trace' to show detailed location information)\n";
}

// Opens the LocalStore on the first object written, then forwards.
class EvalStoreTarget::LazyWriter : public eval::StoreWriter {
 public:
  explicit LazyWriter(EvalStoreTarget& target) : target_(target) {}
  void addText(const std::string& path, const std::string& contents,
               const std::set<std::string>& refs) override {
    get().addText(path, contents, refs);
  }
  void addDerivation(const std::string& path, const std::string& contents,
                     const std::set<std::string>& refs,
                     const std::map<std::string, std::string>& outputs) override {
    get().addDerivation(path, contents, refs, outputs);
  }
  void addSource(const std::string& path, const std::string& fsPath,
                 const eval::PathFilter& filter, bool recursive) override {
    get().addSource(path, fsPath, filter, recursive);
  }
  void useDerivationHashes(const store::DrvHashCache* hashes) override {
    get().useDerivationHashes(hashes);
  }
  void flush() override {
    if (writer_) writer_->flush();
  }
  size_t queued() const { return writer_ ? writer_->queued() : 0; }

 private:
  eval::LocalStoreWriter& get() {
    if (!writer_)
      writer_.emplace(*target_.localStore(), eval::LocalStoreWriter::kDefaultBatchSize,
                      [this] { target_.releaseHeld(); });
    return *writer_;
  }
  EvalStoreTarget& target_;
  std::optional<eval::LocalStoreWriter> writer_;
};

EvalStoreTarget::EvalStoreTarget() = default;
EvalStoreTarget::~EvalStoreTarget() = default;

void EvalStoreTarget::addOptions(boost::program_options::options_description& opts) {
  namespace po = boost::program_options;
  location_.addOptions(opts);
  opts.add_options()("store-root", po::value(&storeRoot_),
                     "write into a plain directory DIR instead of kiln's store\n"
                     "(DIR/nix/store/..., like nix's local?root=DIR; no database)")(
      "readonly-mode", po::bool_switch(&readOnly_),
      "write nothing; store paths are still computed exactly")(
      "read-write-mode", "write to the store (the default)");
}

void EvalStoreTarget::apply(const boost::program_options::variables_map& vm,
                            eval::EvalSettings& settings) {
  const char* env = std::getenv("NIX_STORE_DIR");
  if (env && *env && (!vm.count("store-dir") || vm["store-dir"].defaulted()))
    location_.storeDir = env;
  settings.storeDir = location_.storeDir;
  settings.readOnly = readOnly_;
}

eval::StoreWriter* EvalStoreTarget::writer() {
  if (readOnly_) return nullptr;
  if (!writer_) {
    if (!storeRoot_.empty()) {
      writer_ = std::make_unique<eval::DirStoreWriter>(storeRoot_);
    } else {
      auto lazy = std::make_unique<LazyWriter>(*this);
      lazy_ = lazy.get();
      writer_ = std::move(lazy);
    }
  }
  return writer_.get();
}

void EvalStoreTarget::print(const std::string& text) {
  held_ += text;
  if (!lazy_ || lazy_->queued() == 0) releaseHeld();
}

void EvalStoreTarget::flush() {
  if (writer_) writer_->flush();
  releaseHeld();
}

void EvalStoreTarget::detachAfterFork() {
  (void)writer_.release();  // leaked on purpose: the parent's to close
  (void)store_.release();
  lazy_ = nullptr;
  held_.clear();
}

void EvalStoreTarget::close() {
  flush();
  writer_.reset();
  lazy_ = nullptr;
  store_.reset();
}

void EvalStoreTarget::releaseHeld() {
  if (held_.empty()) return;
  std::string text = transform_ ? transform_(held_) : std::move(held_);
  held_.clear();
  if (sink_)
    sink_(text);
  else
    std::cout << text;
}

store::LocalStore* EvalStoreTarget::localStore() {
  if (readOnly_ || !storeRoot_.empty()) return nullptr;
  if (!store_) store_ = location_.open();
  return store_.get();
}

}  // namespace kiln::cli
