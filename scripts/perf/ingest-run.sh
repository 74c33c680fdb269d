#!/bin/bash
# ingest-run.sh <svc binary> <tag> <telemetry|hooks>
#
# One svcload run of the OTLP or hooks group against <svc>, with a CPU
# profile of the broker 1 s into each measured run (OTLP: 3 s of each of
# the protobuf and JSON runs; hooks: 6 s of the sustained run). Output in
# $OUT/<tag> (default /tmp/ingest-run): svcload's table, stderr and the
# profiles. SVCLOAD (default /work/bench/svcload) is the load generator,
# PORT (default 16391) the profiler's. Alternate builds with e.g.
#   for i in 1 2; do ingest-run.sh A a-$i hooks; ingest-run.sh B b-$i hooks; done
# CPU per operation = the broker's cores ÷ the rate, both in the table.
set -u
bin=$1 tag=$2 group=$3
out=${OUT:-/tmp/ingest-run}/$tag
mkdir -p "$out"
port=${PORT:-16391}
export SVC_PPROF_ADDR=127.0.0.1:$port
nice -n 19 "${SVCLOAD:-/work/bench/svcload}" --svc "$bin" --only "$group" --out "$out/table.txt" >"$out/stdout" 2>"$out/stderr" &
lp=$!
await() { # a progress line of svcload
	while ! grep -q "$1" "$out/stderr" 2>/dev/null; do
		sleep 0.2
		kill -0 $lp 2>/dev/null || return 1
	done
}
prof() { # name delay seconds
	sleep "$2"
	nice -n 19 curl -s -o "$out/$1.pprof" "http://127.0.0.1:$port/debug/pprof/profile?seconds=$3"
}
if [ "$group" = telemetry ]; then
	await "OTLP ingest http/protobuf" && prof proto 1 3
	await "OTLP ingest http/json" && prof json 1 3
else
	await "sustained run" && prof hooks 1 6
fi
wait $lp
echo "rc=$?" >>"$out/stdout"
