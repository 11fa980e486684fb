# `stdenv.mkDerivation`, the nixpkgs way: a name from pname and version,
# phases run by ./setup.sh, several outputs, `meta` and `passthru` kept out
# of the derivation, and dependencies given as packages.
{ lib, host, system }:
let
  setup = ./setup.sh;
  # Each dependency's `dev` output (headers) and its main output.
  inputPaths = deps: lib.concatMapStrings (d: " ${lib.getDev d} ${d}") deps;
in
{
  inherit host system;
  mkDerivation =
    { pname
    , version
    , buildInputs ? [ ]
    , propagatedBuildInputs ? [ ]
    , outputs ? [ "out" ]
    , meta ? { }
    , passthru ? { }
    , doCheck ? true
    , ...
    }@args:
    let
      attrs = removeAttrs args [ "meta" "passthru" "buildInputs" "propagatedBuildInputs" ] // {
        name = "${pname}-${version}";
        inherit system outputs doCheck;
        builder = host.shell;
        args = [ setup ];
        hostPath = host.PATH;
        buildInputs = inputPaths (buildInputs ++ propagatedBuildInputs);
        propagatedBuildInputs = inputPaths propagatedBuildInputs;
      };
      drv = derivation attrs;
    in
    drv // { inherit meta passthru; } // passthru;
}
