// The per-thread state views and the request path of WebContext.
#include "kiln/web/context.h"

#include <atomic>
#include <unordered_map>

#include "kiln/scheduler/request_queue.h"

namespace kiln::web {

uint64_t WebContext::nextSerial() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

scheduler::StateView* WebContext::view() const {
  // One read-only connection per (thread, context): SQLite connections
  // must not be shared between threads without locking.
  thread_local std::unordered_map<uint64_t,
                                  std::unique_ptr<scheduler::StateView>>
      views;
  auto& slot = views[serial];
  if (!slot) slot = scheduler::StateView::openIfExists(database());
  return slot.get();
}

nlohmann::json WebContext::apply(const std::string& kind,
                                 const nlohmann::json& args) const {
  if (submit) return submit(kind, args);
  return scheduler::submitRequest(database(), stateDir, kind, args,
                                  scheduler::kRequestTimeout, checkEvaluator);
}

int64_t WebContext::queue(const std::string& kind,
                          const nlohmann::json& args) const {
  if (enqueue) return enqueue(kind, args);
  scheduler::StateDb db(database());
  return scheduler::queueRequest(db, kind, args);
}

std::optional<scheduler::TokenScope> WebContext::scopeOf(
    const std::string& token) const {
  if (tokenScope) return tokenScope(token);
  scheduler::StateView* v = view();
  if (!v) return std::nullopt;
  return scheduler::TokenStore(v->rows()).check(token);
}

}  // namespace kiln::web
