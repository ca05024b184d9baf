#!/usr/bin/env bash
# Test harness: a REAL highly-available PostgreSQL 15 cluster on loopback: one etcd (Patroni's DCS)
# and three PostgreSQL nodes pg-1..pg-3, each under Patroni 4.1 (etcd3 DCS).
#
#   patroni-pg.sh up DIR sync|async      start etcd + 3 nodes; wait for a writable leader and 2 streaming
#                                        replicas (sync: and a sync standby); the time it took on stderr
#   patroni-pg.sh url DIR [ID]           libpq URI of all nodes (target_session_attrs=read-write) or of ID
#   patroni-pg.sh leader DIR             the leader's id (the DCS view, from Patroni's REST /cluster)
#   patroni-pg.sh kill DIR ID            SIGKILL the node's Patroni, postmaster and all their children
#   patroni-pg.sh kill-leader DIR        same for the current leader; prints its id
#   patroni-pg.sh wait-leader DIR [NOT]  wait for a writable leader other than NOT; prints "ID SECONDS"
#   patroni-pg.sh start DIR ID           start a killed node again; waits until it streams as a replica
#   patroni-pg.sh freeze-replication DIR SIGSTOP the leader's walsenders: the standbys get no more WAL
#   patroni-pg.sh thaw-replication DIR   SIGCONT them
#   patroni-pg.sh lsn DIR                per running node: "ID primary LSN" or "ID replica RECEIVED REPLAYED"
#   patroni-pg.sh psql DIR ID SQL        run SQL on node ID (database stratum, psql -At)
#   patroni-pg.sh env DIR                STRATUM_HA_* lines to export
#   patroni-pg.sh down DIR               kill everything started under DIR (idempotent, never fails)
#
# Ports (HA_BASE_PORT=B, default 27430, fixed at `up`): etcd client B (peer B+1), PostgreSQL pg-N on
# 127.0.0.1:B+1+N, Patroni REST API of pg-N on B+4+N. Auth: trust on 127.0.0.1 (user postgres).
# As root, Patroni and PostgreSQL (which refuses root) run as the `postgres` user; when postgres can't
# reach Patroni's interpreter or DIR (pyenv under /root, a 0700 mktemp dir) they get the ambient
# capability CAP_DAC_READ_SEARCH. `patronictl -c DIR/ha/m/ID/conf.yml list` works.
# Env knobs: HA_WAIT (seconds, default 90) bounds every wait; HA_BASE_PORT; HA_PGBIN (PostgreSQL bin dir).
# `up` on a DIR that holds a stopped cluster wipes it first; after a failed `up`, run `down`.
#
# Why freeze-replication stops the SENDERS: a SIGSTOPped walreceiver does not stop its kernel from
# buffering the WAL the primary keeps sending; on SIGCONT it reads that tail even after the primary
# died, and the "lost" rows reappear on the new leader (seen here). A stopped walsender sends nothing:
# when the primary is SIGKILLed its tail is gone. wal_receiver_timeout is 10min so that the standbys
# don't reconnect (to a fresh, unfrozen walsender) during a long freeze. In sync mode commits block.
set -euo pipefail

WAIT=${HA_WAIT:-90}
PGBIN=${HA_PGBIN:-/usr/lib/postgresql/15/bin}
IDS=(pg-1 pg-2 pg-3)
SCOPE=stratum-ha

die() { echo "patroni-pg.sh: $*" >&2; exit 1; }
log() { echo "patroni-pg.sh: $*" >&2; }
usage() { sed -n '5,19p' "$0" >&2; exit 2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

# ---------------------------------------------------------------- state layout
# $ROOT/{base,mode,post_init.sh,frozen,killed_at}  $ROOT/etcd/{data,log,pid}
# $ROOT/m/ID/{conf.yml,data/,log,pid,pgpass}
set_root() {
  [[ -n ${1:-} ]] || usage
  if [[ ${2:-} == create ]]; then mkdir -p "$1"; fi
  [[ -d $1 ]] || die "no such directory: $1"
  DIR=$(cd "$1" && pwd) && ROOT=$DIR/ha
  if [[ -f $ROOT/base ]]; then BASE=$(<"$ROOT/base"); else BASE=${HA_BASE_PORT:-27430}; fi
  [[ $BASE =~ ^[0-9]+$ ]] && ((BASE > 1024 && BASE < 65500)) || die "bad HA_BASE_PORT '$BASE'"
}
need_up() { [[ -f $ROOT/base ]] || die "no cluster under $DIR (run 'up' first)"; }
need_id() { [[ ${1:-} =~ ^pg-[123]$ ]] || die "unknown node id '${1:-}' (pg-1, pg-2 or pg-3)"; ID=$1; }
mdir() { echo "$ROOT/m/$1"; }
pg_port() { echo $((BASE + 1 + ${1#pg-})); }
api_port() { echo $((BASE + 4 + ${1#pg-})); }
pid_of() { cat "$1/pid" 2>/dev/null || true; }
pstate() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null || echo X; }
starttime() { awk '{print $22}' "/proc/$1/stat" 2>/dev/null || true; }

# cmdline_has PID STR: PID lives (not a zombie) and its command line contains STR
cmdline_has() {
  local c
  [[ -n $1 && -r /proc/$1/cmdline ]] || return 1
  c=$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline") || return 1
  [[ $c == *"$2"* && $(pstate "$1") != [ZX] ]]
}
alive() { cmdline_has "$(pid_of "$ROOT/m/$1")" "$ROOT/m/$1/conf.yml"; }
etcd_alive() { cmdline_has "$(pid_of "$ROOT/etcd")" "$ROOT/etcd/data"; }
# pm_of ID: the node's running postmaster (postmaster.pid, checked against /proc)
pm_of() {
  local d=$ROOT/m/$1/data pid
  pid=$(head -n1 "$d/postmaster.pid" 2>/dev/null || true)
  cmdline_has "$pid" "$d" && echo "$pid" || true
}
# children PID...: direct children of the given pids
children() { ps -e -o pid=,ppid= | awk -v pp=" $* " 'index(pp, " " $2 " ") {print $1}'; }
# wait_gone PID...: wait (max 10s) until none of them lives (zombies count as gone)
wait_gone() {
  local i p left
  for i in $(seq 1 200); do
    left=0 && for p in "$@"; do [[ $p != "$$" && $(pstate "$p") != [ZX] ]] && left=1; done
    ((left)) || return 0
    sleep 0.05
  done
  return 1
}

psql_at() { # psql_at ID SQL
  PGCONNECT_TIMEOUT=3 "$PGBIN/psql" -X -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(pg_port "$1")" \
    -U postgres -d stratum -c "$2"
}
writable() { [[ $(psql_at "$1" 'select pg_is_in_recovery()' 2>/dev/null) == f ]]; }
# cluster: Patroni's /cluster JSON (the DCS view) from the first running node that answers
cluster() {
  local id out
  for id in "${IDS[@]}"; do
    alive "$id" || continue
    out=$(curl -fsS -m 2 "http://127.0.0.1:$(api_port "$id")/cluster" 2>/dev/null) || continue
    jq -e '.members' >/dev/null 2>&1 <<<"$out" && { echo "$out"; return 0; }
  done
  return 1
}
dcs_leader() { jq -r '[.members[] | select(.role=="leader")][0].name // empty' <<<"$1"; }
# replica_ok ID: ID's Patroni runs and says (itself, not the DCS, whose member keys live for ttl)
# that its PostgreSQL is a replica streaming from the primary
replica_ok() {
  alive "$1" && curl -fsS -m 2 "http://127.0.0.1:$(api_port "$1")/patroni" 2>/dev/null |
    jq -e 'select(.role=="replica" and .replication_state=="streaming")' >/dev/null 2>&1
}

tails() {
  local id
  echo "----- log tail of etcd (pid $(pid_of "$ROOT/etcd")$(etcd_alive || echo ', NOT running')) -----" >&2
  tail -n 8 "$ROOT/etcd/log" >&2 2>/dev/null || true
  for id in "${IDS[@]}"; do
    echo "----- log tail of $id (pg $(pg_port "$id"), api $(api_port "$id"), pid $(pid_of "$(mdir "$id")")$(alive "$id" || echo ', NOT running')) -----" >&2
    grep -v 'INFO: no action' "$(mdir "$id")/log" 2>/dev/null | tail -n 25 >&2 || echo "(no log)" >&2
  done
}
fail_wait() {
  log "TIMEOUT after ${WAIT}s waiting for: $1" && echo "----- cluster -----" >&2
  { cluster | jq -c '.members[] | {name, role, state, timeline, lag}'; } >&2 2>/dev/null || echo "(no answer)" >&2
  tails; exit 1
}

# ---------------------------------------------------------------- daemons
ensure_patroni() {
  if ! command -v patroni >/dev/null; then
    log "patroni not on PATH, installing patroni[etcd3] 4.1 with pip"
    python3 -m pip install -q 'patroni[etcd3]>=4.1,<4.2' psycopg2-binary >&2
    PATH=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH
  fi
  PATRONI=$(command -v patroni) || die "patroni not found after pip install"
  if [[ $PATRONI == */shims/* ]] && command -v pyenv >/dev/null; then PATRONI=$(pyenv which patroni); fi
  read -r PY _ < <(head -n1 "$PATRONI") && PY=${PY#\#!}
}

# RUNAS: the prefix for daemons. Root: the postgres user (+ CAP_DAC_READ_SEARCH when needed, see top)
set_runas() {
  RUNAS=()
  ((EUID == 0)) || return 0
  local plain=(setpriv --reuid=postgres --regid=postgres --init-groups)
  if "${plain[@]}" sh -c 'test -x "$1" && test -r "$2" && test -w "$3"' sh "$PY" "$PATRONI" "$ROOT/m" 2>/dev/null; then
    RUNAS=("${plain[@]}")
  else
    RUNAS=("${plain[@]}" --inh-caps=+dac_read_search --ambient-caps=+dac_read_search)
    # (no `test -w` here: access(2) ignores the capabilities of a non-root caller)
    "${RUNAS[@]}" sh -c ': >"$1/.probe" && rm "$1/.probe" && cat "$2" >/dev/null' sh "$ROOT/m" "$PATRONI" ||
      die "cannot run Patroni as postgres, even with CAP_DAC_READ_SEARCH"
  fi
  RUNAS+=(env HOME="$ROOT" USER=postgres LOGNAME=postgres)
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# spawn PIDDIR MATCH CMD...: setsid, so the daemon outlives the caller; waits until it has exec'ed
spawn() {
  local d=$1 match=$2 i pid
  shift 2
  echo "===== $(date '+%F %T') start =====" >>"$d/log"
  setsid "$@" </dev/null >>"$d/log" 2>&1 &
  pid=$!
  echo "$pid" >"$d/pid"
  for i in $(seq 1 200); do
    cmdline_has "$pid" "$match" && return 0
    [[ -d /proc/$pid ]] || break
    sleep 0.05
  done
  log "$d did not start"; tail -n 30 "$d/log" >&2 || true; exit 1
}

# Patroni: ttl/loop_wait/retry_timeout at the minimums Patroni 4.1 validates (20/1/3); a lagging
# standby may be promoted (maximum_lag_on_failover 1 GiB); a returning node always rejoins
# (pg_rewind, else a fresh base backup).
write_conf() {
  local id=$1 d=$ROOT/m/$1 sync=false
  [[ $(<"$ROOT/mode") == sync ]] && sync=true
  cat >"$d/conf.yml" <<EOF
# written by patroni-pg.sh
scope: $SCOPE
name: $id
log: {level: INFO, format: '%(asctime)s %(levelname)s: %(message)s'}
restapi: {listen: '127.0.0.1:$(api_port "$id")', connect_address: '127.0.0.1:$(api_port "$id")'}
etcd3: {hosts: '127.0.0.1:$BASE'}
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 1
    retry_timeout: 3
    maximum_lag_on_failover: 1073741824
    synchronous_mode: $sync
    synchronous_mode_strict: $sync
    synchronous_node_count: 1
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters: {wal_level: replica, hot_standby: 'on', wal_log_hints: 'on', max_connections: 50,
        max_wal_senders: 5, max_replication_slots: 5, max_worker_processes: 4, shared_buffers: 16MB,
        wal_keep_size: 64MB, min_wal_size: 32MB, max_wal_size: 128MB, wal_receiver_timeout: 10min,
        wal_retrieve_retry_interval: 500ms, dynamic_shared_memory_type: mmap}
  initdb: [{encoding: UTF8}, {locale: C}, {auth: trust}, no-sync]
  post_init: '$ROOT/post_init.sh'
postgresql:
  listen: '127.0.0.1:$(pg_port "$id")'
  connect_address: '127.0.0.1:$(pg_port "$id")'
  data_dir: '$d/data'
  bin_dir: '$PGBIN'
  pgpass: '$d/pgpass'
  authentication: {superuser: {username: postgres}, replication: {username: postgres}}
  parameters: {unix_socket_directories: ''}
  pg_hba: ['host all all 127.0.0.1/32 trust', 'host replication all 127.0.0.1/32 trust']
  basebackup: [{checkpoint: fast}]
  use_pg_rewind: true
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
EOF
}

launch() {
  local d=$ROOT/m/$1
  alive "$1" && die "$1 is already running (pid $(pid_of "$d"))"
  port_free "$(pg_port "$1")" && port_free "$(api_port "$1")" ||
    die "port $(pg_port "$1") or $(api_port "$1") of $1 is in use"
  spawn "$d" "$d/conf.yml" "${RUNAS[@]}" "$PATRONI" "$d/conf.yml"
}

# kill_node ID: a host crash: SIGKILL Patroni, the postmaster and their children (backends,
# walsenders, pg_rewind, ...). Both are SIGSTOPped first so that neither forks or reacts meanwhile.
kill_node() {
  local pat='' pm pids
  alive "$1" && pat=$(pid_of "$ROOT/m/$1")
  pm=$(pm_of "$1")
  kill -STOP $pat $pm 2>/dev/null || true
  pids=($pat $pm $(children $pat $pm))
  ((${#pids[@]})) || { log "kill: $1 is not running"; return 0; }
  kill -KILL "${pids[@]}" 2>/dev/null || true
  wait_gone "${pids[@]}" || log "kill: processes of $1 survived SIGKILL: ${pids[*]}"
}

# ---------------------------------------------------------------- commands
cmd_up() {
  set_root "${1:-}" create
  local mode=${2:-} id p t0 deadline c leader n
  [[ $mode == sync || $mode == async ]] || usage
  command -v etcd >/dev/null || die "etcd not on PATH (apt-get install etcd-server)"
  command -v curl >/dev/null && command -v jq >/dev/null || die "needs curl and jq"
  [[ -x $PGBIN/postgres ]] || die "no PostgreSQL binaries in $PGBIN"
  if [[ -d $ROOT ]]; then
    etcd_alive && die "a cluster is running under $DIR (run 'down' first)"
    for id in "${IDS[@]}"; do alive "$id" && die "$id is running under $DIR (run 'down' first)"; done
    cmd_down "$DIR"
    set -e
    rm -rf "$ROOT"
    set_root "$DIR" # BASE from the environment again
  fi
  ensure_patroni
  t0=$(now)
  for p in $(seq "$BASE" $((BASE + 7))); do port_free "$p" || die "port 127.0.0.1:$p is in use (set HA_BASE_PORT)"; done
  mkdir -p "$ROOT/etcd" "$ROOT/m"
  echo "$BASE" >"$ROOT/base" && echo "$mode" >"$ROOT/mode"
  cat >"$ROOT/post_init.sh" <<EOF
#!/bin/sh
# Patroni runs this once, on the node that bootstraps the cluster, with a connection string as \$1
PGOPTIONS='-c synchronous_commit=local' exec '$PGBIN/psql' -X -q -v ON_ERROR_STOP=1 -d "\$1" -c 'CREATE DATABASE stratum'
EOF
  chmod 0755 "$ROOT" "$ROOT/m" "$ROOT/post_init.sh"
  for id in "${IDS[@]}"; do mkdir -p "$(mdir "$id")" && write_conf "$id"; done
  if ((EUID == 0)); then chown -R postgres:postgres "$ROOT/m"; fi
  set_runas
  spawn "$ROOT/etcd" "$ROOT/etcd/data" etcd --name e0 --data-dir "$ROOT/etcd/data" \
    --listen-client-urls "http://127.0.0.1:$BASE" --advertise-client-urls "http://127.0.0.1:$BASE" \
    --listen-peer-urls "http://127.0.0.1:$((BASE + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((BASE + 1))" \
    --initial-cluster "e0=http://127.0.0.1:$((BASE + 1))" --initial-cluster-token "$SCOPE-$BASE" \
    --initial-cluster-state new --log-level warn
  deadline=$((SECONDS + WAIT))
  until curl -fsS -m 2 "http://127.0.0.1:$BASE/health" 2>/dev/null | grep -q '"health":"true"'; do
    etcd_alive || { log "etcd exited"; tails; exit 1; }
    ((SECONDS < deadline)) || fail_wait "etcd to be healthy"
    sleep 0.1
  done
  for id in "${IDS[@]}"; do launch "$id"; done
  while :; do
    for id in "${IDS[@]}"; do alive "$id" || { log "$id exited during startup"; tails; exit 1; }; done
    if c=$(cluster) && leader=$(dcs_leader "$c") && [[ -n $leader ]]; then
      n=0
      for id in "${IDS[@]}"; do
        if [[ $id != "$leader" ]] && replica_ok "$id"; then n=$((n + 1)); fi
      done
      ((n == 2)) && { [[ $mode == async ]] || jq -e '.members[] | select(.role=="sync_standby")' >/dev/null <<<"$c"; } &&
        writable "$leader" && break
    fi
    ((SECONDS < deadline)) || fail_wait "a writable leader, 2 streaming replicas$([[ $mode == sync ]] && echo ' and a sync standby')"
    sleep 0.2
  done
  log "up: $mode cluster ready in $(since "$t0")s, leader $leader ($(cmd_url "$DIR"))"
}

cmd_url() {
  set_root "${1:-}"
  local h="127.0.0.1:$(pg_port pg-1),127.0.0.1:$(pg_port pg-2),127.0.0.1:$(pg_port pg-3)" q=?target_session_attrs=read-write
  if [[ -n ${2:-} ]]; then need_id "$2" && h=127.0.0.1:$(pg_port "$ID") q=; fi
  echo "postgres://postgres@$h/stratum$q"
}

cmd_leader() {
  set_root "${1:-}" && need_up
  local c l
  c=$(cluster) || die "no running node answers /cluster"
  l=$(dcs_leader "$c") && [[ -n $l ]] || die "no leader at the moment"
  echo "$l"
}

cmd_kill() {
  set_root "${1:-}" && need_up && need_id "${2:-}"
  kill_node "$ID" && now >"$ROOT/killed_at"
}

cmd_kill_leader() {
  set_root "${1:-}"
  local l
  l=$(cmd_leader "$DIR")
  alive "$l" || die "the leader in the DCS, $l, is not running (already killed?)"
  kill_node "$l" && now >"$ROOT/killed_at" && echo "$l"
}

cmd_wait_leader() {
  set_root "${1:-}" && need_up
  local not=${2:-} t0 deadline=$((SECONDS + WAIT)) c l
  t0=$(now)
  until c=$(cluster) && l=$(dcs_leader "$c") && [[ -n $l && $l != "$not" ]] && alive "$l" && writable "$l"; do
    ((SECONDS < deadline)) || fail_wait "a writable leader${not:+ other than $not}"
    sleep 0.2
  done
  [[ -f $ROOT/killed_at ]] && log "wait-leader: $l leads, $(since "$(<"$ROOT/killed_at")")s after the last kill"
  echo "$l $(since "$t0")"
}

cmd_start() {
  set_root "${1:-}" && need_up && need_id "${2:-}"
  local t0 deadline=$((SECONDS + WAIT))
  t0=$(now)
  [[ -z $(pm_of "$ID") ]] || die "$ID's postmaster still runs (pid $(pm_of "$ID")); kill it first"
  ensure_patroni && set_runas && launch "$ID"
  until replica_ok "$ID"; do
    alive "$ID" || { log "$ID exited after start"; tails; exit 1; }
    ((SECONDS < deadline)) || fail_wait "$ID to stream as a replica"
    sleep 0.2
  done
  log "start: $ID streams as a replica after $(since "$t0")s"
}

cmd_freeze() {
  set_root "${1:-}" && need_up
  [[ -s $ROOT/frozen ]] && die "replication is already frozen (thaw-replication first)"
  local l pm pids=() p i sc n=0
  l=$(cmd_leader "$DIR")
  pm=$(pm_of "$l")
  [[ -n $pm ]] || die "leader $l has no running postmaster"
  for p in $(children "$pm"); do cmdline_has "$p" " walsender " && pids+=("$p"); done
  for p in "${IDS[@]}"; do if [[ $p != "$l" ]] && alive "$p"; then n=$((n + 1)); fi; done
  ((${#pids[@]} >= n && n > 0)) || die "leader $l has ${#pids[@]} walsender(s) for $n running standby(s); retry"
  : >"$ROOT/frozen"
  for p in "${pids[@]}"; do
    # keep it stopped only inside a syscall (its epoll wait, normally): there it holds no spinlock
    for i in $(seq 1 100); do
      kill -STOP "$p" 2>/dev/null || break
      for _ in 1 2 3 4 5 6 7 8 9 10; do [[ $(pstate "$p") == T ]] && break; sleep 0.01; done
      # first field of /proc/PID/syscall: a syscall number, or -1 / running when in user space
      sc=$(cut -d' ' -f1 "/proc/$p/syscall" 2>/dev/null || echo unreadable)
      [[ $sc =~ ^[0-9]+$ || $sc == unreadable ]] && break
      kill -CONT "$p" 2>/dev/null
      sleep 0.0$((RANDOM % 9 + 1))
    done
    [[ $sc =~ ^[0-9]+$ ]] || log "freeze: walsender $p stopped outside a syscall ($sc)"
    echo "$p $(starttime "$p")" >>"$ROOT/frozen"
  done
  log "freeze: stopped the ${#pids[@]} walsender(s) of leader $l: ${pids[*]}"
}

cmd_thaw() {
  set_root "${1:-}" && need_up
  local p st n=0
  [[ -f $ROOT/frozen ]] || { log "thaw: nothing frozen"; return 0; }
  while read -r p st; do
    [[ -n $p && $(starttime "$p") == "$st" && $(pstate "$p") == [Tt] ]] || continue
    kill -CONT "$p" 2>/dev/null && n=$((n + 1))
  done <"$ROOT/frozen"
  rm -f "$ROOT/frozen"
  log "thaw: continued $n walsender(s)"
}

cmd_lsn() {
  set_root "${1:-}" && need_up
  local id out
  for id in "${IDS[@]}"; do
    alive "$id" || continue
    out=$(psql_at "$id" "select case when pg_is_in_recovery() then 'replica ' ||
      coalesce(pg_last_wal_receive_lsn()::text, '-') || ' ' || coalesce(pg_last_wal_replay_lsn()::text, '-')
      else 'primary ' || pg_current_wal_lsn() end" 2>/dev/null) || out=down
    echo "$id $out"
  done
}

cmd_psql() {
  set_root "${1:-}" && need_up && need_id "${2:-}"
  [[ -n ${3:-} ]] || usage
  psql_at "$ID" "$3"
}

cmd_env() {
  set_root "${1:-}" && need_up
  echo "STRATUM_HA_URL=$(cmd_url "$DIR")"
  echo "STRATUM_HA_MODE=$(<"$ROOT/mode")"
  echo "STRATUM_HA_ETCD=http://127.0.0.1:$BASE"
  echo "STRATUM_HA_PATRONI_API=http://127.0.0.1:$(api_port pg-1),http://127.0.0.1:$(api_port pg-2),http://127.0.0.1:$(api_port pg-3)"
}

cmd_down() {
  set +e
  [[ -n ${1:-} && -d $1 ]] || return 0
  DIR=$(cd "$1" && pwd) || return 0
  ROOT=$DIR/ha
  [[ -d $ROOT ]] || return 0
  local id pids=() p pm key shmid
  for id in "${IDS[@]}"; do
    pm=$(pm_of "$id")
    [[ -n $pm ]] && kill -STOP "$pm" 2>/dev/null && pids+=("$pm" $(children "$pm"))
    alive "$id" && pids+=("$(pid_of "$ROOT/m/$id")")
  done
  etcd_alive && pids+=("$(pid_of "$ROOT/etcd")")
  # safety net: anything whose command line names a path under $ROOT (initdb, pg_rewind, ...)
  for p in /proc/[0-9]*; do
    [[ $(tr '\0' ' ' 2>/dev/null <"$p/cmdline") == *"$ROOT/"* ]] && pids+=("${p#/proc/}")
  done
  for p in "${pids[@]}"; do [[ $p == "$$" ]] || kill -KILL "$p" 2>/dev/null; done
  wait_gone "${pids[@]}"
  # drop the killed postmasters' SysV shared memory interlock segments (postmaster.pid line 7)
  for id in "${IDS[@]}"; do
    read -r key shmid < <(sed -n 7p "$ROOT/m/$id/data/postmaster.pid" 2>/dev/null) || continue
    [[ $key =~ ^[0-9]+$ && $shmid =~ ^[0-9]+$ ]] || continue
    ipcs -m 2>/dev/null | awk -v id="$shmid" -v k="$(printf '0x%08x' "$key")" \
      '$2==id && $1==k && $6==0 {f=1} END{exit !f}' && ipcrm -m "$shmid" 2>/dev/null
  done
  rm -f "$ROOT/frozen"
  return 0
}

main() {
  local cmd=${1:-}
  [[ -n $cmd ]] || usage
  shift
  case $cmd in
  up) cmd_up "$@" ;;
  url) cmd_url "$@" ;;
  leader) cmd_leader "$@" ;;
  kill) cmd_kill "$@" ;;
  kill-leader) cmd_kill_leader "$@" ;;
  wait-leader) cmd_wait_leader "$@" ;;
  start) cmd_start "$@" ;;
  freeze-replication) cmd_freeze "$@" ;;
  thaw-replication) cmd_thaw "$@" ;;
  lsn) cmd_lsn "$@" ;;
  psql) cmd_psql "$@" ;;
  env) cmd_env "$@" ;;
  down) cmd_down "$@" || true; exit 0 ;;
  -h | --help | help) usage ;;
  *) die "unknown command '$cmd'" ;;
  esac
}

main "$@"
