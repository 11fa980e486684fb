#pragma once
// Registration of uploaded outputs in the central store, off the service
// thread (docs/scheduler.md, "The service loop"). Adding a path fsyncs every
// file and the store directory (unless the store is set not to) and writes
// the database: tens of milliseconds on a busy disk, during which the
// service thread would read no message and fill no slot.

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kiln/common/file.h"
#include "kiln/common/stream.h"
#include "kiln/common/sync.h"
#include "kiln/store/local_store.h"

namespace kiln::scheduler {

/// An uploaded output whose size and NAR hash the transfer verified.
struct Registration {
  int64_t step = 0;    ///< database id of the step that built it
  std::string output;  ///< output name ("out")
  store::ValidPathInfo info;
  AutoCloseFD nar;  ///< the NAR, from offset 0 (an unlinked temporary file)
  /// The scheduler's own verifier hashed `nar` and checked `info` against
  /// it (a direct upload): it is added without being hashed again.
  bool verified = false;
};

/// Adds upload `r` (its NAR in `nar`) to `store` with the DerivationOutputs
/// row of its deriver, in one transaction (store::LocalStore::Batch). Throws
/// what LocalStore::addFromNar throws; then nothing is registered.
void registerUpload(store::LocalStore& store, const Registration& r,
                    Source& nar);

/// How a registration ended.
struct RegistrationDone {
  int64_t step = 0;
  std::string output;
  std::string error;  ///< empty on success
  /// The content is not what it claims (store::ContentMismatchError, e.g.
  /// a fixed output that does not hash to its declared hash), as opposed
  /// to a failure of the store.
  bool rejected = false;
};

/// One background thread that adds submitted NARs to a store, in order, and
/// reports each end. The service thread submits and takes the reports; the
/// background thread only calls `RegisterFn`. Exceptions of `RegisterFn`
/// become the report's error (a store::ContentMismatchError also sets
/// `rejected`); none leaves the thread.
class Registrar {
 public:
  /// Adds one NAR (e.g. LocalStore::addFromNar on a store of its own).
  using RegisterFn = std::function<void(const Registration&, Source&)>;

  /// Starts the thread. Throws SysError if the wake descriptor cannot be
  /// created.
  explicit Registrar(RegisterFn fn);
  /// Registers what is still queued, then joins the thread.
  ~Registrar();
  Registrar(const Registrar&) = delete;
  Registrar& operator=(const Registrar&) = delete;

  /// Queues `r`; never blocks on the store.
  void submit(Registration r);
  /// The reports since the last call, in submission order; clears the wake
  /// descriptor.
  std::vector<RegistrationDone> takeDone();
  /// A descriptor that is readable while reports wait (poll it with the
  /// socket so a report ends the wait at once).
  int wakeFd() const { return wake_.get(); }
  /// Registrations submitted and not yet reported.
  size_t pending();

 private:
  struct State {
    std::deque<Registration> queue;
    std::vector<RegistrationDone> done;
    size_t inFlight = 0;
    bool stop = false;
  };
  void run() noexcept;
  void report(RegistrationDone d);

  RegisterFn fn_;
  AutoCloseFD wake_;
  Sync<State> state_;
  std::thread thread_;
};

}  // namespace kiln::scheduler
