#!/usr/bin/env bash
# Test harness: a REAL Patroni raft (pysyncobj) cluster on loopback, without PostgreSQL.
#
# Each member is one `patroni_raft_controller` (Patroni's standalone raft daemon) with a YAML
# config `raft: {self_addr, partner_addrs, data_dir}`; each member's raft listens on IP:5010.
#
#   patroni.sh up DIR ID=IP [ID=IP ...]  start founders; wait for a leader + all partners connected
#   patroni.sh join DIR ID=IP            start a new member; it adds itself (Patroni's DynMemberSyncObj
#                                        asks a partner for `members` and sends `add self`); falls back
#                                        to `syncobj_admin -add` on the leader; waits until listed everywhere
#   patroni.sh members DIR               raft members (host:port), one per line
#   patroni.sh leader DIR                leader host:port
#   patroni.sh stop|start DIR ID         SIGTERM+wait / start again with the same data_dir
#   patroni.sh pause|resume DIR ID       SIGSTOP / SIGCONT
#   patroni.sh kill DIR ID               SIGKILL
#   patroni.sh transfer DIR ID           make ID the raft's leader (-transfer, until it holds)
#   patroni.sh env DIR                   STRATUM_RAFT_PATRONI / STRATUM_PATRONI_RAFT_CONN / _PORT
#   patroni.sh down DIR                  kill everything started under DIR (idempotent, never fails)
#
# Needs `patroni_raft_controller` and `syncobj_admin` on PATH (pip: patroni[raft] / pysyncobj).
# patroni_raft_controller imports patroni.psycopg although it never talks to PostgreSQL; when neither
# psycopg2 nor psycopg is importable, a tiny stub psycopg2 is put on PYTHONPATH for the daemons.
#
# Env knobs: PATRONI_RAFT_WAIT (seconds, default 60) bounds every wait;
#            PATRONI_RAFT_LOG_LEVEL (default INFO) is the daemons' log level;
#            PATRONI_RAFT_PYTHON (default python3) must import pysyncobj (used for status polling).
#
# NOTE: `syncobj_admin` has no timeout flag and waits up to 900 s for an answer from a SIGSTOPped
# member; this script wraps every call in `timeout` and never queries members it paused.
set -euo pipefail

PORT=5010
WAIT=${PATRONI_RAFT_WAIT:-60}
ADMIN_TIMEOUT=5
LOG_LEVEL=${PATRONI_RAFT_LOG_LEVEL:-INFO}
PY=${PATRONI_RAFT_PYTHON:-python3} # an interpreter that has pysyncobj (for fast status queries)

die() { echo "patroni.sh: $*" >&2; exit 1; }
log() { echo "patroni.sh: $*" >&2; }

usage() {
  sed -n '4,18p' "$0" >&2
  exit 2
}

# ---------------------------------------------------------------- state layout
# $ROOT/order             all member IDs in creation order
# $ROOT/founders          founder IDs
# $ROOT/m/ID/{ip,conf.yml,data/,log,pid,paused}
# $ROOT/pystub            psycopg2 stub (only when needed)

set_root() {
  [[ -n ${1:-} ]] || usage
  DIR=$1
  [[ ${2:-} == create ]] && mkdir -p "$DIR"
  [[ -d $DIR ]] || die "no such directory: $DIR"
  DIR=$(cd "$DIR" && pwd)
  ROOT=$DIR/patroni
}

mdir() { echo "$ROOT/m/$1"; }
ip_of() { cat "$(mdir "$1")/ip"; }
addr_of() { echo "$(ip_of "$1"):$PORT"; }
known() { [[ -f $(mdir "$1")/ip ]]; }
all_ids() { [[ -f $ROOT/order ]] && cat "$ROOT/order" || true; }
founder_ids() { [[ -f $ROOT/founders ]] && cat "$ROOT/founders" || true; }
is_founder() { grep -qxF "$1" "$ROOT/founders" 2>/dev/null; }

pid_of() {
  local f
  f=$(mdir "$1")/pid
  [[ -f $f ]] && cat "$f" || true
}

# alive: the recorded pid exists and is still our daemon (cmdline names our config)
alive() {
  local pid
  pid=$(pid_of "$1")
  [[ -n $pid ]] || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  local cmdline
  cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
  [[ $cmdline == *"$(mdir "$1")/conf.yml"* ]] || return 1
  local state
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo X)
  [[ $state != Z && $state != X ]]
}

paused() {
  local pid state
  pid=$(pid_of "$1")
  [[ -f $(mdir "$1")/paused ]] && return 0
  [[ -n $pid && -r /proc/$pid/stat ]] || return 1
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo X)
  [[ $state == T || $state == t ]]
}

# running: alive and not paused (safe to query)
running() { alive "$1" && ! paused "$1"; }

running_ids() {
  local id
  for id in $(all_ids); do
    if running "$id"; then echo "$id"; fi
  done
}

id_of_addr() {
  local a=$1 id
  for id in $(all_ids); do
    [[ $(addr_of "$id") == "$a" ]] && { echo "$id"; return 0; }
  done
  return 1
}

# Status queries. `syncobj_admin -conn A -status` costs ~0.35 s of Python start-up per call, so the
# wait loops take one snapshot of all running members per round with a tiny helper that sends the
# same 'status' utility command through pysyncobj's TcpUtility (what syncobj_admin uses) with a
# real timeout, and prints the dict exactly as syncobj_admin does ("key: value", sorted).
PYSTATUS='
import sys
from pysyncobj.utility import TcpUtility
t = float(sys.argv[1])
for a in sys.argv[2:]:
    print("@@ " + a)
    try:
        r = TcpUtility(None, t).executeCommand(a, ["status"])
    except Exception:
        r = None
    if isinstance(r, dict):
        for k, v in sorted(r.items()):
            print("%s: %s" % (k, v))
    sys.stdout.flush()
'
declare -A ST=()

# snapshot: query every running (not paused) member once; status() answers from it until the next one
snapshot() {
  ST=()
  local addrs=() id out line cur=""
  for id in $(running_ids); do addrs+=("$(addr_of "$id")"); done
  ((${#addrs[@]})) || return 0
  out=$(timeout $((ADMIN_TIMEOUT * ${#addrs[@]} + 5)) "$PY" -c "$PYSTATUS" "$ADMIN_TIMEOUT" "${addrs[@]}" 2>/dev/null) || true
  while IFS= read -r line; do
    if [[ $line == "@@ "* ]]; then
      cur=${line#@@ }
      ST[$cur]=""
    elif [[ -n $cur ]]; then
      ST[$cur]+="$line"$'\n'
    fi
  done <<<"$out"
}

# status ADDR: the member's status dict (from the snapshot if it has ADDR), or fail
status() {
  local a=$1 out
  if [[ -v "ST[$a]" ]]; then
    out=${ST[$a]}
  else
    out=$(timeout $((ADMIN_TIMEOUT + 5)) "$PY" -c "$PYSTATUS" "$ADMIN_TIMEOUT" "$a" 2>/dev/null) || true
  fi
  # the answer must come from the member we asked (a daemon bound to 0.0.0.0 would answer for all)
  grep -qxF "self: $a" <<<"$out" || return 1
  grep -v '^@@ ' <<<"$out"
}

inlist() { grep -qxF -- "$1" <<<"$2"; }
skey() { sed -n "/^$1: /{s/^$1: //p;q;}" <<<"$2"; }
# self + partners of a status
smembers() {
  { skey self "$1"; sed -n 's/^partner_node_status_server_\(.*\): [0-9]*$/\1/p' <<<"$1"; } | sort
}

tails() {
  local id
  for id in "$@"; do
    local f
    f=$(mdir "$id")/log
    echo "----- log tail of $id ($(addr_of "$id"), pid $(pid_of "$id")) -----" >&2
    [[ -f $f ]] && tail -n 25 "$f" >&2 || echo "(no log)" >&2
  done
}

fail_wait() {
  local what=$1
  shift
  log "TIMEOUT after ${WAIT}s waiting for: $what"
  local id st
  snapshot
  for id in $(all_ids); do
    if running "$id"; then
      st=$(status "$(addr_of "$id")" || echo '(no status answer)')
      echo "----- status of $id ($(addr_of "$id")) -----" >&2
      grep -E '^(self|leader|state|has_quorum|partner_)' <<<"$st" >&2 || echo "$st" >&2
    else
      echo "----- $id ($(addr_of "$id")): not running$(paused "$id" && echo ' (paused)') -----" >&2
    fi
  done
  tails "$@"
  exit 1
}

# ---------------------------------------------------------------- daemons

ensure_pystub() {
  if "$PY" -c 'import psycopg2' >/dev/null 2>&1 || "$PY" -c 'import psycopg' >/dev/null 2>&1; then
    return 0
  fi
  mkdir -p "$ROOT/pystub/psycopg2"
  cat >"$ROOT/pystub/psycopg2/__init__.py" <<'EOF'
# Stub written by patroni.sh: patroni_raft_controller imports patroni.psycopg but never
# connects to PostgreSQL.
__version__ = '2.9.99 (stub)'
class Error(Exception): pass
class DatabaseError(Error): pass
class OperationalError(DatabaseError): pass
class ProgrammingError(DatabaseError): pass
def connect(*args, **kwargs):
    raise OperationalError('psycopg2 stub: no PostgreSQL in this harness')
EOF
  cat >"$ROOT/pystub/psycopg2/extensions.py" <<'EOF'
def adapt(value): raise NotImplementedError('psycopg2 stub')
def parse_dsn(dsn): raise NotImplementedError('psycopg2 stub')
def quote_ident(value, scope): raise NotImplementedError('psycopg2 stub')
EOF
  export PYTHONPATH="$ROOT/pystub${PYTHONPATH:+:$PYTHONPATH}"
}

# new_member ID IP KIND PARTNER_ADDR...
new_member() {
  local id=$1 ip=$2 kind=$3
  shift 3
  [[ $id =~ ^[A-Za-z0-9._-]+$ ]] || die "bad member id '$id'"
  [[ $ip =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "bad loopback ip '$ip' for $id (want 127.x.y.z)"
  known "$id" && die "member $id already exists under $ROOT (run 'down' first or pick another id)"
  local other
  for other in $(all_ids); do
    [[ $(ip_of "$other") == "$ip" ]] && die "ip $ip already used by $other"
  done
  local d
  d=$(mdir "$id")
  mkdir -p "$d/data"
  echo "$ip" >"$d/ip"
  echo "$kind" >"$d/kind"
  {
    echo "# written by patroni.sh"
    echo "raft:"
    echo "  self_addr: '$ip:$PORT'"
    if (($# == 0)); then
      echo "  partner_addrs: []"
    else
      echo "  partner_addrs:"
      local p
      for p in "$@"; do echo "  - '$p'"; done
    fi
    echo "  data_dir: '$d/data'"
    # without bind_addr pysyncobj binds 0.0.0.0:5010 and the first member answers for every IP
    echo "  bind_addr: '$ip:$PORT'"
    # retry_timeout bounds how long a (re)starting member asks its partners for `members`
    echo "  retry_timeout: 6"
    echo "log:"
    echo "  level: $LOG_LEVEL"
    echo "  format: '%(asctime)s %(levelname)s: %(message)s'"
  } >"$d/conf.yml"
  echo "$id" >>"$ROOT/order"
  [[ $kind == founder ]] && echo "$id" >>"$ROOT/founders"
  return 0
}

launch() {
  local id=$1 d bin
  d=$(mdir "$id")
  alive "$id" && die "$id is already running (pid $(pid_of "$id"))"
  bin=$(command -v patroni_raft_controller) || die "patroni_raft_controller not on PATH (pip install 'patroni[raft]')"
  command -v syncobj_admin >/dev/null || die "syncobj_admin not on PATH (pip install pysyncobj)"
  "$PY" -c 'import pysyncobj' 2>/dev/null || die "$PY cannot import pysyncobj (set PATRONI_RAFT_PYTHON)"
  # is the port free?
  if (exec 3<>"/dev/tcp/$(ip_of "$id")/$PORT") 2>/dev/null; then
    die "$(addr_of "$id") is already in use by another process"
  fi
  ensure_pystub
  rm -f "$d/paused"
  echo "===== $(date '+%F %T') start $id =====" >>"$d/log"
  # setsid: own session, so the daemon outlives the caller and no terminal signal reaches it
  # PYTHONFAULTHANDLER: a daemon killed by a fatal signal leaves its Python stack in its log
  PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1 setsid "$bin" "$d/conf.yml" </dev/null >>"$d/log" 2>&1 &
  local pid=$!
  echo "$pid" >"$d/pid"
  # until the forked shell has exec'ed, /proc/PID/cmdline is still this script's: wait for the exec
  local i
  for i in $(seq 1 100); do
    alive "$id" && return 0
    [[ -d /proc/$pid ]] || break
    sleep 0.05
  done
  alive "$id" || { log "$id did not start"; tails "$id"; exit 1; }
}

# wait until ADDR answers -status at all
wait_answers() {
  local id=$1 deadline=$((SECONDS + WAIT))
  while ((SECONDS < deadline)); do
    gone "$id" && { exited "$id"; exit 1; }
    status "$(addr_of "$id")" >/dev/null && return 0
    sleep 0.2
  done
  fail_wait "$id ($(addr_of "$id")) to answer syncobj_admin -status" "$id"
}

# The authoritative view: ask running members (founders first) for the leader, then ask the leader.
# Prints the leader's status (falls back to a quorate member's status). Returns 1 if nothing usable.
cluster_view() {
  local id st ldr lid lst fallback=""
  for id in $(founder_ids) $(all_ids); do
    running "$id" || continue
    st=$(status "$(addr_of "$id")") || continue
    ldr=$(skey leader "$st")
    [[ -n $ldr && $ldr != None ]] || continue
    [[ $(skey has_quorum "$st") == True ]] || continue
    if [[ $ldr == "$(skey self "$st")" ]]; then
      printf '%s\n' "$st"
      return 0
    fi
    [[ -z $fallback ]] && fallback=$st
    if lid=$(id_of_addr "$ldr") && running "$lid" && lst=$(status "$ldr") &&
      [[ $(skey state "$lst") == 2 && $(skey has_quorum "$lst") == True ]]; then
      printf '%s\n' "$lst"
      return 0
    fi
  done
  [[ -n $fallback ]] || return 1
  printf '%s\n' "$fallback"
}

# gone ID: the daemon is really gone. Three looks 0.1 s apart: on a loaded machine one look at
# /proc can miss a live process (its cmdline is read under the process's memory lock).
gone() {
  local i
  for i in 1 2 3; do
    alive "$1" && return 1
    sleep 0.1
  done
  return 0
}

# exited ID: what is left of a daemon that went away during startup, and its log
exited() {
  local pid
  pid=$(pid_of "$1")
  if [[ -n $pid && -d /proc/$pid ]]; then
    log "$1 ($(addr_of "$1")) exited during startup (pid $pid: state $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null), cmdline '$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)')"
  else
    log "$1 ($(addr_of "$1")) exited during startup (pid ${pid:-?} is gone)"
  fi
  tails "$1"
}

# ---------------------------------------------------------------- commands

cmd_up() {
  set_root "${1:-}" create
  shift
    (($# >= 1)) || usage
  local spec id ip ids=() ips=()
  for spec in "$@"; do
    [[ $spec == *=* ]] || die "expected ID=IP, got '$spec'"
    ids+=("${spec%%=*}")
    ips+=("${spec#*=}")
  done
  mkdir -p "$ROOT/m"
  local t0=$SECONDS i j partners
  for i in "${!ids[@]}"; do
    partners=()
    for j in "${!ids[@]}"; do
      ((i == j)) || partners+=("${ips[$j]}:$PORT")
    done
    new_member "${ids[$i]}" "${ips[$i]}" founder "${partners[@]}"
  done
  for id in "${ids[@]}"; do launch "$id"; done
  local n=${#ids[@]} deadline=$((SECONDS + WAIT)) ok st leaders
  while :; do
    snapshot
    ok=1
    leaders=()
    for id in "${ids[@]}"; do
      gone "$id" && { exited "$id"; exit 1; }
      if ! st=$(status "$(addr_of "$id")"); then ok=0; break; fi
      local l
      l=$(skey leader "$st")
      if [[ -z $l || $l == None || $(skey has_quorum "$st") != True ]]; then ok=0; break; fi
      if [[ $(skey partner_nodes_count "$st") != $((n - 1)) ]]; then ok=0; break; fi
      if grep -q '^partner_node_status_server_.*: 0$' <<<"$st"; then ok=0; break; fi
      leaders+=("$l")
    done
    if ((ok)) && [[ $(printf '%s\n' "${leaders[@]}" | sort -u | wc -l) == 1 ]]; then
      break
    fi
    ((SECONDS < deadline)) || fail_wait "every founder to see a leader and all $((n - 1)) partners connected" "${ids[@]}"
    sleep 0.2
  done
  log "up: ${#ids[@]} founders ready in $((SECONDS - t0))s, leader ${leaders[0]}"
}

cmd_join() {
  set_root "${1:-}"
  local spec=${2:-}
  [[ $spec == *=* ]] || usage
  local id=${spec%%=*} ip=${spec#*=}
  [[ -f $ROOT/order ]] || die "no cluster under $ROOT (run 'up' first)"
  local t0=$SECONDS view partners=() p
  snapshot
  view=$(cluster_view) || die "no running member with a leader under $ROOT to join"
  for p in $(smembers "$view"); do
    [[ $p == "$ip:$PORT" ]] || partners+=("$p")
  done
  new_member "$id" "$ip" joiner "${partners[@]}"
  launch "$id"
  local me="$ip:$PORT" deadline=$((SECONDS + WAIT)) added_by_hand=0 ok st other lst
  local fallback_at=$((SECONDS + 15)) relaunched=0
  while :; do
    if gone "$id"; then
      exited "$id"
      # Seen once in CI under load: a joiner gone at once with nothing in its log. It holds no
      # state yet, so it is started once more before the join is called failed.
      ((relaunched)) && exit 1
      log "join: starting $id once more"
      launch "$id"
      relaunched=1
      continue
    fi
    snapshot
    ok=1
    # the leader must list it (authoritative), then every running member that the leader lists
    if view=$(cluster_view) && inlist "$me" "$(smembers "$view")"; then
      for other in $(running_ids); do
        inlist "$(addr_of "$other")" "$(smembers "$view")" || continue # removed/foreign node
        if ! st=$(status "$(addr_of "$other")") || ! inlist "$me" "$(smembers "$st")"; then
          ok=0
          break
        fi
      done
      # and the new member must have found the leader
      if ((ok)); then
        if ! st=$(status "$me") || [[ $(skey leader "$st") == None || -z $(skey leader "$st") ]]; then ok=0; fi
      fi
    else
      ok=0
      # Patroni's self-add is fire-and-forget (one attempt); retry explicitly against the leader
      if ((SECONDS >= fallback_at && added_by_hand < 3)) && [[ -n ${view:-} ]]; then
        lst=$(skey leader "$view")
        if [[ -n $lst && $lst != None ]]; then
          log "join: $me not listed after 15s, running: syncobj_admin -conn $lst -add $me"
          timeout "$ADMIN_TIMEOUT" syncobj_admin -conn "$lst" -add "$me" >&2 || true
          added_by_hand=$((added_by_hand + 1))
          fallback_at=$((SECONDS + 5))
        fi
      fi
    fi
    ((ok)) && break
    ((SECONDS < deadline)) || fail_wait "every running member to list $me" "$id" $(running_ids)
    sleep 0.2
  done
  log "join: $id ($me) member in $((SECONDS - t0))s$( ((added_by_hand)) && echo " (needed explicit -add)")$( ((relaunched)) && echo " (started twice)")"
}

cmd_members() {
  set_root "${1:-}"
  local view
  snapshot
  view=$(cluster_view) || die "no running member with a leader and quorum under $ROOT"
  smembers "$view"
}

cmd_leader() {
  set_root "${1:-}"
  local view
  snapshot
  view=$(cluster_view) || die "no running member with a leader and quorum under $ROOT"
  skey leader "$view"
}

need_member() {
  set_root "${1:-}"
  [[ -n ${2:-} ]] || usage
  known "$2" || die "unknown member '$2' under $ROOT"
  ID=$2
}

cmd_stop() {
  need_member "$@"
  alive "$ID" || { log "stop: $ID is not running"; return 0; }
  local pid
  pid=$(pid_of "$ID")
  kill -TERM "$pid" 2>/dev/null || true
  kill -CONT "$pid" 2>/dev/null || true # a paused daemon must run to handle SIGTERM
  rm -f "$(mdir "$ID")/paused"
  local deadline=$((SECONDS + WAIT))
  while alive "$ID"; do
    if ((SECONDS >= deadline)); then
      log "stop: $ID (pid $pid) ignored SIGTERM for ${WAIT}s, sending SIGKILL"
      tails "$ID"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.5
      break
    fi
    sleep 0.1
  done
}

cmd_start() {
  need_member "$@"
  launch "$ID"
  wait_answers "$ID"
  # with its old journal it should find the leader again (or re-add itself, see findings)
  local deadline=$((SECONDS + WAIT)) st l
  while :; do
    alive "$ID" || { log "$ID exited after start"; tails "$ID"; exit 1; }
    if st=$(status "$(addr_of "$ID")"); then
      l=$(skey leader "$st")
      [[ -n $l && $l != None ]] && break
    fi
    ((SECONDS < deadline)) || fail_wait "$ID ($(addr_of "$ID")) to see a leader after restart" "$ID"
    sleep 0.2
  done
}

cmd_pause() {
  need_member "$@"
  alive "$ID" || die "pause: $ID is not running"
  kill -STOP "$(pid_of "$ID")"
  touch "$(mdir "$ID")/paused"
}

cmd_resume() {
  need_member "$@"
  alive "$ID" || die "resume: $ID is not running"
  kill -CONT "$(pid_of "$ID")"
  rm -f "$(mdir "$ID")/paused"
}

cmd_kill() {
  need_member "$@"
  if alive "$ID"; then
    local pid
    pid=$(pid_of "$ID")
    kill -KILL "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 10))
    while alive "$ID" && ((SECONDS < deadline)); do sleep 0.05; done
  fi
  rm -f "$(mdir "$ID")/paused"
  touch "$(mdir "$ID")/killed"
}

# Makes ID the raft's leader: `-transfer <addr>` to the current leader,
# repeated until the status shows ID leading (a transfer request may be
# lost to an election the old leader wins).
cmd_transfer() {
  need_member "$@"
  local target end leader
  target=$(addr_of "$ID")
  end=$(($(date +%s) + WAIT))
  while :; do
    leader=$(cmd_leader "$DIR" 2>/dev/null) || leader=
    [[ $leader == "$target" ]] && return 0
    [[ $(date +%s) -lt $end ]] || die "$ID did not become the leader in ${WAIT}s (leader: ${leader:-none})"
    if [[ -n $leader ]]; then
      timeout "$ADMIN_TIMEOUT" syncobj_admin -conn "$leader" -transfer "$target" >&2 || true
    fi
    sleep 1
  done
}

cmd_env() {
  set_root "${1:-}"
  local id conn=()
  for id in $(founder_ids); do conn+=("$(addr_of "$id")"); done
    ((${#conn[@]})) || die "no founders under $ROOT"
  echo "STRATUM_RAFT_PATRONI=syncobj"
  echo "STRATUM_PATRONI_RAFT_CONN=$(
    IFS=,
    echo "${conn[*]}"
  )"
  echo "STRATUM_PATRONI_RAFT_PORT=$PORT"
}

cmd_down() {
  set +e
  [[ -n ${1:-} ]] || return 0
  [[ -d $1 ]] || return 0
  DIR=$(cd "$1" && pwd) || return 0
  ROOT=$DIR/patroni
  [[ -d $ROOT ]] || return 0
  local pids=() id pid p
  for id in $(all_ids); do
    pid=$(pid_of "$id")
    [[ -n $pid ]] && alive "$id" && pids+=("$pid")
  done
  # safety net: any process whose command line names a config under $ROOT/m/
  for p in /proc/[0-9]*; do
    if [[ $(tr '\0' ' ' 2>/dev/null <"$p/cmdline") == *"$ROOT/m/"* ]]; then
      pids+=("${p#/proc/}")
    fi
  done
  ((${#pids[@]})) || return 0
  for pid in "${pids[@]}"; do
    [[ $pid == "$$" ]] && continue
    kill -KILL "$pid" 2>/dev/null
    kill -CONT "$pid" 2>/dev/null
  done
  local deadline=$((SECONDS + 10)) left
  while ((SECONDS < deadline)); do
    left=0
    for pid in "${pids[@]}"; do
      [[ $pid == "$$" ]] && continue
      if [[ -d /proc/$pid ]] && [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != Z ]]; then left=1; fi
    done
    ((left)) || break
    sleep 0.05
  done
  for id in $(all_ids); do rm -f "$(mdir "$id")/paused"; done
  return 0
}

main() {
  local cmd=${1:-}
  [[ -n $cmd ]] || usage
  shift
  case $cmd in
  up) cmd_up "$@" ;;
  join) cmd_join "$@" ;;
  members) cmd_members "$@" ;;
  leader) cmd_leader "$@" ;;
  stop) cmd_stop "$@" ;;
  start) cmd_start "$@" ;;
  pause) cmd_pause "$@" ;;
  resume) cmd_resume "$@" ;;
  kill) cmd_kill "$@" ;;
  env) cmd_env "$@" ;;
  transfer) cmd_transfer "$@" ;;
  down) cmd_down "$@" || true; exit 0 ;;
  -h | --help | help) usage ;;
  *) die "unknown command '$cmd'" ;;
  esac
}

main "$@"
