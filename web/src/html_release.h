#pragma once
// HTML of release engineering's pieces (html_release.cc, docs/release.md).

#include "html_util.h"

namespace kiln::web {

/// The build page's "Constituents" section of an aggregate build (the
/// model's `aggregate`: aggregateJson); "" when it is null.
std::string aggregateSection(const json& aggregate);

/// The jobset page's "Channel" section: its job, where it is and its
/// advances (a channelModel).
std::string channelSection(const json& channel);

/// A job page's charts (the model's `history`: jobHistoryJson): build
/// duration, output size and closure size per build, oldest first.
std::string jobCharts(const json& history);

/// An evaluation's "Regressed" section: the jobs past their jobset's
/// growth limits, before and after (the model's `regressions`); "" when
/// there are none.
std::string regressionsSection(const json& regressions);

/// The build page's "Reproducibility" section (the model's
/// `reproducibility`: repeatCheckJson): the check's verdict, the outputs
/// that differ and diffoscope's report; "" when there was no check.
std::string reproducibilitySection(const json& check);

/// The jobset page's "Not deterministic" section (the model's
/// `nonDeterministic`: nonDeterministicJson); "" when there are none.
std::string nonDeterministicSection(const json& rows);

/// The channel's page (/jobset/{project}/{jobset}/channel/latest).
std::string renderChannel(const json& m);

/// "The last estimate ... finished ... later (n %)." for a lastEstimate
/// model ({"eval", "estimatedMs", "actualMs", "errorMs", "percent"}), or
/// "" for null.
std::string lastEstimateText(const json& last);

/// The evaluation page's expected finish (model_estimate.h's model:
/// {"expected", "last"}), or "" for null.
std::string estimateSection(const json& estimate);

}  // namespace kiln::web
