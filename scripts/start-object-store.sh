#!/usr/bin/env bash
# A real S3 object store for kiln's tests and for trying the object-store
# cache by hand: a one-node Ceph cluster (one monitor, one in-memory OSD, no
# authentication between its daemons) and its S3 gateway, radosgw, all on
# 127.0.0.1, under DIR, with no systemd (Debian's radosgw, ceph-mon,
# ceph-osd; scripts/install-deps.sh installs them).
#
#   eval "$(scripts/start-object-store.sh DIR PORT)"   # starts it; prints
#       export KILN_S3_ENDPOINT=http://127.0.0.1:PORT AWS_ACCESS_KEY_ID=...
#       AWS_SECRET_ACCESS_KEY=...  (an S3 user made for the occasion; its
#       keys are KILN_S3_ACCESS_KEY / KILN_S3_SECRET_KEY when both are set)
#   scripts/start-object-store.sh stop DIR             # stops it
#
# Everything it writes is under DIR; the daemons' logs are in DIR/log. The
# OSD keeps objects in memory (memstore, KILN_S3_MEMORY bytes, default
# 2 GiB): a test's objects are gone when it stops.
set -euo pipefail

die() { echo "start-object-store: $*" >&2; exit 1; }

# The pid in DIR/run/NAME.pid, or nothing.
pid_of() { cat "$1/run/$2.pid" 2>/dev/null || true; }

# Whether process $1 runs (a zombie, waiting for init to reap it, does not).
alive() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ "$state" != Z* ]]
}

# Stops the daemons in the order that keeps each from waiting on one
# already gone: the gateway, then the OSD, then the monitor. Each gets
# 0.3 s of SIGTERM (a clean stop takes each about 2 s, for objects that
# live in memory anyway), then SIGKILL.
stop() {
  local dir=$1 name pid
  for name in client.rgw.a osd.0 mon.a; do
    pid=$(pid_of "$dir" "$name")
    [ -n "$pid" ] || continue
    kill "$pid" 2>/dev/null || true
    for _ in 1 2 3; do alive "$pid" || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    while alive "$pid"; do sleep 0.05; done
    rm -f "$dir/run/$name.pid"
  done
}

if [ "${1:-}" = stop ]; then
  [ $# -eq 2 ] || die "usage: $0 stop DIR"
  stop "$2"
  exit 0
fi
[ $# -eq 2 ] || die "usage: $0 DIR PORT | $0 stop DIR"
for tool in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph curl; do
  command -v "$tool" >/dev/null ||
    die "$tool is missing: run scripts/install-deps.sh (Debian: radosgw ceph-mon ceph-osd)"
done
dir=$(mkdir -p "$1" && cd "$1" && pwd)
port=$2
[[ "$port" =~ ^[0-9]+$ ]] || die "PORT must be a number, not '$port'"
[ -z "$(pid_of "$dir" mon.a)" ] || die "$dir already runs a store: '$0 stop $dir' first"

# The monitor's port: a free one on loopback.
mon_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fsid=$(python3 -c 'import uuid; print(uuid.uuid4())')
mkdir -p "$dir/mon/a" "$dir/osd/0" "$dir/run" "$dir/log" "$dir/rgw"
conf=$dir/ceph.conf
cat > "$conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
# One node, nothing to authenticate between its daemons.
auth cluster required = none
auth service required = none
auth client required = none
ms bind ipv6 = false
ms bind msgr1 = false
ms bind msgr2 = true
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
osd objectstore = memstore
memstore device bytes = ${KILN_S3_MEMORY:-2147483648}
run dir = $dir/run
pid file = $dir/run/\$name.pid
admin socket = $dir/run/\$name.\$pid.asok
log file = $dir/log/\$name.log
mon data = $dir/mon/\$id
osd data = $dir/osd/\$id
keyring = $dir/keyring
[mon]
# The default 1 s adds seconds to the gateway's start and the first PUT.
paxos propose interval = 0.05
[client]
# Without it, with auth none, radosgw retries for 300 s and exits.
ms mon client mode = crc secure
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$port
rgw data = $dir/rgw
EOF
: > "$dir/keyring"

monmaptool --create --addv a "[v2:127.0.0.1:$mon_port]" --fsid "$fsid" \
  "$dir/monmap" >"$dir/log/setup.log" 2>&1
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" >>"$dir/log/setup.log" 2>&1 ||
  die "ceph-mon --mkfs failed (see $dir/log/setup.log)"
ceph-mon -c "$conf" -i a >>"$dir/log/setup.log" 2>&1 ||
  die "ceph-mon did not start (see $dir/log/)"
osd_id=$(ceph -c "$conf" --connect-timeout 30 osd create 2>>"$dir/log/setup.log") ||
  { stop "$dir"; die "the monitor did not answer (see $dir/log/)"; }
[ "$osd_id" = 0 ] || { stop "$dir"; die "unexpected OSD id '$osd_id'"; }
ceph-osd -c "$conf" -i 0 --mkfs >>"$dir/log/setup.log" 2>&1 ||
  { stop "$dir"; die "ceph-osd --mkfs failed (see $dir/log/setup.log)"; }
ceph-osd -c "$conf" -i 0 >>"$dir/log/setup.log" 2>&1 ||
  { stop "$dir"; die "ceph-osd did not start (see $dir/log/)"; }
radosgw -c "$conf" -n client.rgw.a >>"$dir/log/setup.log" 2>&1 ||
  { stop "$dir"; die "radosgw did not start (see $dir/log/)"; }
for _ in $(seq 600); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" && break
  sleep 0.1
done
curl -s -o /dev/null "http://127.0.0.1:$port/" ||
  { stop "$dir"; die "radosgw does not answer on 127.0.0.1:$port (see $dir/log/client.rgw.a.log)"; }
# KILN_S3_ACCESS_KEY and KILN_S3_SECRET_KEY, when both are set, are the
# user's keys (a gateway started again keeps its clients' credentials).
fixed_keys=()
if [ -n "${KILN_S3_ACCESS_KEY:-}" ] && [ -n "${KILN_S3_SECRET_KEY:-}" ]; then
  fixed_keys=(--access-key="$KILN_S3_ACCESS_KEY" --secret-key="$KILN_S3_SECRET_KEY")
fi
user=$(radosgw-admin -c "$conf" -n client.rgw.a --admin-socket "$dir/run/admin.asok" \
  user create --uid=kiln --display-name=kiln "${fixed_keys[@]}" 2>>"$dir/log/setup.log") ||
  { stop "$dir"; die "radosgw-admin could not make the S3 user (see $dir/log/setup.log)"; }
keys=$(python3 -c 'import json,sys; k=json.load(sys.stdin)["keys"][0]; print(k["access_key"], k["secret_key"])' <<<"$user")
read -r access secret <<<"$keys"
echo "export KILN_S3_ENDPOINT=http://127.0.0.1:$port"
echo "export AWS_ACCESS_KEY_ID=$access"
echo "export AWS_SECRET_ACCESS_KEY=$secret"
