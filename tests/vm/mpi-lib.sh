# shellcheck shell=bash
# Open MPI across the test VMs (sourced by scenarios after guest-lib.sh, on
# two VMs): host names and /etc/hosts, a remote-exec service standing in
# for ssh (the guests have none), mpirun's common arguments (mpi_common,
# with ppn ranks per VM), the transports' arguments (transport_args) and
# mpi_cleanup, which ends the processes named in $mpi_procs (and orted) on
# both VMs, and mpi_run, one run of $bench (tools/kcoll-mpibench) with its
# output in a file. Expects peer, rexec_port, ppn, np and bench set by the
# caller.
#
# Launch: VM 1 serves a tiny remote-exec service (busybox nc -ll -e, one
# command line per connection, exit status sent back); mpirun on VM 0 uses
# it as its rsh agent (--mca plm_rsh_agent), so Open MPI's ordinary rsh
# launcher starts its orted on VM 1. This is a test network between two
# private VMs: the service has no authentication.
mpi_procs=${mpi_procs:-kcoll-mpibench}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_openib_warn_no_device_params_found=0

# Distinct host names (Open MPI names nodes by them) and a hosts file for
# both; the host root is read-only, so bind a tmpfs copy over /etc/hosts.
hostname "vm$kcoll_vm"
printf '127.0.0.1 localhost\n10.9.0.1 vm0\n10.9.0.2 vm1\n' >/tmp/hosts
mount --bind /tmp/hosts /etc/hosts

for i in $(seq 1 120); do busybox ping -c1 -W1 "$peer" >/dev/null 2>&1 && break; done
busybox ping -c1 -W2 "$peer" >/dev/null || fail "peer $peer unreachable over eth0"
log "rxe0 GID 1: $(cat /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null)" \
	"($(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/1 2>/dev/null))"

# ------------------------------------------------------------ remote exec
# Server (both VMs; only VM 1's is used): read one line, run it with bash,
# answer its output and a last line __KCOLL_RC=<status>.
cat >/tmp/kcoll-rexecd <<EOF
#!/bin/bash
IFS= read -r cmd || exit 0
echo "\$(date +%T) \$cmd" >>"$KCOLL_OUT/rexec.log"
bash -c "\$cmd" </dev/null 2>&1
echo "__KCOLL_RC=\$?"
EOF
# Client, in ssh's place: kcoll-rsh [options] HOST COMMAND...
cat >/tmp/kcoll-rsh <<EOF
#!/bin/bash
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1
shift
exec 3<>"/dev/tcp/\$host/$rexec_port" || exit 255
printf '%s\n' "\$*" >&3
rc=255
while IFS= read -r line <&3 || [ -n "\$line" ]; do
	case \$line in
	__KCOLL_RC=*) rc=\${line#__KCOLL_RC=} ;;
	*) printf '%s\n' "\$line" ;;
	esac
done
exit "\$rc"
EOF
chmod +x /tmp/kcoll-rexecd /tmp/kcoll-rsh
busybox nc -ll -p "$rexec_port" -e /tmp/kcoll-rexecd &
rexecd_pid=$!
sleep 0.5
if [ "$kcoll_vm" = 0 ]; then
	for i in $(seq 1 100); do
		[ "$(/tmp/kcoll-rsh vm1 hostname 2>/dev/null)" = vm1 ] && break
		sleep 0.3
	done
	[ "$(/tmp/kcoll-rsh vm1 hostname 2>/dev/null)" = vm1 ] || fail "remote exec to vm1 does not answer"
fi

# ------------------------------------------------------------ mpirun
printf 'vm0 slots=%d\nvm1 slots=%d\n' "$ppn" "$ppn" >/tmp/kcoll-mpi.hosts
# Common to every run. One vCPU per VM runs two ranks: ranks yield while
# they poll (Open MPI would set this itself had the hostfile said slots=1).
mpi_common=(--hostfile /tmp/kcoll-mpi.hosts -np "$np" --map-by slot --bind-to none
	--mca plm rsh --mca plm_rsh_agent /tmp/kcoll-rsh --mca plm_rsh_no_tree_spawn 1
	--mca oob_tcp_if_include eth0 --mca mpi_yield_when_idle 1
	--mca orte_base_help_aggregate 0)
# UCX over rxe: GID 1 is the IPv4 RoCE v2 one. rc_v means RC verbs plus
# UD verbs as UCX's auxiliary (wire-up) transport, and UCX's UD drops every
# packet rxe delivers unless its destination-GID check is off (with it on,
# endpoints die with "ud_ep.c: UD endpoint ...: unhandled timeout error").
# Large messages: the emulated wire loses packets, and rxe recovers only by
# go-back-N after the RC ack timeout. UCX's default rendezvous (RDMA READ)
# with its 1 s timeout stalls for seconds per MiB; RDMA WRITE rendezvous
# with perftest's own timeout (-u 14: 4.096 us * 2^14 = 67 ms) keeps going.
# shellcheck disable=SC2054
ucx_env=(-x UCX_NET_DEVICES=rxe0:1 -x UCX_IB_GID_INDEX=1 -x UCX_TLS=rc_v,sm,self
	-x UCX_UD_VERBS_TIMEOUT=600s -x UCX_RC_VERBS_TIMEOUT=67ms -x UCX_RNDV_SCHEME=put_zcopy
	-x UCX_KEEPALIVE_INTERVAL=inf -x UCX_WARN_UNUSED_ENV_VARS=n)

transport_args() {	# name -> mpirun arguments
	case $1 in
	tcp) echo "--mca pml ob1 --mca btl tcp,vader,self --mca btl_tcp_if_include eth0" ;;
	ucx) echo "--mca pml ucx --mca btl ^openib,ofi ${ucx_env[*]} -x UCX_UD_VERBS_ETH_DGID_CHECK=n" ;;
	ucx-dgidcheck) echo "--mca pml ucx --mca btl ^openib,ofi ${ucx_env[*]}" ;;
	openib) echo "--mca pml ob1 --mca btl openib,vader,self --mca btl_openib_if_include rxe0:1" \
		"--mca btl_openib_cpc_include rdmacm --mca btl_openib_allow_ib 1" ;;
	esac
}

# Processes a run left behind (a run killed by its timeout) would steal the
# VMs' only vCPUs from the next one: end them on both VMs (guest only).
mpi_cleanup() {
	local here there
	sleep 1
	# shellcheck disable=SC2086
	here=$(pidof $mpi_procs orted)
	# shellcheck disable=SC2016
	there=$(/tmp/kcoll-rsh vm1 "p=\$(pidof $mpi_procs orted); [ -n \"\$p\" ] && kill -9 \$p; echo \$p")
	[ -n "$here$there" ] && log "ended leftover MPI processes: vm0 [$here] vm1 [$there]"
	# shellcheck disable=SC2086
	[ -n "$here" ] && kill -9 $here
}

# rxe0's non-zero counters (packets, retransmissions, duplicates).
rxe_pkts() {
	(cd /sys/class/infiniband/rxe0/ports/1/hw_counters 2>/dev/null &&
		grep -H . ./* | sed 's|^\./||' | grep -v ':0$' | tr '\n' ' ')
}

# mpi_run NAME TIMEOUT TRANSPORT BENCH-ARGS...: output in $KCOLL_OUT/mpi-NAME.txt
mpi_run() {
	local name=$1 tmo=$2 tr=$3 t0=$SECONDS rc before
	shift 3
	before=$(rxe_pkts)
	# shellcheck disable=SC2046
	timeout -k 15 "$tmo" mpirun "${mpi_common[@]}" $(transport_args "$tr") \
		"$bench" "$@" >"$KCOLL_OUT/mpi-$name.txt" 2>&1
	rc=$?
	{
		echo "# transport $tr: mpirun $(transport_args "$tr") kcoll-mpibench $*"
		echo "# exit $rc after $((SECONDS - t0)) s"
		echo "# vm0 rxe0 counters before: $before"
		echo "# vm0 rxe0 counters after:  $(rxe_pkts)"
	} >>"$KCOLL_OUT/mpi-$name.txt"
	log "mpi $name ($tr): exit $rc in $((SECONDS - t0)) s"
	mpi_cleanup
	return $rc
}
