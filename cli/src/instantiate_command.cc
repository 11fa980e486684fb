// `kiln instantiate`: a drop-in for nix-instantiate (parse, evaluate, print
// values or derivation paths).
#include <boost/program_options.hpp>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>

#include "command.h"
#include "eval_cli.h"
#include "kiln/common/file.h"
#include "kiln/evaluator/dir_store_writer.h"
#include "kiln/evaluator/eval_state.h"
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
  std::string storeRoot;  // --store-root: where .drv files are written
  bool fromExpr = false, eval = false, strict = false, json = false, xml = false;
  bool noLocation = false, parseOnly = false, readStdin = false, showTrace = false;
  uint32_t maxCallDepth = 10000;
};

// "-" means: read the expression from stdin.
std::vector<std::string> takeStdinMarker(const std::vector<std::string>& in, Options& o) {
  std::vector<std::string> rest;
  for (auto& a : in) {
    if (a == "-") o.readStdin = true;
    else rest.push_back(a);
  }
  return rest;
}

void printResult(EvalState& st, const Options& o, Value& v) {
  if (o.strict) st.forceValueDeep(v);
  else st.forceValue(v, kNoPos);
  Context ctx;
  if (o.json) {
    printValueAsJSON(st, o.strict, v, kNoPos, std::cout, ctx, true);
    std::cout << "\n";
  } else if (o.xml) {
    printValueAsXML(st, o.strict, !o.noLocation, v, std::cout, ctx);
  } else {
    printValue(st, std::cout, v);
    std::cout << "\n";
  }
}

void processExpr(EvalState& st, const Options& o, Bindings* autoArgs, Expr* e) {
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
      for (auto& drv : collectDerivations(st, v, autoArgs)) std::cout << drv << "\n";
    }
  }
}

int run(const Options& o) {
  EvalSettings settings;
  settings.maxCallDepth = o.maxCallDepth;
  for (auto& i : o.includes) settings.searchPath.push_back(i);
  applyNixEnvironment(settings);
  int rc = kExitOk;
  runWithLargeStack([&] {
    try {
      EvalState st(settings);
      std::optional<DirStoreWriter> writer;
      if (!o.storeRoot.empty()) st.storeWriter = &writer.emplace(o.storeRoot);
      std::string cwd = absPath(".");
      Bindings* autoArgs = makeAutoArgs(st, o.autoArgs);
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
          processExpr(st, o, autoArgs, st.parseExprFromFile(absPath(path)));
        }
      }
    } catch (const EvalError& e) {
      std::cout.flush();
      std::cerr << "error: " << e.what() << "\n";
      rc = kExitFailure;
    } catch (const Error& e) {
      std::cout.flush();
      std::cerr << "error: " << e.what() << "\n";
      rc = kExitFailure;
    }
  });
  return rc;
}

int instantiate(const std::vector<std::string>& argv) {
  Options o;
  po::options_description opts(
      "Usage: kiln instantiate [options] [FILE... | -E EXPR...]\n\n"
      "Evaluates Nix expressions like nix-instantiate: prints .drv paths, or\n"
      "with --eval the value.\n\nOptions");
  opts.add_options()("help,h", "show this help")(
      "expr,E", po::bool_switch(&o.fromExpr), "arguments are expressions, not files")(
      "attr,A", po::value(&o.attrPaths), "select an attribute path (repeatable)")(
      "include,I", po::value(&o.includes), "add a search path entry (prefix=path or path)")(
      "eval", po::bool_switch(&o.eval), "print the value instead of derivation paths")(
      "strict", po::bool_switch(&o.strict), "evaluate the value deeply")(
      "json", po::bool_switch(&o.json), "print the value as JSON")(
      "xml", po::bool_switch(&o.xml), "print the value as XML")(
      "no-location", po::bool_switch(&o.noLocation), "omit source positions in XML")(
      "parse", po::bool_switch(&o.parseOnly), "only parse and print the expression")(
      "readonly-mode", "do not write to the store")(
      "read-write-mode", "accepted; .drv files are written only with --store-root")(
      "store-root", po::value(&o.storeRoot),
      "write .drv files under DIR (DIR/nix/store/..., like nix's local?root=DIR)")(
      "show-trace", po::bool_switch(&o.showTrace), "show error traces (always on)")(
      "add-root", po::value<std::string>(), "register a GC root (accepted, not used)")(
      "indirect", "with --add-root (accepted)")(
      "max-call-depth", po::value(&o.maxCallDepth), "maximum nesting of function calls (default 10000)")(
      "arg", "NAME EXPR: argument for the top-level function")(
      "argstr", "NAME STRING: string argument for the top-level function");
  po::options_description hidden;
  hidden.add_options()("files", po::value(&o.files));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("files", -1);
  try {
    std::vector<std::string> rest = takeStdinMarker(takeAutoArgs(argv, o.autoArgs), o);
    po::variables_map vm;
    po::store(po::command_line_parser(rest).options(all).positional(pos).run(), vm);
    if (vm.count("help")) {
      std::cout << opts;
      return kExitOk;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "kiln instantiate: " << e.what() << "\n" << opts;
    return kExitUsage;
  }
  return run(o);
}

RegisterCommand reg("instantiate", "evaluate Nix expressions (drop-in for nix-instantiate)", instantiate);

}  // namespace
}  // namespace kiln::cli
