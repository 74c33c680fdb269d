#!/usr/bin/env bash
# fan-toolprof.sh <svc binary> <outdir>: CPU profiles of the kit's load generator (fanout) in cell 4
# (P=16 S=100, 10 s) against a fresh svc and a fresh Centrifugo, started as compare.sh starts them
# (run compare.sh once first: it builds fanout and unpacks the peers into the cache). Writes
# <outdir>/tool-svc.pprof, tool-cf.pprof and each run's JSON line. Uses ports 18090 and 18000.
set -u
svc=$(realpath "$1"); o=$(realpath -m "$2"); mkdir -p "$o"
here=${BENCH:-../shared/bench}; cache=${XDG_CACHE_HOME:-$HOME/.cache}/svc-bench; d=$(mktemp -d)
"$svc" serve --config-path "$d/svc.json" --addr 127.0.0.1:18090 --db-path "$d/main.db" >"$d/stdout" 2>"$d/stderr" &
pid=$!
for _ in $(seq 300); do grep -q 'admin token:' "$d/stdout" 2>/dev/null && curl -sf http://127.0.0.1:18090/healthz >/dev/null && break; sleep 0.1; done
python3 "$here/mkmembers.py" 18090 "$(grep -o 'svc_[A-Za-z0-9_-]*' "$d/stdout" | head -1)" 1020 "$d/tokens.json" >/dev/null
$cache/fanout -max-time 3m -label svc -target svc -url http://127.0.0.1:18090 -svc-tokens "$d/tokens.json" -svc-ready-event ready -svc-mode broadcast -server-pid $pid -scenario throughput -pubs 16 -subs 100 -duration 10s -cpuprofile $o/tool-svc.pprof | tail -1 > $o/tool-svc.json
kill $pid; wait $pid 2>/dev/null
c=$(mktemp -d); cp "$here/peers/centrifugo-config.json" "$c/config.json"
(cd "$c" && exec "$cache/centrifugo" -c "$c/config.json" >"$c/stdout" 2>"$c/stderr") &
cpid=$!
for _ in $(seq 200); do curl -sf http://127.0.0.1:18000/health >/dev/null && break; sleep 0.1; done
$cache/fanout -max-time 3m -label cf -target centrifugo -url http://127.0.0.1:18000 -cf-api-key bench-api-key-local-only -cf-secret bench-secret-local-only -cf-transport uni_sse -server-pid $cpid -scenario throughput -pubs 16 -subs 100 -duration 10s -cpuprofile $o/tool-cf.pprof | tail -1 > $o/tool-cf.json
kill $cpid; wait $cpid 2>/dev/null
rm -rf "$d" "$c"
echo TOOLPROF DONE
