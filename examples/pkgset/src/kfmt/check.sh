set -e
got=$(printf 'aaa bbb\nccc\n\nddd\n' | "$1" -w 7)
[ "$got" = "$(printf 'aaa bbb\nccc\n\nddd')" ] || { echo "kfmt: got '$got'"; exit 1; }
echo "kfmt: ok"
