// Notification payloads and the outbox sink (notification_outbox.h).
#include "kiln/scheduler/notification_outbox.h"

#include <cstdio>

#include "kiln/common/logging.h"
#include "kiln/common/status.h"
#include "kiln/scheduler/forge_store.h"

namespace kiln::scheduler {

using nlohmann::json;
using Kind = LifecycleEvent::Kind;

std::string lifecycleEventName(Kind kind) {
  switch (kind) {
    case Kind::kEvalStarted:
      return "eval.started";
    case Kind::kEvalFinished:
      return "eval.finished";
    case Kind::kEvalFailed:
      return "eval.failed";
    case Kind::kBuildQueued:
      return "build.queued";
    case Kind::kBuildStarted:
      return "build.started";
    case Kind::kBuildFinished:
      return "build.finished";
    case Kind::kStepFinished:
      return "step.finished";
    case Kind::kChannelAdvanced:
      return "channel.advanced";
    case Kind::kEvalQueued:
      return "eval.queued";
    case Kind::kEvalDone:
      return "eval.done";
  }
  return "unknown";
}

NotificationOutbox::NotificationOutbox(std::vector<std::string> targets,
                                       std::function<void()> queued)
    : targets_(std::move(targets)),
      queued_(std::move(queued)),
      random_(std::random_device{}()) {}

void NotificationOutbox::attach(StateDb& db) {
  db_ = &db;
  store_.emplace(db);
}

// A random (version 4) UUID: receivers drop a notification whose id they
// have seen (delivery is at least once).
std::string NotificationOutbox::newId() {
  uint64_t a = random_(), b = random_();
  a = (a & ~0xf000ull) | 0x4000ull;
  b = (b & ~(3ull << 62)) | (2ull << 62);
  char s[40];
  std::snprintf(s, sizeof s, "%08llx-%04llx-%04llx-%04llx-%012llx",
                (unsigned long long)(a >> 32),
                (unsigned long long)((a >> 16) & 0xffff),
                (unsigned long long)(a & 0xffff), (unsigned long long)(b >> 48),
                (unsigned long long)(b & 0xffffffffffffull));
  return s;
}

namespace {

// A location without the credentials a URL may hold
// (scheme://user:password@host/... becomes scheme://host/...).
std::string publicLocation(const std::string& location) {
  auto scheme = location.find("://");
  if (scheme == std::string::npos) return location;
  auto hostStart = scheme + 3;
  auto at = location.find('@', hostStart);
  auto slash = location.find('/', hostStart);
  if (at == std::string::npos || (slash != std::string::npos && at > slash))
    return location;
  return location.substr(0, hostStart) + location.substr(at + 1);
}

// The evaluated commit of a git jobset's inputs hash ("git:<commit>").
void addRevision(json& eval, const std::string& inputsHash) {
  if (inputsHash.rfind("git:", 0) == 0) eval["revision"] = inputsHash.substr(4);
}

}  // namespace

json NotificationOutbox::jobsetJson(int64_t id) {
  auto js = db_->jobset(id);
  if (!js) return json{{"id", id}};
  json out{{"id", id},
           {"name", js->name},
           {"project", store_->projectName(js->project)},
           {"kind", js->kind},
           {"location", publicLocation(js->location)},
           {"branch", js->branch}};
  if (auto f = ForgeStore(*db_).jobset(id))
    out["forge"] = json{{"forge", f->forge},
                        {"repo", f->repo},
                        {"number", f->number},
                        {"head", f->head}};
  return out;
}

json NotificationOutbox::buildJson(int64_t id, bool finished) {
  auto b = db_->build(id);
  if (!b) return nullptr;
  json j{{"id", b->id},
         {"eval", b->eval},
         {"jobset", jobsetJson(b->jobset)},
         {"job", b->job},
         {"drv", b->drvPath},
         {"nixName", b->nixName},
         {"system", b->system},
         {"createdMs", b->createdMs}};
  if (finished && b->finished) {
    j["status"] = b->status;
    j["statusName"] = std::string(stepStatusName(StepStatus(b->status)));
    j["stopMs"] = b->stopMs;
    j["error"] = b->error;
    if (b->reusedFrom) j["reusedFrom"] = b->reusedFrom;
    json outs = json::object();
    for (auto& [name, path] : db_->buildOutputs(id)) outs[name] = path;
    j["outputs"] = outs;
  }
  return j;
}

json NotificationOutbox::evalRefJson(int64_t id) {
  if (lastEval_.first == id && id != 0) return lastEval_.second;
  auto e = db_->evaluation(id);
  if (!e) return nullptr;
  json j{{"id", e->id}, {"inputsHash", e->inputsHash}};
  addRevision(j, e->inputsHash);
  lastEval_ = {id, j};
  return j;
}

json NotificationOutbox::stepJson(int64_t id) {
  auto s = db_->step(id);
  if (!s) return nullptr;
  json j{
      {"id", s->id},         {"drv", s->drvPath},       {"system", s->system},
      {"worker", s->worker}, {"attempts", s->attempts}, {"startMs", s->startMs},
      {"stopMs", s->stopMs}, {"error", s->error}};
  if (s->finished) {
    j["status"] = s->status;
    j["statusName"] = std::string(stepStatusName(StepStatus(s->status)));
  }
  return j;
}

json NotificationOutbox::payload(const LifecycleEvent& ev, int64_t timeMs) {
  json body{{"id", newId()},
            {"event", lifecycleEventName(ev.kind)},
            {"timeMs", timeMs}};
  switch (ev.kind) {
    case Kind::kEvalStarted:
      body["jobset"] = jobsetJson(ev.jobset);
      break;
    case Kind::kEvalFinished:
    case Kind::kEvalFailed: {
      body["jobset"] = jobsetJson(ev.jobset);
      if (ev.eval == 0 && ev.kind == Kind::kEvalFinished) {
        body["skipped"] = true;  // inputs unchanged: no new evaluation
        break;
      }
      auto e = db_->evaluation(ev.eval);
      if (!e) return nullptr;
      body["eval"] = json{{"id", e->id},         {"inputsHash", e->inputsHash},
                          {"timeMs", e->timeMs}, {"durationMs", e->durationMs},
                          {"jobs", e->jobs},     {"error", e->error}};
      addRevision(body["eval"], e->inputsHash);
      break;
    }
    case Kind::kBuildQueued:
    case Kind::kBuildStarted:
    case Kind::kBuildFinished:
      body["build"] = buildJson(ev.build, ev.kind == Kind::kBuildFinished);
      if (body["build"].is_null()) return nullptr;
      if (json e = evalRefJson(body["build"]["eval"].get<int64_t>());
          !e.is_null())
        body["eval"] = e;
      break;
    case Kind::kStepFinished:
      body["step"] = stepJson(ev.step);
      if (body["step"].is_null()) return nullptr;
      break;
    case Kind::kChannelAdvanced: {
      body["jobset"] = jobsetJson(ev.jobset);
      body["eval"] = evalRefJson(ev.eval);
      if (body["eval"].is_null()) return nullptr;
      body["build"] = buildJson(ev.build, true);
      break;
    }
    case Kind::kEvalQueued:
    case Kind::kEvalDone:
      return evalBuildsJson(body, ev);
  }
  return body;
}

// eval.queued and eval.done: the evaluation, its build counts and, for a
// pull request's jobset, what it rebuilds against its base, per system.
json NotificationOutbox::evalBuildsJson(json body, const LifecycleEvent& ev) {
  auto e = db_->evaluation(ev.eval);
  if (!e) return nullptr;
  body["jobset"] = jobsetJson(e->jobset);
  body["eval"] =
      json{{"id", e->id}, {"inputsHash", e->inputsHash}, {"jobs", e->jobs}};
  addRevision(body["eval"], e->inputsHash);
  BuildCounts c = db_->buildCounts(e->id);
  body["counts"] = json{{"builds", c.all},
                        {"finished", c.finished},
                        {"succeeded", c.succeeded},
                        {"failed", c.finished - c.succeeded}};
  auto forge = ForgeStore(*db_).jobset(e->jobset);
  if (forge && forge->number != 0 && ev.kind == Kind::kEvalQueued) {
    body["rebuilds"] = rebuildsAgainstBase(*db_, e->id, forge->baseJobset);
    auto evals = db_->evaluations(forge->baseJobset);
    int64_t base = 0;
    for (auto& be : evals)
      if (be.error.empty()) base = std::max(base, be.id);
    if (base) body["baseEval"] = base;
  }
  return body;
}

// Writes eval.done once every build of evaluation `eval` has finished.
void NotificationOutbox::checkEvalDone(int64_t eval, int64_t timeMs) {
  if (!eval) return;
  BuildCounts c = db_->buildCounts(eval);
  if (c.all == 0 || c.finished < c.all) return;
  LifecycleEvent done{Kind::kEvalDone};
  done.eval = eval;
  auto e = db_->evaluation(eval);
  if (!e) return;
  done.jobset = e->jobset;
  onLifecycleEvent(done, timeMs);
}

void NotificationOutbox::write(const std::string& key, const json& body,
                               int64_t timeMs) {
  std::string text = body.dump();
  for (auto& t : targets_)
    store_->add(t, key, body["event"].get<std::string>(), text, timeMs);
  if (queued_) queued_();
}

void NotificationOutbox::onLifecycleEvent(const LifecycleEvent& ev,
                                          int64_t timeMs) {
  if (!db_) {
    logWarn("notification outbox: event before the database was attached");
    return;
  }
  json body = payload(ev, timeMs);
  if (body.is_null()) return;
  std::string key;
  if (ev.kind == Kind::kChannelAdvanced)
    key = "jobset:" + std::to_string(ev.jobset);
  else if (ev.build)
    key = "build:" + std::to_string(ev.build);
  else if (ev.step)
    key = "step:" + std::to_string(ev.step);
  else
    key = "jobset:" + std::to_string(ev.jobset);
  write(key, body, timeMs);
  if (ev.kind == Kind::kEvalQueued)
    checkEvalDone(ev.eval, timeMs);
  else if (ev.kind == Kind::kBuildFinished && body.contains("build"))
    checkEvalDone(body["build"].value("eval", int64_t{0}), timeMs);
}

// The core's events: a build that ends (success, failure, cancellation) is
// build.finished; one revived by a retried dependency is queued again.
void NotificationOutbox::onBuildEvent(const BuildEvent& ev, int64_t timeMs) {
  LifecycleEvent le;
  le.build = ev.build;
  le.kind = ev.kind == BuildEvent::Kind::kRevived ? Kind::kBuildQueued
                                                  : Kind::kBuildFinished;
  onLifecycleEvent(le, timeMs);
}

}  // namespace kiln::scheduler
