#!/bin/bash
# The packages as installed (tools/deb-test.sh, make deb-test): the guest's
# root is the host's, where kcoll-dkms, libcoll0, libcoll-dev and
# kcoll-tools are installed and DKMS built the module for this kernel. So
# nothing of the build tree is used: modprobe finds the DKMS module under
# /lib/modules, and the test program (built against the installed
# libcoll-dev, argument 1) runs 2 ranks per VM on the installed libcoll0.
# Usage (2 VMs): tests/vm/vmrun.sh -k KVER -n 2 -o OUT -t 600 \
#     -a PROGRAM tests/vm/scenarios/installed.sh
. "$kcoll_top/tests/vm/guest-lib.sh"

prog=$KCOLL_ARG
kcoll_net_up
kcoll_rxe_up
ko=$(modinfo -F filename kcoll 2>/dev/null)
case $ko in
*/updates/dkms/*) log "modprobe finds the DKMS build: $ko" ;;
*) fail "modinfo kcoll: '$ko', not a DKMS build" ;;
esac
modprobe kcoll ack_timeout=14 || fail "modprobe kcoll"
[ -c /dev/kcoll ] || fail "/dev/kcoll missing after modprobe"
echo "kcoll-test: begin $(basename "$kcoll_run")" >/dev/kmsg
/usr/sbin/kcollctl --version >"$KCOLL_OUT/kcollctl.txt" 2>&1 ||
	fail "the installed kcollctl --version"
/usr/sbin/kcolld -t -c /etc/kcoll/kcolld.conf >>"$KCOLL_OUT/kcollctl.txt" 2>&1 ||
	fail "the installed kcolld -t rejects the packaged configuration"
kcoll_peers_up
vm_sync ready 300
export KCOLL_NRANKS=4 KCOLL_SECRET=6b636f6c6c2d6465622d746573742121
pids=()
for r in $((2 * kcoll_vm)) $((2 * kcoll_vm + 1)); do
	KCOLL_ROOT=10.9.0.1:29877 KCOLL_RANK=$r timeout -k 5 300 "$prog" \
		>"$KCOLL_OUT/rank$r.txt" 2>&1 &
	pids+=($!)
done
for p in "${pids[@]}"; do
	wait "$p" || fail "a rank of $prog failed"
done
cat "$KCOLL_OUT"/rank*.txt
# A collective uses the installed libcoll, not the tree's (/lib is
# /usr/lib on Debian 12).
lib=$(ldd "$prog" | awk '/libcoll.so.0/ { print $3 }')
[ -n "$lib" ] && [ "$(readlink -f "$lib")" = "$(readlink -f /usr/lib/x86_64-linux-gnu/libcoll.so.0)" ] ||
	fail "$prog does not use the installed libcoll.so.0: $(ldd "$prog" | grep coll)"

# kcolld as kcolld.service runs it: another user (the unit's is dynamic),
# CAP_NET_ADMIN alone (ambient and bounding set), no new privileges. It
# must set a tunable from its configuration, and again after SIGHUP (the
# unit's reload) with the file changed.
conf=/tmp/kcolld-test.conf
echo "op_timeout_ms = 123457" >$conf
chmod 0644 $conf
setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs \
	--inh-caps=-all,+net_admin --ambient-caps=-all,+net_admin \
	--bounding-set=-all,+net_admin \
	/usr/sbin/kcolld -f -p 0 -c $conf >"$KCOLL_OUT/kcolld.txt" 2>&1 &
kd=$!
# Does sysfs op_timeout_ms become $1 within 10 s?
op_timeout_becomes() {
	for _ in $(seq 1 50); do
		[ "$(cat /sys/class/misc/kcoll/op_timeout_ms)" = "$1" ] && return 0
		sleep 0.2
	done
	return 1
}
op_timeout_becomes 123457 ||
	fail "kcolld with CAP_NET_ADMIN alone did not set op_timeout_ms from its file"
echo "op_timeout_ms = 223457" >$conf
kill -HUP $kd
op_timeout_becomes 223457 ||
	fail "kcolld did not apply the changed file on SIGHUP (the unit's reload)"
grep -q "CapEff:.*0000000000001000" /proc/$kd/status ||
	fail "kcolld's effective capabilities are not CAP_NET_ADMIN alone: $(grep CapEff /proc/$kd/status)"
kill $kd
wait $kd
log "kcolld as the unit runs it: $(grep -c . "$KCOLL_OUT/kcolld.txt") log lines"
vm_sync "done" 300
modprobe -r kcoll || fail "modprobe -r kcoll"
kcoll_klog_check
kcoll_finish
