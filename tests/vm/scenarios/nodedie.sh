#!/bin/bash
# Death of a node: one rank per VM (run it on 3 VMs) starts a 64 MiB
# allreduce; the last VM then stops dead (sysrq 'b': no process exit, no
# disconnect, its NIC falls silent). The survivors must fail within the
# operation timeout with the lost rank named in the report, then shrink
# the communicator to themselves (no bootstrap) and run an allreduce on
# it. Afterwards nothing is leaked on the survivors and the module unloads
# with a clean kernel log.
#
#   tests/vm/vmrun.sh -k KVER -n 3 -o OUT -t 900 tests/vm/scenarios/nodedie.sh
#
# With the argument "split" (vmrun.sh -a split) the node stops during a
# coll_comm_split() instead: the survivors' split must end bounded (an
# error, or a child whose next allreduce fails), then they shrink. With
# "revoke", rank 0 revokes the allreduce's communicator while the node is
# dead: the revoke returns at once and ends every survivor's allreduce.
# With "revoke-cut", nobody dies: rank 0 sends its frames for the last
# VM nowhere (its neighbour entry set to a MAC nobody has) just before it
# revokes, so that VM's rank hears of the revoke only from rank 1, which
# passes it on; every allreduce must still end at once.
# With "grow", the node stops during a coll_comm_grow() that admits a new
# process on VM 0 (kcoll-nodedie -g): every survivor's grow and the
# newcomer's join must end bounded (an error, or a grown communicator
# whose next allreduce fails), then the survivors shrink. "grow=MS": the
# node stops MS ms into its grow (default: 0-80 ms at random).
#
# The victim writes its own "ok" status just before it dies (kcoll-nodedie
# -s): it cannot report afterwards.
. "$kcoll_top/tests/vm/guest-lib.sh"

TOOL=$KCOLL_TOP/build/tests/bin/kcoll-nodedie
ROOT_IP=10.9.0.1
PORT=29700
victim=$((kcoll_nvms - 1))

[ "$kcoll_nvms" -ge 3 ] || fail "nodedie needs 3 VMs (two survivors)"
[ -x "$TOOL" ] || fail "no $TOOL (make tests-bin)"
kcoll_net_up
kcoll_rxe_up
kcoll_mod_load
kcoll_res_baseline
kcoll_peers_up

export KCOLL_NRANKS=$kcoll_nvms KCOLL_RANK=$kcoll_vm
export KCOLL_ROOT=$ROOT_IP:$PORT
export KCOLL_SECRET=6b636f6c6c2d766d2d746573742d3031
export KCOLL_BOOTSTRAP_TIMEOUT_MS=300000
mode= what="an allreduce" tmo=10000 newcomer=
case "${KCOLL_ARG:-}" in
split)	mode=-S what="a split"
	export KCOLL_CONNECT_TIMEOUT_MS=5000 ;;
# A long operation timeout: what ends the others' allreduce must be the
# revoke (and the drain of its writes to the dead node), not the timeout.
grow|grow=*)
	mode="-G -f $KCOLL_OUT/grow-id" what="a grow"
	[ "$KCOLL_ARG" = grow ] || export KCOLL_NODEDIE_DELAY_MS=${KCOLL_ARG#grow=}
	export KCOLL_CONNECT_TIMEOUT_MS=5000
	if [ "$kcoll_vm" = 0 ]; then
		rm -f "$KCOLL_OUT"/grow-id*
		timeout -k 10 600 "$TOOL" -g $((kcoll_nvms + 1)) \
			-f "$KCOLL_OUT/grow-id" -T $tmo \
			>"$KCOLL_OUT/newcomer.log" 2>&1 &
		newcomer=$!
	fi ;;
revoke)	mode=-R what="an allreduce that rank 0 then revokes" tmo=60000 ;;
revoke-cut)
	mode="-R -X" what="an allreduce that rank 0 revokes, cut off" tmo=60000
	export KCOLL_NODEDIE_CUT="10.9.0.$((victim + 1)) 52:54:00:00:00:ee eth0" ;;
esac
if [ "$kcoll_vm" = "$victim" ] && [ "${KCOLL_ARG:-}" != revoke-cut ]; then
	log "rank $kcoll_vm: this node dies in the middle of $what"
	"$TOOL" -v "$victim" -T $tmo $mode \
		-s "$KCOLL_OUT/status" >"$KCOLL_OUT/nodedie.log" 2>&1
	# Only reached if the victim failed before it could die.
	fail "the victim did not die: $(tail -3 "$KCOLL_OUT/nodedie.log" | tr '\n' ' ')"
	kcoll_finish
	exit 0
fi
t0=$SECONDS
timeout -k 10 600 "$TOOL" -v "$victim" -T $tmo $mode \
	>"$KCOLL_OUT/nodedie.log" 2>&1 ||
	fail "kcoll-nodedie rank $kcoll_vm failed (see nodedie.log): $(kcoll_why "$KCOLL_OUT/nodedie.log")"
sed "s/^/[rank $kcoll_vm] /" "$KCOLL_OUT/nodedie.log"
if [ -n "${newcomer:-}" ]; then
	wait "$newcomer" || fail "the grow's newcomer failed (see newcomer.log): $(kcoll_why "$KCOLL_OUT/newcomer.log")"
	sed "s/^/[newcomer] /" "$KCOLL_OUT/newcomer.log"
fi
log "survived the node's death in $((SECONDS - t0)) s"
kcoll_res_check
kcoll_mod_unload
kcoll_finish
