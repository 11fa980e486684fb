#!/usr/bin/env bash
# A real PostgreSQL server for kiln's tests (the state layer's second
# backend) and for trying it by hand: one server listening on 127.0.0.1
# (and KILN_PG_LISTEN's address, below), everything under DIR, no
# systemd and no Debian cluster (Debian's postgresql;
# scripts/install-deps.sh installs it).
#
#   eval "$(scripts/start-postgres.sh DIR PORT)"   # starts it; prints
#       export KILN_DATABASE_URL=postgresql://kiln@127.0.0.1:PORT/kiln
#       PGPASSFILE=DIR/pgpass
#   scripts/start-postgres.sh stop DIR             # stops it, keeping DIR
#   scripts/start-postgres.sh check                # whether it can run here;
#       prints the folder of the server's programs (psql, createdb, ...)
#
# The first start makes the cluster (DIR/data): a superuser role `kiln`
# with a generated password, written to DIR/pgpass (PGPASSFILE format, mode
# 0600, owned by whoever ran this), and a database `kiln`. TCP clients must
# give that password (scram-sha-256); the unix socket, in DIR/run (mode
# 0700), trusts whoever can reach it. Starting an initialized DIR again
# keeps its data (PORT may differ). fsync is off: a crash of the machine
# may lose a test's data, never the host's.
#
# As root it runs the server as the unprivileged `postgres` user (initdb
# refuses root), which must be able to reach DIR; as anyone else, as that
# user. The server's log is DIR/log/postgres.log, initdb's DIR/log/setup.log.
# The programs are the newest /usr/lib/postgresql/VERSION/bin's, or those
# in $KILN_PG_BINDIR.
#
# With KILN_PG_LISTEN=ADDR (an IPv4 address of this host, e.g. a test's
# bridge in a network namespace) it listens on ADDR too, pg_hba.conf lets
# clients of the subnets this host is on (samenet) in with the password
# (scram-sha-256), the URL printed names ADDR and DIR/pgpass holds the
# password for both addresses. Without it (the default), 127.0.0.1 only.
#
# Measured on 2 busy cores: a first start (initdb included) takes 1.1 to
# 1.5 s, a start of an initialized DIR 0.2 s, a stop 0.13 s.
set -euo pipefail

die() { echo "start-postgres: $*" >&2; exit 1; }

# The newest server's programs: $KILN_PG_BINDIR, Debian's
# /usr/lib/postgresql/VERSION/bin, or PATH.
find_bindir() {
  local d
  if [ -n "${KILN_PG_BINDIR:-}" ]; then
    echo "$KILN_PG_BINDIR"
    return
  fi
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -z "$d" ] && command -v pg_ctl >/dev/null; then
    d=$(dirname "$(command -v pg_ctl)")
  fi
  echo "$d"
}

bindir=$(find_bindir)
for tool in initdb pg_ctl postgres psql createdb; do
  [ -n "$bindir" ] && [ -x "$bindir/$tool" ] ||
    die "$tool is missing: run scripts/install-deps.sh (Debian: postgresql)"
done

# Commands that touch the cluster run as its owner: `postgres` when we are
# root, else ourselves. From / so that a folder it cannot read is no bother.
as_owner=()
if [ "$(id -u)" -eq 0 ]; then
  id -u postgres >/dev/null 2>&1 ||
    die "there is no 'postgres' user to run the server as (Debian: postgresql makes it)"
  as_owner=(setpriv --reuid=postgres --regid=postgres --init-groups)
fi
owner() { (cd / && "${as_owner[@]}" "$@"); }

# pg_ctl status: 0 runs, 3 does not, 4 no cluster.
running() { owner "$bindir/pg_ctl" status -D "$1/data" >/dev/null 2>&1; }

# A fast stop (clients disconnected, one checkpoint), else an immediate one.
stop() {
  local dir=$1
  [ -f "$dir/data/PG_VERSION" ] || return 0
  running "$dir" || return 0
  owner "$bindir/pg_ctl" stop -D "$dir/data" -m fast -w -t 10 >/dev/null 2>&1 ||
    owner "$bindir/pg_ctl" stop -D "$dir/data" -m immediate -w -t 10 >/dev/null 2>&1 ||
    die "the server in $dir does not stop (see $dir/log/postgres.log)"
}

case "${1:-}" in
  check)
    [ $# -eq 1 ] || die "usage: $0 check"
    echo "$bindir"
    exit 0
    ;;
  stop)
    [ $# -eq 2 ] || die "usage: $0 stop DIR"
    [ -d "$2" ] || exit 0  # nothing to stop
    stop "$(cd "$2" && pwd)"
    exit 0
    ;;
esac
[ $# -eq 2 ] || die "usage: $0 DIR PORT | $0 stop DIR | $0 check"
command -v od >/dev/null || die "od is missing (Debian: coreutils)"
port=$2
listen=${KILN_PG_LISTEN:-}
[ -z "$listen" ] || [[ "$listen" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] ||
  die "KILN_PG_LISTEN must be an IPv4 address, not '$listen'"
[[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -gt 0 ] && [ "$port" -lt 65536 ] ||
  die "PORT must be a number from 1 to 65535, not '$port'"
dir=$(mkdir -p "$1" && cd "$1" && pwd)
owner test -x "$dir" ||
  die "the postgres user cannot reach $dir: make it and its parents searchable (chmod o+x)"
# The socket's path must fit in sun_path (107 bytes).
[ ${#dir} -le 80 ] || die "$dir is too long for a unix socket path: choose a shorter DIR"
running "$dir" && die "$dir already runs a server: '$0 stop $dir' first"

mkdir -p "$dir/data" "$dir/log" "$dir/run"
chmod 0700 "$dir/data" "$dir/run"
if [ ${#as_owner[@]} -gt 0 ]; then
  chown postgres:postgres "$dir/data" "$dir/log" "$dir/run"
fi

fresh=false
if [ ! -f "$dir/data/PG_VERSION" ]; then
  fresh=true
  [ -z "$(ls -A "$dir/data")" ] || die "$dir/data is neither empty nor a cluster"
  password=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
  pwfile=$dir/run/initdb-password
  printf '%s\n' "$password" | owner sh -c "umask 077 && cat > '$pwfile'"
  owner "$bindir/initdb" -D "$dir/data" -U kiln --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C \
    --no-sync --no-instructions >"$dir/log/setup.log" 2>&1 ||
    { rm -f "$pwfile"; die "initdb failed (see $dir/log/setup.log)"; }
  rm -f "$pwfile"
  echo "include 'kiln.conf'" | owner sh -c "cat >> '$dir/data/postgresql.conf'"
else
  [ -f "$dir/pgpass" ] || die "$dir/pgpass is missing: the kiln role's password is lost"
  password=$(head -n 1 "$dir/pgpass" | cut -d: -f5-)
fi

# Clients on the host's subnets (the bridge KILN_PG_LISTEN is on) log in
# with the password. Kept once added: without KILN_PG_LISTEN the server
# listens on 127.0.0.1 alone, which 127.0.0.1/32's line covers.
hba="host all all samenet scram-sha-256"
if [ -n "$listen" ] && ! grep -qxF "$hba" "$dir/data/pg_hba.conf"; then
  echo "$hba" | owner sh -c "cat >> '$dir/data/pg_hba.conf'"
fi

# Regenerated on each start: the port and KILN_PG_LISTEN may change.
owner sh -c "cat > '$dir/data/kiln.conf'" <<EOF
# Written by scripts/start-postgres.sh on each start.
listen_addresses = '127.0.0.1${listen:+, $listen}'
port = $port
unix_socket_directories = '$dir/run'
unix_socket_permissions = 0700
# A test server: speed over durability.
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 16MB
max_connections = 50
EOF
(umask 077 && for host in 127.0.0.1 $listen; do
  printf '%s:%s:*:kiln:%s\n' "$host" "$port" "$password"
done > "$dir/pgpass")
chmod 0600 "$dir/pgpass"

owner "$bindir/pg_ctl" start -D "$dir/data" -l "$dir/log/postgres.log" -w -t 60 \
  >>"$dir/log/setup.log" 2>&1 ||
  die "the server did not start (see $dir/log/postgres.log): $(tail -n 5 "$dir/log/postgres.log" 2>/dev/null)"
if $fresh; then
  owner "$bindir/createdb" -h "$dir/run" -p "$port" -U kiln kiln >>"$dir/log/setup.log" 2>&1 ||
    { stop "$dir"; die "createdb kiln failed (see $dir/log/setup.log)"; }
fi
url=postgresql://kiln@${listen:-127.0.0.1}:$port/kiln
answer=$(PGPASSFILE=$dir/pgpass PGCONNECT_TIMEOUT=10 "$bindir/psql" -w -X -q -A -t \
  -d "$url" -c 'SELECT 1' 2>&1) ||
  { stop "$dir"; die "the server does not answer on ${listen:-127.0.0.1}:$port: $answer"; }
[ "$answer" = 1 ] || { stop "$dir"; die "SELECT 1 answered '$answer'"; }
echo "export KILN_DATABASE_URL=$url PGPASSFILE=$dir/pgpass"
