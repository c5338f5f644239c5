#!/usr/bin/env bash
# emulate.sh — an emulated multi-node cluster on one Linux machine.
#
#   examples/cluster/emulate.sh up 4 2 200mbit      # 4 nodes x 2 ranks, each node's link capped at 200 Mbit/s
#   examples/cluster/emulate.sh up 4 2 200mbit --groups 2 --global-rate 100mbit
#                                 # the same nodes in 2 switch groups of 2, joined by 100 Mbit/s uplinks
#   examples/cluster/emulate.sh mpirun build/measure/measure --backend mpi --out emu.json
#   examples/cluster/emulate.sh mpirun -np 8 build/engine/engine --model ... --grid 2,2,1,2
#   examples/cluster/emulate.sh status
#   examples/cluster/emulate.sh down
#
# Why: the advisor's placement-aware cost model (MODEL.md §2) only matters where
# bandwidth has tiers — fast inside a node, a shared, slower NIC between nodes.
# One machine can have those tiers:
#
#   * each "node" is a network namespace (<prefix>-n0, <prefix>-n1, ...) with
#     one interface, eth0, a veth whose other end is a port of a bridge in a
#     "switch" namespace (<prefix>-sw);
#   * tc (htb by default, FOURFOLD_CLUSTER_QDISC) caps the node's eth0
#     (node -> switch) and its switch port (switch -> node) at RATE, so each
#     node has one full-duplex link of RATE that all its ranks share, like a
#     NIC;
#   * mpirun runs in the switch namespace; its rsh agent (a script standing
#     in for ssh) starts each node's orted with
#     `ip netns exec <node> unshare --uts sh -c "hostname <node>; ..."`, so
#     Open MPI sees separate hosts: shared memory (vader) inside a node, TCP
#     over the capped links between nodes, and MPI_Comm_split_type(SHARED)
#     returns the nodes.
#
# Two-level fabric (`up ... --groups K --global-rate GRATE`, K > 1): the
# nodes sit in K switch groups of N/K consecutive nodes (node i in group
# i/(N/K), as ranks sit on nodes in blocks). Each group has its own switch
# namespace (<prefix>-s0, <prefix>-s1, ...) whose bridge the group's nodes
# plug into; the group switches are joined through a spine, <prefix>-sw
# (where mpirun runs), each by one veth uplink capped at GRATE each way by
# the same qdisc as the nodes' links. Traffic between groups crosses two
# uplinks, and every ring with members in a group and outside it shares that
# group's uplink: the global tier of MODEL.md §2 ("Switch groups"). One /24,
# one L2 domain: Open MPI sees the same hosts and addresses either way.
#
# Nothing is created in the host's own network namespace: every interface,
# address and qdisc lives inside the cluster's namespaces, and the addresses
# (a private /24, FOURFOLD_CLUSTER_SUBNET) are visible only there. The only
# global names are the namespaces themselves, all starting with the prefix.
#
# State (node count, ranks per node, rate, names, hostfile, rsh agent) lives in
# $FOURFOLD_CLUSTER_DIR (default /run/fourfold-cluster). Environment:
#   FOURFOLD_CLUSTER_DIR     state directory             [/run/fourfold-cluster]
#   FOURFOLD_CLUSTER_PREFIX  namespace name prefix, used by `up`   [ffclu]
#   FOURFOLD_CLUSTER_SUBNET  first three octets of the cluster /24 [10.77.0]
#   FOURFOLD_CLUSTER_MPIRUN  the mpirun to use           [mpirun]
#   FOURFOLD_CLUSTER_QDISC   how `up` caps a link: htb (a class at the rate,
#                            the kernel's smallest bucket) or tbf (a token
#                            bucket of 4 ms of traffic)             [htb]
#
# Behaviour:
#   up N R RATE   N nodes (1..250) of R ranks each; RATE in tc's units
#                 (bit kbit mbit gbit tbit or a bare number: bits/s; bps kbps
#                 mbps gbps tbps: BYTES/s; IEC kibit mibit kibps ...; e.g.
#                 200mbit, 1gbit), per direction. Keep RATE at
#                 or below ~1gbit: above that the CPU, not the link, limits.
#                 --groups K (K divides N; default 1, one switch) and
#                 --global-rate GRATE (needed when K > 1; tc units as RATE):
#                 K switch groups joined by uplinks of GRATE each way.
#                 Already up with the same N R RATE (and groups): nothing to do (exit 0).
#                 Already up with other parameters: an error; run `down` first.
#                 A failure part-way removes everything it created.
#   mpirun ARGS   mpirun with the cluster's settings, as a prefix to a normal
#                 launch line. -np defaults to N*R with block mapping
#                 (--map-by ppr:R:node, rank r on node r/R); an explicit -np,
#                 --map-by, --bind-to or -wdir of yours wins. The program is
#                 resolved to an absolute path and ranks start in the current
#                 directory. mpirun's exit code is passed through.
#   status        prints the cluster (exit 1 if it is not up).
#   down          removes everything (processes left in the namespaces, the
#                 namespaces and all in them, the state directory). Succeeds
#                 when nothing is up, and also cleans up after a failed run.
#
# Exit codes: 0 ok; 2 usage; 77 namespaces cannot be created here (not root,
# no CAP_SYS_ADMIN/CAP_NET_ADMIN, or iproute2 missing) — test suites treat 77
# as "skipped"; 1 any other failure; `mpirun` passes mpirun's code through.
#
# Needs: root, iproute2 (ip, tc), util-linux (unshare), Open MPI (MPICH's UCX
# transport would bypass the links through shared memory).

set -euo pipefail

readonly STATE_DIR=${FOURFOLD_CLUSTER_DIR:-/run/fourfold-cluster}
readonly DEFAULT_PREFIX=${FOURFOLD_CLUSTER_PREFIX:-ffclu}
readonly SUBNET=${FOURFOLD_CLUSTER_SUBNET:-10.77.0}
readonly MPIRUN=${FOURFOLD_CLUSTER_MPIRUN:-mpirun}
readonly QDISC=${FOURFOLD_CLUSTER_QDISC:-htb}
readonly SWITCH_ADDR_HOST=254   # the switch namespace's address (mpirun's side)
readonly ME=${0##*/}
UP_PREFIX=""                    # set while `up` builds a cluster, for its cleanup trap

die() { echo "$ME: $*" >&2; exit 1; }
usage_error() { echo "$ME: $*" >&2; echo "usage: $ME up NODES RANKS_PER_NODE RATE [--groups K --global-rate GRATE] | mpirun ARGS... | status | down" >&2; exit 2; }
skip() { echo "$ME: cannot emulate a cluster here: $*" >&2; exit 77; }

# ---------------------------------------------------------------- state ----

# The state file is plain KEY=VALUE lines written by `up`; read it without
# sourcing (it is root-owned, but parsing keeps a stray file from running).
declare -A ST=()
load_state() {
  ST=()
  [[ -f $STATE_DIR/state ]] || return 1
  local key value
  while IFS='=' read -r key value; do
    [[ $key =~ ^[a-z_]+$ ]] && ST[$key]=$value
  done <"$STATE_DIR/state"
  [[ -n ${ST[prefix]:-} && -n ${ST[nodes]:-} ]]
}

node_ns() { echo "$1-n$2"; }     # prefix, index -> node namespace (= node host name)
switch_ns() { echo "$1-sw"; }   # the only switch, or the spine of a two-level fabric
group_ns() { echo "$1-s$2"; }    # prefix, index -> a switch group's switch

# Namespaces that exist now and belong to a cluster with this prefix.
cluster_namespaces() {
  local prefix=$1
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}-(sw|s[0-9]+|n[0-9]+)\$" || true
}

# ------------------------------------------------------------------ rate ----

# tc's rate syntax (tc(8), "RATES"): a number and a unit; "bit" units and a
# bare number are bits per second, "bps" units are BYTES per second (tc's own
# convention). Prints bits/s, or fails for anything tc would not take.
rate_to_bits() {
  local text=${1,,} num unit mult
  [[ $text =~ ^([0-9]+(\.[0-9]+)?)([a-z]*)$ ]] || return 1
  num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]}
  case $unit in
    bit|'') mult=1 ;;         kbit) mult=1000 ;;         mbit) mult=1000000 ;;
    gbit) mult=1000000000 ;;  tbit) mult=1000000000000 ;;
    kibit) mult=1024 ;;       mibit) mult=1048576 ;;     gibit) mult=1073741824 ;;
    tibit) mult=1099511627776 ;;
    bps) mult=8 ;;            kbps) mult=8000 ;;         mbps) mult=8000000 ;;
    gbps) mult=8000000000 ;;  tbps) mult=8000000000000 ;;
    kibps) mult=8192 ;;       mibps) mult=8388608 ;;     gibps) mult=8589934592 ;;
    tibps) mult=8796093022208 ;;
    *) return 1 ;;
  esac
  awk -v n="$num" -v m="$mult" 'BEGIN { printf "%.0f\n", n * m }'
}

# ------------------------------------------------------------------ down ----

# Remove every trace of the cluster with this prefix. Idempotent; never fails
# for "already gone". Processes still inside a node (an orted or rank left by
# a killed mpirun) would keep its namespace alive after `ip netns del`, so
# they are ended first — they can only be this cluster's.
teardown() {
  local prefix=$1 ns pids sig
  local -a all=()
  mapfile -t all < <(cluster_namespaces "$prefix")
  if ((${#all[@]})); then
    for sig in TERM KILL; do
      pids=""
      for ns in "${all[@]}"; do
        pids+=" $(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
      done
      [[ -z ${pids// /} ]] && break
      # shellcheck disable=SC2086  # a list of pids
      kill -s "$sig" $pids 2>/dev/null || true
      sleep 0.3
    done
    for ns in "${all[@]}"; do
      ip netns del "$ns" 2>/dev/null || true
    done
  fi
  # Deleting a namespace deletes its veths, bridge and qdiscs with it.
  rm -rf -- "$STATE_DIR"
}

cmd_down() {
  (($# == 0)) || usage_error "down takes no arguments"
  local prefix=$DEFAULT_PREFIX
  if load_state; then prefix=${ST[prefix]}; fi
  command -v ip >/dev/null || { rm -rf -- "$STATE_DIR"; return 0; }
  teardown "$prefix"
  # A prefix from the environment that differs from the state's: clean it too.
  [[ $prefix == "$DEFAULT_PREFIX" ]] || teardown "$DEFAULT_PREFIX"
  local left
  left=$(cluster_namespaces "$prefix")
  [[ -z $left ]] || die "could not remove namespaces: $left"
  return 0
}

# -------------------------------------------------------------------- up ----

# The rsh agent Open MPI calls instead of ssh: `AGENT [options] HOST CMD...`.
# It joins CMD the way ssh does (the remote shell sees one string) and runs it
# inside HOST's namespace, in a private UTS namespace whose host name is HOST,
# so the orted and its ranks report HOST and shared-memory segments (named by
# host) stay per node. It is a local child of mpirun, so the caller's
# environment and working directory carry over to the ranks.
write_agent() {
  local file=$1 prefix=$2
  cat >"$file" <<EOF
#!/bin/sh
# rsh agent for the emulated cluster '$prefix' (written by emulate.sh up).
while [ \$# -gt 0 ]; do
  case "\$1" in
    -*) shift ;;        # ssh-style options (e.g. -x): nothing to do locally
    *) break ;;
  esac
done
host=\$1; shift
case "\$host" in
  $prefix-n[0-9]*) ;;
  *) echo "rsh agent: '\$host' is not a node of cluster '$prefix'" >&2; exit 255 ;;
esac
exec ip netns exec "\$host" unshare --uts sh -c "hostname \$host && \$*"
EOF
  chmod 755 "$file"
}

# Cap one interface's egress at the rate.
#   tbf: its bucket must hold a few ms of traffic at this rate (and a few
#     packets), or it throttles TCP below the rate; 50 ms of queue keeps TCP
#     from seeing drops on every burst. The bucket lets a message that follows
#     idle time leave at memory speed (measure --gap-us times that), and two
#     operations at once on one link were measured to cost 2-3x their sum:
#     not work-conserving, unlike a NIC (advisor/README.md).
#   htb: a class at the rate with the kernel's smallest bucket (a packet or
#     two) over a byte FIFO of 50 ms: sharing is near work-conserving, as a
#     NIC's. The default: with measure timing each group on its own, the
#     paced validation scores better on it than on tbf (advisor/README.md).
shape() {
  local ns=$1 dev=$2 bits=$3 rate=$4 burst queue
  ip -n "$ns" link set "$dev" up
  case $QDISC in
    tbf)
      burst=$((bits / 8 / 250))                 # 4 ms worth of bytes
      ((burst < 32768)) && burst=32768
      tc -n "$ns" qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms ;;
    htb)
      queue=$((bits / 8 / 20))                  # 50 ms worth of bytes
      ((queue < 65536)) && queue=65536
      tc -n "$ns" qdisc replace dev "$dev" root handle 1: htb default 10 &&
        tc -n "$ns" class replace dev "$dev" parent 1: classid 1:10 htb rate "$rate" ceil "$rate" quantum 60000 &&
        tc -n "$ns" qdisc replace dev "$dev" parent 1:10 handle 10: bfifo limit "$queue" ;;
  esac
}

# Whether an interface has carrier, allowing the kernel a moment to say so.
has_carrier() {
  local _
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    [[ $(ip -n "$1" -o link show "$2") == *LOWER_UP* ]] && return 0
    sleep 0.1
  done
  return 1
}

cmd_up() {
  (($# >= 3)) || usage_error "up needs NODES RANKS_PER_NODE RATE, e.g. up 4 2 200mbit"
  local nodes=$1 rpn=$2 rate=$3 bits prefix=$DEFAULT_PREFIX groups=1 grate="" gbits=0
  shift 3
  while (($#)); do
    case $1 in
      --groups|--global-rate)
        (($# >= 2)) || usage_error "$1 needs a value"
        if [[ $1 == --groups ]]; then groups=$2; else grate=$2; fi
        shift 2 ;;
      *) usage_error "up: unknown argument '$1' (after NODES RANKS_PER_NODE RATE: --groups K --global-rate GRATE)" ;;
    esac
  done
  if ! [[ $nodes =~ ^[0-9]{1,3}$ ]] || ((nodes < 1 || nodes > 250)); then
    usage_error "NODES '$nodes': a whole number from 1 to 250"
  fi
  if ! [[ $rpn =~ ^[0-9]{1,4}$ ]] || ((rpn < 1 || rpn > 1024)); then
    usage_error "RANKS_PER_NODE '$rpn': a whole number from 1 to 1024"
  fi
  if ! bits=$(rate_to_bits "$rate") || ((bits < 8000)); then
    usage_error "RATE '$rate': a tc rate such as 100mbit, 200mbit or 1gbit (at least 1kbps)"
  fi
  if ! [[ $groups =~ ^[0-9]{1,3}$ ]] || ((groups < 1 || groups > nodes || nodes % groups)); then
    usage_error "--groups '$groups': a whole number from 1 to NODES that divides NODES ($nodes)"
  fi
  if ((groups > 1)); then
    [[ -n $grate ]] || usage_error "--groups $groups needs --global-rate GRATE, the uplink of each switch group"
    if ! gbits=$(rate_to_bits "$grate") || ((gbits < 8000)); then
      usage_error "--global-rate '$grate': a tc rate such as 100mbit or 1gbit (at least 1kbps)"
    fi
  elif [[ -n $grate ]]; then
    usage_error "--global-rate needs --groups K with K > 1 (one switch has no global link)"
  fi
  [[ $prefix =~ ^[a-z][a-z0-9]{0,9}$ ]] ||
    usage_error "FOURFOLD_CLUSTER_PREFIX '$prefix': 1-10 lower-case letters and digits, starting with a letter"
  [[ $SUBNET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] ||
    usage_error "FOURFOLD_CLUSTER_SUBNET '$SUBNET': three octets, e.g. 10.77.0"
  [[ $QDISC == tbf || $QDISC == htb ]] || usage_error "FOURFOLD_CLUSTER_QDISC '$QDISC': expected tbf or htb"
  ((bits <= 1000000000)) ||
    echo "$ME: note: above ~1gbit the CPU, not the emulated link, is likely the limit" >&2

  # Already up: same shape -> nothing to do; another shape -> refuse rather
  # than pull the network from under a running job.
  if load_state; then
    if [[ -n $(cluster_namespaces "${ST[prefix]}") ]]; then
      if [[ ${ST[nodes]} == "$nodes" && ${ST[ranks_per_node]} == "$rpn" && ${ST[rate_bits]} == "$bits" &&
            ${ST[prefix]} == "$prefix" && ${ST[qdisc]:-tbf} == "$QDISC" && ${ST[groups]:-1} == "$groups" &&
            ${ST[global_rate_bits]:-0} == "$gbits" ]]; then
        echo "$ME: already up: ${ST[nodes]} nodes x ${ST[ranks_per_node]} ranks at ${ST[rate]}" >&2
        return 0
      fi
      die "a cluster is already up (${ST[nodes]} nodes x ${ST[ranks_per_node]} ranks at ${ST[rate]}," \
          "prefix ${ST[prefix]}, state $STATE_DIR); run '$ME down' first"
    fi
    teardown "${ST[prefix]}"                # stale state, no namespaces: start afresh
  fi

  # Can we? Checked up front so the answer is a clean 77 with the reason.
  local tool
  for tool in ip tc unshare "$MPIRUN"; do
    command -v "$tool" >/dev/null ||
      skip "'$tool' not found (ip and tc: Debian package iproute2; unshare: util-linux; mpirun: openmpi-bin)"
  done
  # MPICH (UCX) was seen to bypass the links through shared memory.
  local version
  version=$("$MPIRUN" --version 2>&1 || true)
  [[ $version == *"Open MPI"* || $version == *"OpenRTE"* ]] ||
    skip "'$MPIRUN' is not Open MPI's (set FOURFOLD_CLUSTER_MPIRUN); other MPIs may bypass the emulated links"
  [[ -z $(cluster_namespaces "$prefix") ]] ||
    die "namespaces with prefix '$prefix' exist but no state in $STATE_DIR (another FOURFOLD_CLUSTER_DIR?);" \
        "remove them with FOURFOLD_CLUSTER_PREFIX=$prefix $ME down, or pick another prefix"
  local probe_err
  if ! probe_err=$(ip netns add "$(switch_ns "$prefix")" 2>&1); then
    skip "'ip netns add' failed (needs root with CAP_SYS_ADMIN and CAP_NET_ADMIN): $probe_err"
  fi

  # From here on, any failure removes everything created so far. (A global:
  # the EXIT trap may run after this function's locals are gone.)
  UP_PREFIX=$prefix
  trap 'rc=$?; trap - EXIT; if ((rc)); then echo "$ME: up failed; cleaning up" >&2; teardown "$UP_PREFIX"; fi; exit $rc' EXIT
  trap 'exit 1' INT TERM HUP

  # Ranks start through `ip netns exec` (which mounts a private /sys) and
  # `unshare --uts`: both need more than creating a namespace does.
  if ! probe_err=$(ip netns exec "$(switch_ns "$prefix")" unshare --uts true 2>&1); then
    skip "'ip netns exec ... unshare --uts' failed (needs CAP_SYS_ADMIN): $probe_err"
  fi

  mkdir -p "$STATE_DIR"
  chmod 755 "$STATE_DIR"
  local sw i ns
  sw=$(switch_ns "$prefix")
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" addr add "$SUBNET.$SWITCH_ADDR_HOST/24" dev br0
  ip -n "$sw" link set br0 up

  # Two levels: each switch group's bridge in its own namespace, joined to
  # the spine's bridge by one uplink, capped like a node's link. One level:
  # every node on the spine's bridge, as before.
  local g gs per_group=$((nodes / groups)) group_list=""
  local -a node_switch=()
  if ((groups > 1)); then
    for ((g = 0; g < groups; g++)); do
      gs=$(group_ns "$prefix" "$g")
      ip netns add "$gs"
      ip -n "$gs" link set lo up
      ip -n "$gs" link add br0 type bridge
      ip -n "$gs" link set br0 up
      ip -n "$sw" link add "u$g" type veth peer name up0 netns "$gs"
      ip -n "$sw" link set "u$g" master br0
      ip -n "$gs" link set up0 master br0
      shape "$gs" up0 "$gbits" "$grate"      # group -> spine
      shape "$sw" "u$g" "$gbits" "$grate"    # spine -> group
      group_list+="$gs "
    done
  fi
  for ((i = 0; i < nodes; i++)); do
    if ((groups > 1)); then node_switch[i]=$(group_ns "$prefix" "$((i / per_group))"); else node_switch[i]=$sw; fi
  done

  : >"$STATE_DIR/hostfile"
  for ((i = 0; i < nodes; i++)); do
    ns=$(node_ns "$prefix" "$i")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # Created inside the switch namespace and moved straight into the node's:
    # neither end ever exists in the host's namespace.
    ip -n "${node_switch[i]}" link add "p$i" type veth peer name eth0 netns "$ns"
    ip -n "${node_switch[i]}" link set "p$i" master br0
    ip -n "$ns" addr add "$SUBNET.$((i + 1))/24" dev eth0
    shape "$ns" eth0 "$bits" "$rate"                    # node -> switch
    shape "${node_switch[i]}" "p$i" "$bits" "$rate"     # switch -> node
    echo "$ns slots=$rpn" >>"$STATE_DIR/hostfile"
  done
  write_agent "$STATE_DIR/rsh-agent" "$prefix"

  # Every link has come up (carrier on both ends): catches a broken veth or
  # bridge now instead of as an Open MPI timeout later.
  for ((i = 0; i < nodes; i++)); do
    ns=$(node_ns "$prefix" "$i")
    if ! has_carrier "$ns" eth0 || ! has_carrier "${node_switch[i]}" "p$i"; then
      die "the link of node $i ($ns) did not come up"
    fi
  done
  if ((groups > 1)); then
    for ((g = 0; g < groups; g++)); do
      gs=$(group_ns "$prefix" "$g")
      if ! has_carrier "$gs" up0 || ! has_carrier "$sw" "u$g"; then
        die "the uplink of switch group $g ($gs) did not come up"
      fi
    done
  fi

  {
    echo "prefix=$prefix"
    echo "nodes=$nodes"
    echo "ranks_per_node=$rpn"
    echo "rate=$rate"
    echo "rate_bits=$bits"
    echo "qdisc=$QDISC"
    echo "subnet=$SUBNET.0/24"
    echo "switch_ns=$sw"
    echo "node_ns=$(for ((i = 0; i < nodes; i++)); do printf '%s ' "$(node_ns "$prefix" "$i")"; done)"
    echo "groups=$groups"
    echo "global_rate=$grate"
    echo "global_rate_bits=$gbits"
    echo "group_ns=$group_list"
  } >"$STATE_DIR/state.tmp"
  mv "$STATE_DIR/state.tmp" "$STATE_DIR/state"     # written last: its presence means "up"
  trap - EXIT INT TERM HUP
  echo "$ME: up: $nodes nodes x $rpn ranks, each node's link capped at $rate ($bits bit/s) each way by tc $QDISC;" \
       "state in $STATE_DIR" >&2
  ((groups == 1)) ||
    echo "$ME: up: $groups switch groups of $per_group nodes, each joined to the spine by an uplink capped at" \
         "$grate ($gbits bit/s) each way" >&2
}

# ---------------------------------------------------------------- mpirun ----

# mpirun options that take a value (two for --mca): needed to find where the
# program starts in a launch line. Anything else starting with '-' is a flag.
takes_value() {
  case $1 in
    -np|--np|-n|--n|-c|-x|-H|--host|-host|--hostfile|-hostfile|--machinefile|-machinefile|--default-hostfile|\
    --map-by|-map-by|--rank-by|-rank-by|--bind-to|-bind-to|-wdir|--wdir|-wd|--wd|--path|-path|--prefix|\
    --output-filename|-output-filename|--timeout|-timeout|--npernode|-npernode|--npersocket|-npersocket|\
    --cpus-per-proc|-cpus-per-proc|--cpus-per-rank|-cpus-per-rank|--app|-app|--report-bindings-file|\
    --stdin|-stdin|--merge-stderr-to-stdout-file|--tune|-tune|--am|-am|--preload-files|-preload-files|\
    --personality|--report-uri|-report-uri|--rankfile|-rankfile|--xml-file)
      return 0 ;;
  esac
  return 1
}

# A program as ranks will see it: absolute, so that a different working
# directory or PATH inside a node cannot change which file runs.
resolve_program() {
  local prog=$1 found
  if [[ $prog == */* ]]; then
    [[ -e $prog ]] || die "program '$prog' not found (relative to $PWD)"
    realpath -s -- "$prog"                 # -s: keep symlinks, argv[0] may matter
  elif found=$(type -P -- "$prog"); then
    realpath -s -- "$found"
  else
    die "program '$prog' not found in PATH; give a path, e.g. build/measure/measure"
  fi
}

cmd_mpirun() {
  if ! load_state || [[ -z $(cluster_namespaces "${ST[prefix]}") ]]; then
    die "no cluster is up (state: $STATE_DIR); run '$ME up NODES RANKS_PER_NODE RATE' first"
  fi
  local prefix=${ST[prefix]} nodes=${ST[nodes]} rpn=${ST[ranks_per_node]} subnet=${ST[subnet]}
  local -a args=("$@") user_opts=() rest=()
  local i=0 n=${#args[@]} have_np=0 have_map=0 have_bind=0 have_wdir=0 a
  local -A user_mca=()    # MCA names given on the line: Open MPI refuses a name twice
  while ((i < n)); do
    a=${args[i]}
    [[ $a == -* ]] || break
    case $a in
      -np|--np|-n|--n|-c) have_np=1 ;;
      --map-by|-map-by|--npernode|-npernode|--npersocket|-npersocket|--rankfile|-rankfile) have_map=1 ;;
      --bind-to|-bind-to) have_bind=1 ;;
      -wdir|--wdir|-wd|--wd) have_wdir=1 ;;
      --app|-app) die "--app is not supported through $ME" ;;
      -H|--host|-host|--hostfile|-hostfile|--machinefile|-machinefile)
        die "$a: the cluster's nodes come from its hostfile ($STATE_DIR/hostfile)" ;;
    esac
    user_opts+=("$a")
    if [[ $a == --mca || $a == -mca || $a == --gmca || $a == -gmca ]]; then
      ((i + 2 < n)) || usage_error "$a needs a name and a value"
      user_opts+=("${args[i + 1]}" "${args[i + 2]}")
      user_mca[${args[i + 1]}]=1
      i=$((i + 3))
    elif takes_value "$a"; then
      ((i + 1 < n)) || usage_error "$a needs a value"
      user_opts+=("${args[i + 1]}")
      i=$((i + 2))
    else
      i=$((i + 1))
    fi
  done
  ((i < n)) || usage_error "mpirun: no program given"
  rest=("$(resolve_program "${args[i]}")" "${args[@]:i+1}")

  # Ranks need these whatever the caller's environment; the rsh agent is a
  # local child of mpirun, so the whole environment reaches the orteds, and
  # -x makes each one explicit for the ranks as well.
  export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  local -a env_opts=(-x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS)
  if ((EUID == 0)); then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi

  # The cluster's MCA settings, NAME VALUE pairs; one given on the command
  # line replaces ours (mpirun refuses a name listed twice).
  # shellcheck disable=SC2054  # commas inside MCA values, not array separators
  local -a mca=(
    plm_rsh_agent "$STATE_DIR/rsh-agent"
    # mpirun launches every orted itself: an orted starting others would run
    # the agent from inside a node.
    plm_rsh_no_tree_spawn 1
    # TCP between nodes over the capped links only; shared memory inside one.
    pml ob1
    btl self,vader,tcp
    btl_tcp_if_include "$subnet"
    oob_tcp_if_include "$subnet"
    # Without 'put' in the flags: with it, bidirectional traffic ran at half speed.
    btl_tcp_flags send,inplace,need-ack,need-csum
    # Ring all-reduce: the default algorithm choice reached ~60% of the cap.
    coll_tuned_use_dynamic_rules 1
    coll_tuned_allreduce_algorithm 4
    # The ring for the non-blocking all-reduce too (libnbc: ranks that poll,
    # --poll-us, issue MPI_Iallreduce). Left to choose, libnbc runs an
    # in-place one as a binomial tree, and in the engine a group's last member
    # now and then waited 60-70 ms for it (1,4,2,1 mb8, 128 KiB: 16-22 ms a
    # call against 5 ms with the ring).
    coll_libnbc_iallreduce_algorithm 1
    # Many ranks on few cores: spinning ranks starve the ones doing work.
    mpi_yield_when_idle 1
  )
  local -a opts=(--hostfile "$STATE_DIR/hostfile" "${env_opts[@]}")
  for ((i = 0; i < ${#mca[@]}; i += 2)); do
    [[ -n ${user_mca[${mca[i]}]:-} ]] || opts+=(--mca "${mca[i]}" "${mca[i + 1]}")
  done
  ((have_np)) || opts+=(-np "$((nodes * rpn))")
  ((have_map)) || opts+=(--map-by "ppr:$rpn:node")
  ((have_bind)) || opts+=(--bind-to none)    # emulated nodes share the real cores
  ((have_wdir)) || opts+=(-wdir "$PWD")

  local rc=0
  ip netns exec "$(switch_ns "$prefix")" "$MPIRUN" "${opts[@]}" "${user_opts[@]}" "${rest[@]}" || rc=$?
  return "$rc"
}

# ---------------------------------------------------------------- status ----

cmd_status() {
  if ! load_state; then
    echo "no cluster is up (state: $STATE_DIR)"
    return 1
  fi
  local prefix=${ST[prefix]} ns present
  echo "cluster: ${ST[nodes]} nodes x ${ST[ranks_per_node]} ranks, link ${ST[rate]} (${ST[rate_bits]} bit/s) each way, tc ${ST[qdisc]:-tbf}"
  echo "state:   $STATE_DIR (hostfile, rsh-agent); subnet ${ST[subnet]}; switch namespace ${ST[switch_ns]}"
  local groups=${ST[groups]:-1} g per_group
  if ((groups > 1)); then
    per_group=$((ST[nodes] / groups))
    echo "groups:  $groups switch groups of $per_group nodes, each uplink ${ST[global_rate]} (${ST[global_rate_bits]} bit/s) each way to the spine ${ST[switch_ns]}"
    for ((g = 0; g < groups; g++)); do
      echo "  group $g: switch $(group_ns "$prefix" "$g"), nodes $(node_ns "$prefix" $((g * per_group)))..$(node_ns "$prefix" $(((g + 1) * per_group - 1)))"
    done
  fi
  present=$(cluster_namespaces "$prefix")
  for ns in ${ST[switch_ns]} ${ST[group_ns]:-} ${ST[node_ns]}; do
    if grep -qx -- "$ns" <<<"$present"; then
      if [[ $ns == "${ST[switch_ns]}" ]]; then
        echo "  $ns: $(ip -n "$ns" -br addr show br0 | awk '{print $3}') ($(ip -n "$ns" -o link show master br0 | wc -l) ports)"
      elif [[ $ns != "$prefix"-n* ]]; then
        echo "  $ns: switch group, $(ip -n "$ns" -o link show master br0 | wc -l) ports, uplink" \
             "${ST[qdisc]:-tbf} $({ tc -n "$ns" qdisc show dev up0; tc -n "$ns" class show dev up0; } | grep -o -m1 'rate [^ ]*')"
      else
        echo "  $ns: $(ip -n "$ns" -br addr show eth0 | awk '{print $3}')," \
             "${ST[qdisc]:-tbf} $({ tc -n "$ns" qdisc show dev eth0; tc -n "$ns" class show dev eth0; } | grep -o -m1 'rate [^ ]*')," \
             "$(ip netns pids "$ns" | wc -l) processes"
      fi
    else
      echo "  $ns: MISSING"
      present=broken
    fi
  done
  [[ $present != broken ]]
}

# ------------------------------------------------------------------ main ----

main() {
  (($# >= 1)) || usage_error "no command"
  local cmd=$1
  shift
  case $cmd in
    up) cmd_up "$@" ;;
    mpirun) cmd_mpirun "$@" ;;
    status) cmd_status "$@" ;;
    down) cmd_down "$@" ;;
    -h|--help|help) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" ;;
    *) usage_error "unknown command '$cmd'" ;;
  esac
}

main "$@"
