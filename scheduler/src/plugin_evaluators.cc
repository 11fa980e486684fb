// Evaluator plugins as EvalRunners (evaluation.h, docs/plugin-abi.md
// "Evaluator table"): the request is built from the jobset, the plugin's
// job lines are parsed and checked as they arrive (no exception crosses the
// boundary in either direction), and every job is completed and checked
// against its `.drv` in the central store afterwards.
#include <mutex>
#include <nlohmann/json.hpp>

#include "kiln/common/logging.h"
#include "kiln/scheduler/evaluation.h"
#include "kiln/scheduler/state_db.h"
#include "kiln/store/derivation.h"

namespace kiln::scheduler {
namespace {

constexpr size_t kMaxJobLine = 1u << 20;
constexpr size_t kMaxJobs = 1u << 20;
constexpr size_t kMaxImportPaths = 1u << 20;

kiln_status fail(kiln_error* err, kiln_status code, const std::string& msg) {
  if (err) {
    err->code = code;
    err->sys_errno = 0;
    std::snprintf(err->message, sizeof err->message, "%s", msg.c_str());
  }
  return code;
}

/// What one evaluation's sink collects (the ctx of kiln_eval_sink).
struct SinkState {
  const JobsetSpec& jobset;
  store::LocalStore& store;
  std::string workDir;
  std::vector<Job> jobs;

  // A line that is not a job: a per-job error when it names its attr.
  static std::optional<std::string> attrOf(const std::string& line) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("attr") && j["attr"].is_string() &&
        !j["attr"].get<std::string>().empty())
      return j["attr"].get<std::string>();
    return std::nullopt;
  }

  static kiln_status job(void* ctx, const char* line, size_t len,
                         kiln_error* err) noexcept {
    auto& self = *static_cast<SinkState*>(ctx);
    try {
      if (len > kMaxJobLine)
        return fail(
            err, KILN_ERR_INVALID,
            "a job line of " + std::to_string(len) + " bytes (at most 1 MiB)");
      if (self.jobs.size() >= kMaxJobs)
        return fail(err, KILN_ERR_INVALID, "more than 1048576 jobs");
      std::string text(line, len);
      try {
        self.jobs.push_back(parseJobLine(text, false));
      } catch (const FormatError& e) {
        auto attr = attrOf(text);
        if (!attr) return fail(err, KILN_ERR_INVALID, e.what());
        Job bad;
        bad.attr = *attr;
        bad.error = e.what();
        self.jobs.push_back(bad);
      }
      return KILN_OK;
    } catch (const std::exception& e) {
      return fail(err, KILN_ERR_FAILED, e.what());
    }
  }

  static kiln_status importNix(void* ctx, const char* root,
                               const char* const* paths,
                               kiln_error* err) noexcept {
    auto& self = *static_cast<SinkState*>(ctx);
    try {
      std::string r = root ? root : "";
      if (self.workDir.empty() || !r.starts_with(self.workDir + "/") ||
          r.find("/../") != std::string::npos || r.ends_with("/.."))
        return fail(err, KILN_ERR_INVALID,
                    "import_nix_store: root '" + r +
                        "' is not inside the jobset's work folder " +
                        self.workDir);
      std::vector<std::string> list;
      for (size_t i = 0; paths && paths[i]; i++) {
        if (i >= kMaxImportPaths)
          return fail(err, KILN_ERR_INVALID,
                      "import_nix_store: too many paths");
        list.push_back(paths[i]);
      }
      importFromNixChroot(r, list, self.store);
      return KILN_OK;
    } catch (const std::exception& e) {
      return fail(err, KILN_ERR_FAILED,
                  std::string("import_nix_store: ") + e.what());
    }
  }
};

/// The jobset's arguments as names and Nix expressions; throws FormatError.
std::vector<std::pair<std::string, std::string>> argumentsOf(
    const JobsetSpec& js) {
  nlohmann::json args;
  try {
    args = nlohmann::json::parse(js.arguments.empty() ? "{}" : js.arguments);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError("jobset '" + js.name +
                      "': arguments are not JSON: " + e.what());
  }
  if (!args.is_object())
    throw FormatError("jobset '" + js.name + "': arguments are not an object");
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [name, expr] : args.items()) {
    if (!expr.is_string())
      throw FormatError("jobset '" + js.name + "': argument '" + name +
                        "' is not a string holding a Nix expression");
    out.emplace_back(name, expr.get<std::string>());
  }
  return out;
}

/// Makes `job` relative to the jobset's attribute and checks it against
/// its `.drv` (valid, held by a temporary root), filling in name, system
/// and outputs; a mismatch or a missing `.drv` is the job's error.
void completeJob(Job& job, const JobsetSpec& js, store::LocalStore& store) {
  std::string prefix = js.attribute + ".";
  if (!js.attribute.empty() && job.attr.starts_with(prefix))
    job.attr = job.attr.substr(prefix.size());
  if (!job.error.empty()) return;
  try {
    auto drvPath = store.parsePath(job.drvPath);
    store.addTempRoot(drvPath);
    if (!store.isValid(drvPath))
      throw Error(job.drvPath + " is not valid in the store");
    auto drv = store::readDerivationFile(store.storeDir(),
                                         store.physicalPath(drvPath));
    if (!job.system.empty() && job.system != drv.platform)
      throw Error("the evaluator says system " + job.system +
                  ", the .drv says " + drv.platform);
    job.system = drv.platform;
    if (job.name.empty()) job.name = drv.name;
    std::map<std::string, std::string> outputs;
    for (auto& [n, o] : drv.outputs)
      if (o.path) outputs[n] = store.printPath(*o.path);
    if (!job.outputs.empty() && job.outputs != outputs)
      throw Error("the evaluator's outputs differ from the .drv's");
    job.outputs = outputs;
  } catch (const std::exception& e) {
    job.error =
        std::string("evaluator reported ") + job.drvPath + ": " + e.what();
    job.drvPath.clear();
  }
}

/// One evaluator plugin instance as an EvalRunner.
class PluginEvalRunner final : public EvalRunner {
 public:
  PluginEvalRunner(const plugins::PluginInfo& info,
                   plugins::PluginConfig config)
      : info_(info),
        host_(KILN_PLUGIN_EVALUATOR, info.name, std::move(config)),
        table_(static_cast<const kiln_evaluator_functions*>(info.functions)) {
    if (info.functionsSize < KILN_EVALUATOR_EVALUATE_MIN_SIZE ||
        !table_->evaluate)
      throw Error("evaluator plugin '" + info.name + "' (" + info.file +
                  ") was built against ABI minor " +
                  std::to_string(info.abiMinor) +
                  ", which has no evaluate function: rebuild it");
    kiln_error err{};
    if (table_->create(host_.table(), &instance_, &err) != KILN_OK)
      throw Error("evaluator plugin '" + info.name + "' (" + info.file +
                  "): " + err.message);
  }
  ~PluginEvalRunner() override { table_->destroy(instance_); }
  PluginEvalRunner(const PluginEvalRunner&) = delete;
  PluginEvalRunner& operator=(const PluginEvalRunner&) = delete;

  std::vector<Job> evaluate(const JobsetSpec& js, const Checkout& co,
                            const EvalStore& target) override {
    auto args = argumentsOf(js);
    std::vector<const char*> names, exprs;
    for (auto& [n, e] : args) {
      names.push_back(n.c_str());
      exprs.push_back(e.c_str());
    }
    names.push_back(nullptr);
    exprs.push_back(nullptr);
    std::string file = co.dir + "/" + js.file;
    kiln_eval_request req{
        sizeof req,        js.name.c_str(),         co.dir.c_str(),
        file.c_str(),      js.attribute.c_str(),    names.data(),
        exprs.data(),      target.stateDir.c_str(), target.storeDir.c_str(),
        co.workDir.c_str()};
    store::LocalStore store(target.stateDir, store::StoreDir(target.storeDir));
    SinkState state{js, store, co.workDir, {}};
    kiln_eval_sink sink{sizeof sink, &state, &SinkState::job,
                        &SinkState::importNix};
    kiln_error err{};
    if (table_->evaluate(instance_, &req, &sink, &err) != KILN_OK)
      throw Error("evaluator '" + info_.name + "': " + err.message);
    for (auto& job : state.jobs) completeJob(job, js, store);
    return std::move(state.jobs);
  }

 private:
  plugins::PluginInfo info_;
  plugins::HostServices host_;
  const kiln_evaluator_functions* table_;
  void* instance_ = nullptr;
};

}  // namespace

struct PluginEvaluators::State {
  const plugins::PluginRegistry& registry;
  std::map<std::string, plugins::PluginConfig> configs;
  std::mutex mu;
  std::map<std::string, std::unique_ptr<PluginEvalRunner>> runners;
};

PluginEvaluators::PluginEvaluators(
    const plugins::PluginRegistry& registry,
    std::map<std::string, plugins::PluginConfig> configs)
    : state_(new State{registry, std::move(configs), {}, {}}) {}

PluginEvaluators::~PluginEvaluators() = default;

void checkEvaluatorLoaded(const plugins::PluginRegistry& registry,
                          const std::string& jobset,
                          const std::string& evaluator) {
  try {
    registry.require(KILN_PLUGIN_EVALUATOR, evaluator);
  } catch (const Error& e) {
    throw SchedulerStateError("jobset '" + jobset + "': " + e.what());
  }
}

EvaluatorCheck loadedEvaluatorCheck(const plugins::PluginRegistry& registry) {
  return [&registry](const std::string& jobset, const std::string& name) {
    checkEvaluatorLoaded(registry, jobset, name);
  };
}

EvalRunner& PluginEvaluators::get(const std::string& name) {
  std::lock_guard lock(state_->mu);
  auto& slot = state_->runners[name];
  if (!slot) {
    try {
      const auto& info = state_->registry.require(KILN_PLUGIN_EVALUATOR, name);
      auto c = state_->configs.find(name);
      slot = std::make_unique<PluginEvalRunner>(
          info,
          c == state_->configs.end() ? plugins::PluginConfig{} : c->second);
    } catch (...) {
      state_->runners.erase(name);
      throw;
    }
  }
  return *slot;
}

}  // namespace kiln::scheduler
