# Jobs whose values need each other (tests/integration/eval_threads_test.cc
# and scripts/tsan-eval.sh): every one fails with infinite recursion.
let
  mk = name: dep: derivation {
    inherit name; system = "x86_64-linux"; builder = "/bin/sh"; d = dep.drvPath;
  };
in builtins.listToAttrs (builtins.genList (i: {
  name = "c${toString i}";
  value = let self = mk "c${toString i}" other; other = mk "o${toString i}" self; in self;
}) 50) // rec { a = mk "a" b; b = mk "b" a; }
