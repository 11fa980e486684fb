# The documentation site: libkstr's API reference (its `doc` output) and
# the kutils manual, with an index page listing every package of the set.
{ lib, stdenv, libkstr, kmanual, packages }:
stdenv.mkDerivation {
  pname = "docs-site";
  version = "1.0";
  buildPhase = "true";
  checkPhase = "true";
  installPhase = ''
    mkdir -p $out
    cp -r ${libkstr.doc}/share/doc/libkstr $out/libkstr
    cp -r ${kmanual}/share/doc/kutils $out/kutils
    {
      echo '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Packages</title></head><body><h1>Packages</h1><ul>'
      ${lib.concatMapStrings (p: ''
      echo '<li>${p.name}: ${p.meta.description}</li>'
      '') packages}
      echo '</ul><p><a href="libkstr/api.html">libkstr API</a> · <a href="kutils/index.html">kutils manual</a></p></body></html>'
    } > $out/index.html
  '';
  meta.description = "HTML documentation of the whole package set";
}
