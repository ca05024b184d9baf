# Sourced by the HTTP benches (http.sh, ab.sh): what a server under bench
# holds before its runs.

# ready_and_seeded BASE ADMIN: waits until the server at BASE is ready (10
# s at most, then fails), then admits n-0..n-63 with the bootstrap token.
ready_and_seeded() {
  local base=$1 admin=$2 i
  for i in $(seq 100); do
    curl -sf "$base/readyz" >/dev/null && break
    [ "$i" = 100 ] && { echo "the server at $base did not become ready" >&2; return 1; }
    sleep 0.1
  done
  for i in $(seq 0 63); do
    curl -sf -o /dev/null -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
      -d "{\"nodeId\":\"n-$i\",\"role\":\"compute\",\"mgmtIp\":\"10.9.0.$((i + 1))\"}" \
      "$base/v1/admin/cluster/members"
  done
}

# bench_token BIN URL: a ClusterOperator token created on the host.
bench_token() {
  STRATUM_DATABASE_URL=$2 STRATUM_LOG=warn "$1" token create \
    --principal user/bench --policy ClusterOperator | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])'
}
