// What `kiln serve` prints about its builds (serve_console.h).
#include "serve_console.h"

#include <algorithm>
#include <ostream>
#include <sstream>

#include "kiln/common/status.h"

namespace kiln::cli {

using scheduler::BuildState;
using scheduler::Page;

namespace {

constexpr size_t kErrorLines = 6;       // of an evaluation's error, shown
constexpr size_t kLineBytes = 300;      // of each of those lines
constexpr int64_t kBuildsPerTurn = 10;  // failed builds named per turn

// The first kErrorLines lines of `error`, each indented and cut, and how
// many lines were left out.
std::string errorHead(const std::string& error) {
  std::istringstream in(error);
  std::string out, line;
  size_t n = 0, total = 0;
  while (std::getline(in, line)) {
    total++;
    if (n == kErrorLines) continue;
    if (line.size() > kLineBytes) line = line.substr(0, kLineBytes) + "…";
    out += "  " + line + "\n";
    n++;
  }
  if (total > n) out += "  (" + std::to_string(total - n) + " more lines)\n";
  return out;
}

std::string statusText(int status) {
  if (status < 0 || status > 255 || !isValidStepStatus(uint8_t(status)))
    return "status " + std::to_string(status);
  return std::string(stepStatusName(static_cast<StepStatus>(status)));
}

}  // namespace

std::vector<scheduler::EvalErrorRow> allEvaluationErrors(
    scheduler::StateView& view, int64_t eval) {
  std::vector<scheduler::EvalErrorRow> out;
  for (int64_t offset = 0; offset <= Page::kMaxOffset;
       offset += Page::kMaxLimit) {
    auto page = view.evaluationErrors(eval, Page{offset, Page::kMaxLimit});
    out.insert(out.end(), page.rows.begin(), page.rows.end());
    if (!page.more) break;
  }
  return out;
}

ServeConsole::ServeConsole(std::string stateDir,
                           scheduler::DatabaseSpec database, std::string webUrl,
                           std::ostream& out, const Clock& clock)
    : stateDir_(std::move(stateDir)),
      database_(std::move(database)),
      webUrl_(std::move(webUrl)),
      out_(out),
      clock_(clock),
      start_(clock.now()) {}

void ServeConsole::report(const std::vector<ServedJobset>& jobsets) {
  if (!view_) view_ = scheduler::StateView::openIfExists(database_);
  if (!view_) return;
  ServeTotals t = totals(jobsets);
  if (t.finished - t.succeeded != failedSeen_) {
    failedSeen_ = t.finished - t.succeeded;
    announceFailedBuilds(t.evals);
  }
  if (printed_ && t == last_) return;
  printed_ = true;
  last_ = t;
  printProgress(t);
  if (t.done() && !(summaryPrinted_ && summarized_ == t)) {
    summaryPrinted_ = true;
    summarized_ = t;
    printSummary(t);
  }
}

ServeTotals ServeConsole::totals(const std::vector<ServedJobset>& jobsets) {
  ServeTotals t;
  t.allEvaluated = true;
  for (auto& js : jobsets) {
    if (js.evaluating) {
      t.allEvaluated = false;
      t.evaluating++;
      continue;
    }
    auto row = view_->rows().jobsetByName(js.project, js.name);
    auto latest = row ? view_->evaluations(row->id, Page{0, 1})
                      : scheduler::Paged<scheduler::EvaluationSummary>{};
    if (latest.rows.empty()) {
      t.allEvaluated = false;
      t.evaluating++;
      continue;
    }
    const auto& e = latest.rows[0];
    if (!e.eval.error.empty()) {
      t.failedEvals++;
      announceEvalFailure(e);
    }
    t.all += e.counts.all;
    t.finished += e.counts.finished;
    t.succeeded += e.counts.succeeded;
    t.jobErrors += jobErrors(e.eval.id);
    t.evals.push_back(e.eval.id);
  }
  return t;
}

void ServeConsole::announceEvalFailure(const scheduler::EvaluationSummary& e) {
  if (!announcedEvals_.insert(e.eval.id).second) return;
  out_ << "evaluation " << e.eval.id << " of project " << e.project
       << ", jobset " << e.jobset << " failed:\n"
       << errorHead(e.eval.error) << "  all of it: " << evalPointer(e.eval.id)
       << std::endl;
}

int64_t ServeConsole::jobErrors(int64_t eval) {
  auto it = jobErrorsByEval_.find(eval);
  if (it != jobErrorsByEval_.end()) return it->second;
  // Evaluations are written whole, so the count of a visible one is final.
  int64_t n = int64_t(allEvaluationErrors(*view_, eval).size());
  jobErrorsByEval_[eval] = n;
  return n;
}

void ServeConsole::announceFailedBuilds(const std::vector<int64_t>& evals) {
  int64_t named = 0, more = 0;
  for (int64_t eval : evals) {
    for (int64_t offset = 0; offset <= Page::kMaxOffset;
         offset += Page::kMaxLimit) {
      auto page = view_->evaluationBuilds(eval, {BuildState::kFailed, "", ""},
                                          Page{offset, Page::kMaxLimit});
      for (auto& b : page.rows) {
        if (announcedBuilds_.count(b.id)) continue;
        if (named == kBuildsPerTurn) {
          more++;
          continue;
        }
        announcedBuilds_.insert(b.id);
        named++;
        out_ << "build " << b.id << " (job " << b.job << ") "
             << statusText(b.status) << "; log: kiln log --state-dir "
             << stateDir_ << databaseFlag() << " " << b.drvPath;
        if (!webUrl_.empty())
          out_ << "; page: " << webUrl_ << "/build/" << b.id;
        out_ << std::endl;
      }
      if (!page.more) break;
    }
  }
  if (more > 0) {
    out_ << "... and " << more << " more failed builds";
    if (!webUrl_.empty()) out_ << " (" << webUrl_ << "/)";
    out_ << std::endl;
    failedSeen_ = -1;  // name the rest next turn
  }
}

std::string ServeConsole::databaseFlag() const {
  return database_.isPostgres() ? " --database " + database_.url : "";
}

std::string ServeConsole::evalPointer(int64_t eval) const {
  std::string p = "kiln evaluation show " + std::to_string(eval) +
                  " --state-dir " + stateDir_ + databaseFlag();
  if (!webUrl_.empty())
    p += ", or " + webUrl_ + "/eval/" + std::to_string(eval);
  return p;
}

std::string ServeConsole::counts(const ServeTotals& t) const {
  std::string s = std::to_string(t.finished - t.succeeded) + " failed";
  if (t.jobErrors > 0) {
    auto withErrors =
        std::find_if(t.evals.begin(), t.evals.end(), [&](int64_t e) {
          auto it = jobErrorsByEval_.find(e);
          return it != jobErrorsByEval_.end() && it->second > 0;
        });
    s += ", " + std::to_string(t.jobErrors) + " job" +
         (t.jobErrors == 1 ? "" : "s") + " did not evaluate (" +
         evalPointer(*withErrors) + ")";
  }
  if (t.failedEvals > 0)
    s += ", " + std::to_string(t.failedEvals) + " evaluation" +
         (t.failedEvals == 1 ? "" : "s") + " failed";
  return s;
}

void ServeConsole::printProgress(const ServeTotals& t) {
  std::string waiting =
      std::to_string(t.evaluating) + " jobset" + (t.evaluating == 1 ? "" : "s");
  if (t.evals.empty() && t.evaluating > 0) {
    out_ << "builds: none yet, evaluating " << waiting << std::endl;
    return;
  }
  out_ << "builds: " << t.finished << "/" << t.all << " finished, "
       << t.succeeded << " succeeded, " << counts(t);
  if (t.done())
    out_ << " (all builds finished)";
  else if (t.evaluating > 0)
    out_ << " (evaluating " << waiting << " more)";
  out_ << std::endl;
}

void ServeConsole::printSummary(const ServeTotals& t) {
  auto secs =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.now() - start_);
  out_ << "summary: " << t.all << " jobs, " << t.succeeded << " succeeded, "
       << counts(t) << ", " << secs.count()
       << " s since kiln serve started (still serving; Ctrl-C stops)"
       << std::endl;
}

}  // namespace kiln::cli
