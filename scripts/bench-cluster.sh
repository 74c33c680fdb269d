#!/usr/bin/env bash
# The several-brokers figures of docs/SCALING.md ("Several brokers"):
# fanout (../shared/bench/fanout with scripts/fanout-brokers.patch) against
# 1, 2 and 3 brokers of one team, subscribers spread over the brokers, the
# publishers on the first broker or on all of them. One JSON line per run.
#
#   scripts/bench-cluster.sh FANOUT TOKENS.json [REPS]
#
# The brokers: make run-cluster (7433, 7434) plus a third on 7435 on the
# same config and database (docs/SCALING.md gives the commands); TOKENS
# is ../shared/bench/mkmembers.py's output for members created before the
# brokers started.
set -euo pipefail
f=${1:?usage: bench-cluster.sh FANOUT TOKENS.json [REPS]}
tok=${2:?usage: bench-cluster.sh FANOUT TOKENS.json [REPS]}
reps=${3:-2}
b=(http://127.0.0.1:7433 http://127.0.0.1:7434 http://127.0.0.1:7435)
urls() { local IFS=,; echo "${b[*]:0:$1}"; }
for rep in $(seq "$reps"); do
  for n in 1 2 3; do
    "$f" -target svc -svc-tokens "$tok" -url "${b[0]}" -svc-sub-urls "$(urls $n)" -scenario latency \
      -subs 60 -msgs 200 -rate 40 -label "lat n=$n rep=$rep" | tail -n 1
    "$f" -target svc -svc-tokens "$tok" -url "${b[0]}" -svc-sub-urls "$(urls $n)" -scenario throughput \
      -pubs 6 -subs 30 -duration 8s -label "thr-one n=$n rep=$rep" | tail -n 1
    "$f" -target svc -svc-tokens "$tok" -url "$(urls $n)" -svc-sub-urls "$(urls $n)" -scenario throughput \
      -pubs 6 -subs 30 -duration 8s -label "thr-all n=$n rep=$rep" | tail -n 1
  done
done
