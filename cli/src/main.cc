#include <algorithm>
#include <exception>
#include <iostream>
#include <sstream>

#include "command.h"
#include "kiln/common/error.h"
#include "version_info.h"

namespace kiln::cli {

std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}

RegisterCommand::RegisterCommand(std::string name, std::string summary,
                                 CommandFn fn) {
  commands().push_back({std::move(name), std::move(summary), std::move(fn)});
}

namespace {

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

void printUsage(std::ostream& os, const std::string& prefix) {
  os << "Usage: kiln " << (prefix.empty() ? "COMMAND" : prefix + " COMMAND")
     << " [OPTIONS]\n\n"
        "kiln: a build farm for Nix package collections.\n\nCommands:\n";
  auto sorted = commands();
  std::sort(sorted.begin(), sorted.end(),
            [](auto& a, auto& b) { return a.name < b.name; });
  for (auto& c : sorted) {
    if (!prefix.empty() && c.name.rfind(prefix + " ", 0) != 0) continue;
    os << "  " << c.name << std::string(c.name.size() < 30 ? 30 - c.name.size() : 1, ' ')
       << c.summary << "\n";
  }
  os << "\nRun 'kiln COMMAND --help' for the options of one command.\n";
}

}  // namespace
}  // namespace kiln::cli

int main(int argc, char** argv) {
  using namespace kiln::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  // Installed or symlinked as nix-instantiate: the drop-in, every
  // argument its own (docs/evaluator.md).
  std::string self = argv[0];
  if (self.substr(self.rfind('/') + 1) == "nix-instantiate") args.insert(args.begin(), "instantiate");
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    printUsage(args.empty() ? std::cerr : std::cout, "");
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "--version") {
    std::cout << versionText();
    return kExitOk;
  }
  const Command* best = nullptr;
  size_t bestLen = 0;
  for (auto& c : commands()) {
    auto w = words(c.name);
    if (w.size() > args.size() || w.size() <= bestLen) continue;
    if (std::equal(w.begin(), w.end(), args.begin())) {
      best = &c;
      bestLen = w.size();
    }
  }
  if (!best) {
    // "kiln store" alone lists the store subcommands.
    bool isGroup = std::any_of(commands().begin(), commands().end(), [&](auto& c) {
      return c.name.rfind(args[0] + " ", 0) == 0;
    });
    if (isGroup) {
      bool help = args.size() > 1 && (args[1] == "--help" || args[1] == "-h");
      printUsage(help ? std::cout : std::cerr, args[0]);
      if (!help && args.size() > 1)
        std::cerr << "\nkiln: unknown command '" << args[0] << " " << args[1] << "'\n";
      return help ? kExitOk : kExitUsage;
    }
    std::cerr << "kiln: unknown command '" << args[0]
              << "'; run 'kiln --help' for the list\n";
    return kExitUsage;
  }
  try {
    return best->run({args.begin() + static_cast<long>(bestLen), args.end()});
  } catch (const kiln::FormatError& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
    return kExitFailure;
  }
}
