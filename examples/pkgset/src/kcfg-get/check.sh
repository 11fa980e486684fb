set -e
printf '# settings\nname = kiln \nbad line\nport=8080 # web\n' > t.cfg
[ "$("$1" t.cfg port 2>/dev/null)" = 8080 ] || exit 1
[ "$("$1" t.cfg name 2>/dev/null)" = kiln ] || exit 1
if "$1" t.cfg none 2>/dev/null; then exit 1; fi
echo "kcfg-get: ok"
