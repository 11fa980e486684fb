// The forge tables (forge_store.h).
#include "kiln/scheduler/forge_store.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "kiln/scheduler/state_db.h"
#include "state_rows.h"

namespace kiln::scheduler {
namespace {

constexpr const char* kCols =
    "f.jobset, f.forge, f.repo, f.number, f.base_jobset, f.head, f.closed, "
    "f.swept";

ForgeJobsetRow readRow(const SqlStmt& s) {
  ForgeJobsetRow r;
  r.jobset = s.getInt(0);
  r.forge = s.getStr(1);
  r.repo = s.getStr(2);
  r.number = s.getInt(3);
  r.baseJobset = s.getInt(4);
  r.head = s.getStr(5);
  r.closedMs = s.getInt(6);
  r.swept = s.getInt(7) != 0;
  return r;
}

}  // namespace

std::string normalizeRepoUrl(const std::string& url) {
  std::string u = url;
  while (!u.empty() && u.back() == '/') u.pop_back();
  if (u.size() > 4 && u.compare(u.size() - 4, 4, ".git") == 0)
    u.resize(u.size() - 4);
  auto scheme = u.find("://");
  if (scheme != std::string::npos) {
    u = u.substr(scheme + 3);
  } else {
    // scp-like: [user@]host:path (not a folder, which has no ':' first).
    auto colon = u.find(':');
    auto slash = u.find('/');
    if (colon == std::string::npos ||
        (slash != std::string::npos && slash < colon))
      return u;
    u[colon] = '/';
  }
  auto hostEnd = u.find('/');
  auto at = u.rfind('@', hostEnd);
  if (at != std::string::npos) u = u.substr(at + 1);
  hostEnd = u.find('/');
  for (size_t i = 0; i < std::min(hostEnd, u.size()); i++)
    u[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(u[i])));
  return u;
}

std::map<std::string, int64_t> rebuildsAgainstBase(StateDb& db, int64_t eval,
                                                   int64_t baseJobset) {
  std::set<std::pair<std::string, std::string>> base;  // (job, drv)
  auto evals = db.evaluations(baseJobset);
  int64_t newest = 0;
  for (auto& e : evals)
    if (e.error.empty()) newest = std::max(newest, e.id);
  if (newest)
    for (auto& b : db.buildsOfEval(newest)) base.emplace(b.job, b.drvPath);
  std::map<std::string, int64_t> out;
  for (auto& b : db.buildsOfEval(eval))
    if (!base.count({b.job, b.drvPath})) out[b.system]++;
  return out;
}

ForgeStore::ForgeStore(StateDb& db) : db_(db.db()) {}

void ForgeStore::setWebhookSecretFile(int64_t project,
                                      const std::string& file) {
  db_.prepare("DELETE FROM forge_webhooks WHERE project = ?")
      .bind(project)
      .exec();
  if (file.empty()) return;
  db_.prepare("INSERT INTO forge_webhooks (project, secret_file) VALUES (?, ?)")
      .bind(project)
      .bind(file)
      .exec();
}

std::string ForgeStore::webhookSecretFile(int64_t project) {
  auto s =
      db_.prepare("SELECT secret_file FROM forge_webhooks WHERE project = ?");
  s.bind(project);
  return s.step() ? s.getStr(0) : std::string();
}

std::vector<WebhookProject> ForgeStore::webhookProjects() {
  auto s = db_.prepare(
      "SELECT p.id, p.name, w.secret_file FROM forge_webhooks w JOIN "
      "projects p ON p.id = w.project ORDER BY p.name");
  std::vector<WebhookProject> out;
  while (s.step()) out.push_back({s.getInt(0), s.getStr(1), s.getStr(2)});
  return out;
}

bool ForgeStore::recordDelivery(const std::string& forge, const std::string& id,
                                int64_t timeMs) {
  auto seen = db_.prepare(
      "SELECT 1 FROM forge_deliveries WHERE forge = ? AND delivery = ?");
  seen.bind(forge).bind(id);
  if (seen.step()) return false;
  db_.prepare(
         "INSERT INTO forge_deliveries (forge, delivery, received) VALUES "
         "(?, ?, ?)")
      .bind(forge)
      .bind(id)
      .bind(timeMs)
      .exec();
  return true;
}

int64_t ForgeStore::pruneDeliveries(int64_t beforeMs) {
  auto n =
      db_.prepare("SELECT COUNT(*) FROM forge_deliveries WHERE received < ?");
  n.bind(beforeMs);
  int64_t count = n.step() ? n.getInt(0) : 0;
  db_.prepare("DELETE FROM forge_deliveries WHERE received < ?")
      .bind(beforeMs)
      .exec();
  return count;
}

void ForgeStore::upsertJobset(const ForgeJobsetRow& r) {
  db_.prepare("DELETE FROM forge_jobsets WHERE jobset = ?")
      .bind(r.jobset)
      .exec();
  db_.prepare(
         "INSERT INTO forge_jobsets (jobset, forge, repo, number, base_jobset, "
         "head, closed, swept) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
      .bind(r.jobset)
      .bind(r.forge)
      .bind(r.repo)
      .bind(r.number)
      .bind(r.baseJobset)
      .bind(r.head)
      .bind(r.closedMs)
      .bind(int64_t{r.swept ? 1 : 0})
      .exec();
}

std::optional<ForgeJobsetRow> ForgeStore::jobset(int64_t jobset) {
  auto s = db_.prepare(std::string("SELECT ") + kCols +
                       " FROM forge_jobsets f WHERE f.jobset = ?");
  s.bind(jobset);
  if (!s.step()) return std::nullopt;
  return readRow(s);
}

std::optional<ForgeJobsetRow> ForgeStore::pull(int64_t project,
                                               const std::string& forge,
                                               const std::string& repo,
                                               int64_t number) {
  auto s = db_.prepare(std::string("SELECT ") + kCols +
                       " FROM forge_jobsets f JOIN jobsets j ON j.id = "
                       "f.jobset WHERE j.project = ? AND f.forge = ? AND "
                       "f.repo = ? AND f.number = ?");
  s.bind(project).bind(forge).bind(repo).bind(number);
  if (!s.step()) return std::nullopt;
  return readRow(s);
}

std::vector<ForgeJobsetRow> ForgeStore::closedUnswept(int64_t closedBeforeMs) {
  auto s = db_.prepare(std::string("SELECT ") + kCols +
                       " FROM forge_jobsets f WHERE f.closed > 0 AND "
                       "f.closed <= ? AND f.swept = 0 ORDER BY f.jobset");
  s.bind(closedBeforeMs);
  std::vector<ForgeJobsetRow> out;
  while (s.step()) out.push_back(readRow(s));
  return out;
}

}  // namespace kiln::scheduler
