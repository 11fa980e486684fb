#pragma once
/// Server-rendered HTML of the web's pages (docs/web.md): each renderer
/// turns a page model (model.h) into a whole document with inline CSS and
/// inline SVG charts; no page needs JavaScript except the live log of a
/// running build (a small inline script on server-sent events). Every text
/// from the database is escaped.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::web {

/// `s` with &, <, >, " and ' escaped for HTML text and attribute values,
/// and each bidirectional control character (U+202E and its kin, which
/// would reorder what follows: a name that reads as another) shown as
/// its code, "[U+202E]".
std::string htmlEscape(std::string_view s);
/// A name (job, project, jobset) escaped for HTML text; one longer than
/// `maxChars` characters is cut there with "…" and shown whole on hover
/// (a `title`), so that no name pushes a table off the screen.
std::string htmlName(std::string_view name, size_t maxChars = 80);
/// The live log's script element (a running build's page): follows
/// `/build/{id}/log/live` into `<pre id="log" data-live=...>`.
std::string liveLogScript();
/// The Content-Security-Policy of every answer: nothing loads from
/// elsewhere, the pages' one inline style and one inline script run (by
/// their SHA-256), no other script, no framing, forms post to this site.
const std::string& contentSecurityPolicy();
/// A Unix-ms time as "2026-12-04 19:49:18 UTC" ("—" for 0).
std::string formatTime(int64_t ms);
/// A duration in ms as "42s", "3m 05s", "2h 01m" ("—" when negative).
std::string formatDuration(int64_t ms);
/// A byte count as "512 B", "1.5 KiB", "3.2 MiB", "1.1 GiB".
std::string formatBytes(int64_t bytes);

/// A bar chart of `values` (one bar each, heights relative to `max`, or to
/// the largest value when `max` <= 0) as an inline SVG with a title per
/// bar (`labels`, same length) and an accessible `title`.
std::string svgBars(const std::string& title, const std::vector<double>& values,
                    const std::vector<std::string>& labels, double max = 0);

/// A whole page: the layout (navigation, search form) around `body`.
std::string htmlPage(const std::string& title, const std::string& body);

/// The pages, from the models of the same names (model.h).
std::string renderOverview(const nlohmann::json& m);
std::string renderProjects(const nlohmann::json& m);
std::string renderJobset(const nlohmann::json& m);
std::string renderEvaluation(const nlohmann::json& m);
std::string renderComparison(const nlohmann::json& m);
/// `canOperate`: show restart/cancel/bump forms (they still need a token).
std::string renderBuild(const nlohmann::json& m);
std::string renderJob(const nlohmann::json& m);
std::string renderQueue(const nlohmann::json& m);
std::string renderWorkers(const nlohmann::json& m);
std::string renderSearch(const nlohmann::json& m);
/// An error page for `status` with `message`.
std::string renderError(int status, const std::string& message);

/// The SVG status badge of a job ("build | passing" etc.) for the status
/// name of its newest build ("" when it has none).
std::string renderBadge(const std::string& statusName);

}  // namespace kiln::web
