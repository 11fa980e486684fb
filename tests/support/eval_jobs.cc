#include "eval_jobs.h"

#include <gtest/gtest.h>

namespace kiln::test {

std::string evalJobsCollection(int packages) {
  return R"(
let
  mk = name: deps: derivation {
    inherit name; system = "x86_64-linux"; builder = "/bin/sh";
    args = [ "-c" "echo ${toString deps} > $out" ];
  };
  pkgs = builtins.listToAttrs (builtins.genList (i: {
    name = "p${toString i}";
    value = mk "p${toString i}" (if i == 0 then [] else [ pkgs."p${toString (i / 2)}" ]);
  }) )" + std::to_string(packages) +
         R"();
in pkgs // {
  broken = throw "broken is broken";
  nested = { recurseForDerivations = true; a = mk "nested-a" [ pkgs.p7 ];
             bad = 1 + true; };
}
)";
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
