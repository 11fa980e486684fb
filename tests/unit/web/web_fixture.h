#pragma once
// A small state directory for the web's tests: project "nixpkgs", jobset
// "trunk", two evaluations (the second: "hello" newly failing, "curl"
// newly succeeding, "gcc" still failing, "zlib" new, "perl" removed,
// "bash" unfinished), steps with a worker and times, an output, per-job
// errors, and two log attempts of hello's step.

#include <string>

#include "kiln/common/file.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::web::testing {

class WebFixture {
 public:
  WebFixture();
  const std::string& stateDir() const { return dir_.path(); }
  static std::string drv(const std::string& name);
  static std::string out(const std::string& name);

  int64_t jobset = 0, base = 0, eval = 0;
  int64_t hello = 0;      ///< hello's build in `eval` (failed)
  int64_t helloBase = 0;  ///< hello's build in `base` (succeeded)
  int64_t bash = 0;       ///< bash's build in `eval` (unfinished)
  int64_t helloStep = 0;  ///< the step of hello's .drv

 private:
  int64_t addBuild(scheduler::StateDb& db, int64_t eval,
                   const std::string& job, int status, int64_t createdMs);
  TempDir dir_{"kiln-web"};
};

}  // namespace kiln::web::testing
