// HTML of the overview, projects, jobset, evaluation and comparison pages
// (html.h), rendered from their models (model.h).
#include "html_release.h"
#include "html_util.h"

namespace kiln::web {

std::string statusBadge(const json& row) {
  std::string name = row.value("statusName", "queued");
  return "<span class=\"st st-" + htmlEscape(name) + "\">" +
         htmlEscape(row.value("statusLabel", name)) + "</span>";
}

std::string buildLink(int64_t id) {
  return "<a href=\"/build/" + std::to_string(id) + "\">" + std::to_string(id) +
         "</a>";
}

std::string evalLink(int64_t id) {
  return "<a href=\"/eval/" + std::to_string(id) + "\">" + std::to_string(id) +
         "</a>";
}

std::string jobsetLink(const std::string& project, const std::string& jobset) {
  return "<a href=\"/jobset/" + htmlEscape(percentEncodeSegment(project)) +
         "/" + htmlEscape(percentEncodeSegment(jobset)) + "\">" +
         htmlName(project) + ":" + htmlName(jobset) + "</a>";
}

std::string pager(const json& page, const std::string& base,
                  const std::string& param) {
  int64_t offset = page["offset"], limit = page["limit"];
  std::string sep = base.find('?') == std::string::npos ? "?" : "&";
  std::string out = "<div class=\"pager\">";
  if (offset > 0)
    out += "<a href=\"" +
           htmlEscape(base + sep + param + "=" +
                      std::to_string(std::max<int64_t>(0, offset - limit))) +
           "\">← newer</a>";
  if (page["more"].get<bool>())
    out +=
        "<a href=\"" +
        htmlEscape(base + sep + param + "=" + std::to_string(offset + limit)) +
        "\">more →</a>";
  return out + "</div>";
}

std::string evaluationsTable(const json& rows) {
  std::string t =
      "<table><tr><th>Evaluation</th><th>Jobset</th><th>Time</th><th>Inputs"
      "</th><th class=\"num\">Builds</th><th class=\"num\">Succeeded</th><th "
      "class=\"num\">Failed</th><th class=\"num\">Unfinished</th></tr>";
  for (auto& e : rows)
    t +=
        "<tr><td>" + evalLink(e["id"]) + "</td><td>" +
        jobsetLink(e["project"], e["jobset"]) + "</td><td>" +
        formatTime(e["timeMs"]) + "</td><td class=\"mono\">" +
        esc(e["inputsHash"].get<std::string>().substr(0, 20)) +
        "</td><td class=\"num\">" + e["builds"].dump() +
        "</td><td class=\"num\">" + e["succeeded"].dump() +
        "</td><td class=\"num\">" + e["failed"].dump() +
        "</td><td class=\"num\">" + e["unfinished"].dump() +
        (e.contains("estimate") && e["estimate"]["expected"].is_object()
             ? " <span class=\"muted expected-finish\">expected " +
                   formatTime(e["estimate"]["expected"]["finishMs"]) + "</span>"
             : std::string()) +
        "</td></tr>";
  if (rows.empty())
    t += "<tr><td colspan=\"8\" class=\"muted\">none yet</td></tr>";
  return t + "</table>";
}

namespace {

std::string charts(const json& m) {
  std::vector<double> rate, lat, idle;
  std::vector<std::string> rateL, latL, idleL;
  for (auto& b : m["failureRate"]) {
    int64_t f = b["finished"], x = b["failed"];
    rate.push_back(f ? double(x) / double(f) : 0);
    rateL.push_back(formatTime(b["startMs"]) + ": " + std::to_string(x) +
                    " of " + std::to_string(f) + " failed");
  }
  for (auto& s : m["history"]) {
    double l = s["dispatchLatencyMs"].is_null()
                   ? 0
                   : s["dispatchLatencyMs"].get<double>();
    lat.push_back(l);
    latL.push_back(formatTime(s["atMs"]) + ": " + std::to_string(l) + " ms");
    idle.push_back(s["idleSlotSeconds"].get<double>());
    idleL.push_back(formatTime(s["atMs"]) + ": " + std::to_string(idle.back()) +
                    " slot-s idle with work");
  }
  std::string out = "<h2>Failure rate, last 24 hours (per hour)</h2>" +
                    svgBars("failure rate per hour", rate, rateL, 1.0);
  out += "<h2>Dispatch latency</h2>";
  out += lat.empty() ? "<p class=\"muted\">no samples yet</p>"
                     : "<div class=\"lat\">" +
                           svgBars("dispatch latency", lat, latL) + "</div>";
  out += "<h2>Idle-with-work slot time</h2>";
  out += idle.empty()
             ? "<p class=\"muted\">no samples yet</p>"
             : svgBars("idle slot seconds with work queued", idle, idleL);
  return out;
}

}  // namespace

std::string renderOverview(const json& m) {
  std::string b;
  if (!m["scheduler"].get<bool>())
    b += "<p class=\"muted\">No running scheduler: queue, running steps and "
         "workers are unknown.</p>";
  if (m["metrics"].is_object()) {
    auto& x = m["metrics"];
    b += "<div class=\"cards\"><div class=\"card\"><b>" +
         x["runningSteps"].dump() + "</b>running</div><div class=\"card\"><b>" +
         x["waitingSteps"].dump() + "</b>waiting</div><div class=\"card\"><b>" +
         std::to_string(x.value("waitingRepeats", 0)) + " / " +
         std::to_string(x.value("runningRepeats", 0)) +
         "</b>checks waiting / running</div><div class=\"card\"><b>" +
         x["freeSlots"].dump() + " / " + x["totalSlots"].dump() +
         "</b>free slots</div><div class=\"card\"><b>" +
         std::to_string(int64_t(x["meanDispatchLatencyMs"].get<double>())) +
         " ms</b>mean dispatch latency</div><div class=\"card\"><b>" +
         formatDuration(x["longestIdleWithWorkMs"]) +
         "</b>longest idle with work</div></div>";
  }
  b += "<h2>Queue per system</h2><table><tr><th>System</th><th "
       "class=\"num\">Queued</th></tr>";
  for (auto& q : m["queue"])
    b += "<tr><td>" + esc(q["system"]) + "</td><td class=\"num\">" +
         q["queued"].dump() + "</td></tr>";
  b += "</table><h2>Running steps</h2><table><tr><th>Step</th><th>System</th>"
       "<th>Worker</th><th>Elapsed</th></tr>";
  for (auto& s : m["running"])
    b += "<tr><td class=\"mono\">" + esc(s["drvPath"]) + "</td><td>" +
         esc(s["system"]) + "</td><td>" + esc(s["worker"]) + "</td><td>" +
         formatDuration(s["elapsedMs"]) + "</td></tr>";
  b += "</table><h2>Workers</h2>" + workersTable(m["workers"]);
  b += "<h2>Recent evaluations</h2>" + evaluationsTable(m["evaluations"]);
  if (m.contains("lastEstimate"))
    if (std::string t = lastEstimateText(m["lastEstimate"]); !t.empty())
      b += "<p id=\"estimate-error\" class=\"muted\">" + t + "</p>";
  return htmlPage("Overview", b + charts(m));
}

std::string renderProjects(const json& m) {
  std::string b =
      "<table><tr><th>Project</th><th>Description</th><th>"
      "Jobsets</th></tr>";
  for (auto& p : m["projects"]) {
    std::string js;
    for (auto& j : p["jobsets"]) js += jobsetLink(p["name"], j["name"]) + " ";
    b += "<tr><td>" + nameText(p["name"]) + "</td><td>" +
         esc(p["description"]) + "</td><td>" + js + "</td></tr>";
  }
  return htmlPage("Projects", b + "</table>");
}

std::string renderJobset(const json& m) {
  auto& js = m["jobset"];
  std::string project = m["project"], name = js["name"];
  std::string self = "/jobset/" + percentEncodeSegment(project) + "/" +
                     percentEncodeSegment(name);
  std::string b = "<p>" + esc(js["kind"]) + " <code>" + esc(js["location"]) +
                  "</code>, file <code>" + esc(js["file"]) +
                  "</code>, checked every " + js["checkInterval"].dump() +
                  " s, shares " + js["shares"].dump() + "</p>";
  b += channelSection(m["channel"]);
  b += nonDeterministicSection(m["nonDeterministic"]);
  b += "<h2>Evaluations</h2>" + evaluationsTable(m["evaluations"]["rows"]) +
       pager(m["evaluations"], self, "evals");
  b += "<h2>Jobs × evaluations</h2><table><tr><th>Job</th>";
  for (auto& e : m["matrix"]["evaluations"])
    b += "<th>" + evalLink(e["id"]) + "</th>";
  b += "</tr>";
  for (auto& row : m["matrix"]["jobs"]["rows"]) {
    b += "<tr><td><a href=\"" +
         htmlEscape(self + "/job/" +
                    percentEncodeSegment(row["job"].get<std::string>())) +
         "\">" + nameText(row["job"]) + "</a></td>";
    for (auto& c : row["cells"])
      b += c.is_null() ? "<td class=\"muted\">—</td>"
                       : "<td><a class=\"st st-" + esc(c["statusName"]) +
                             "\" href=\"/build/" + c["build"].dump() + "\">" +
                             esc(c["statusName"]) + "</a></td>";
    b += "</tr>";
  }
  b += "</table>" + pager(m["matrix"]["jobs"], self, "jobs");
  return htmlPage("Jobset " + project + ":" + name, b);
}

std::string buildsTable(const json& rows) {
  std::string t =
      "<table><tr><th>Build</th><th>Job</th><th>System</th><th>"
      "Status</th><th>Finished</th></tr>";
  for (auto& r : rows)
    t += "<tr><td>" + buildLink(r["id"]) + "</td><td>" + nameText(r["job"]) +
         "</td><td>" + esc(r["system"]) + "</td><td>" + statusBadge(r) +
         "</td><td>" + formatTime(r["stopMs"]) + "</td></tr>";
  if (rows.empty()) t += "<tr><td colspan=\"5\" class=\"muted\">none</td></tr>";
  return t + "</table>";
}

std::string renderEvaluation(const json& m) {
  auto& e = m["evaluation"];
  int64_t id = e["id"];
  std::string self = "/eval/" + std::to_string(id);
  std::string b = "<p>" + jobsetLink(e["project"], e["jobset"]) + ", " +
                  formatTime(e["timeMs"]) + ", inputs <code>" +
                  esc(e["inputsHash"]) + "</code>, evaluated in " +
                  formatDuration(e["durationMs"]) + "</p>";
  if (!e["error"].get<std::string>().empty())
    b += "<pre class=\"log\">" + esc(e["error"]) + "</pre>";
  b += regressionsSection(m["regressions"]);
  if (m.contains("estimate")) b += estimateSection(m["estimate"]);
  if (m["previous"].get<int64_t>())
    b += "<p><a href=\"" + self +
         "/compare\">Compare with the previous "
         "evaluation (" +
         m["previous"].dump() + ")</a></p>";
  std::string state = m["filter"]["state"];
  b += "<nav class=\"tabs\">";
  for (const char* s : {"all", "succeeded", "failed", "unfinished"})
    b += std::string("<a") + (state == s ? " class=\"on\"" : "") + " href=\"" +
         self + "?state=" + s + "\">" + s + "</a>";
  b += "</nav><form method=\"get\" action=\"" + self +
       "\"><input type=\"hidden\" name=\"state\" value=\"" + htmlEscape(state) +
       "\"><input name=\"job\" placeholder=\"job prefix\" value=\"" +
       esc(m["filter"]["job"]) +
       "\"> <input name=\"system\" "
       "placeholder=\"system\" value=\"" +
       esc(m["filter"]["system"]) + "\"> <button>Filter</button></form>";
  b += buildsTable(m["builds"]["rows"]) +
       pager(m["builds"], self + "?state=" + state, "offset");
  if (!m["errors"]["rows"].empty()) {
    b += "<h2>Evaluation errors</h2><table><tr><th>Attribute</th><th>Error"
         "</th></tr>";
    for (auto& r : m["errors"]["rows"])
      b += "<tr><td class=\"mono\">" + esc(r["attr"]) + "</td><td><pre>" +
           esc(r["error"]) + "</pre></td></tr>";
    b += "</table>" + pager(m["errors"], self + "?state=" + state, "errors");
  }
  return htmlPage("Evaluation " + std::to_string(id), b);
}

std::string renderComparison(const json& m) {
  int64_t id = m["evaluation"]["id"], base = m["base"]["id"];
  std::string self =
      "/eval/" + std::to_string(id) + "/compare?base=" + std::to_string(base);
  std::string b = "<p>Evaluation " + evalLink(id) + " against " +
                  evalLink(base) + " (" + formatTime(m["base"]["timeMs"]) +
                  ")</p>" + regressionsSection(m["regressions"]) +
                  "<nav class=\"tabs\">";
  std::string kind = m["kind"];
  for (auto& [name, n] : m["counts"].items())
    b += "<a" + std::string(name == kind ? " class=\"on\"" : "") + " href=\"" +
         htmlEscape(self + "&kind=" + name) + "\">" + htmlEscape(name) + " (" +
         n.dump() + ")</a>";
  b += "</nav><table><tr><th>Job</th><th>Before</th><th>After</th></tr>";
  for (auto& r : m["changes"]["rows"]) {
    auto cell = [](const json& x) {
      return x.is_null()
                 ? std::string("<td class=\"muted\">—</td>")
                 : "<td>" + buildLink(x["id"]) + " " + statusBadge(x) + "</td>";
    };
    b += "<tr><td>" + nameText(r["job"]) + "</td>" + cell(r["before"]) +
         cell(r["after"]) + "</tr>";
  }
  if (m["changes"]["rows"].empty())
    b += "<tr><td colspan=\"3\" class=\"muted\">none</td></tr>";
  b += "</table>" + pager(m["changes"], self + "&kind=" + kind, "offset");
  return htmlPage("Comparison of evaluation " + std::to_string(id), b);
}

}  // namespace kiln::web
