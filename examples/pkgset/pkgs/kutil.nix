# One of the kutils: a small program in src/NAME, linked against libkstr
# (and what else `extraInputs` names), checked by its own check.sh.
{ lib, stdenv, libkstr, pname, description, extraInputs ? [ ], static ? false }:
stdenv.mkDerivation {
  inherit pname;
  version = "1.0";
  src = ../src + "/${pname}";
  buildInputs = [ libkstr ] ++ extraInputs;
  # A static build links libkstr.a into the program, with no run-time
  # search path: it keeps no reference to libkstr.
  makeFlags = lib.optionalString static "LIBS=-l:libkstr.a LDFLAGS=-L${libkstr}/lib";
  meta = {
    inherit description;
    license = lib.licenses.bsd2;
    mainProgram = pname;
  };
}
