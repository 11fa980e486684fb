# One of the kutils: a one-file C program src/NAME/NAME.c, linked against
# libkstr (and what else `extraInputs` names; `libs` are the -l flags) and
# checked by its own check.sh. The sources have no build system: the
# phases below are it.
{ lib, stdenv, libkstr, pname, description, extraInputs ? [ ], libs ? "-lkstr", static ? false }:
stdenv.mkDerivation {
  inherit pname;
  version = "1.0";
  src = ../src + "/${pname}";
  buildInputs = [ libkstr ] ++ extraInputs;
  # A static build links libkstr.a into the program, with no run-time
  # search path: it keeps no reference to libkstr.
  libs = if static then "-l:libkstr.a" else libs;
  preBuild = lib.optionalString static "LDFLAGS=-L${libkstr}/lib";
  buildPhase = "$CC $CFLAGS $CPPFLAGS -o ${pname} ${pname}.c $LDFLAGS $libs";
  checkPhase = "sh ./check.sh ./${pname}";
  installPhase = "mkdir -p $out/bin && cp ${pname} $out/bin/";
  meta = {
    inherit description;
    license = lib.licenses.bsd2;
    mainProgram = pname;
  };
}
