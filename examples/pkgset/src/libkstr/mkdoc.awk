# Generates the API reference (HTML) from the `///` comments of a header:
# each comment block documents the declaration that follows it.
BEGIN {
  print "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
  print "<title>" title "</title></head><body>\n<h1>" title "</h1>\n<dl>"
}
/^\/\/\// { sub(/^\/\/\/ ?/, ""); doc = doc (doc ? " " : "") $0; next }
doc != "" && NF > 0 {
  decl = $0
  gsub(/&/, "\\&amp;", decl); gsub(/</, "\\&lt;", decl); gsub(/>/, "\\&gt;", decl)
  gsub(/&/, "\\&amp;", doc); gsub(/</, "\\&lt;", doc); gsub(/>/, "\\&gt;", doc)
  print "<dt><code>" decl "</code></dt><dd>" doc "</dd>"
  doc = ""
}
END { print "</dl>\n</body></html>" }
