#include "web_fixture.h"

#include "kiln/scheduler/logs.h"

namespace kiln::web::testing {

using scheduler::StateDb;

std::string WebFixture::drv(const std::string& name) {
  return "/nix/store/" + std::string(32, 'd') + "-" + name + ".drv";
}

std::string WebFixture::out(const std::string& name) {
  return "/nix/store/" + std::string(32, 'o') + "-" + name;
}

int64_t WebFixture::addBuild(StateDb& db, int64_t e, const std::string& job,
                             int status, int64_t createdMs) {
  scheduler::BuildRow b;
  b.eval = e;
  b.jobset = jobset;
  b.job = job;
  b.nixName = job + "-1.0";
  b.system = "x86_64-linux";
  b.drvPath = drv(job + (e == base ? "-old" : ""));
  b.createdMs = createdMs;
  int64_t id = db.createBuild(b);
  if (status >= 0) db.finishBuild(id, status, createdMs + 60'000, "");
  return id;
}

WebFixture::WebFixture() {
  StateDb db(dir_.path() + "/scheduler.sqlite");
  int64_t p = db.createProject({0, "nixpkgs", "the packages", true});
  scheduler::JobsetRow j;
  j.project = p;
  j.name = "trunk";
  j.location = "/src/nixpkgs";
  jobset = db.createJobset(j);
  constexpr int64_t kT0 = 1'700'000'000'000;
  base = db.createEvaluation({0, jobset, "git:aaaa", kT0, 900, 5, ""}, {});
  helloBase = addBuild(db, base, "hello", 0, kT0);
  addBuild(db, base, "curl", 1, kT0);
  addBuild(db, base, "gcc", 1, kT0);
  addBuild(db, base, "perl", 0, kT0);
  addBuild(db, base, "bash", 0, kT0);
  eval = db.createEvaluation({0, jobset, "git:bbbb", kT0 + 3'600'000, 1200, 5,
                              ""},
                             {{"broken.pkg", "attribute 'x' missing"}});
  int64_t t1 = kT0 + 3'600'000;
  hello = addBuild(db, eval, "hello", 1, t1);
  addBuild(db, eval, "curl", 0, t1);
  addBuild(db, eval, "gcc", 1, t1);
  addBuild(db, eval, "zlib", 0, t1);
  bash = addBuild(db, eval, "bash", -1, t1);
  scheduler::StepRow s;
  s.drvPath = drv("hello");
  s.system = "x86_64-linux";
  s.pname = "hello";
  s.createdMs = t1;
  helloStep = db.upsertStep(s);
  db.startStep(helloStep, "builder-1", t1);  // attempt 1 (log below)
  db.startStep(helloStep, "builder-1", t1 + 1000);  // attempt 2
  db.finishStep(helloStep, 1, t1 + 43'000, "builder failed with exit code 2");
  db.setBuildOutputs(helloBase, {{"out", out("hello-1.0")}});
  createDirs(dir_.path() + "/logs");
  writeFile(scheduler::stepLogPath(dir_.path(), drv("hello"), 1),
            "first attempt\n");
  writeFile(scheduler::stepLogPath(dir_.path(), drv("hello"), 2),
            "second attempt\nmake: *** [all] Error 2\n");
}

}  // namespace kiln::web::testing
