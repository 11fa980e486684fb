// Shared command-line plumbing for the evaluating commands.
#include "eval_cli.h"

#include <boost/program_options/errors.hpp>
#include <cstdlib>

#include "kiln/common/file.h"

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
    v->mkThunk(st.baseEnv, st.parseExprFromString(expr, cwd));
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

}  // namespace kiln::cli
