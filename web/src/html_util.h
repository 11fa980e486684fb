#pragma once
// Pieces shared by the HTML renderers (html_pages.cc, html_build.cc).

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/web/html.h"
#include "kiln/web/http.h"

namespace kiln::web {

using nlohmann::json;

/// A JSON string (or any value, dumped) escaped for HTML.
inline std::string esc(const json& j) {
  return htmlEscape(j.is_string() ? j.get<std::string>() : j.dump());
}
/// A name from a model (job, project, jobset) for HTML text: escaped, and
/// a very long one cut with the whole name on hover (htmlName).
inline std::string nameText(const json& j) {
  return htmlName(j.is_string() ? j.get<std::string>() : j.dump());
}
/// A status label coloured by its name (from a build or step model row).
std::string statusBadge(const json& row);
/// Links to a build, an evaluation, a jobset.
std::string buildLink(int64_t id);
std::string evalLink(int64_t id);
std::string jobsetLink(const std::string& project, const std::string& jobset);
/// "newer"/"more" links of a page model (offset, limit, more) on `base`
/// with the offset in query argument `param`.
std::string pager(const json& page, const std::string& base,
                  const std::string& param);
/// Tables of evaluation summaries, builds, workers.
std::string evaluationsTable(const json& rows);
std::string buildsTable(const json& rows);
std::string workersTable(const json& rows);

}  // namespace kiln::web
