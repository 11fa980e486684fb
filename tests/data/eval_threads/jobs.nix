# The job collection of the `kiln eval --workers/--processes` tests
# (tests/support/eval_jobs.h) and scripts/tsan-eval.sh: `packages`
# top-level jobs, each depending on the one at half its index, a nested
# set entered through recurseForDerivations (a job and a type error) and a
# throwing job.
{ packages ? 400 }:
let
  mk = name: deps: derivation {
    inherit name; system = "x86_64-linux"; builder = "/bin/sh";
    args = [ "-c" "echo ${toString deps} > $out" ];
  };
  pkgs = builtins.listToAttrs (builtins.genList (i: {
    name = "p${toString i}";
    value = mk "p${toString i}" (if i == 0 then [] else [ pkgs."p${toString (i / 2)}" ]);
  }) packages);
in pkgs // {
  broken = throw "broken is broken";
  nested = { recurseForDerivations = true; a = mk "nested-a" [ pkgs.p7 ];
             bad = 1 + true; };
}
