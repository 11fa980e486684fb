#include "eval_jobs.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace kiln::test {

std::string evalJobsCollection(int packages) {
  return "import \"" + sourceDir() + "/tests/data/eval_threads/jobs.nix\" { packages = " +
         std::to_string(packages) + "; }\n";
}

void expectPerJobErrors(const std::string& out) {
  EXPECT_NE(out.find(R"({"attr":"broken","error":"broken is broken"})"),
            std::string::npos)
      << out;
  EXPECT_NE(
      out.find(
          R"({"attr":"nested.bad","error":"cannot add a Boolean to an integer)"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find(R"({"attr":"nested.a","name":"nested-a")"),
            std::string::npos)
      << out;
}

}  // namespace kiln::test
