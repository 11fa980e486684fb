#pragma once
/// Release engineering's rows (docs/release.md, schema migration 15):
/// aggregate builds' constituents (table `aggregate_constituents`) and
/// jobsets' channels (`jobsets.channel_job`, table `channel_advances`).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// The most constituents listed per aggregate build.
inline constexpr int64_t kMaxListedConstituents = 5000;

/// Records that build `first` is an aggregate whose constituent is build
/// `second`, for each pair (idempotent), a few hundred per statement.
/// Throws SqlError.
void addAggregateConstituents(
    StateDb& db, const std::vector<std::pair<int64_t, int64_t>>& edges);

/// The constituents' builds of aggregate build `aggregate`, by job name
/// (at most kMaxListedConstituents); empty when it is no aggregate.
std::vector<BuildRow> aggregateConstituents(StateDb& db, int64_t aggregate);

/// Whether build `build` is an aggregate (has recorded constituents).
bool isAggregate(StateDb& db, int64_t build);

/// One advance of a jobset's channel: to evaluation `eval`, whose build
/// `build` of the channel job succeeded.
struct ChannelAdvance {
  int64_t id = 0;
  int64_t jobset = 0;
  int64_t eval = 0;
  int64_t build = 0;
  int64_t timeMs = 0;
};

/// Where build `build` could take its jobset's channel: its jobset and
/// evaluation when the build is of the jobset's channel job, finished and
/// succeeded, and the evaluation is newer than the one the channel is at
/// (`current`, nullopt when it never advanced).
struct ChannelCandidate {
  int64_t jobset = 0;
  int64_t eval = 0;
  int64_t build = 0;
  std::optional<ChannelAdvance> current;
};
std::optional<ChannelCandidate> channelCandidate(StateDb& db, int64_t build);

/// Records the advance of `c`'s channel to its evaluation at `nowMs`.
ChannelAdvance recordChannelAdvance(StateDb& db, const ChannelCandidate& c,
                                    int64_t nowMs);

/// channelCandidate, then recordChannelAdvance when there is one (no
/// regression gate). Returns the advance recorded (nullopt: none). Call
/// it in the transaction that finished the build. Throws SqlError.
std::optional<ChannelAdvance> advanceChannel(StateDb& db, int64_t build,
                                             int64_t nowMs);

/// A job whose closure size ("closure", bytes) or build time ("time",
/// ms) grew past its jobset's limit between evaluation `baseEval` (the
/// channel's) and the evaluation it is recorded for.
struct Regression {
  std::string job;
  std::string kind;
  int64_t baseEval = 0;
  int64_t before = 0;
  int64_t after = 0;
};

/// The closure size (bytes) of a store path; nullopt when not known.
using ClosureSizeFn =
    std::function<std::optional<int64_t>(const std::string& path)>;

/// Build times under this are not compared (their growth is noise).
inline constexpr int64_t kMinComparedBuildMs = 10'000;
/// The most jobs an evaluation's gate compares.
inline constexpr int64_t kMaxComparedJobs = 100'000;

/// The jobs of evaluation `eval` that succeeded there and in `base` and
/// whose `out` output's closure (through `closureSize`) grew more than
/// `maxClosureGrowthPct` percent, or whose top step's run time (at least
/// kMinComparedBuildMs before) grew more than `maxBuildTimeGrowthPct`
/// percent; a limit of 0 is not checked. By job, then kind.
std::vector<Regression> findRegressions(StateDb& db, int64_t eval, int64_t base,
                                        int64_t maxClosureGrowthPct,
                                        int64_t maxBuildTimeGrowthPct,
                                        const ClosureSizeFn& closureSize);

/// Records `regressions` of evaluation `eval` (replacing any recorded).
void recordRegressions(StateDb& db, int64_t eval,
                       const std::vector<Regression>& regressions);

/// The regressions recorded for evaluation `eval` (it held the channel),
/// by job, then kind; at most kMaxListedConstituents.
std::vector<Regression> evalRegressions(StateDb& db, int64_t eval);

/// Where jobset `jobset`'s channel is (nullopt: it never advanced).
std::optional<ChannelAdvance> latestChannelAdvance(StateDb& db, int64_t jobset);

/// The advances of jobset `jobset`'s channel, newest first, at most `limit`
/// (1..Page::kMaxLimit).
std::vector<ChannelAdvance> channelAdvances(StateDb& db, int64_t jobset,
                                            int64_t limit);

/// Records that evaluation `eval`'s sources are store path `path`.
void setEvalSources(StateDb& db, int64_t eval, const std::string& path);
/// The store path of evaluation `eval`'s sources ("" when not kept).
std::string evalSources(StateDb& db, int64_t eval);

/// The most store paths a channel lists.
inline constexpr int64_t kMaxChannelPaths = 1'000'000;

/// The output paths of evaluation `eval`'s succeeded builds, sorted,
/// distinct, at most kMaxChannelPaths (a channel's store-paths).
std::vector<std::string> succeededOutputs(StateDb& db, int64_t eval);

}  // namespace kiln::scheduler
