// HTML of release engineering's pieces (docs/release.md): aggregate
// builds' constituents.
#include "html_release.h"

#include <cstdio>

namespace kiln::web {

std::string aggregateSection(const json& aggregate) {
  if (aggregate.is_null()) return "";
  std::string out = "<h2>Constituents</h2>";
  auto& failed = aggregate["failed"];
  if (!failed.empty()) {
    std::string names;
    for (auto& f : failed) names += (names.empty() ? "" : ", ") + nameText(f);
    out += "<p id=\"constituents-failed\">Did not succeed: " + names + "</p>";
  } else if (aggregate["unfinished"].get<int64_t>() > 0) {
    out += "<p>" + aggregate["unfinished"].dump() +
           " constituents have not finished.</p>";
  } else {
    out += "<p>Every constituent succeeded.</p>";
  }
  out += buildsTable(aggregate["constituents"]);
  if (aggregate["truncated"].get<bool>())
    out += "<p class=\"muted\">(list cut at its limit)</p>";
  return out;
}

namespace {

std::string advancesTable(const json& advances) {
  std::string t =
      "<table id=\"channel-advances\"><tr><th>Advanced</th><th>Evaluation"
      "</th><th>Build</th><th>Inputs</th></tr>";
  for (auto& a : advances)
    t += "<tr><td>" + formatTime(a["timeMs"]) + "</td><td>" +
         evalLink(a["eval"]) + "</td><td>" + buildLink(a["build"]) +
         "</td><td class=\"mono\">" + esc(a["inputsHash"]) + "</td></tr>";
  if (advances.empty())
    t += "<tr><td colspan=\"4\" class=\"muted\">never advanced</td></tr>";
  return t + "</table>";
}

std::string channelBase(const json& m) {
  return "/jobset/" + percentEncodeSegment(m["project"].get<std::string>()) +
         "/" + percentEncodeSegment(m["jobset"].get<std::string>()) +
         "/channel/latest";
}

}  // namespace

std::string jobCharts(const json& history) {
  auto& points = history["points"];
  if (points.empty()) return "";
  struct Series {
    const char* key;
    const char* title;
    const char* cls;
    std::vector<double> values;
    std::vector<std::string> labels;
  };
  Series series[] = {{"durationMs", "Build duration", "lat", {}, {}},
                     {"outputSize", "Output size", "size", {}, {}},
                     {"closureSize", "Closure size", "closure", {}, {}}};
  for (auto& p : points)
    for (auto& s : series) {
      const json& v = p[s.key];
      std::string at = "evaluation " + p["eval"].dump() + ", build " +
                       p["build"].dump() + ": ";
      s.values.push_back(v.is_number() ? v.get<double>() : 0);
      s.labels.push_back(at + (!v.is_number() ? "not built"
                               : std::string(s.key) == "durationMs"
                                   ? formatDuration(v.get<int64_t>())
                                   : formatBytes(v.get<int64_t>())));
    }
  std::string out = "<div class=\"cards\" id=\"job-history\">";
  for (auto& s : series)
    out += "<div class=\"card " + std::string(s.cls) + "\"><h2>" + s.title +
           "</h2>" + svgBars(s.title, s.values, s.labels) + "</div>";
  return out + "</div>";
}

std::string regressionsSection(const json& regressions) {
  if (regressions.empty()) return "";
  std::string t =
      "<h2>Regressed</h2><p id=\"regressed\">Jobs grew past the jobset's "
      "limits against the channel's evaluation " +
      evalLink(regressions[0]["baseEval"]) +
      ": the channel stays there.</p><table><tr><th>Job</th><th>What</th><th "
      "class=\"num\">Before</th><th class=\"num\">After</th><th "
      "class=\"num\">Growth</th></tr>";
  for (auto& r : regressions) {
    bool time = r["kind"] == "time";
    auto show = [&](const json& v) {
      return time ? formatDuration(v.get<int64_t>()) : formatBytes(v);
    };
    char growth[32];
    std::snprintf(growth, sizeof growth, "+%.0f %%",
                  r["growthPercent"].get<double>());
    t += "<tr><td>" + nameText(r["job"]) + "</td><td>" +
         (time ? "build time" : "closure size") + "</td><td class=\"num\">" +
         show(r["before"]) + "</td><td class=\"num\">" + show(r["after"]) +
         "</td><td class=\"num\">" + growth + "</td></tr>";
  }
  return t + "</table>";
}

std::string channelSection(const json& channel) {
  std::string out = "<h2>Channel</h2><p>Advances when job <code>" +
                    esc(channel["channelJob"]) + "</code> succeeds";
  if (!channel["latest"].is_null())
    out += "; now at " + evalLink(channel["latest"]["eval"]) + " (<a href=\"" +
           htmlEscape(channelBase(channel)) + "\">channel</a>)";
  return out + ".</p>" + advancesTable(channel["advances"]);
}

std::string renderChannel(const json& m) {
  std::string base = htmlEscape(channelBase(m));
  auto& at = m["latest"];
  std::string b = "<p>" + jobsetLink(m["project"], m["jobset"]) +
                  ": the newest evaluation in which job <code>" +
                  esc(m["channelJob"]) + "</code> succeeded is " +
                  evalLink(at["eval"]) + " (build " + buildLink(at["build"]) +
                  ", inputs <code>" + esc(at["inputsHash"]) +
                  "</code>), since " + formatTime(at["timeMs"]) + ".</p>";
  b += "<ul>";
  // git-revision answers only for git jobsets (inputs "git:<commit>").
  bool git = at["inputsHash"].get<std::string>().starts_with("git:");
  for (auto* f : {"store-paths.xz", "nixexprs.tar.xz", "git-revision",
                  "binary-cache-url"})
    if (git || std::string_view(f) != "git-revision")
      b += "<li><a href=\"" + base + "/" + f + "\">" + f + "</a></li>";
  b += "</ul><h2>Advances</h2>" + advancesTable(m["advances"]);
  return htmlPage("Channel " + m["project"].get<std::string>() + ":" +
                      m["jobset"].get<std::string>(),
                  b);
}

}  // namespace kiln::web

namespace kiln::web {

namespace {

std::string outputNames(const json& names) {
  std::string s;
  for (auto& n : names) s += (s.empty() ? "" : ", ") + esc(n);
  return s;
}

}  // namespace

std::string reproducibilitySection(const json& check) {
  if (check.is_null()) return "";
  std::string state = check["state"];
  std::string out = "<h2>Reproducibility</h2><p id=\"repeat-verdict\">" +
                    statusBadge(check) + " ";
  if (state == "differs")
    out += "Built again on " + esc(check["secondWorker"]) + " (first on " +
           esc(check["firstWorker"]) + "): the NAR hashes of " +
           outputNames(check["differing"]) + " differ.";
  else if (state == "same")
    out += "Built again on " + esc(check["secondWorker"]) +
           " with the same NAR hashes.";
  else if (state == "failed")
    out += "The second build on " + esc(check["secondWorker"]) +
           " did not succeed.";
  else
    out += "A second build is " + htmlEscape(state) + ".";
  if (check.contains("waiting"))
    out += " <span id=\"repeat-waiting\">Why: " + esc(check["waiting"]) +
           ".</span>";
  out += "</p>";
  if (!check["report"].get<std::string>().empty())
    out += "<h3>diffoscope</h3><pre id=\"diffoscope-report\">" +
           esc(check["report"]) + "</pre>";
  return out;
}

std::string nonDeterministicSection(const json& rows) {
  if (rows.empty()) return "";
  std::string t =
      "<h2>Not deterministic</h2><table id=\"non-deterministic\"><tr><th>Job"
      "</th><th>Build</th><th>Derivation</th><th>Outputs</th><th>Checked"
      "</th></tr>";
  for (auto& r : rows) {
    int64_t build = r["build"];
    t += "<tr><td>" + nameText(r["job"]) + "</td><td>" +
         (build ? buildLink(build) : std::string("–")) +
         "</td><td class=\"mono\">" + esc(r["drvPath"]) + "</td><td>" +
         outputNames(r["differing"]) + "</td><td>" +
         formatTime(r["finishedMs"]) + "</td></tr>";
  }
  return t + "</table>";
}

std::string lastEstimateText(const json& last) {
  if (!last.is_object()) return "";
  int64_t err = last["errorMs"];
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.0f", last["percent"].get<double>());
  return "The last estimate (evaluation " + evalLink(last["eval"]) +
         ") expected it to finish at " + formatTime(last["estimatedMs"]) +
         "; it finished at " + formatTime(last["actualMs"]) + ", " +
         formatDuration(err < 0 ? -err : err) +
         (err < 0   ? " earlier"
          : err > 0 ? " later"
                    : "") +
         " (" + pct + " % of the time it looked ahead).";
}

std::string estimateSection(const json& estimate) {
  if (!estimate.is_object()) return "";
  std::string out;
  auto& x = estimate["expected"];
  if (x.is_object()) {
    out += "<p id=\"expected-finish\">Expected finish: <b>" +
           formatTime(x["finishMs"]) + "</b> (" + x["steps"].dump() +
           (x["truncated"].get<bool>() ? "+" : "") +
           " steps left; critical path " +
           formatDuration(int64_t(x["criticalPathSec"].get<double>() * 1000)) +
           ", work " +
           formatDuration(int64_t(x["totalWorkSec"].get<double>() * 1000)) +
           " over " + x["slots"].dump() + " slots).</p>";
  }
  std::string last = lastEstimateText(estimate["last"]);
  if (!last.empty()) out += "<p id=\"estimate-error\">" + last + "</p>";
  return out;
}

}  // namespace kiln::web
