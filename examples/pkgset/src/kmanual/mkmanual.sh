# Generates the kutils manual: one HTML page per program, made from what
# the program itself prints for --help and --version, and an index.
# Usage: mkmanual.sh OUTDIR PROGRAM...
set -eu
out="$1"; shift
mkdir -p "$out"
esc() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g'; }
{
  echo '<!DOCTYPE html><html><head><meta charset="utf-8"><title>kutils manual</title></head><body>'
  echo '<h1>kutils manual</h1><ul>'
  for p in "$@"; do
    name=$(basename "$p")
    echo "<li><a href=\"$name.html\">$name</a>: $("$p" --version | esc)</li>"
    {
      echo "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>$name</title></head><body>"
      echo "<h1>$name</h1><pre>"
      "$p" --help | esc
      echo "</pre><p><a href=\"index.html\">all programs</a></p></body></html>"
    } > "$out/$name.html"
  done
  echo '</ul></body></html>'
} > "$out/index.html"
