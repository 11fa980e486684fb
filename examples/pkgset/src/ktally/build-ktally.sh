# Writes ktally to $1 with the programs it runs substituted
# ($SHELL_PATH, $TR, $HEAD: host tools; kupper, kgrep, ksort, kuniq from PATH).
set -eu
find_prog() { command -v "$1" || { echo "ktally: $1 not found" >&2; exit 1; }; }
sed -e "s|@shell@|$(find_prog bash)|" -e "s|@tr@|$(find_prog tr)|" \
    -e "s|@head@|$(find_prog head)|" -e "s|@kupper@|$(find_prog kupper)|" \
    -e "s|@kgrep@|$(find_prog kgrep)|" -e "s|@ksort@|$(find_prog ksort)|" \
    -e "s|@kuniq@|$(find_prog kuniq)|" ktally.in > "$1"
chmod +x "$1"
