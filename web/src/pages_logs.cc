// Build logs (download per attempt, live server-sent events) and the job
// routes (history, latest redirects, badge).
#include "pages_logs.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "kiln/scheduler/logs.h"
#include "kiln/web/html.h"
#include "kiln/web/model.h"

namespace kiln::web {

namespace {

using scheduler::StepLog;
using scheduler::StepLogReader;

const char* const kLogType = "text/plain; charset=utf-8";

// A log the database holds, streamed as it is decompressed (or as its
// pieces are read, for a running attempt: what is there now).
class DatabaseLogBody : public BodyStream {
 public:
  DatabaseLogBody(const WebContext& ctx, StepLog log)
      : ctx_(ctx), reader_(std::move(log)) {}

  // Reads the first piece now, so that a log that does not decompress is
  // an error response rather than a cut body.
  void start() {
    try {
      first_ = read(kFirstBytes);
    } catch (const scheduler::CorruptLogError& e) {
      throw HttpError(500, e.what());
    }
  }

  Next next(std::string& out, size_t max) override {
    if (!first_.empty()) {
      size_t n = std::min(max, first_.size());
      out.append(first_, 0, n);
      first_.erase(0, n);
      return Next::kData;
    }
    std::string piece;
    try {
      piece = read(max);
    } catch (const scheduler::CorruptLogError& e) {
      out += "\n[kiln: " + std::string(e.what()) + "]\n";
      return Next::kEnd;
    }
    if (piece.empty()) return Next::kEnd;
    out += piece;
    return Next::kData;
  }

 private:
  static constexpr size_t kFirstBytes = 64 << 10;

  std::string read(size_t max) {
    auto* view = ctx_.view();
    if (!view) return "";
    std::string piece = reader_.read(view->rows(), offset_, max);
    offset_ += static_cast<int64_t>(piece.size());
    return piece;
  }

  const WebContext& ctx_;
  StepLogReader reader_;
  int64_t offset_ = 0;
  std::string first_;
};

}  // namespace

Response logResponse(const WebContext& ctx, const scheduler::StepLog& log) {
  if (log.where == StepLog::Where::kFile)
    return Response::file(log.path, kLogType);
  auto body = std::make_shared<DatabaseLogBody>(ctx, log);
  body->start();
  return Response::streamed(body, kLogType);
}

void appendEventData(std::string& out, std::string_view text) {
  size_t i = 0;
  for (;;) {
    size_t j = text.find_first_of("\r\n", i);
    out += "data: ";
    out += text.substr(i, j - i);
    out += "\n\n";
    if (j == std::string_view::npos) return;
    i = j + (text.compare(j, 2, "\r\n") == 0 ? 2 : 1);
    if (i == text.size()) return;
  }
}

namespace {

scheduler::BuildRow findBuild(WebContext& ctx, int64_t id) {
  auto* view = ctx.view();
  auto b = view ? view->rows().build(id) : std::nullopt;
  if (!b) throw HttpError(404, "build " + std::to_string(id) + " not found");
  return *b;
}

// Where a reconnecting EventSource left off: its `Last-Event-ID`,
// "ATTEMPT:OFFSET" as LiveLog sends them; {0, 0} (from the start) when
// absent or malformed.
std::pair<int, int64_t> resumePoint(const Request& req) {
  std::string id = req.header("last-event-id");
  auto colon = id.find(':');
  if (colon == std::string::npos || id.size() > 40) return {0, 0};
  try {
    size_t used = 0;
    int attempt = std::stoi(id.substr(0, colon), &used);
    if (used != colon) return {0, 0};
    std::string rest = id.substr(colon + 1);
    int64_t offset = std::stoll(rest, &used);
    if (used != rest.size() || attempt < 1 || offset < 0) return {0, 0};
    return {attempt, offset};
  } catch (const std::exception&) {
    return {0, 0};
  }
}

// Streams the newest log attempt of a build's step as server-sent events
// (one `data:` per line), switching to a newer attempt when one appears,
// and ends with an `end` event carrying the build's status label. After
// each batch of lines an `id:` ("ATTEMPT:OFFSET") lets a reconnecting
// browser resume there (the server ends idle streams).
class LiveLog : public BodyStream {
 public:
  LiveLog(WebContext& ctx, scheduler::BuildRow build,
          std::pair<int, int64_t> resume)
      : ctx_(ctx),
        build_(std::move(build)),
        resumeAttempt_(resume.first),
        resumeOffset_(resume.second) {}

  Next next(std::string& out, size_t max) override {
    try {
      return nextPiece(out, max);
    } catch (const scheduler::CorruptLogError& e) {
      appendEventData(out, "[kiln: " + std::string(e.what()) + "]");
      auto* view = ctx_.view();
      auto b = view ? view->rows().build(build_.id) : std::nullopt;
      out += "event: end\ndata: " +
             statusLabel(b && b->finished ? b->status : -1) + "\n\n";
      return Next::kEnd;
    }
  }

 private:
  // The newest attempt's log, from the database or its file; a reader of
  // it (again when it moved from the database's pieces to its row).
  void follow(scheduler::StateView& view, std::string& out) {
    auto logs = scheduler::stepLogs(view.rows(), ctx_.stateDir, build_.drvPath);
    if (logs.empty()) return;
    const StepLog& newest = logs.back();
    if (newest.attempt != attempt_) {
      attempt_ = newest.attempt;
      offset_ = 0;
      if (attempt_ == resumeAttempt_)  // a reconnect: what it has, skipped
        offset_ = std::min(resumeOffset_, newest.size);
      else
        out += "event: attempt\ndata: " + std::to_string(attempt_) + "\n\n";
    } else if (reader_ && reader_->log().where == newest.where) {
      return;
    }
    reader_ = std::make_unique<StepLogReader>(newest);
  }

  std::string readFrom(scheduler::StateView* view, size_t max) {
    return view && reader_ ? reader_->read(view->rows(), offset_, max) : "";
  }

  Next nextPiece(std::string& out, size_t max) {
    auto* view = ctx_.view();
    if (view) follow(*view, out);
    std::string chunk = readFrom(view, max / 2);
    size_t end = chunk.rfind('\n');
    if (end != std::string::npos) {
      chunk.resize(end + 1);
      offset_ += int64_t(chunk.size());
      appendEventData(out, chunk);
      appendId(out);
      return Next::kData;
    }
    auto b = view ? view->rows().build(build_.id) : std::nullopt;
    if (!b || b->finished) {
      // The last line may lack its newline: send what is left first.
      std::string rest = readFrom(view, max / 2);
      if (!rest.empty()) {
        offset_ += int64_t(rest.size());
        appendEventData(out, rest);
        appendId(out);
        return Next::kData;
      }
      // The scheduler stores a finished attempt's log in the database a
      // moment after the build's row: until it has (or for a while, in
      // case it never does), its last pieces may still come.
      if (awaitingStoredLog()) return out.empty() ? Next::kWait : Next::kData;
      out += "event: end\ndata: " + statusLabel(b ? b->status : -1) + "\n\n";
      return Next::kEnd;
    }
    return out.empty() ? Next::kWait : Next::kData;
  }

  // Whether the newest attempt's log is the database's pieces of a
  // finished build, within kStoreWait of first seeing it finished.
  bool awaitingStoredLog() {
    if (!reader_ || reader_->log().where != StepLog::Where::kLive) return false;
    const Clock& clock = ctx_.clock ? *ctx_.clock : RealClock::instance();
    if (!finishedSeen_) finishedSeen_ = clock.now();
    return clock.now() - *finishedSeen_ < kStoreWait;
  }

  // An event with an id and no data: it moves the browser's last event
  // id without dispatching anything.
  void appendId(std::string& out) const {
    out += "id: " + std::to_string(attempt_) + ":" + std::to_string(offset_) +
           "\n\n";
  }

  WebContext& ctx_;
  scheduler::BuildRow build_;
  int resumeAttempt_;
  int64_t resumeOffset_;
  int attempt_ = 0;
  std::unique_ptr<StepLogReader> reader_;
  int64_t offset_ = 0;
  std::optional<Clock::TimePoint> finishedSeen_;
  static constexpr auto kStoreWait = std::chrono::seconds(10);
};

}  // namespace

std::string latestLogTail(scheduler::StateView& view,
                          const std::string& stateDir,
                          const std::string& drvPath, size_t maxBytes) {
  auto logs = scheduler::stepLogs(view.rows(), stateDir, drvPath);
  if (logs.empty()) return "";
  int64_t from = std::max<int64_t>(0, logs.back().size - int64_t(maxBytes));
  std::string tail;
  try {
    tail = StepLogReader(logs.back()).read(view.rows(), from, maxBytes);
  } catch (const scheduler::CorruptLogError& e) {
    return "[kiln: " + std::string(e.what()) + "]\n";
  }
  if (from > 0) {
    size_t nl = tail.find('\n');
    tail = nl == std::string::npos ? "" : tail.substr(nl + 1);
  }
  return tail;
}

void addLogRoutes(Router& router, WebContext& ctx) {
  router.add("GET", "/build/{id}/log",
             [&ctx](const Request& req, const RouteParams& p) {
               auto b = findBuild(ctx, p.id("id"));
               auto logs = scheduler::stepLogs(ctx.view()->rows(), ctx.stateDir,
                                               b.drvPath);
               if (logs.empty())
                 throw HttpError(
                     404, "build " + std::to_string(b.id) + " has no log yet");
               int64_t attempt =
                   intArg(req, "attempt", logs.back().attempt, 1, 1'000'000);
               for (auto& log : logs)
                 if (log.attempt == attempt) return logResponse(ctx, log);
               throw HttpError(404, "build " + std::to_string(b.id) +
                                        " has no log attempt " +
                                        std::to_string(attempt));
             });
  router.add("GET", "/build/{id}/log/live",
             [&ctx](const Request& req, const RouteParams& p) {
               auto b = findBuild(ctx, p.id("id"));
               auto r = Response::streamed(
                   std::make_shared<LiveLog>(ctx, b, resumePoint(req)),
                   "text/event-stream");
               r.headers.push_back({"Cache-Control", "no-cache"});
               return r;
             });
}

namespace {

scheduler::JobsetRow jobsetOf(WebContext& ctx, const RouteParams& p) {
  auto* view = ctx.view();
  auto js = view ? view->rows().jobsetByName(p.at("project"), p.at("jobset"))
                 : std::nullopt;
  if (!js)
    throw HttpError(
        404, "jobset " + p.at("project") + ":" + p.at("jobset") + " not found");
  return *js;
}

Handler latest(WebContext& ctx, bool finishedEval) {
  return [&ctx, finishedEval](const Request&, const RouteParams& p) {
    auto js = jobsetOf(ctx, p);
    int64_t id = ctx.view()->latestBuild(js.id, p.at("job"), finishedEval);
    if (!id)
      throw HttpError(404,
                      "job " + p.at("job") + " has no successful build" +
                          (finishedEval ? " in a finished evaluation" : ""));
    return Response::redirect("/build/" + std::to_string(id));
  };
}

Handler jobPage(WebContext& ctx, bool api) {
  return [&ctx, api, sizes = storeSizes(ctx)](const Request& req,
                                             const RouteParams& p) {
    auto* view = ctx.view();
    if (!view)
      throw HttpError(503, "the scheduler has not created its state yet");
    scheduler::Page page{
        intArg(req, "offset", 0, 0, scheduler::Page::kMaxOffset),
        intArg(req, "limit", 50, 1, scheduler::Page::kMaxLimit)};
    try {
      json m =
          jobModel(*view, p.at("project"), p.at("jobset"), p.at("job"), page,
                   sizes);
      return api || req.wantsJson() ? Response::json(m)
                                    : Response::html(renderJob(m));
    } catch (const NotFound& e) {
      throw HttpError(404, e.what());
    }
  };
}

}  // namespace

void addJobRoutes(Router& router, WebContext& ctx) {
  const std::string job = "/jobset/{project}/{jobset}/job/{job}";
  router.add("GET", job, jobPage(ctx, false));
  router.add("GET", "/api" + job, jobPage(ctx, true));
  router.add("GET", job + "/latest", latest(ctx, false));
  router.add("GET", job + "/latest-finished", latest(ctx, true));
  router.add(
      "GET", job + "/badge.svg", [&ctx](const Request&, const RouteParams& p) {
        auto js = jobsetOf(ctx, p);
        auto h =
            ctx.view()->jobHistory(js.id, p.at("job"), scheduler::Page{0, 1});
        std::string name;
        if (!h.rows.empty())
          name = statusName(h.rows[0].build.finished ? h.rows[0].build.status
                                                     : -1);
        Response r;
        r.contentType = "image/svg+xml";
        r.body = renderBadge(name);
        r.headers.push_back({"Cache-Control", "no-cache"});
        return r;
      });
}

}  // namespace kiln::web
