#!/usr/bin/env bash
# A local PostgreSQL cluster to try or measure svc on (make run-postgres,
# docs/SCALING.md): Debian's binaries (make postgres installs them), data in
# DIR/data, listening on a unix socket in DIR/sock only (no TCP port), trust
# authentication for the superuser svc, fsync and synchronous_commit on as
# svc requires. Run as root, the server runs as the postgres user
# (PostgreSQL refuses root), so DIR and its parent get search permission
# (o+x) for it; otherwise everything it creates is the user's alone.
#
#   scripts/pgcluster.sh start DIR          initdb on first use; start unless running
#   scripts/pgcluster.sh status DIR         exit 0 when running
#   scripts/pgcluster.sh stop DIR           fast shutdown, when running
#   scripts/pgcluster.sh createdb DIR NAME  create database NAME unless it exists
#   scripts/pgcluster.sh dropdb DIR NAME    drop database NAME if it exists
#   scripts/pgcluster.sh url DIR NAME       print database NAME's postgres:// URL
set -euo pipefail
umask 077
usage() { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
cmd=${1:-}; [[ -n $cmd && -n ${2:-} ]] || usage
mkdir -p "$2"
dir=$(cd "$2" && pwd)
data=$dir/data sock=$dir/sock
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[[ -n $bin && -x $bin/initdb ]] || {
  echo "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run make postgres (or: sudo apt-get install -y postgresql)" >&2
  exit 1
}
# A unix socket's path is limited to 107 bytes.
(( ${#sock} + 15 <= 107 )) || { echo "$sock is too long a path for PostgreSQL's socket: use a shorter RUNDIR" >&2; exit 1; }

root=; [[ $(id -u) = 0 ]] && root=1
# as_server runs a server-side command as the user the server runs as.
as_server() { if [[ -n $root ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
running() { [[ -s $data/PG_VERSION ]] && as_server "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; }
urlencode() {
  local s=$1 out= c i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case $c in [A-Za-z0-9._~/-]) out+=$c ;; *) printf -v c '%%%02X' "'$c"; out+=$c ;; esac
  done
  printf '%s' "$out"
}
psql1() { "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -U svc -d postgres -tA -c "$1"; }
name_ok() { [[ $1 =~ ^[a-z_][a-z0-9_]{0,62}$ ]] || { echo "database name must match [a-z_][a-z0-9_]*: $1" >&2; exit 2; }; }

case $cmd in
start)
  if [[ ! -s $data/PG_VERSION ]]; then
    mkdir -p "$data" "$sock"
    chmod 700 "$data" "$sock"
    if [[ -n $root ]]; then
      chown postgres: "$data" "$sock"
      chmod o+x "$dir" "$(dirname "$dir")"
      runuser -u postgres -- test -w "$data" || {
        echo "the postgres user cannot reach $data: give it search permission (chmod o+x) on the directories above it" >&2
        exit 1
      }
    fi
    echo "initdb: a new PostgreSQL cluster in $data"
    as_server "$bin/initdb" -D "$data" -U svc --auth=trust --encoding=UTF8 --no-locale >"$dir/initdb.log" 2>&1 || {
      cat "$dir/initdb.log" >&2
      exit 1
    }
    cat >>"$data/postgresql.conf" <<CONF

# scripts/pgcluster.sh: a unix socket only, durable commits (svc refuses fsync or synchronous_commit off).
listen_addresses = ''
unix_socket_directories = '$sock'
unix_socket_permissions = 0700
fsync = on
synchronous_commit = on
CONF
  fi
  running && exit 0
  # Its own session: a ^C in the terminal stops svc, not the database
  # under it; whoever started the cluster stops it.
  if [[ -n $root ]]; then
    setsid -w runuser -u postgres -- "$bin/pg_ctl" -D "$data" -l "$data/postgres.log" -w -t 60 start >/dev/null
  else
    setsid -w "$bin/pg_ctl" -D "$data" -l "$data/postgres.log" -w -t 60 start >/dev/null
  fi || { tail -n 20 "$data/postgres.log" >&2; exit 1; }
  ;;
status) running ;;
stop)
  running || exit 0
  as_server "$bin/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null
  ;;
createdb)
  name=${3:?usage: pgcluster.sh createdb DIR NAME}; name_ok "$name"
  [[ $(psql1 "SELECT 1 FROM pg_database WHERE datname = '$name'") = 1 ]] || psql1 "CREATE DATABASE $name"
  ;;
dropdb)
  name=${3:?usage: pgcluster.sh dropdb DIR NAME}; name_ok "$name"
  psql1 "DROP DATABASE IF EXISTS $name WITH (FORCE)"
  ;;
url)
  name=${3:?usage: pgcluster.sh url DIR NAME}; name_ok "$name"
  printf 'postgres://svc@/%s?host=%s&sslmode=disable\n' "$name" "$(urlencode "$sock")"
  ;;
*) usage ;;
esac
