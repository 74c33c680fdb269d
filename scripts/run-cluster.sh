#!/usr/bin/env bash
# make run-cluster: two svc brokers of one team on one PostgreSQL and one
# NATS, to try several brokers on one machine (docs/OPERATIONS.md, "Several
# brokers").
#
#   scripts/run-cluster.sh SVC RUNDIR [svc serve flags...]
#
# PostgreSQL: the cluster of make run-postgres (scripts/pgcluster.sh, data
# in RUNDIR/pg), database svc_cluster. NATS: nats-server built from the Go
# module go.mod already requires (no download other than the Go module
# proxy), into RUNDIR/bin, listening on 127.0.0.1:${NATS_PORT:-4222}.
# Brokers: 127.0.0.1:${SVC_PORT_A:-7433} and 127.0.0.1:${SVC_PORT_B:-7434},
# one team config RUNDIR/cluster/svc.json and its KEK beside it
# (svc.json.kek), shared by both. The first broker starts alone (a first
# run prints the admin token), the second once the first answers /healthz.
# Logs: RUNDIR/cluster/{nats,svc-a,svc-b}.log. A broker or NATS that dies
# (kill -9 one to try) is reported and the rest keep running; ^C (or a
# signal to this script) stops both brokers, NATS, and PostgreSQL when this
# started it.
set -euo pipefail
svc=${1:?usage: run-cluster.sh SVC RUNDIR [svc serve flags...]}
run=${2:?usage: run-cluster.sh SVC RUNDIR [svc serve flags...]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
nats_port=${NATS_PORT:-4222}
port_a=${SVC_PORT_A:-7433}
port_b=${SVC_PORT_B:-7434}
umask 077
mkdir -p "$run/bin" "$run/cluster"
dir=$(cd "$run/cluster" && pwd)

# nats-server at the version go.mod pins; go build caches it, so only a
# changed go.mod rebuilds.
nats=$(cd "$run/bin" && pwd)/nats-server
if [[ ! -x $nats || $root/go.mod -nt $nats ]]; then
  echo "building nats-server from the module in go.mod"
  (cd "$root" && CGO_ENABLED=0 go build -o "$nats" github.com/nats-io/nats-server/v2)
fi

pids=()
pg_started=
cleanup() {
  local i
  trap - INT TERM EXIT
  # In reverse order, each waited for: the brokers drain their streams and
  # commits while NATS is still there.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  [[ -z $pg_started ]] || "$here/pgcluster.sh" stop "$run/pg"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! "$here/pgcluster.sh" status "$run/pg"; then
  "$here/pgcluster.sh" start "$run/pg"
  pg_started=1
  echo "PostgreSQL started in $run/pg (stopped when this stops)"
fi
"$here/pgcluster.sh" createdb "$run/pg" svc_cluster
db=$("$here/pgcluster.sh" url "$run/pg" svc_cluster)

# A ^C in the terminal reaches every process started here (they share its
# process group) and this script, whose cleanup then waits for them all.
"$nats" -a 127.0.0.1 -p "$nats_port" >"$dir/nats.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$nats_port") 2>/dev/null && break
  kill -0 "${pids[0]}" 2>/dev/null || { cat "$dir/nats.log" >&2; echo "nats-server did not start" >&2; exit 1; }
  sleep 0.1
done
echo "NATS on nats://127.0.0.1:$nats_port"

serve() { # serve NAME PORT
  SVC_NATS_URL=nats://127.0.0.1:$nats_port "$svc" serve --addr "127.0.0.1:$2" \
    --config-path "$dir/svc.json" --db-url "$db" "${@:3}" 2>"$dir/svc-$1.log" &
  pids+=($!)
  local pid=$!
  for _ in $(seq 300); do
    curl -fsS "http://127.0.0.1:$2/healthz" >/dev/null 2>&1 && { echo "broker $1 on http://127.0.0.1:$2 (log $dir/svc-$1.log)"; return; }
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$dir/svc-$1.log" >&2; echo "broker $1 did not start" >&2; exit 1; }
    sleep 0.1
  done
  echo "broker $1 did not answer /healthz within 30 s" >&2
  exit 1
}
serve a "$port_a" "$@"
serve b "$port_b" "$@"
echo "both brokers up; ^C stops them, NATS and (if this started it) PostgreSQL"
# A process that dies (kill -9 a broker to see its streams resume on the
# other) is reported; the rest keep running until ^C.
names=([${pids[0]}]=nats-server [${pids[1]}]="broker a" [${pids[2]}]="broker b")
live=("${pids[@]}")
while ((${#live[@]})); do
  gone=
  wait -n -p gone "${live[@]}" || true
  [[ -n $gone ]] || continue
  echo "${names[$gone]} (pid $gone) exited; the rest keep running, ^C stops them" >&2
  for i in "${!live[@]}"; do [[ ${live[i]} != "$gone" ]] || unset 'live[i]'; done
done
exit 1
