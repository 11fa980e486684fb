#include "cli_common.h"

#include <cerrno>
#include <iostream>
#include <sstream>

#include "command.h"
#include "kiln/common/error.h"
#include "kiln/store/local_store.h"

namespace kiln::cli {

namespace po = boost::program_options;

std::optional<int> parseCommandLine(const std::string& name, const po::options_description& opts,
                                    std::vector<std::string>& paths, int maxPaths,
                                    const std::vector<std::string>& args, po::variables_map& vm,
                                    int minPaths) {
  po::options_description hidden;
  hidden.add_options()("path", po::value(&paths));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("path", maxPaths);
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    if (vm.count("help")) {
      std::cout << opts;
      return kExitOk;
    }
    po::notify(vm);
    if (static_cast<int>(paths.size()) < minPaths) throw po::error("missing PATH argument");
  } catch (const po::error& e) {
    std::cerr << "kiln " << name << ": " << e.what() << "\n" << opts;
    return kExitUsage;
  }
  return std::nullopt;
}

int guarded(const std::string& name, const std::function<int()>& body) {
  try {
    return body();
  } catch (const FormatError& e) {
    std::cerr << "kiln " << name << ": " << e.what() << "\n";
    return kExitBadInput;
  } catch (const store::InvalidPathError& e) {
    std::cerr << "kiln " << name << ": " << e.what() << "\n";
    return kExitNotFound;
  } catch (const SysError& e) {
    std::cerr << "kiln " << name << ": " << e.what() << "\n";
    return e.errNo() == ENOENT ? kExitNotFound : kExitFailure;
  } catch (const Error& e) {
    std::cerr << "kiln " << name << ": " << e.what() << "\n";
    return kExitFailure;
  }
}

std::vector<std::string> listWords(const std::vector<std::string>& lists) {
  std::vector<std::string> out;
  for (auto& l : lists) {
    std::istringstream in(l);
    for (std::string w; in >> w;) out.push_back(w);
  }
  return out;
}

}  // namespace kiln::cli
