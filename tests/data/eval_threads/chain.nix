# Packages that each need the three before them (tests/integration/
# eval_threads_test.cc): a thread starting anywhere forces a long chain
# that another thread is likely forcing too, so threads wait for each
# other's packages all along. Every 37th package throws
# (its dependants skip it); p250 needs itself through p251 (the
# others skip both).
let
  mk = name: deps: derivation {
    inherit name; system = "x86_64-linux"; builder = "/bin/sh";
    deps = map (d: d.drvPath) deps;
    work = toString (builtins.foldl' (a: b: a + b) 0 (builtins.genList (x: x) 3000));
  };
  broken = i: i - (i / 37) * 37 == 5;
  name = i: "p${toString i}";
  inCycle = j: j == 250 || j == 251;
  depsOf = i: builtins.filter (j: j >= 0 && !(broken j) && !(inCycle j)) [ (i - 1) (i - 2) (i - 3) ];
  pkgs = builtins.listToAttrs (builtins.genList (i: {
    name = name i;
    value =
      if broken i then throw "broken ${name i}"
      else if i == 250 then mk (name i) [ pkgs.p251 ]
      else if i == 251 then mk (name i) [ pkgs.p250 ]
      else mk (name i) (map (j: pkgs.${name j}) (depsOf i));
  }) 400);
in pkgs
