set -e
out=$(printf 'one two\nthree\n' | "$1")
[ "$out" = "2 3 14" ] || { echo "kwc: got '$out'"; exit 1; }
echo "kwc: ok"
