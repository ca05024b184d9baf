#!/usr/bin/env bash
# The HTTP path, measured with wrk against the release binary on the
# durable settings: GET /healthz (the ceiling of axum and the client here),
# GET a member and GET the peers alternating, and POST join-progress over
# 64 members; 64 connections, a generated bearer token with
# ClusterOperator. Usage: bench/http.sh sqlite|postgres [seconds]
# (PostgreSQL: STRATUM_TEST_PG_URL, default postgres://postgres@127.0.0.1:5432/test;
# STRATUM_BENCH_BIN: the binary, default target/release/stratum).
set -euo pipefail
backend=${1:-sqlite}
secs=${2:-10}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
# STRATUM_BENCH_BIN: another build to measure (an earlier commit's, say).
bin=${STRATUM_BENCH_BIN:-$root/target/release/stratum}
[ -x "$bin" ] || cargo build --release -p stratum-api --bin stratum
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
admin=bench-bootstrap-token-0123456789abcdefghij
pg_admin=${STRATUM_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/test}
case $backend in
  sqlite) url=sqlite://$tmp/stratum.db ;;
  postgres)
    db=stratum_bench_http_$$
    psql "$pg_admin" -qc "CREATE DATABASE $db"
    url=${pg_admin%/*}/$db ;;
  *) echo "usage: $0 sqlite|postgres [seconds]" >&2; exit 2 ;;
esac
cleanup() {
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  if [ "$backend" = postgres ]; then psql "$pg_admin" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)"; fi
  rm -rf "$tmp"
}
STRATUM_DATABASE_URL=$url STRATUM_BOOTSTRAP_TOKEN=$admin STRATUM_LOG=warn \
  "$bin" serve --listen "127.0.0.1:$port" 2>"$tmp/server.log" &
server=$!
trap cleanup EXIT
base=http://127.0.0.1:$port
. "$here/seed.sh"
ready_and_seeded "$base" "$admin"
export STRATUM_BENCH_TOKEN
STRATUM_BENCH_TOKEN=$(bench_token "$bin" "$url")
runs=0
run() {
  echo "== $backend: $1"
  shift
  # STRATUM_BENCH_PERF=DIR records a profile of the server during each run.
  if [ -n "${STRATUM_BENCH_PERF:-}" ]; then
    mkdir -p "$STRATUM_BENCH_PERF"
    # Counted here: an expansion in the backgrounded command would count in
    # its subshell, and every run would write 1.data.
    runs=$((runs + 1))
    perf record -F 499 -g -p "$server" -o "$STRATUM_BENCH_PERF/$runs.data" -- sleep "$secs" 2>/dev/null &
  fi
  # The server's CPU time per request (user + system, from /proc): steadier
  # than the rate on a shared machine, where wrk takes a core of its own.
  local before after out
  before=$(awk '{print $14 + $15}' "/proc/$server/stat")
  out=$(wrk -t2 -c64 -d"${secs}s" --latency "$@")
  after=$(awk '{print $14 + $15}' "/proc/$server/stat")
  echo "$out" | grep -E 'Requests/sec|Non-2xx|Socket errors|^ +(50|99)%'
  echo "$out" | awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" \
    '/requests in/ {printf "Server CPU:    %.1f us/request\n", t / hz * 1e6 / $1}'
}
run "GET /healthz" "$base/healthz"
run "GET a member and GET the peers, alternating" -s "$here/get.lua" "$base"
run "POST join-progress, 64 members round-robin" -s "$here/progress.lua" "$base"
echo "== $backend: server RSS $(ps -o rss= -p "$server") KiB"
