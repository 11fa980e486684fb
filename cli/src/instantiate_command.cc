// `kiln instantiate`: a drop-in for nix-instantiate (parse, evaluate, print
// values or derivation paths).
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>

#include "command.h"
#include "eval_cli.h"
#include "nix_flags.h"
#include "kiln/common/file.h"
#include "kiln/evaluator/eval_state.h"
#include "kiln/evaluator/eval_stats.h"
#include "kiln/evaluator/output.h"
#include "kiln/evaluator/attr_path.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;
using namespace kiln::eval;

struct Options {
  std::vector<std::string> files;
  std::vector<std::string> attrPaths;
  std::vector<std::string> includes;
  AutoArgSpec autoArgs;  // --arg / --argstr
  EvalStoreTarget target;  // --state-dir/--store-dir, --store-root, --readonly-mode
  std::string addRoot;     // --add-root: symlink (and GC root) per printed .drv
  int roots = 0;           // roots made so far (the 2nd is PATH-2, ...)
  bool warned = false;     // the missing --add-root warning was printed
  bool fromExpr = false, eval = false, strict = false, json = false, xml = false;
  bool noLocation = false, parseOnly = false, readStdin = false, showTrace = false;
  uint32_t maxCallDepth = 10000;
  NixFlags nix;  // Nix's common flags and settings (--option, -j, ...)
};

// Options whose value is the next argument (for nix-instantiate's
// "'-A' requires an argument").
bool takesValue(const std::string& a) {
  for (const char* o : {"-A", "--attr", "-I", "--include", "--add-root", "--max-call-depth",
                        "--state-dir", "--store-dir", "--store-root"})
    if (a == o) return true;
  return false;
}

// Takes what Boost cannot express the way nix-instantiate parses it: "-"
// (read the expression from stdin) and -E/--expr, a switch that may be
// repeated. Throws po::error if an option lacks its value.
std::vector<std::string> takeNixStyleArgs(const std::vector<std::string>& in, Options& o) {
  std::vector<std::string> rest;
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string& a = in[i];
    if (takesValue(a) && i + 1 == in.size())
      throw boost::program_options::error("'" + a + "' requires an argument");
    if (takesValue(a)) {
      rest.push_back(a);
      rest.push_back(in[++i]);
    } else if (a == "-") {
      o.readStdin = true;
    } else if (a == "-E" || a == "--expr") {
      o.fromExpr = true;
    } else {
      rest.push_back(a);
    }
  }
  return rest;
}

void printResult(EvalState& st, Options& o, Value& v) {
  if (o.strict) st.forceValueDeep(v);
  else st.forceValue(v, kNoPos);
  o.target.flush();  // the value may name objects it wrote
  Context ctx;
  if (o.json) {
    std::string json;
    printValueAsJSON(st, o.strict, v, kNoPos, json, ctx, true);
    std::cout << json;  // no newline, as Nix
  } else if (o.xml) {
    printValueAsXML(st, o.strict, !o.noLocation, v, std::cout, ctx);
  } else {
    printValue(st, std::cout, v);
    std::cout << "\n";
  }
}

// Makes the next --add-root link for `drvPath`; returns what to print.
std::string addRoot(Options& o, const std::string& drvPath) {
  std::string link = absPath(o.addRoot);
  if (++o.roots > 1) link += "-" + std::to_string(o.roots);
  if (store::LocalStore* store = o.target.localStore()) {
    o.target.flush();  // the .drv must be valid to become a root
    store->addIndirectRoot(store->parsePath(drvPath), link);
    return link;
  }
  // Read-only or a plain --store-root directory: no GC to protect it
  // from, only the symlink (as nix-instantiate --readonly-mode does).
  struct stat sb;
  if (lstat(link.c_str(), &sb) == 0) {
    if (!S_ISLNK(sb.st_mode))
      throw Error("cannot create the GC root '" + link + "': it exists and is not a symlink");
    unlink(link.c_str());
  }
  if (symlink(drvPath.c_str(), link.c_str()) != 0)
    throw SysError("creating symlink '" + link + "'", errno);
  return link;
}

void printDrv(EvalState& st, Options& o, std::string_view drvPath, std::string_view output) {
  // "<drvPath>" or "<drvPath>!<output>".
  std::string suffix = output.empty() ? "" : "!" + std::string(output);
  if (!o.addRoot.empty()) {
    std::string link = addRoot(o, std::string(drvPath));
    o.target.print(link + suffix + "\n");
    return;
  }
  if (!o.warned && !o.nix.noGcWarning) {  // nix-instantiate warns in read-only mode too
    o.warned = true;
    std::cerr << "warning: you did not specify '--add-root'; the result might be removed by "
                 "the garbage collector\n";
  }
  o.target.print(std::string(drvPath) + suffix + "\n");
}

void processExpr(EvalState& st, Options& o, Bindings* autoArgs, Expr* e) {
  if (o.parseOnly) {
    e->show(st.symbols, std::cout);
    std::cout << "\n";
    return;
  }
  Value vRoot;
  st.eval(e, vRoot);
  std::vector<std::string> paths = o.attrPaths.empty() ? std::vector<std::string>{""} : o.attrPaths;
  for (auto& path : paths) {
    Value& v = *findAlongAttrPath(st, path, autoArgs, vRoot);
    st.forceValue(v, kNoPos);
    if (o.eval) {
      Value vRes;
      if (autoArgs->size == 0) vRes = v;
      else st.autoCallFunction(autoArgs, v, vRes);
      printResult(st, o, vRes);
    } else {
      forEachDerivation(st, v, autoArgs, [&](std::string_view drvPath, std::string_view output) {
        printDrv(st, o, drvPath, output);
      });
    }
  }
}

// Evaluates the files, expressions or stdin.
void processInputs(EvalState& st, Options& o, Bindings* autoArgs) {
  std::string cwd = absPath(".");
  if (o.readStdin) {
    std::stringstream buf;
    buf << std::cin.rdbuf();
    processExpr(st, o, autoArgs, st.parseExprFromString(buf.str(), cwd, "«stdin»"));
  } else if (o.fromExpr) {
    for (auto& text : o.files) processExpr(st, o, autoArgs, st.parseExprFromString(text, cwd));
  } else {
    std::vector<std::string> files = o.files.empty() ? std::vector<std::string>{"./default.nix"} : o.files;
    for (auto& f : files) {
      std::string path = f;
      if (path.size() > 2 && path.front() == '<' && path.back() == '>')
        path = st.findFile(path.substr(1, path.size() - 2), kNoPos);
      processExpr(st, o, autoArgs, st.parseExprFromFile(st.checkSourcePath(absPath(path))));
    }
  }
}

int run(Options& o, const EvalSettings& settings) {
  int rc = kExitOk;
  runWithLargeStack([&] {
    try {
      EvalState& st = makeProcessEvalState(settings);  // left to exit
      st.setStoreWriter(o.target.writer());
      if (o.nix.findFile) {  // --find-file: search path look-ups only
        for (auto& f : o.files) std::cout << st.findFile(f, kNoPos) << "\n";
        return;
      }
      processInputs(st, o, makeAutoArgs(st, o.autoArgs));
      o.target.flush();
      maybePrintEvalStats(st);  // KILN_EVAL_STATS
    } catch (const Error& e) {
      try {
        o.target.flush();  // what was made before the error, as Nix keeps it
      } catch (const Error&) {
      }
      std::cout.flush();
      printEvalError(std::cerr, e.what(), o.showTrace);
      rc = kExitFailure;
    }
  });
  return rc;
}

constexpr const char* kNixFlagsHelp = R"(
Nix's common flags (nix-instantiate 2.8 accepts them all):
  --option NAME VALUE   set a Nix setting; kiln honours restrict-eval,
                        allowed-uris, show-trace, system, nix-path, store,
                        pure-eval; other settings are accepted
                        with no effect (unknown ones are warned about)
  --NAME VALUE, --NAME, --no-NAME, --extra-NAME VALUE
                        the same for every setting (e.g. --restrict-eval,
                        --allowed-uris URIS, --system SYSTEM)
  --store URL           local?root=DIR or DIR: as --store-root DIR;
                        auto, local, daemon: kiln's store
  --dry-run             as --readonly-mode
  --eval-only, --parse-only   as --eval, --parse
  --find-file           print where each argument is found in the search path
  --no-gc-warning       no warning about a missing --add-root
  --version             print the Nix version kiln implements
  -v/--verbose, --quiet, --debug   log level; kiln prints only what Nix
                        prints at -vv: "instantiated 'NAME' -> 'DRV'"
  No effect in kiln (accepted):
  --log-format F, -j/--max-jobs N, --cores N, --timeout N,
  --max-silent-time N, -Q/--no-build-output, -K/--keep-failed,
  -k/--keep-going, --fallback, --repair, --impure, --eval-store URL,
  --override-flake A B, --relaxed-sandbox (values are checked as Nix does)
)";

// Parses argv as nix-instantiate does into `o` and `vm`. Returns an exit
// code to stop with, or -1 to go on.
int parseArgs(const std::vector<std::string>& argv, Options& o, po::variables_map& vm) {
  po::options_description opts(
      "Usage: kiln instantiate [options] [FILE... | -E EXPR...]\n\n"
      "Evaluates Nix expressions like nix-instantiate: prints .drv paths, or\n"
      "with --eval the value. .drv files and sources are written into kiln's\n"
      "store (--state-dir) unless --readonly-mode.\n\nOptions");
  opts.add_options()("help,h", "show this help")(
      "expr,E", "arguments are expressions, not files")(
      "attr,A", po::value(&o.attrPaths), "select an attribute path (repeatable)")(
      "include,I", po::value(&o.includes), "add a search path entry (prefix=path or path)")(
      "eval", po::bool_switch(&o.eval), "print the value instead of derivation paths")(
      "strict", po::bool_switch(&o.strict), "evaluate the value deeply")(
      "json", po::bool_switch(&o.json), "print the value as JSON")(
      "xml", po::bool_switch(&o.xml), "print the value as XML")(
      "no-location", po::bool_switch(&o.noLocation), "omit source positions in XML")(
      "parse", po::bool_switch(&o.parseOnly), "only parse and print the expression")(
      "show-trace", po::bool_switch(&o.showTrace),
      "print the whole trace of an error (\"... while ...\" lines)")(
      "add-root", po::value(&o.addRoot),
      "make PATH a symlink to the .drv and a GC root of kiln's store\n"
      "(PATH-2, PATH-3 ... for further derivations)")(
      "indirect", "with --add-root (accepted; roots are always indirect)")(
      "max-call-depth", po::value(&o.maxCallDepth), "maximum nesting of function calls (default 10000)")(
      "arg", "NAME EXPR: argument for the top-level function")(
      "argstr", "NAME STRING: string argument for the top-level function");
  o.target.addOptions(opts);
  po::options_description hidden;
  hidden.add_options()("files", po::value(&o.files));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("files", -1);
  try {
    std::vector<std::string> rest = takeNixStyleArgs(
        takeNixFlags(expandShortFlags(takeAutoArgs(argv, o.autoArgs)), o.nix, takesValue, std::cerr),
        o);
    po::store(po::command_line_parser(rest).options(all).positional(pos).run(), vm);
    if (vm.count("help")) {
      std::cout << opts << kNixFlagsHelp;
      return kExitOk;
    }
    if (o.nix.version) {
      std::cout << "nix-instantiate (kiln) 2.8.0\n";
      return kExitOk;
    }
    po::notify(vm);
  } catch (const po::unknown_option& e) {
    // As nix-instantiate: exit code 1 and its wording.
    std::cerr << "error: unrecognised flag '" << e.get_option_name()
              << "'\nTry 'kiln instantiate --help' for more information.\n";
    return kExitFailure;
  } catch (const po::error& e) {
    std::cerr << "error: " << e.what() << "\nTry 'kiln instantiate --help' for more information.\n";
    return kExitFailure;
  }
  o.eval = o.eval || o.nix.evalOnly || o.nix.parseOnly;
  o.parseOnly = o.parseOnly || o.nix.parseOnly;
  if (o.nix.dryRun) o.target.setReadOnly();
  return -1;
}

int instantiate(const std::vector<std::string>& argv) {
  Options o;
  po::variables_map vm;
  if (int rc = parseArgs(argv, o, vm); rc >= 0) return rc;
  EvalSettings settings;
  try {
    settings.maxCallDepth = o.maxCallDepth;
    for (auto& i : o.includes) settings.searchPath.push_back(i);
    applyNixEnvironment(settings);
    std::string storeRoot = applyNixSettings(o.nix, settings, o.includes.size(), o.showTrace);
    if (!storeRoot.empty()) o.target.setStoreRoot(storeRoot);
    settings.showTrace = o.showTrace;
    o.target.apply(vm, settings);
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitFailure;
  }
  return run(o, settings);
}

RegisterCommand reg("instantiate", "evaluate Nix expressions (drop-in for nix-instantiate)", instantiate);

}  // namespace
}  // namespace kiln::cli
