// HTML of the build, job, queue, workers and search pages (html.h).
#include "html_release.h"
#include "html_util.h"

namespace kiln::web {

namespace {

std::string stepsTable(const json& steps) {
  std::string t =
      "<table><tr><th>Step</th><th>Status</th><th>Worker</th>"
      "<th>Attempts</th><th>Duration</th><th class=\"num\">Peak "
      "memory</th><th class=\"num\">CPU</th><th class=\"num\">"
      "Build dir</th></tr>";
  // What the last attempt used (docs/worker.md, "Limits per build").
  auto measured = [](const json& v, bool bytes) -> std::string {
    if (!v.is_number() || v.get<int64_t>() <= 0) return "—";
    return bytes ? formatBytes(v) : formatDuration(v.get<int64_t>() / 1000);
  };
  for (auto& s : steps) {
    std::string error = s.value("error", "");
    t += "<tr><td class=\"mono\">" + esc(s["drvPath"]) + "</td><td>" +
         statusBadge(s) +
         (error.empty() || !s["status"].is_number() || s["status"] == 0
              ? std::string()
              : " <span class=\"muted\">" + htmlEscape(error) + "</span>") +
         "</td><td>" + esc(s["worker"]) + "</td><td class=\"num\">" +
         s["attempts"].dump() + "</td><td>" +
         (s["durationMs"].is_null() ? "—" : formatDuration(s["durationMs"])) +
         "</td><td class=\"num\">" + measured(s["peakMemoryBytes"], true) +
         "</td><td class=\"num\">" + measured(s["cpuTimeUs"], false) +
         "</td><td class=\"num\">" + measured(s["buildDirBytes"], true) +
         "</td></tr>";
  }
  if (steps.empty())
    t += "<tr><td colspan=\"8\" class=\"muted\">none</td></tr>";
  return t + "</table>";
}


// One action on the build: a form posting its API token (operate scope)
// to the write API, which redirects back here; no JavaScript needed.
std::string actionForm(int64_t id, const std::string& action,
                       const std::string& label, const std::string& extra) {
  return "<form class=\"action\" method=\"post\" action=\"/api/build/" +
         std::to_string(id) + "/" + action +
         "\"><input type=\"password\" name=\"token\" "
         "placeholder=\"operate token\" required>" +
         extra + "<button type=\"submit\">" + label + "</button></form>";
}

std::string buildActions(const json& b) {
  int64_t id = b["id"];
  std::string out = "<h2>Actions</h2>";
  if (!b["finished"].get<bool>()) {
    out += actionForm(id, "cancel", "Cancel", "");
    out += actionForm(id, "bump", "Bump",
                      "<input type=\"number\" name=\"priority\" "
                      "value=\"100\" min=\"0\" max=\"1000000\">");
  } else if (b["status"] != 0) {
    out += actionForm(id, "restart", "Restart", "");
  } else {
    return "";
  }
  return out;
}

}  // namespace

std::string renderBuild(const json& m) {
  auto& b = m["build"];
  int64_t id = b["id"];
  bool finished = b["finished"];
  std::string body =
      "<table><tr><th>Status</th><td id=\"status\">" + statusBadge(b) +
      (b["status"].is_null() ? "" : " (" + b["status"].dump() + ")") +
      "</td></tr><tr><th>Job</th><td><a href=\"" +
      htmlEscape("/jobset/" + percentEncodeSegment(m["project"].get<std::string>()) + "/" +
                 percentEncodeSegment(m["jobset"].get<std::string>()) + "/job/" +
                 percentEncodeSegment(b["job"].get<std::string>())) +
      "\">" + nameText(b["job"]) + "</a></td></tr><tr><th>Jobset</th><td>" +
      jobsetLink(m["project"], m["jobset"]) + "</td></tr><tr><th>Evaluation"
      "</th><td>" + evalLink(b["eval"]) + "</td></tr><tr><th>System</th><td>" +
      esc(b["system"]) + "</td></tr><tr><th>Derivation</th><td "
      "class=\"mono\">" + esc(b["drvPath"]) + "</td></tr><tr><th>Queued"
      "</th><td>" + formatTime(b["createdMs"]) + "</td></tr><tr><th>Finished"
      "</th><td>" + formatTime(b["stopMs"]) + "</td></tr><tr><th>Priority"
      "</th><td>" + b["globalPriority"].dump() + "</td></tr>";
  if (!b["error"].get<std::string>().empty())
    body += "<tr><th>Error</th><td>" + esc(b["error"]) + "</td></tr>";
  body += "</table>" + buildActions(b) + aggregateSection(m["aggregate"]) +
          reproducibilitySection(m["reproducibility"]);
  body += "<h2>Outputs</h2><table><tr><th>Name</th><th>Path</th><th "
          "class=\"num\">Size</th><th class=\"num\">Closure</th></tr>";
  for (auto& o : m["outputs"])
    body += "<tr><td>" + esc(o["name"]) + "</td><td class=\"mono\">" +
            esc(o["path"]) + "</td><td class=\"num\">" +
            (o["narSize"].is_null() ? "—" : formatBytes(o["narSize"])) +
            "</td><td class=\"num\">" +
            (o["closureSize"].is_null() ? "—" : formatBytes(o["closureSize"])) +
            "</td></tr>";
  body += "</table><h2>Steps built for it</h2>" + stepsTable(m["steps"]);
  body += "<h2>Dependencies</h2>" + stepsTable(m["dependencies"]);
  if (m["stepsTruncated"].get<bool>())
    body += "<p class=\"muted\">(lists cut at their limit)</p>";
  body += "<h2>Log</h2><p>";
  for (auto& l : m["logs"]) {
    std::string a = l["attempt"].dump();
    body += "<a href=\"/build/" + std::to_string(id) + "/log?attempt=" + a +
            "\">attempt " + a + "</a> ";
  }
  if (m["logs"].empty()) body += "<span class=\"muted\">no log yet</span>";
  body += "</p>";
  std::string tail = m.value("logTail", "");
  body += "<pre class=\"log\" id=\"log\"" +
          (finished ? std::string()
                    : " data-live=\"/build/" + std::to_string(id) +
                          "/log/live\"") +
          ">" + htmlEscape(tail) + "</pre>";
  if (!finished) body += liveLogScript();
  return htmlPage("Build " + std::to_string(id), body);
}

std::string renderJob(const json& m) {
  std::string project = m["project"], jobset = m["jobset"], job = m["job"];
  std::string self = "/jobset/" + percentEncodeSegment(project) + "/" +
                     percentEncodeSegment(jobset) + "/job/" +
                     percentEncodeSegment(job);
  std::string b = "<p>" + jobsetLink(project, jobset) +
                  " · <a href=\"" + htmlEscape(self) + "/latest\">latest</a> · "
                  "<a href=\"" + htmlEscape(self) + "/latest-finished\">latest "
                  "finished</a> · <img alt=\"status badge\" src=\"" +
                  htmlEscape(self) + "/badge.svg\"></p>";
  b += jobCharts(m["history"]);
  b += "<table><tr><th>Build</th><th>Evaluation</th><th>Status</th><th>"
       "Finished</th><th>Duration</th></tr>";
  for (auto& r : m["builds"]["rows"])
    b += "<tr><td>" + buildLink(r["id"]) + "</td><td>" + evalLink(r["eval"]) +
         "</td><td>" + statusBadge(r) + "</td><td>" + formatTime(r["stopMs"]) +
         "</td><td>" +
         (r["durationMs"].is_null() ? "—" : formatDuration(r["durationMs"])) +
         "</td></tr>";
  b += "</table>" + pager(m["builds"], self, "offset");
  return htmlPage("Job " + job, b);
}

std::string renderQueue(const json& m) {
  std::string b;
  if (!m["scheduler"].get<bool>())
    return htmlPage("Queue", "<p class=\"muted\">No running scheduler.</p>");
  b += "<p>" + m["total"].dump() + " unfinished steps, as of " +
       formatTime(m["takenMs"]) + ".</p><table><tr><th>Step</th><th>System"
       "</th><th>State</th><th>Why it waits</th></tr>";
  for (auto& s : m["steps"]["rows"])
    b += "<tr><td class=\"mono\">" + esc(s["drvPath"]) + "</td><td>" +
         esc(s["system"]) + "</td><td>" + esc(s["state"]) +
         "</td><td>" + esc(s["whyWaiting"]) + "</td></tr>";
  return htmlPage("Queue", b + "</table>" + pager(m["steps"], "/queue", "offset"));
}

std::string workersTable(const json& rows) {
  std::string t = "<table><tr><th>Worker</th><th>Systems</th><th "
                  "class=\"num\">Slots</th><th class=\"num\">Running</th><th "
                  "class=\"num\">Load</th></tr>";
  for (auto& w : rows) {
    std::string systems;
    for (auto& s : w["systems"])
      systems += (systems.empty() ? "" : ", ") + s.get<std::string>();
    t += "<tr><td>" + esc(w["name"]) + "</td><td>" +
         htmlEscape(systems) + "</td><td class=\"num\">" + w["slots"].dump() +
         "</td><td class=\"num\">" + w["runningSteps"].dump() +
         "</td><td class=\"num\">" +
         std::to_string(int(w["load"].get<double>() * 100)) + "%</td></tr>";
  }
  if (rows.empty()) t += "<tr><td colspan=\"5\" class=\"muted\">none</td></tr>";
  return t + "</table>";
}

namespace {

std::string joined(const json& list, const char* sep) {
  std::string out;
  for (auto& x : list) out += (out.empty() ? "" : sep) + htmlEscape(x.get<std::string>());
  return out;
}

// What the worker's last heartbeat said of its machine, led by why it
// takes no new step when it is over a pressure threshold.
std::string machineCell(const json& w) {
  std::string pressure = w.value("pressure", std::string());
  std::string health = w.value("health", std::string());
  std::string cell = health.empty() ? "" : htmlEscape(health);
  if (pressure.empty()) return cell;
  return "<strong>no new steps: " + htmlEscape(pressure) + "</strong>" +
         (cell.empty() ? "" : "<br>" + cell);
}

// The workers page's table: the overview's columns plus features, the
// steps each builds now, when it was last heard from and its results.
std::string workerDetailsTable(const json& rows) {
  std::string t =
      "<table><tr><th>Worker</th><th>Systems</th><th>Features</th><th "
      "class=\"num\">Slots</th><th>Building</th><th>Last seen</th><th "
      "class=\"num\">Succeeded</th><th class=\"num\">Failed</th><th>"
      "Machine</th></tr>";
  for (auto& w : rows) {
    std::string steps = joined(w["steps"], "<br>");
    t += "<tr><td>" + esc(w["name"]) + "</td><td>" +
         joined(w["systems"], ", ") + "</td><td>" +
         joined(w["features"], ", ") + "</td><td class=\"num\">" +
         w["slots"].dump() + "</td><td class=\"mono\">" +
         (steps.empty() ? "<span class=\"muted\">idle</span>" : steps) +
         "</td><td>" +
         (w["lastSeenMs"].get<int64_t>() ? formatTime(w["lastSeenMs"])
                                         : "never") +
         "</td><td class=\"num\">" + w["succeededSteps"].dump() +
         "</td><td class=\"num\">" + w["failedSteps"].dump() + "</td><td>" +
         machineCell(w) + "</td></tr>";
  }
  if (rows.empty()) t += "<tr><td colspan=\"9\" class=\"muted\">none</td></tr>";
  return t + "</table><p class=\"muted\">Succeeded and failed count the steps " +
         std::string("settled since each worker connected.</p>");
}

}  // namespace

std::string renderWorkers(const json& m) {
  if (!m["scheduler"].get<bool>())
    return htmlPage("Workers", "<p class=\"muted\">No running scheduler.</p>");
  return htmlPage("Workers", workerDetailsTable(m["workers"]));
}

std::string renderSearch(const json& m) {
  std::string b = "<h2>Jobs</h2><table><tr><th>Job</th><th>Jobset</th><th>"
                  "Latest build</th></tr>";
  for (auto& j : m["jobs"])
    b += "<tr><td>" + nameText(j["job"]) + "</td><td>" +
         jobsetLink(j["project"], j["jobset"]) + "</td><td>" +
         buildLink(j["latestBuild"]) + "</td></tr>";
  b += "</table><h2>Builds by derivation</h2>" + buildsTable(m["builds"]);
  b += "<h2>Outputs</h2><table><tr><th>Path</th><th>Build</th></tr>";
  for (auto& o : m["outputs"])
    b += "<tr><td class=\"mono\">" + esc(o["path"]) + "</td><td>" +
         buildLink(o["build"]) + "</td></tr>";
  return htmlPage("Search: " + m["query"].get<std::string>(), b + "</table>");
}

}  // namespace kiln::web
