# A release collection gated by a `tested` aggregate job, as nixpkgs gates
# its channels (pkgs/top-level/release.nix's `tested`, made by
# releaseTools.aggregate): a derivation with `_hydraAggregate = true` whose
# `constituents` are derivations (here `lib` and `app`) or the attribute
# names of other jobs (here "docs"). The aggregate succeeds when every
# constituent does; the jobset's channel (channel_job, default `tested`)
# advances to the newest evaluation where it succeeded.
#
# `app` fails while a file named `broken` is next to this one, so a test
# can break the gate and fix it again; `docs` grows a hundredfold while a
# file named `bloat` is there (a regression gate's closure-size limit).
let
  system = builtins.currentSystem;
  mk = name: script: derivation {
    inherit name system;
    PATH = "/usr/bin:/bin";
    builder = "/bin/sh";
    args = [ "-c" script ];
  };
  broken = builtins.pathExists ./broken;
in rec {
  lib = mk "lib-1.0" "echo lib > $out";
  app = mk "app-1.0" (if broken
    then "echo 'app: the test suite failed' >&2; exit 1"
    else "cat ${lib} > $out; echo app >> $out");
  docs = mk "docs-1.0" (if builtins.pathExists ./bloat
    then "head -c 100000 /dev/zero > $out"
    else "echo 'the manual' > $out");
  # releaseTools.aggregate, reduced to what Hydra reads: the flag, the
  # constituents, and the list written into the output.
  tested = derivation {
    name = "tested";
    inherit system;
    _hydraAggregate = true;
    constituents = [ lib app "docs" ];
    PATH = "/usr/bin:/bin";
    builder = "/bin/sh";
    args = [ "-c" ''
      mkdir -p $out/nix-support
      for c in $constituents; do echo $c; done \
        > $out/nix-support/hydra-aggregate-constituents
    '' ];
  };
}
