#!/usr/bin/env bash
# Two builds' HTTP writes compared on a machine whose speed drifts: both
# servers up at once, each on its own database (durable settings, 64
# members, a ClusterOperator token), and `wrk -t2 -c64` POSTing
# join-progress (progress.lua) at each in turn, ROUNDS times. Prints the
# rate, p99 and the server's CPU per request of each run.
# Usage: bench/ab.sh OLD_BIN NEW_BIN [rounds] [sqlite|postgres] [seconds]
# (PostgreSQL: STRATUM_TEST_PG_URL, default postgres://postgres@127.0.0.1:5432/test).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OLD_BIN NEW_BIN [rounds] [sqlite|postgres] [seconds]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
. "$here/seed.sh"
rounds=${3:-4}
backend=${4:-postgres}
secs=${5:-6}
admin=bench-bootstrap-token-0123456789abcdefghij
pg_admin=${STRATUM_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
tmp=$(mktemp -d)
declare -A bin port server token url
bin[old]=$1
bin[new]=$2
cleanup() {
  for b in old new; do
    [ -n "${server[$b]:-}" ] && { kill "${server[$b]}" 2>/dev/null || true; wait "${server[$b]}" 2>/dev/null || true; }
    if [ "$backend" = postgres ]; then psql "$pg_admin" -qc "DROP DATABASE IF EXISTS stratum_bench_ab_${b}_$$ WITH (FORCE)"; fi
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
for b in old new; do
  case $backend in
    sqlite) url[$b]=sqlite://$tmp/$b.db ;;
    postgres)
      psql "$pg_admin" -qc "CREATE DATABASE stratum_bench_ab_${b}_$$"
      url[$b]=${pg_admin%/*}/stratum_bench_ab_${b}_$$ ;;
    *) echo "usage: $0 OLD_BIN NEW_BIN [rounds] [sqlite|postgres] [seconds]" >&2; exit 2 ;;
  esac
  port[$b]=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  STRATUM_DATABASE_URL=${url[$b]} STRATUM_BOOTSTRAP_TOKEN=$admin STRATUM_LOG=warn \
    "${bin[$b]}" serve --listen "127.0.0.1:${port[$b]}" 2>"$tmp/$b.log" &
  server[$b]=$!
  ready_and_seeded "http://127.0.0.1:${port[$b]}" "$admin"
  token[$b]=$(bench_token "${bin[$b]}" "${url[$b]}")
done
for _ in $(seq "$rounds"); do
  for b in old new; do
    before=$(awk '{print $14 + $15}' "/proc/${server[$b]}/stat")
    out=$(STRATUM_BENCH_TOKEN=${token[$b]} wrk -t2 -c64 -d"${secs}s" --latency \
      -s "$here/progress.lua" "http://127.0.0.1:${port[$b]}")
    after=$(awk '{print $14 + $15}' "/proc/${server[$b]}/stat")
    echo "$out" | awk -v b="$b" -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" '
      $1 == "99%" {p99 = $2}
      /requests in/ {n = $1}
      /Requests\/sec/ {rps = $2}
      END {printf "%s: %9.0f requests/s  p99 %8s  server CPU %5.1f us/request\n", b, rps, p99, t / hz * 1e6 / n}'
  done
done
