#!/usr/bin/env bash
# make run-postgres: svc on a local PostgreSQL cluster in RUNDIR/pg.
#
#   scripts/run-postgres.sh SVC RUNDIR [svc serve flags...]
#
# Starts the cluster (scripts/pgcluster.sh: initdb on first use), creates
# the database svc in it, and runs `SVC serve` on it with the team config
# RUNDIR/pg/svc.json (its files under RUNDIR/pg/svc-files). When svc stops,
# the cluster stops too if this script started it; one already running
# (scripts/pgcluster.sh start RUNDIR/pg) is left running. The state is
# separate from `make run`'s RUNDIR/svc.json and svc.db: a config and a
# database belong together (svc refuses a config whose team is not in the
# database).
set -euo pipefail
svc=${1:?usage: run-postgres.sh SVC RUNDIR [svc serve flags...]}
run=${2:?usage: run-postgres.sh SVC RUNDIR [svc serve flags...]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
pg=$run/pg
started=
if ! "$here/pgcluster.sh" status "$pg"; then
  "$here/pgcluster.sh" start "$pg"
  started=1
  echo "PostgreSQL started in $pg (stopped when svc stops)"
fi
stop_cluster() { [[ -z $started ]] || "$here/pgcluster.sh" stop "$pg"; }
trap stop_cluster EXIT
"$here/pgcluster.sh" createdb "$pg" svc
url=$("$here/pgcluster.sh" url "$pg" svc)
echo "svc on $url"
"$svc" serve --config-path "$pg/svc.json" --db-url "$url" "$@" &
pid=$!
# A ^C in the terminal reaches svc itself; a signal sent to this script
# only is passed on. Either way svc shuts down and the script waits for it.
trap 'kill -TERM "$pid" 2>/dev/null || true' INT TERM
rc=0
while kill -0 "$pid" 2>/dev/null; do
  wait "$pid" && rc=0 || rc=$?
done
exit "$rc"
