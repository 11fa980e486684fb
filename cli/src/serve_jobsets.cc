// The declared projects and jobsets of `kiln serve` (serve_jobsets.h).
#include "serve_jobsets.h"

#include <algorithm>
#include <ostream>
#include <set>

#include "kiln/scheduler/forge_store.h"
#include "kiln/scheduler/repeat_check.h"
#include "kiln/scheduler/service.h"
#include "serve_tokens.h"

namespace kiln::cli {

using nlohmann::json;

json jobsetRequestArgs(const std::string& project, const ConfiguredJobset& j) {
  return {{"project", project},
          {"name", j.name},
          {"kind", j.kind},
          {"location", j.location},
          {"branch", j.branch},
          {"file", j.file},
          {"attribute", j.attribute},
          {"arguments", j.arguments},
          {"checkInterval", j.checkInterval},
          {"shares", j.shares},
          {"enabled", j.enabled},
          {"evaluator", j.evaluator},
          {"channelJob", j.channelJob},
          {"maxClosureGrowth", j.maxClosureGrowth},
          {"maxBuildTimeGrowth", j.maxBuildTimeGrowth},
          {"repeatFraction", j.repeatFraction}};
}

bool sameJobset(const scheduler::JobsetRow& row, const ConfiguredJobset& j) {
  return row.kind == j.kind && row.location == j.location &&
         row.branch == j.branch && row.file == j.file &&
         row.attribute == j.attribute &&
         json::parse(row.arguments, nullptr, false) == j.arguments &&
         row.checkIntervalSec == j.checkInterval && row.shares == j.shares &&
         row.enabled == j.enabled && row.evaluator == j.evaluator &&
         row.channelJob == j.channelJob &&
         row.maxClosureGrowthPct == j.maxClosureGrowth &&
         row.maxBuildTimeGrowthPct == j.maxBuildTimeGrowth &&
         row.repeatPpm == scheduler::repeatFractionToPpm(j.repeatFraction);
}

JobsetSync::JobsetSync(const scheduler::DatabaseSpec& database,
                       std::ostream& out)
    : db_(database), out_(out) {}

void JobsetSync::queue(const std::string& kind, const json& args,
                       const std::string& what) {
  std::string jobset;
  if (kind == "jobset-eval")
    jobset = args["project"].get<std::string>() + "/" +
             args["jobset"].get<std::string>();
  pending_.push_back(
      {scheduler::queueRequest(db_, kind, args), kind, what, jobset});
}

bool JobsetSync::evaluating(const std::string& project,
                            const std::string& jobset) const {
  std::string key = project + "/" + jobset;
  return std::any_of(pending_.begin(), pending_.end(),
                     [&](const Pending& p) { return p.jobset == key; });
}

std::vector<std::string> JobsetSync::apply(
    const std::vector<ConfiguredProject>& projects, bool all) {
  std::vector<std::string> changes;
  for (auto& p : projects) {
    if (!db_.projectByName(p.name))
      queue("project-create",
            {{"name", p.name}, {"description", p.description}},
            "project " + p.name);
    syncWebhook(p, changes);
    for (auto& j : p.jobsets) {
      std::string what = "project " + p.name + ", jobset " + j.name;
      auto row = db_.jobsetByName(p.name, j.name);
      bool changed = !row || !sameJobset(*row, j);
      if (!row) {
        queue("jobset-create", jobsetRequestArgs(p.name, j), what);
        changes.push_back("added " + what);
      } else if (changed) {
        json args = jobsetRequestArgs(p.name, j);
        args.erase("name");
        args["jobset"] = j.name;
        queue("jobset-update", args, what);
        changes.push_back("changed " + what);
      }
      if (j.enabled && (changed || all))
        queue(
            "jobset-eval",
            {{"project", p.name}, {"jobset", j.name}, {"ifChanged", !changed}},
            what);
    }
    disableUndeclared(p, changes);
  }
  return changes;
}

// Queues `p`'s webhook secret file when the state has another.
void JobsetSync::syncWebhook(const ConfiguredProject& p,
                             std::vector<std::string>& changes) {
  auto row = db_.projectByName(p.name);
  std::string stored =
      row ? scheduler::ForgeStore(db_).webhookSecretFile(row->id) : "";
  if ((!row && p.webhookSecretFile.empty()) || stored == p.webhookSecretFile)
    return;
  queue("project-webhook",
        {{"project", p.name}, {"secretFile", p.webhookSecretFile}},
        "project " + p.name);
  changes.push_back("set the webhook secret file of project " + p.name);
}

// Disables the enabled jobsets of `p` in the state that it does not list
// (a pull request's, which a forge made, stay).
void JobsetSync::disableUndeclared(const ConfiguredProject& p,
                                   std::vector<std::string>& changes) {
  auto project = db_.projectByName(p.name);
  if (!project) return;
  std::set<std::string> declared;
  for (auto& j : p.jobsets) declared.insert(j.name);
  for (auto& row : db_.jobsets()) {
    if (row.project != project->id || !row.enabled || declared.count(row.name))
      continue;
    auto forge = scheduler::ForgeStore(db_).jobset(row.id);
    if (forge && forge->number != 0) continue;
    std::string what = "project " + p.name + ", jobset " + row.name;
    queue("jobset-update",
          {{"project", p.name}, {"jobset", row.name}, {"enabled", false}},
          what);
    changes.push_back("disabled " + what + " (no longer declared)");
  }
}

std::vector<std::string> JobsetSync::applyTokens(
    const std::vector<ConfiguredToken>& tokens) {
  std::vector<std::pair<ConfiguredToken, std::string>> declared;
  std::vector<std::string> lines;
  for (auto& t : tokens) {
    try {
      declared.emplace_back(t, declaredTokenSecret(t));
    } catch (const Error& e) {
      lines.push_back(std::string("kiln serve: ") + e.what());
    }
  }
  auto plan = planTokens(declared, scheduler::TokenStore(db_).list(),
                         [] { return scheduler::generateToken().salt; });
  for (auto& [kind, args] : plan.requests)
    queue(kind, args,
          kind == "token-create" ? "token " + args.value("name", std::string())
                                 : "token id " + args["id"].dump());
  for (auto& c : plan.changes) lines.push_back(c);
  for (auto& p : plan.problems) lines.push_back("kiln serve: " + p);
  return lines;
}

void JobsetSync::poll() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    std::optional<json> answer;
    try {
      answer = scheduler::requestAnswer(db_, it->id);
      if (!answer) {
        ++it;
        continue;
      }
      if (it->kind == "jobset-eval") {
        int64_t eval = answer->value("eval", int64_t(0));
        if (eval)
          out_ << "evaluation " << eval << " of " << it->what << std::endl;
        else
          out_ << it->what << ": inputs unchanged, not evaluated again"
               << std::endl;
      }
    } catch (const scheduler::SchedulerStateError& e) {
      // A project that exists already is fine; anything else is reported.
      if (it->kind != "project-create")
        out_ << "kiln serve: " << it->kind << " of " << it->what
             << " refused: " << e.what() << std::endl;
    } catch (const Error& e) {
      out_ << "kiln serve: " << it->kind << " of " << it->what
           << " failed: " << e.what() << std::endl;
    }
    it = pending_.erase(it);
  }
}

}  // namespace kiln::cli
