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

/// `s` with &, <, >, " and ' escaped for HTML text and attribute values.
std::string htmlEscape(std::string_view s);
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
