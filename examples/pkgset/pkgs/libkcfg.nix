{ lib, stdenv, libkstr }:
stdenv.mkDerivation {
  pname = "libkcfg";
  version = "0.3";
  src = ../src/libkcfg;
  # Users of libkcfg link libkstr too: it comes along.
  propagatedBuildInputs = [ libkstr ];
  meta = {
    description = "Reads key = value configuration files (static library)";
    license = lib.licenses.mit;
  };
}
