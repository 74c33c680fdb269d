#!/usr/bin/env bash
# fan-perfstat.sh <svc binary> <tag>: runs ../shared/bench/compare.sh (REPS, CELLS, SERVERS
# from the environment, as compare.sh takes them) and, for every server it starts, counts its
# syscalls with `perf stat` (write, read, epoll, futex, fsync, pwrite64, ...; PERF=0 skips it),
# keeps its last /proc/<pid>/stat (utime, stime) and, for svc, its last GET /metrics, twice a
# second. Output in $DIR (default .): <tag>.jsonl (compare.sh's), <tag>.perf.<server>.<rep>,
# <tag>.stat.<server>.<rep>, <tag>.metrics.<rep>. docs/PERFORMANCE.md, "Issue 30: what bounds
# deliveries and the p99 (experiments)". Run it niced on a shared machine.
set -u
bin=$1; tag=$2; d=$(realpath -m "${DIR:-.}"); mkdir -p "$d"
compare=${COMPARE:-../shared/bench/compare.sh} # from the checkout's root, as the docs run it
out=$d/$tag.jsonl
EV=syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendto,syscalls:sys_enter_read,syscalls:sys_enter_recvfrom,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex,syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync,syscalls:sys_enter_nanosleep,syscalls:sys_enter_sched_yield,syscalls:sys_enter_pwrite64
: > "$out.log"
OUT=$out "$compare" "$bin" > "$d/$tag.stdout" 2>&1 &
cpid=$!
seen=""
while kill -0 $cpid 2>/dev/null; do
  while read -r line; do
    # "# rep <n> <server> (pid <pid>) load: ..."
    set -- $line
    key="$3.$4"; pid=${6%)}
    case " $seen " in *" $key "*) continue;; esac
    seen="$seen $key"
    ( while kill -0 "$pid" 2>/dev/null; do cat /proc/$pid/stat > "$d/$tag.st.tmp.$4" 2>/dev/null && mv "$d/$tag.st.tmp.$4" "$d/$tag.stat.$4.$3"; sleep 0.5; done ) &
    if [[ $4 == svc ]]; then
      ( while kill -0 "$pid" 2>/dev/null; do curl -sf http://127.0.0.1:18090/metrics > "$d/$tag.m.tmp" && mv "$d/$tag.m.tmp" "$d/$tag.metrics.$3"; sleep 0.5; done ) &
    fi
    [[ ${PERF:-1} == 1 ]] && perf stat -x, -e "$EV" -p "$pid" -o "$d/$tag.perf.$4.$3" >/dev/null 2>&1 &
  done < <(grep '^# rep' "$out.log" 2>/dev/null)
  sleep 0.2
done
wait
tail -n 30 "$d/$tag.stdout"
