// The state database's row readers and column lists (state_rows.h).
#include "state_rows.h"

namespace kiln::scheduler::detail {

std::string joinWords(const std::vector<std::string>& v) {
  std::string out;
  for (auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

std::vector<std::string> splitWords(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(' ', i);
    if (j == std::string::npos) j = s.size();
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

const char* const kJobsetColumns =
    "id, project, name, kind, location, branch, file, attribute, arguments, "
    "check_interval, shares, enabled, last_checked, last_inputs, evaluator, "
    "channel_job, max_closure_growth, max_build_time_growth, repeat_ppm";

JobsetRow readJobset(const SqlStmt& s) {
  JobsetRow j;
  j.id = s.getInt(0);
  j.project = s.getInt(1);
  j.name = s.getStr(2);
  j.kind = s.getStr(3);
  j.location = s.getStr(4);
  j.branch = s.getStr(5);
  j.file = s.getStr(6);
  j.attribute = s.getStr(7);
  j.arguments = s.getStr(8);
  j.checkIntervalSec = s.getInt(9);
  j.shares = s.getInt(10);
  j.enabled = s.getInt(11) != 0;
  j.lastCheckedMs = s.getInt(12);
  j.lastInputs = s.getStr(13);
  j.evaluator = s.getStr(14);
  j.channelJob = s.getStr(15);
  j.maxClosureGrowthPct = s.getInt(16);
  j.maxBuildTimeGrowthPct = s.getInt(17);
  j.repeatPpm = s.getInt(18);
  return j;
}

const char* const kBuildColumns =
    "id, eval, jobset, job, nix_name, system, drv_path, finished, status, "
    "global_priority, local_priority, created, stop_time, error, reused_from, "
    "max_silent, timeout";

BuildRow readBuild(const SqlStmt& s) { return *readBuildAt(s, 0); }

std::optional<BuildRow> readBuildAt(const SqlStmt& s, int c) {
  if (s.isNull(c)) return std::nullopt;
  BuildRow b;
  b.id = s.getInt(c);
  b.eval = s.getInt(c + 1);
  b.jobset = s.getInt(c + 2);
  b.job = s.getStr(c + 3);
  b.nixName = s.getStr(c + 4);
  b.system = s.getStr(c + 5);
  b.drvPath = s.getStr(c + 6);
  b.finished = s.getInt(c + 7) != 0;
  b.status = s.isNull(c + 8) ? -1 : static_cast<int>(s.getInt(c + 8));
  b.globalPriority = static_cast<int>(s.getInt(c + 9));
  b.localPriority = static_cast<int>(s.getInt(c + 10));
  b.createdMs = s.getInt(c + 11);
  b.stopMs = s.getInt(c + 12);
  b.error = s.getStr(c + 13);
  b.reusedFrom = s.getInt(c + 14);
  b.maxSilentSec = s.getInt(c + 15);
  b.timeoutSec = s.getInt(c + 16);
  return b;
}

std::string buildColumnsOf(const std::string& alias) {
  std::string out;
  std::string_view cols = kBuildColumns;
  while (!cols.empty()) {
    size_t comma = cols.find(", ");
    out += (out.empty() ? "" : ", ") + alias + "." +
           std::string(cols.substr(0, comma));
    cols = comma == std::string_view::npos ? "" : cols.substr(comma + 2);
  }
  return out;
}

const char* const kStepColumns =
    "id, drv_path, system, pname, features, finished, status, error, "
    "attempts, worker, created, start_time, stop_time, peak_memory, "
    "cpu_time_us, build_dir_bytes";
const char* const kStepNulls =
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, NULL, NULL";

StepRow readStep(const SqlStmt& s) {
  StepRow r;
  r.id = s.getInt(0);
  r.drvPath = s.getStr(1);
  r.system = s.getStr(2);
  r.pname = s.getStr(3);
  r.features = splitWords(s.getStr(4));
  r.finished = s.getInt(5) != 0;
  r.status = s.isNull(6) ? -1 : static_cast<int>(s.getInt(6));
  r.error = s.getStr(7);
  r.attempts = s.getInt(8);
  r.worker = s.getStr(9);
  r.createdMs = s.getInt(10);
  r.startMs = s.getInt(11);
  r.stopMs = s.getInt(12);
  r.peakMemoryBytes = s.getInt(13);
  r.cpuTimeUs = s.getInt(14);
  r.buildDirBytes = s.getInt(15);
  return r;
}

EvaluationRow readEval(const SqlStmt& s) {
  return {s.getInt(0), s.getInt(1), s.getStr(2), s.getInt(3),
          s.getInt(4), s.getInt(5), s.getStr(6)};
}

std::string placeholderRows(size_t rows, size_t n) {
  std::string row = "(?";
  for (size_t i = 1; i < n; i++) row += ", ?";
  row += ")";
  std::string out;
  for (size_t i = 0; i < rows; i++) out += (i ? ", " : "") + row;
  return out;
}

}  // namespace kiln::scheduler::detail
