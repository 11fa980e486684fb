# A small example collection: three packages in a chain and a set of tools
# that Hydra-style job enumeration enters because of recurseForDerivations.
let
  system = builtins.currentSystem;
  mk = name: script: deps: derivation {
    inherit name system;
    # Builders start with PATH=/path-not-set (as in Nix); cat and ls are
    # taken from the host until the collection has its own tools.
    PATH = "/usr/bin:/bin";
    builder = "/bin/sh";
    args = [ "-c" script ];
    buildInputs = deps;
  };
in rec {
  greeting = mk "greeting-1.0" "echo hello > $out" [ ];
  shout = mk "shout-1.0" "read -r g < ${greeting}; echo \"$g!\" > $out" [ greeting ];
  banner = mk "banner-1.0" "cat ${shout} ${greeting} > $out" [ shout greeting ];
  tools = {
    recurseForDerivations = true;
    lister = mk "lister-0.1" "ls / > $out" [ ];
  };
}
