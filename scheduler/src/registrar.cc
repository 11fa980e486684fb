#include "kiln/scheduler/registrar.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

#include "kiln/common/error.h"
#include "kiln/common/fail_point.h"
#include "kiln/common/logging.h"
#include "kiln/store/content_check.h"

namespace kiln::scheduler {

void registerUpload(store::LocalStore& store, const Registration& r,
                    Source& nar) {
  // The path and its DerivationOutputs row commit together: a crash leaves
  // both or neither. The .drv may come from nix-instantiate, which
  // registers no outputs, so the row is always written here.
  store::LocalStore::Batch batch(store, store::LocalStore::Batch::Sync::kEachFile);
  if (r.verified)
    batch.addVerifiedNar(r.info, nar);
  else
    batch.addFromNar(r.info, nar);
  if (r.info.deriver)
    batch.registerDerivationOutputs(*r.info.deriver, {{r.output, r.info.path}});
  batch.commit();
  KILN_FAIL_POINT("scheduler.upload.after-commit");
}

Registrar::Registrar(RegisterFn fn) : fn_(std::move(fn)) {
  wake_ = AutoCloseFD(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) throwSysError("creating the registrar's eventfd");
  thread_ = std::thread([this] { run(); });
}

Registrar::~Registrar() {
  state_.lock()->stop = true;
  state_.notifyAll();
  thread_.join();
}

void Registrar::submit(Registration r) {
  state_.lock()->queue.push_back(std::move(r));
  state_.notifyAll();
}

std::vector<RegistrationDone> Registrar::takeDone() {
  uint64_t n;
  // Nonblocking: EAGAIN just means nothing was reported.
  if (::read(wake_.get(), &n, sizeof n) < 0 && errno != EAGAIN)
    logWarn(std::string("reading the registrar's eventfd: ") + strerror(errno));
  auto s = state_.lock();
  return std::exchange(s->done, {});
}

size_t Registrar::pending() {
  auto s = state_.lock();
  return s->queue.size() + s->inFlight;
}

void Registrar::report(RegistrationDone d) {
  {
    auto s = state_.lock();
    s->done.push_back(std::move(d));
    --s->inFlight;
  }
  uint64_t one = 1;
  if (::write(wake_.get(), &one, sizeof one) < 0)
    logWarn(std::string("waking the scheduler loop: ") + strerror(errno));
}

void Registrar::run() noexcept {
  for (;;) {
    std::optional<Registration> r;
    {
      auto s = state_.lock();
      s.wait([&] { return s->stop || !s->queue.empty(); });
      if (s->queue.empty()) return;  // stopping, and everything is done
      r.emplace(std::move(s->queue.front()));
      s->queue.pop_front();
      ++s->inFlight;
    }
    RegistrationDone d{r->step, r->output, "", false};
    try {
      FdSource src(r->nar.get());
      fn_(*r, src);
    } catch (const store::ContentMismatchError& e) {
      d.error = e.what();
      d.rejected = true;
    } catch (const std::exception& e) {
      d.error = e.what();
    } catch (...) {
      d.error = "unknown error";
    }
    report(std::move(d));
  }
}

}  // namespace kiln::scheduler
