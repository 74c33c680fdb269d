#!/usr/bin/env bash
# Stands in for the svc binary where a tool starts `svc serve ... --db-path
# FILE` (the benchmark kit's compare.sh, cmd/svcload): runs the real svc
# with --db-url on a fresh database of a local cluster instead (both stores
# in it), and passes every other command through. docs/SCALING.md,
# "PostgreSQL beside SQLite", has the commands.
#
#   scripts/pgcluster.sh start /tmp/bench-pg
#   BENCH_PG_DIR=/tmp/bench-pg BENCH_SVC=bin/svc ../shared/bench/compare.sh scripts/svc-on-postgres.sh
#
# BENCH_PG_DIR: the cluster's directory (scripts/pgcluster.sh start DIR);
# BENCH_SVC: the svc binary (default bin/svc beside scripts/). Not SVC_*
# names: cmd/svcload passes no SVC_* variable on to the broker.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
svc=${BENCH_SVC:-$here/../bin/svc}
[[ ${1:-} == serve ]] || exec "$svc" "$@"
dir=${BENCH_PG_DIR:?set BENCH_PG_DIR to a cluster directory (scripts/pgcluster.sh start DIR)}
name=svc_bench_$(date +%s)_$$
"$here/pgcluster.sh" createdb "$dir" "$name"
url=$("$here/pgcluster.sh" url "$dir" "$name")
args=()
while (($#)); do
  case $1 in
    --db-path) shift 2 ;;
    --db-path=*) shift ;;
    *) args+=("$1"); shift ;;
  esac
done
exec "$svc" "${args[@]}" --db-url "$url"
