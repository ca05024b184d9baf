#!/usr/bin/env bash
# A real clustered OVN Northbound + Southbound database (ovsdb-server raft)
# on loopback, for stratum's raft-cleanup integration tests.
#
#   ovn.sh up DIR ID=IP [ID=IP ...]  founders: the first creates both clusters,
#                                    the others join; returns once the first
#                                    founder lists them all and each is a
#                                    connected cluster member
#   ovn.sh join DIR ID=IP            a new member joins both clusters
#   ovn.sh rejoin DIR ID             a kicked member joined back by hand: both
#                                    servers stopped, their databases made anew
#                                    with `ovsdb-tool join-cluster` (a kicked
#                                    server cannot rejoin with its old one),
#                                    started; returns once both clusters list it
#   ovn.sh members DIR               `OVN_Northbound tcp:IP:6643` /
#                                    `OVN_Southbound tcp:IP:6644` lines, from
#                                    the first founder (else any running member)
#   ovn.sh leader DIR DB             ID of DB's current leader
#   ovn.sh stop DIR ID | start DIR ID    graceful stop / start from db files
#   ovn.sh pause DIR ID | resume DIR ID  SIGSTOP / SIGCONT both servers
#   ovn.sh kill DIR ID               SIGKILL both servers
#   ovn.sh env DIR                   STRATUM_* lines for stratum's `kick` adapter
#   ovn.sh transfer DIR DB ID        make ID the leader of DB (by pausing the
#                                    current leader until ID wins an election;
#                                    OVN has no leadership-transfer command)
#   ovn.sh down DIR                  kill everything under DIR; never fails
#
# State lives in DIR/ovn/: `members` (ID IP per line, first line = first
# founder) and DIR/ovn/ID/{nb,sb}.{db,pid,ctl,sock,log}.
# Member IDs are [A-Za-z0-9_.-]+, IPs are IPv4 (use 127.x.y.z: Linux answers
# all of 127/8). NB raft listens on tcp:IP:6643, SB on tcp:IP:6644.
# OVN_TIMEOUT (seconds, default 60) bounds every wait.
set -euo pipefail

NB_SCHEMA=${OVN_NB_SCHEMA:-/usr/share/ovn/ovn-nb.ovsschema}
SB_SCHEMA=${OVN_SB_SCHEMA:-/usr/share/ovn/ovn-sb.ovsschema}
TIMEOUT=${OVN_TIMEOUT:-60}
APPCTL_TIMEOUT=${OVN_APPCTL_TIMEOUT:-3}
DBS=(nb sb)

die() { echo "ovn.sh: $*" >&2; exit 1; }
usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

db_name() { case $1 in nb) echo OVN_Northbound ;; sb) echo OVN_Southbound ;; esac; }
db_port() { case $1 in nb) echo 6643 ;; sb) echo 6644 ;; esac; }
db_key() {
  case $1 in
    OVN_Northbound | nb | NB) echo nb ;;
    OVN_Southbound | sb | SB) echo sb ;;
    *) die "unknown database '$1' (OVN_Northbound or OVN_Southbound)" ;;
  esac
}

# --- state -----------------------------------------------------------------

set_dir() { # DIR [create]
  [[ -n ${1:-} ]] || usage
  if [[ ${2:-} == create ]]; then mkdir -p "$1/ovn"; fi
  [[ -d $1/ovn ]] || die "$1/ovn does not exist (run 'ovn.sh up $1 ...' first)"
  DIR=$(cd "$1" && pwd -P)
  ST=$DIR/ovn
  export OVS_RUNDIR=$ST OVS_LOGDIR=$ST OVS_DBDIR=$ST
}

check_path_len() { # ID
  local p longest=0
  for p in "$ST/$1/nb.sock" "$ST/$1/nb.ctl" "$ST/$1/sb.sock" "$ST/$1/sb.ctl"; do
    if ((${#p} > longest)); then longest=${#p}; fi
  done
  ((longest <= 107)) || die "unix socket path too long (${longest} > 107 bytes): $ST/$1/nb.sock; use a shorter DIR"
}

parse_member() { # ID=IP -> sets MID MIP
  [[ $1 =~ ^([A-Za-z0-9_.-]+)=([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+)$ ]] ||
    die "bad member '$1' (want ID=IP, e.g. f-1=127.0.1.11)"
  MID=${BASH_REMATCH[1]} MIP=${BASH_REMATCH[2]}
}

member_ids() { [[ -f $ST/members ]] && awk '{print $1}' "$ST/members"; return 0; }
member_ip() {
  local ip
  ip=$(awk -v id="$1" '$1 == id {print $2}' "$ST/members" 2>/dev/null)
  [[ -n $ip ]] || die "unknown member '$1' in $ST/members"
  echo "$ip"
}
member_of_ip() { awk -v ip="$1" '$2 == ip {print $1}' "$ST/members" 2>/dev/null; }
first_id() { head -n1 "$ST/members" | awk '{print $1}'; }

pid_of() { # ID db
  local f=$ST/$1/$2.pid pid
  [[ -f $f ]] || return 1
  pid=$(cat "$f" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" || return 1
  # The pid may have been reused: make sure it is our server.
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$ST/$1/$2.db" || return 1
  echo "$pid"
}
proc_state() { # pid -> R/S/T/Z/...
  sed 's/^.*) //' 2>/dev/null <"/proc/$1/stat" | cut -d' ' -f1
}
# Alive and not a zombie (a detached daemon's zombie lingers until PID 1
# reaps it).
alive() { # pid
  local s
  s=$(proc_state "$1") || return 1
  [[ -n $s && $s != Z && $s != X ]]
}
is_paused() { # pid
  local s
  s=$(proc_state "$1") || return 1
  [[ $s == T || $s == t ]]
}
# Running and not paused: its ctl will answer.
responsive() { # ID db
  local pid
  pid=$(pid_of "$1" "$2") || return 1
  ! is_paused "$pid"
}

appctl() { # ID db ARGS...
  local id=$1 db=$2
  shift 2
  ovs-appctl --timeout="$APPCTL_TIMEOUT" -t "$ST/$id/$db.ctl" "$@"
}
status() { appctl "$1" "$2" cluster/status "$(db_name "$2")" 2>/dev/null; }

# Server addresses from a cluster/status text on stdin.
servers_of() {
  awk '/^Servers:/ {s = 1; next}
       s && /^    [0-9a-f]+ \([0-9a-f]+ at / {a = $4; sub(/\)$/, "", a); print a; next}
       s && !/^    / {s = 0}'
}
field() { sed -n "s/^$1: //p" | head -n1; } # FIELD < status

# The member whose cluster/status we read: the first founder, else any
# running member.
reporter() { # db
  local id
  for id in "$(first_id)" $(member_ids); do
    if responsive "$id" "$1" && status "$id" "$1" >/dev/null; then
      echo "$id"
      return 0
    fi
  done
  return 1
}

# --- waiting ---------------------------------------------------------------

log_tails() { # IDs...
  local id db
  for id in "$@"; do
    for db in "${DBS[@]}"; do
      [[ -f $ST/$id/$db.log ]] || continue
      echo "--- tail of $ST/$id/$db.log" >&2
      tail -n 8 "$ST/$id/$db.log" >&2
    done
  done
}

# wait_for DESCRIPTION IDS-FOR-LOGS -- COMMAND...
wait_for() {
  local desc=$1 ids=$2 deadline=$((SECONDS + TIMEOUT))
  shift 3
  until "$@"; do
    if ((SECONDS >= deadline)); then
      echo "ovn.sh: timed out after ${TIMEOUT}s waiting for $desc" >&2
      # shellcheck disable=SC2086
      log_tails $ids
      exit 1
    fi
    sleep 0.2
  done
}

# --- servers ---------------------------------------------------------------

start_server() { # ID db
  local id=$1 db=$2 d=$ST/$1
  if pid_of "$id" "$db" >/dev/null; then return 0; fi
  rm -f "$d/$db.ctl" "$d/$db.sock"
  ovsdb-server --detach --no-chdir \
    --pidfile="$d/$db.pid" --unixctl="$d/$db.ctl" \
    --log-file="$d/$db.log" --remote="punix:$d/$db.sock" \
    "$d/$db.db" 2>"$d/$db.stderr" ||
    {
      log_tails "$id"
      echo "--- stderr of ovsdb-server ($db) of $id" >&2
      tail -n 5 "$d/$db.stderr" >&2
      die "ovsdb-server ($db) of $id did not start"
    }
}

start_member() { # ID
  local db
  for db in "${DBS[@]}"; do start_server "$1" "$db"; done
}

create_member() { # ID IP create|REMOTE-IP...
  local id=$1 ip=$2 db remotes a
  shift 2
  mkdir -p "$ST/$id"
  for db in "${DBS[@]}"; do
    rm -f "$ST/$id/$db.db"
    local local="tcp:$ip:$(db_port "$db")"
    if [[ $1 == create ]]; then
      ovsdb-tool create-cluster "$ST/$id/$db.db" \
        "$([[ $db == nb ]] && echo "$NB_SCHEMA" || echo "$SB_SCHEMA")" "$local" \
        2>>"$ST/$id/$db.stderr"
    else
      remotes=()
      for a in "$@"; do remotes+=("tcp:$a:$(db_port "$db")"); done
      ovsdb-tool join-cluster "$ST/$id/$db.db" "$(db_name "$db")" "$local" "${remotes[@]}" \
        2>>"$ST/$id/$db.stderr"
    fi
  done
}

# Everything is fine with member ID: both DBs say "cluster member" and know a
# leader.
is_member() { # ID
  local db s
  for db in "${DBS[@]}"; do
    s=$(status "$1" "$db") || return 1
    [[ $(field Status <<<"$s") == "cluster member" ]] || return 1
    [[ $(field Leader <<<"$s") != unknown ]] || return 1
  done
}

# Reporter's listings of both DBs name tcp:IP:port for every IP given.
listed() { # IPs...
  local db s ip r
  for db in "${DBS[@]}"; do
    r=$(reporter "$db") || return 1
    s=$(status "$r" "$db" | servers_of) || return 1
    for ip in "$@"; do
      grep -qxF "tcp:$ip:$(db_port "$db")" <<<"$s" || return 1
    done
  done
}

all_up() { # IDs...
  local id ips=()
  for id in "$@"; do
    is_member "$id" || return 1
    ips+=("$(member_ip "$id")")
  done
  listed "${ips[@]}"
}

stop_member() { # ID: ask both servers to exit, then wait for both
  local id=$1 db pid pids=()
  for db in "${DBS[@]}"; do
    pid=$(pid_of "$id" "$db") || continue
    pids+=("$pid")
    kill -CONT "$pid" 2>/dev/null || true
    appctl "$id" "$db" exit >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null || true
  done
  local deadline=$((SECONDS + 15))
  for pid in "${pids[@]}"; do
    while alive "$pid"; do
      if ((SECONDS >= deadline)); then
        echo "ovn.sh: $id (pid $pid) did not exit in 15s, killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
      fi
      sleep 0.05
    done
  done
}

signal_member() { # ID SIGNAL
  local db pid n=0
  for db in "${DBS[@]}"; do
    if pid=$(pid_of "$1" "$db"); then
      kill -"$2" "$pid"
      n=$((n + 1))
    fi
  done
  ((n > 0)) || die "$1 has no running server"
}

# Role/term of each responsive member; prints the leader's ID when exactly one
# member claims leadership in the highest term anyone reports.
current_leader() { # db
  local db=$1 id s role term max=-1 lead="" count=0
  local -A roles terms
  for id in $(member_ids); do
    responsive "$id" "$db" || continue
    s=$(status "$id" "$db") || continue
    roles[$id]=$(field Role <<<"$s")
    terms[$id]=$(field Term <<<"$s")
    [[ ${terms[$id]} =~ ^[0-9]+$ ]] || continue
    ((terms[$id] > max)) && max=${terms[$id]}
  done
  for id in "${!roles[@]}"; do
    if [[ ${roles[$id]} == leader && ${terms[$id]} == "$max" ]]; then
      lead=$id
      count=$((count + 1))
    fi
  done
  ((count == 1)) || return 1
  echo "$lead"
}

# --- commands --------------------------------------------------------------

cmd_up() {
  (($# >= 2)) || usage
  set_dir "$1" create
  shift
  [[ ! -s $ST/members ]] || die "$ST/members exists: run 'ovn.sh down $DIR' and remove $ST first"
  local m x ids=() ips=()
  for m in "$@"; do
    parse_member "$m"
    check_path_len "$MID"
    for x in "${ids[@]}"; do [[ $x != "$MID" ]] || die "duplicate ID $MID"; done
    for x in "${ips[@]}"; do [[ $x != "$MIP" ]] || die "duplicate IP $MIP"; done
    ids+=("$MID") ips+=("$MIP")
  done
  local i
  for i in "${!ids[@]}"; do echo "${ids[$i]} ${ips[$i]}"; done >"$ST/members"
  create_member "${ids[0]}" "${ips[0]}" create
  for i in "${!ids[@]}"; do
    ((i == 0)) || create_member "${ids[$i]}" "${ips[$i]}" "${ips[0]}"
  done
  for i in "${ids[@]}"; do start_member "$i"; done
  wait_for "founders ${ids[*]} to form both clusters" "${ids[*]}" -- all_up "${ids[@]}"
}

cmd_join() {
  (($# == 2)) || usage
  set_dir "$1"
  parse_member "$2"
  check_path_len "$MID"
  ! grep -q "^$MID " "$ST/members" || die "member $MID already exists"
  [[ -z $(member_of_ip "$MIP") ]] || die "IP $MIP already used by $(member_of_ip "$MIP")"
  local remotes=() id
  for id in $(member_ids); do remotes+=("$(member_ip "$id")"); done
  echo "$MID $MIP" >>"$ST/members"
  create_member "$MID" "$MIP" "${remotes[@]}"
  start_member "$MID"
  wait_for "$MID to join both clusters" "$MID $(first_id)" -- all_up "$MID"
}

cmd_rejoin() {
  (($# == 2)) || usage
  set_dir "$1"
  local id=$2 ip remotes=() other
  ip=$(member_ip "$id")
  for other in $(member_ids); do
    [[ $other == "$id" ]] || remotes+=("$(member_ip "$other")")
  done
  stop_member "$id"
  create_member "$id" "$ip" "${remotes[@]}"
  start_member "$id"
  wait_for "$id to join both clusters again" "$id $(first_id)" -- all_up "$id"
}

cmd_members() {
  (($# == 1)) || usage
  set_dir "$1"
  local db r s
  for db in "${DBS[@]}"; do
    r=$(reporter "$db") || die "no running member answers cluster/status $(db_name "$db")"
    s=$(status "$r" "$db") || die "cluster/status $(db_name "$db") on $r failed"
    servers_of <<<"$s" | sort | sed "s/^/$(db_name "$db") /"
  done
}

cmd_leader() {
  (($# == 2)) || usage
  set_dir "$1"
  local db
  db=$(db_key "$2")
  local lead deadline=$((SECONDS + TIMEOUT))
  until lead=$(current_leader "$db"); do
    if ((SECONDS >= deadline)); then
      echo "ovn.sh: timed out after ${TIMEOUT}s waiting for a leader of $(db_name "$db")" >&2
      log_tails $(member_ids)
      exit 1
    fi
    sleep 0.2
  done
  echo "$lead"
}

cmd_stop() {
  (($# == 2)) || usage
  set_dir "$1"
  member_ip "$2" >/dev/null
  stop_member "$2"
}

cmd_start() {
  (($# == 2)) || usage
  set_dir "$1"
  member_ip "$2" >/dev/null
  start_member "$2"
  local db
  for db in "${DBS[@]}"; do
    wait_for "$2/$db to answer" "$2" -- status "$2" "$db" >/dev/null
  done
}

cmd_pause() { (($# == 2)) || usage; set_dir "$1"; member_ip "$2" >/dev/null; signal_member "$2" STOP; }
cmd_resume() { (($# == 2)) || usage; set_dir "$1"; member_ip "$2" >/dev/null; signal_member "$2" CONT; }

cmd_kill() {
  (($# == 2)) || usage
  set_dir "$1"
  member_ip "$2" >/dev/null
  local db pid
  for db in "${DBS[@]}"; do
    if pid=$(pid_of "$2" "$db"); then
      kill -KILL "$pid" 2>/dev/null || true
      while alive "$pid"; do sleep 0.05; done
    fi
  done
}

cmd_env() {
  (($# == 1)) || usage
  set_dir "$1"
  local f
  f=$(first_id)
  echo "STRATUM_RAFT_OVN=kick"
  echo "STRATUM_OVN_NB_CTL=$ST/$f/nb.ctl"
  echo "STRATUM_OVN_SB_CTL=$ST/$f/sb.ctl"
  echo "STRATUM_OVN_NB_SERVER=tcp:{host}:6643"
  echo "STRATUM_OVN_SB_SERVER=tcp:{host}:6644"
}

cmd_transfer() {
  (($# == 3)) || usage
  set_dir "$1"
  local db target=$3 lead deadline=$((SECONDS + TIMEOUT)) id
  db=$(db_key "$2")
  member_ip "$target" >/dev/null
  responsive "$target" "$db" || die "$target/$db is not running"
  wait_for "a leader of $(db_name "$db")" "$(member_ids)" -- current_leader "$db" >/dev/null
  while lead=$(current_leader "$db") || true; [[ $lead != "$target" ]]; do
    ((SECONDS < deadline)) || {
      log_tails $(member_ids)
      die "timed out after ${TIMEOUT}s making $target the leader of $(db_name "$db") (leader: ${lead:-none})"
    }
    [[ -n $lead ]] || { sleep 0.2; continue; }
    # Pause the leader's server (only the one of this DB) until someone else
    # wins an election, then let it rejoin as a follower. Repeat until the
    # winner is the target.
    local pid
    pid=$(pid_of "$lead" "$db") || { sleep 0.2; continue; }
    kill -STOP "$pid"
    local t=$((SECONDS + 20)) new=""
    while ((SECONDS < t)); do
      if new=$(current_leader "$db") && [[ $new != "$lead" ]]; then break; fi
      new=""
      sleep 0.1
    done
    kill -CONT "$pid"
    [[ -n $new ]] || continue
    # Wait until the old leader has stepped down.
    wait_for "$lead to follow the new leader of $(db_name "$db")" "$lead" -- \
      eval '[[ $(status "$lead" "$db" | field Role) == follower ]]'
  done
}

cmd_down() {
  local d=${1:-}
  [[ -n $d && -d $d/ovn ]] || return 0
  ST=$(cd "$d" && pwd -P)/ovn || return 0
  local pids=() f pid p
  for f in "$ST"/*/*.pid; do
    [[ -f $f ]] || continue
    pid=$(cat "$f" 2>/dev/null) || continue
    [[ $pid =~ ^[0-9]+$ ]] && pids+=("$pid")
  done
  # Also any ovsdb-server still running on a db file under DIR (e.g. a lost
  # pid file).
  local cmd
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
    [[ ${cmd%% *} == *ovsdb-server && $cmd == *"$ST/"* ]] && pids+=("${p#/proc/}")
  done
  for pid in "${pids[@]}"; do
    tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$ST/" || continue
    kill -KILL "$pid" 2>/dev/null || true
  done
  local deadline=$((SECONDS + 10))
  for pid in "${pids[@]}"; do
    while alive "$pid" && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$ST/"; do
      ((SECONDS < deadline)) || break
      sleep 0.05
    done
  done
  rm -f "$ST"/*/*.pid "$ST"/*/*.ctl "$ST"/*/*.sock 2>/dev/null || true
  return 0
}

main() {
  (($# >= 1)) || usage
  local cmd=$1
  shift
  case $cmd in
    up | join | rejoin | members | leader | stop | start | pause | resume | kill | env | transfer) "cmd_$cmd" "$@" ;;
    down) cmd_down "$@" || true ;;
    -h | --help | help) usage ;;
    *) die "unknown command '$cmd'" ;;
  esac
}

main "$@"
