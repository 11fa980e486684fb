#pragma once
// Build logs on the web (pages_logs.cc) and helpers the page routes share.

#include <string>
#include <string_view>

#include "kiln/scheduler/logs.h"
#include "kiln/scheduler/state_view.h"
#include "kiln/web/context.h"
#include "kiln/web/model.h"
#include "kiln/web/router.h"

namespace kiln::web {

/// The last `maxBytes` of the newest log attempt of the step building
/// `drvPath` as `view` records the step ("" when there is none), cut at a
/// line start.
std::string latestLogTail(scheduler::StateView& view,
                          const std::string& stateDir,
                          const std::string& drvPath,
                          size_t maxBytes = 64 << 10);
/// Appends `text` (log lines) to `out` as server-sent events' data: one
/// `data:` event per line, where "\n", "\r\n" and a lone "\r" each end
/// a line, so that no byte of a log can start a field or an event of its
/// own (`event: end`). A last line without its end is sent as a line.
void appendEventData(std::string& out, std::string_view text);
/// The response that downloads `log`: its file, or the database's copy
/// streamed as it is decompressed (HttpError 500 if it does not).
Response logResponse(const WebContext& ctx, const scheduler::StepLog& log);
/// `/build/{id}/log` (download, `?attempt=N`) and `/build/{id}/log/live`
/// (server-sent events while the build runs).
void addLogRoutes(Router& router, WebContext& ctx);
/// A job's history page, `latest`, `latest-finished` and `badge.svg`.
void addJobRoutes(Router& router, WebContext& ctx);
/// The sizes of a store path and its closure from the central store of
/// `ctx` (opened on first use; nullopt while the scheduler has not created
/// it).
PathSizeFn storeSizes(const WebContext& ctx);
/// The query argument `name` as an integer in [min, max] (`def` when
/// absent); HttpError(400) naming it otherwise.
int64_t intArg(const Request& req, const std::string& name, int64_t def,
               int64_t min, int64_t max);

}  // namespace kiln::web
