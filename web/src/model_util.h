#pragma once
// Helpers shared by the page models (model_pages.cc, model_build.cc).

#include "kiln/web/model.h"

namespace kiln::web {

/// An evaluation summary as JSON (counts included).
json evaluationJson(const scheduler::EvaluationSummary& e);
/// A page's JSON: {"offset", "limit", "more", "rows"}.
json pageJson(const scheduler::Page& page, bool more, json rows);
/// A jobset row as JSON (without its last inputs).
json jobsetRowJson(const scheduler::JobsetRow& j);
/// The jobset `jobset` of project `project`; NotFound otherwise.
scheduler::JobsetRow findJobset(scheduler::StateView& view,
                                const std::string& project,
                                const std::string& jobset);

}  // namespace kiln::web
