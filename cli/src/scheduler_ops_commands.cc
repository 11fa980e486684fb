// Operator commands on a scheduler's state directory: `kiln project
// create`, `kiln jobset create|eval`, `kiln build add|cancel|restart|bump`
// (also spelled `kiln build-cancel` ...), `kiln queue`, `kiln cached-failure
// clear`. Each becomes a request (docs/scheduler.md, "Operations"): applied
// by the running scheduler through its requests table, or directly when no
// scheduler holds the state directory.
#include <boost/program_options.hpp>
#include <iostream>

#include "command.h"
#include "database_options.h"
#include "kiln/common/error.h"
#include "kiln/scheduler/service.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;
using nlohmann::json;

enum class ArgType { kString, kInt, kJson, kFlag };

// One option of a request command: its flag, its JSON key and type.
struct OpArg {
  std::string flag;  // "name" or "name,n"
  std::string key;
  ArgType type;
  std::string help;
  bool positional = false;
  bool required = false;
};

struct OpCommand {
  std::string name;
  std::string summary;
  std::string kind;  // request kind
  std::vector<OpArg> args;
  int defaultTimeoutSec = 60;  // evaluations may take long
};

// One line per entry, tab-separated; reproducibility checks (state
// "check-…") follow in a section of their own, under a header line.
void printQueue(const json& entries) {
  auto line = [](const json& e) {
    std::cout << e.value("stepId", 0) << "\t" << e.value("state", "") << "\t"
              << e.value("system", "") << "\t" << e.value("drvPath", "") << "\t"
              << e.value("reason", "") << "\n";
  };
  auto isCheck = [](const json& e) {
    return e.value("state", "").starts_with("check-");
  };
  for (auto& e : entries)
    if (!isCheck(e)) line(e);
  bool header = false;
  for (auto& e : entries) {
    if (!isCheck(e)) continue;
    if (!header)
      std::cout << "# reproducibility checks (step checked, state, system, "
                   "derivation, why it waits)\n";
    header = true;
    line(e);
  }
}

int runOp(const OpCommand& cmd, const std::vector<std::string>& argv) {
  po::options_description opts(
      "Usage: kiln " + cmd.name +
      " --state-dir DIR | --database URL [options]\n\n" + cmd.summary +
      "\n\nOptions");
  std::string stateDir;
  DatabaseOptions database;
  int timeoutSec = cmd.defaultTimeoutSec;
  std::string timeoutHelp =
      "seconds to wait for a running scheduler's answer (default " +
      std::to_string(timeoutSec) + ")";
  opts.add_options()("help,h", "show this help")(
      "state-dir", po::value(&stateDir),
      "the scheduler's state directory (its SQLite database)")(
      "timeout", po::value(&timeoutSec), timeoutHelp.c_str())(
      "json", "print the result as JSON");
  database.add(opts);
  po::positional_options_description pos;
  for (auto& a : cmd.args) {
    if (a.type == ArgType::kFlag)
      opts.add_options()(a.flag.c_str(), a.help.c_str());
    else
      opts.add_options()(a.flag.c_str(), po::value<std::string>(),
                         a.help.c_str());
    if (a.positional) pos.add(a.flag.c_str(), 1);
  }
  po::variables_map vm;
  json args = json::object();
  try {
    po::store(po::command_line_parser(argv).options(opts).positional(pos).run(),
              vm);
    if (vm.count("help")) {
      std::cout << opts;
      return kExitOk;
    }
    po::notify(vm);
    for (auto& a : cmd.args) {
      std::string f = a.flag.substr(0, a.flag.find(','));
      if (!vm.count(f)) {
        if (a.required) throw po::error("missing --" + f);
        continue;
      }
      if (a.type == ArgType::kFlag) {
        args[a.key] = true;
        continue;
      }
      auto v = vm[f].as<std::string>();
      if (a.type == ArgType::kString) args[a.key] = v;
      if (a.type == ArgType::kInt) args[a.key] = std::stoll(v);
      if (a.type == ArgType::kJson) args[a.key] = json::parse(v);
    }
  } catch (const std::exception& e) {
    std::cerr << "kiln " << cmd.name << ": " << e.what() << "\n" << opts;
    return kExitUsage;
  }
  if (stateDir.empty() && database.url.empty()) {
    std::cerr << "kiln " << cmd.name
              << ": give --state-dir DIR or --database URL\n"
              << opts;
    return kExitUsage;
  }
  try {
    json r =
        scheduler::submitRequest(database.spec(stateDir), stateDir, cmd.kind,
                                 args, std::chrono::seconds(timeoutSec));
    if (vm.count("json") || !r.is_array()) {
      std::cout << r.dump() << "\n";
    } else {
      printQueue(r);
    }
    return kExitOk;
  } catch (const scheduler::SchedulerStateError& e) {
    std::cerr << "kiln " << cmd.name << ": " << e.what() << "\n";
    std::string m = e.what();
    for (auto prefix : {"no build", "no project", "no jobset", "no such"})
      if (m.rfind(prefix, 0) == 0) return kExitNotFound;
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "kiln " << cmd.name << ": " << e.what() << "\n";
    return kExitFailure;
  }
}

const OpArg kBuild{"build", "build", ArgType::kInt, "the build id", true, true};
const OpArg kProject{"project",      "project", ArgType::kString,
                     "project name", false,     true};

const std::vector<OpCommand>& opCommands() {
  static const std::vector<OpCommand> cmds = {
      {"project create",
       "create a project",
       "project-create",
       {{"name", "name", ArgType::kString, "project name", true, true},
        {"description", "description", ArgType::kString, "description"}}},
      {"project webhook",
       "set the file holding a project's forge webhook secret (docs/ci.md)",
       "project-webhook",
       {{"project", "project", ArgType::kString, "project name", true, true},
        {"secret-file", "secretFile", ArgType::kString,
         "absolute path of the secret (\"\" removes it)", false, true}}},
      {"jobset create",
       "create a jobset: a collection to evaluate",
       "jobset-create",
       {kProject,
        {"name", "name", ArgType::kString, "jobset name", true, true},
        {"kind", "kind", ArgType::kString, "'path' (default) or 'git'"},
        {"location", "location", ArgType::kString,
         "folder, or git repository URL", false, true},
        {"branch", "branch", ArgType::kString, "git branch"},
        {"file", "file", ArgType::kString, "Nix file (default default.nix)"},
        {"attribute", "attribute", ArgType::kString,
         "attribute path holding the jobs"},
        {"arguments", "arguments", ArgType::kJson,
         "JSON object: name -> Nix expression"},
        {"check-interval", "checkInterval", ArgType::kInt,
         "seconds between checks (0 = on demand only; default 300)"},
        {"shares", "shares", ArgType::kInt, "scheduling shares (default 100)"},
        {"evaluator", "evaluator", ArgType::kString,
         "the evaluator plugin: 'builtin' (default: kiln's own), 'nix' "
         "(nix-instantiate) or another loaded one (`kiln plugins`)"},
        {"channel-job", "channelJob", ArgType::kString,
         "the job whose success advances the jobset's channel (default "
         "tested)"},
        {"max-closure-growth", "maxClosureGrowth", ArgType::kInt,
         "percent a job's closure size may grow against the channel's "
         "evaluation before the channel is held (default 0: not checked)"},
        {"max-build-time-growth", "maxBuildTimeGrowth", ArgType::kInt,
         "percent a job's build time may grow likewise (default 0)"},
        {"repeat-fraction", "repeatFraction", ArgType::kJson,
         "share of successful steps built again on another worker to check "
         "that they are reproducible, 0 to 1 (default 0: none)"}}},
      {"jobset eval",
       "evaluate a jobset now",
       "jobset-eval",
       {kProject,
        {"jobset", "jobset", ArgType::kString, "jobset name", true, true},
        {"if-changed", "ifChanged", ArgType::kFlag,
         "skip when the inputs did not change"},
        {"revision", "revision", ArgType::kString,
         "git jobsets: the commit to evaluate (default: the branch's head)"}},
       3600},
      {"build add",
       "add a build of a .drv in the central store",
       "build-add",
       {kProject,
        {"jobset", "jobset", ArgType::kString, "jobset name", false, true},
        {"drv", "drvPath", ArgType::kString, "full .drv path", true, true},
        {"job", "job", ArgType::kString, "job name (default: the .drv name)"}}},
      {"build-cancel", "cancel a build", "build-cancel", {kBuild}},
      {"build-restart",
       "restart a failed build (clears its cached failures)",
       "build-restart",
       {kBuild}},
      {"build-bump",
       "raise a build's global priority",
       "build-bump",
       {kBuild,
        {"priority", "priority", ArgType::kInt, "new priority (default 100)"}}},
      {"queue", "why each unfinished step waits", "queue", {}},
      {"cached-failure clear",
       "forget cached failures",
       "cached-failure-clear",
       {{"drv", "drvPath", ArgType::kString, "one .drv path (default: all)",
         true}}},
  };
  return cmds;
}

struct Registrar {
  Registrar() {
    for (auto& c : opCommands()) {
      RegisterCommand(
          c.name, c.summary,
          [&c](const std::vector<std::string>& a) { return runOp(c, a); });
    }
  }
} registrar;

}  // namespace
}  // namespace kiln::cli
