#!/usr/bin/env bash
# netns_cluster.sh - "hosts" on this machine: N network namespaces on a bridge, for multi-host
# runs of zerotrain over Open MPI's TCP transport without a second machine (needs root).
#
#   netns_cluster.sh [options] run [mpirun args...]     mpirun across the hosts, then clean up
#   netns_cluster.sh [options] exec CMD [args...]       CMD in the root namespace while the hosts
#                                                        exist (ZT_NETNS_MPIRUN names a wrapper
#                                                        that runs mpirun across them; see
#                                                        docs/multihost.md for the others)
#   netns_cluster.sh [options] check                    create, ping every host, clean up
#   netns_cluster.sh [options] srun [srun args...]      srun across the hosts (implies --slurm)
# options:
#   --hosts N        namespaces ("hosts"), default 2
#   --slots K        ranks per host in the hostfile, default 2
#   --subnet A.B.C   /24 the hosts take .1 .. .N of, default 10.77.0
#   --rate R         shape every host's link: tbf rate R (tc syntax: 1gbit, 100mbit), egress
#                    of both ends, so each direction is limited
#   --delay D        netem delay D (tc syntax: 1ms) on both ends of every link
#   --slurm          also start a Slurm cluster on the hosts (munged in the root namespace,
#                    slurmctld on host 1, one slurmd per host, mpi/pmix) for the srun subcommand
#                    and ZT_NETNS_SRUN; needs slurmctld, slurmd, srun and munged
#
# Layout: host i is namespace zt<pid>h<i> with eth0 = <subnet>.<i>/24, its veth peer on bridge
# ztbr<pid> in the root namespace; loopback up in every namespace. mpirun runs inside host 1;
# Open MPI's rsh launcher starts each other host's orted through an agent that maps the host's
# address to its namespace (`ip netns exec`, with its own UTS namespace whose hostname is h<i>),
# so no sshd is needed. Open MPI is told to use only the bridge subnet for its out-of-band and
# TCP traffic; ranks on one host use shared memory (vader), ranks on two hosts use TCP.
#
# Everything created is removed on exit (trap), also after failures and on Ctrl-C.
# Exit status: the command's; 77 when this machine cannot host the namespaces (not root, no
# `ip`, namespace or veth creation refused: a container without CAP_SYS_ADMIN/CAP_NET_ADMIN),
# with the reason on stderr; 2 for a usage error.
set -euo pipefail

HOSTS=2 SLOTS=2 SUBNET=10.77.0 RATE="" DELAY="" SLURM=0
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) HOSTS="$2"; shift 2 ;;
    --slots) SLOTS="$2"; shift 2 ;;
    --subnet) SUBNET="$2"; shift 2 ;;
    --rate) RATE="$2"; shift 2 ;;
    --delay) DELAY="$2"; shift 2 ;;
    --slurm) SLURM=1; shift ;;
    run|exec|check|srun) break ;;
    *) usage ;;
  esac
done
[ $# -ge 1 ] || usage
CMD="$1"; shift
[[ "$HOSTS" =~ ^[0-9]+$ ]] && [ "$HOSTS" -ge 1 ] && [ "$HOSTS" -le 250 ] || { echo "netns_cluster: --hosts $HOSTS: expected 1..250" >&2; exit 2; }
[[ "$SLOTS" =~ ^[0-9]+$ ]] && [ "$SLOTS" -ge 1 ] || { echo "netns_cluster: --slots $SLOTS: expected a positive integer" >&2; exit 2; }
[ "$CMD" = exec ] && [ $# -eq 0 ] && usage

refuse() { echo "netns_cluster: cannot create network namespaces here: $*" >&2; exit 77; }
[ "$(id -u)" = 0 ] || refuse "not root (needs CAP_SYS_ADMIN and CAP_NET_ADMIN)"
command -v ip >/dev/null || refuse "no 'ip' command (Debian package iproute2)"
command -v mpirun >/dev/null || [ "$CMD" = check ] || refuse "no mpirun on PATH"
command -v ping >/dev/null || { echo "netns_cluster: no 'ping' to check the links (Debian package iputils-ping)" >&2; exit 1; }
if [ "$CMD" = srun ]; then SLURM=1; fi
if [ $SLURM = 1 ]; then
  for c in slurmctld slurmd srun sinfo munged; do
    command -v $c >/dev/null || refuse "--slurm: no '$c' (Debian packages slurmctld slurmd slurm-client munge)"
  done
fi
if [ -n "$RATE$DELAY" ]; then command -v tc >/dev/null || refuse "no 'tc' command (iproute2) for --rate/--delay"; fi

TAG="zt$$"
BR="${TAG}br"
WORK="$(mktemp -d /tmp/netns_cluster.XXXXXX)"
MUNGE_PID=""
ns() { echo "${TAG}h$1"; }
addr() { echo "$SUBNET.$1"; }

cleanup() {
  local i
  for i in $(seq 1 "$HOSTS"); do
    ip netns pids "$(ns "$i")" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip link del "${TAG}v$i" 2>/dev/null || true
    ip netns del "$(ns "$i")" 2>/dev/null || true
  done
  ip link del "$BR" 2>/dev/null || true
  [ -z "$MUNGE_PID" ] || kill "$MUNGE_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$(ns 1)" 2>"$WORK/err" || refuse "ip netns add: $(cat "$WORK/err")"
ip link add "$BR" type bridge 2>"$WORK/err" || refuse "ip link add type bridge: $(cat "$WORK/err")"
ip link set "$BR" up
for i in $(seq 1 "$HOSTS"); do
  n="$(ns "$i")"
  [ "$i" = 1 ] || ip netns add "$n" 2>"$WORK/err" || refuse "ip netns add: $(cat "$WORK/err")"
  ip link add "${TAG}v$i" type veth peer name "${TAG}p$i" 2>"$WORK/err" || refuse "ip link add type veth: $(cat "$WORK/err")"
  ip link set "${TAG}p$i" netns "$n"
  ip -n "$n" link set "${TAG}p$i" name eth0
  ip -n "$n" addr add "$(addr "$i")/24" dev eth0
  ip -n "$n" link set lo up
  ip -n "$n" link set eth0 up
  ip link set "${TAG}v$i" master "$BR"
  ip link set "${TAG}v$i" up
  if [ -n "$RATE$DELAY" ]; then
    # both ends: the bridge side shapes what enters host i, eth0 what leaves it
    for side in "ip link" "ip -n $n link"; do
      dev="${TAG}v$i"; pre=""
      [ "$side" = "ip link" ] || { dev=eth0; pre="ip netns exec $n"; }
      parent="root"
      if [ -n "$DELAY" ]; then
        $pre tc qdisc add dev "$dev" root handle 1: netem delay "$DELAY" limit 100000 2>"$WORK/err" ||
          { echo "netns_cluster: --delay $DELAY: tc netem: $(cat "$WORK/err") (this kernel has no sch_netem?)" >&2; exit 1; }
        parent="parent 1:"
      fi
      if [ -n "$RATE" ]; then
        $pre tc qdisc add dev "$dev" $parent handle 2: tbf rate "$RATE" burst 256kb latency 100ms 2>"$WORK/err" ||
          { echo "netns_cluster: --rate $RATE: tc tbf: $(cat "$WORK/err")" >&2; exit 1; }
      fi
    done
  fi
done

# the launch agent: `agent HOST COMMAND...` runs COMMAND in HOST's namespace, hostname h<i>
for i in $(seq 1 "$HOSTS"); do echo "$(addr "$i") $(ns "$i") h$i"; done > "$WORK/hosts.map"
cat > "$WORK/agent" <<EOF
#!/bin/sh
# mpirun's rsh agent for netns_cluster.sh: \$1 = host address, the rest = the orted command line
host="\$1"; shift
set -- \$(awk -v h="\$host" '\$1 == h || \$3 == h { print \$2, \$3 }' "$WORK/hosts.map") "\$*"
[ \$# -eq 3 ] || { echo "netns_cluster agent: unknown host \$host" >&2; exit 1; }
exec ip netns exec "\$1" unshare --uts sh -c 'hostname "\$0"; exec sh -c "\$1"' "\$2" "\$3"
EOF
chmod +x "$WORK/agent"
for i in $(seq 1 "$HOSTS"); do echo "$(addr "$i") slots=$SLOTS"; done > "$WORK/hostfile"

# every host reaches every other before anything runs
for i in $(seq 1 "$HOSTS"); do
  for j in $(seq 1 "$HOSTS"); do
    [ "$i" = "$j" ] && continue
    ok=0
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      if ip netns exec "$(ns "$i")" ping -c1 -W1 "$(addr "$j")" >/dev/null 2>&1; then ok=1; break; fi
      sleep 0.3
    done
    [ $ok = 1 ] || { echo "netns_cluster: host $i cannot reach $(addr "$j")" >&2; exit 1; }
  done
done

# mpirun across the hosts, from inside host 1 (so every orted can call it back on the bridge)
cat > "$WORK/mpirun" <<EOF
#!/bin/sh
# mpirun across netns_cluster.sh's hosts ($HOSTS x $SLOTS slots); arguments go to mpirun
exec ip netns exec "$(ns 1)" unshare --uts sh -c 'hostname h1; exec "\$0" "\$@"' \\
  mpirun --hostfile "$WORK/hostfile" --mca plm_rsh_agent "$WORK/agent" \\
  --mca oob_tcp_if_include "$SUBNET.0/24" --mca btl_tcp_if_include "$SUBNET.0/24" \\
  --mca btl self,vader,tcp --mca plm_rsh_no_tree_spawn 1 "\$@"
EOF
chmod +x "$WORK/mpirun"

# bytes that left host i's eth0 / entered it, for callers measuring inter-host traffic
cat > "$WORK/bytes" <<EOF
#!/bin/sh
# prints "host tx_bytes rx_bytes" of every host's eth0
while read -r a n h; do
  echo "\$h \$(ip netns exec "\$n" cat /sys/class/net/eth0/statistics/tx_bytes /sys/class/net/eth0/statistics/rx_bytes | tr '\\n' ' ')"
done < "$WORK/hosts.map"
EOF
chmod +x "$WORK/bytes"

# Slurm: every daemon in its host's namespace with that host's name; each slurmd in its own
# mount namespace where $S/nodetmp (Slurm's TmpFS, where mpi/pmix puts its per-step
# directories) is that host's own directory, so two "hosts" on one disk do not collide
if [ $SLURM = 1 ]; then
  S="$WORK/slurm"; mkdir -p "$S/state" "$S/nodetmp"
  {
    echo "ClusterName=ztnetns"
    echo "SlurmctldHost=h1($(addr 1))"
    echo "SlurmUser=root"; echo "SlurmdUser=root"
    echo "AuthType=auth/munge"; echo "CredType=cred/munge"; echo "AuthInfo=socket=$S/munge.sock"
    echo "StateSaveLocation=$S/state"; echo "SlurmdSpoolDir=$S/spool-%n"; echo "TmpFS=$S/nodetmp"
    echo "SlurmctldPidFile=$S/ctld.pid"; echo "SlurmdPidFile=$S/slurmd-%n.pid"
    echo "SlurmctldLogFile=$S/ctld.log"; echo "SlurmdLogFile=$S/slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"; echo "TaskPlugin=task/none"; echo "MpiDefault=pmix"
    echo "SchedulerType=sched/builtin"; echo "SelectType=select/cons_tres"; echo "SelectTypeParameters=CR_CPU"
    echo "ReturnToService=2"; echo "JobCompType=jobcomp/none"; echo "AccountingStorageType=accounting_storage/none"
    for i in $(seq 1 "$HOSTS"); do echo "NodeName=h$i NodeAddr=$(addr "$i") CPUs=$SLOTS State=UNKNOWN"; done
    echo "PartitionName=all Nodes=h[1-$HOSTS] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE"
  } > "$S/slurm.conf"
  # slurmd loads a cgroup plugin even with proctrack/linuxproc; v1 accepts this container's mounts
  printf 'CgroupPlugin=cgroup/v1\n' > "$S/cgroup.conf"
  export SLURM_CONF="$S/slurm.conf"
  munged --force -S "$S/munge.sock" --pid-file "$S/munge.pid" 2>"$WORK/err" ||
    { echo "netns_cluster: --slurm: munged: $(cat "$WORK/err")" >&2; exit 1; }
  MUNGE_PID="$(cat "$S/munge.pid")"
  ip netns exec "$(ns 1)" unshare --uts sh -c 'hostname h1; exec slurmctld -D' > "$S/ctld.out" 2>&1 & disown
  for i in $(seq 1 "$HOSTS"); do
    mkdir -p "$S/spool-h$i" "$S/tmp-h$i"
    ip netns exec "$(ns "$i")" unshare --uts --mount sh -c \
      "hostname h$i; mount --bind '$S/tmp-h$i' '$S/nodetmp' && exec slurmd -D -N h$i" > "$S/slurmd-h$i.out" 2>&1 & disown
  done
  up=0
  for _ in $(seq 1 60); do
    st="$(ip netns exec "$(ns 1)" sinfo -h -N -o %t 2>/dev/null | sort -u | tr '\n' ' ')"
    [ "$st" = "idle " ] && { up=1; break; }
    sleep 0.5
  done
  if [ $up = 0 ]; then
    echo "netns_cluster: --slurm: the nodes did not come up (states: ${st:-none}); the logs say:" >&2
    tail -n 3 "$S"/*.out "$S"/*.log >&2 2>/dev/null || true
    exit 1
  fi
  cat > "$WORK/srun" <<EOF
#!/bin/sh
# srun across netns_cluster.sh's Slurm hosts, from host 1; arguments go to srun
SLURM_CONF="$S/slurm.conf" exec ip netns exec "$(ns 1)" unshare --uts sh -c 'hostname h1; exec srun "\$@"' srun "\$@"
EOF
  chmod +x "$WORK/srun"
fi

case "$CMD" in
  check)
    echo "netns_cluster: $HOSTS hosts up on $SUBNET.0/24${RATE:+, rate $RATE}${DELAY:+, delay $DELAY}; every host reaches every other"
    ;;
  run)
    set +e; "$WORK/mpirun" "$@"; rc=$?; set -e
    exit $rc
    ;;
  srun)
    set +e; "$WORK/srun" "$@"; rc=$?; set -e
    exit $rc
    ;;
  exec)
    set +e
    ZT_NETNS_MPIRUN="$WORK/mpirun" ZT_NETNS_BYTES="$WORK/bytes" ZT_NETNS_HOSTS="$HOSTS" \
      ZT_NETNS_NAMES="$(for i in $(seq 1 "$HOSTS"); do printf '%s ' "$(ns "$i")"; done)" ZT_NETNS_SUBNET="$SUBNET" \
      ZT_NETNS_SRUN="$([ $SLURM = 1 ] && echo "$WORK/srun")" "$@"
    rc=$?; set -e
    exit $rc
    ;;
esac
