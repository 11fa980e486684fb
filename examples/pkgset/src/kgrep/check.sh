set -e
in='apple
banana
cherry'
[ "$(echo "$in" | "$1" an)" = banana ] || exit 1
[ "$(echo "$in" | "$1" -c -v an)" = 2 ] || exit 1
if echo "$in" | "$1" zzz; then exit 1; fi
echo "kgrep: ok"
