#!/bin/bash
# The control plane against the real module, in one VM: kcollctl (dev,
# stats, get/set with and without CAP_NET_ADMIN, out-of-range values,
# comm while 2 local ranks run, monitor) and kcolld (configuration applied,
# Prometheus endpoint, module unloaded and loaded again under it: it must
# notice both, re-subscribe and re-apply its configuration).
#
#   tests/vm/vmrun.sh -k KVER -n 1 -o build/vmtest/ctl -t 600 \
#       tests/vm/scenarios/ctl.sh
#
# Logs: kcolld.log, monitor.log, perf-rank<r>.log and one file per check
# under $KCOLL_OUT.
. "$kcoll_top/tests/vm/guest-lib.sh"

CTL=$KCOLL_TOP/build/daemon/kcollctl
KCOLLD=$KCOLL_TOP/build/daemon/kcolld
PERF=$KCOLL_TOP/build/tools/kcoll-perf
SYS=/sys/class/misc/kcoll
PORT=9464
kcolld_pid="" mon_pid="" monj_pid=""

kcoll_net_up
kcoll_rxe_up
kcoll_mod_load
for b in "$CTL" "$KCOLLD" "$PERF"; do
	[ -x "$b" ] || fail "no $b (make daemon tools)"
done

# ctl NAME WANT_RC ARGS...: run kcollctl, output in ctl-NAME.txt.
ctl() {
	local name=$1 want=$2 rc
	shift 2
	timeout 30 "$CTL" "$@" >"$KCOLL_OUT/ctl-$name.txt" 2>&1
	rc=$?
	[ "$rc" = "$want" ] ||
		fail "kcollctl $*: exit $rc, wanted $want: $(head -3 "$KCOLL_OUT/ctl-$name.txt")"
	return 0
}

# JSON on stdin parses (python3 from the host root when there is one).
json_ok() {
	if command -v python3 >/dev/null; then
		python3 -c 'import json, sys; json.load(sys.stdin)'
	else
		grep -q '^{.*}$'
	fi
}

# GET /metrics from kcolld, body on stdout.
metrics() {
	local line
	exec 3<>"/dev/tcp/127.0.0.1/$PORT" || return 1
	printf 'GET /metrics HTTP/1.1\r\nHost: vm\r\n\r\n' >&3
	# Headers up to the blank line, then the body.
	while IFS= read -r -t 10 line <&3; do
		[ "$line" = $'\r' ] && break
	done
	timeout 10 cat <&3
	exec 3<&-
}

# wait_for FILE FIXED_STRING SECONDS
wait_for() {
	local i
	for i in $(seq 1 $(($3 * 10))); do
		grep -qF -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# ------------------------------------------------------------ kcollctl
ctl dev 0 dev
grep -q '^[0-9]*: rxe0: .*port ACTIVE' "$KCOLL_OUT/ctl-dev.txt" ||
	fail "kcollctl dev does not list rxe0 ACTIVE: $(head -2 "$KCOLL_OUT/ctl-dev.txt")"
ctl dev-json 0 -j dev
json_ok <"$KCOLL_OUT/ctl-dev-json.txt" || fail "kcollctl -j dev is not JSON"
ctl stats-json 0 -j stats
json_ok <"$KCOLL_OUT/ctl-stats-json.txt" || fail "kcollctl -j stats is not JSON"
grep -q '"node"' "$KCOLL_OUT/ctl-stats-json.txt" || fail "kcollctl -j stats has no node"
ctl stats 0 stats
ctl comm-none 0 comm
[ -s "$KCOLL_OUT/ctl-comm-none.txt" ] && fail "kcollctl comm lists communicators before any rank ran"
ctl get-all 0 get
grep -q '^chunk_bytes = ' "$KCOLL_OUT/ctl-get-all.txt" || fail "kcollctl get lists no chunk_bytes"
grep -q '^algo/allreduce = ' "$KCOLL_OUT/ctl-get-all.txt" || fail "kcollctl get lists no algo/allreduce"

ctl get-chunk 0 get chunk_bytes
[ "$(cat "$KCOLL_OUT/ctl-get-chunk.txt")" = "$(cat $SYS/chunk_bytes)" ] ||
	fail "kcollctl get chunk_bytes '$(cat "$KCOLL_OUT/ctl-get-chunk.txt")' != sysfs '$(cat $SYS/chunk_bytes)'"
ctl get-algo 0 get algo/allreduce
[ "$(cat "$KCOLL_OUT/ctl-get-algo.txt")" = "$(cat $SYS/algo/allreduce)" ] ||
	fail "kcollctl get algo/allreduce differs from sysfs"
ctl get-unknown 1 get no_such_knob
grep -qi 'no such tunable' "$KCOLL_OUT/ctl-get-unknown.txt" ||
	fail "get of an unknown knob: $(cat "$KCOLL_OUT/ctl-get-unknown.txt")"

ctl set 0 set chunk_bytes 131072
[ "$(cat $SYS/chunk_bytes)" = 131072 ] || fail "set chunk_bytes 131072: sysfs says $(cat $SYS/chunk_bytes)"
ctl set-range 1 set chunk_bytes 1
grep -q 'Invalid argument' "$KCOLL_OUT/ctl-set-range.txt" ||
	fail "out-of-range set: $(cat "$KCOLL_OUT/ctl-set-range.txt")"
log "out of range: $(cat "$KCOLL_OUT/ctl-set-range.txt")"
[ "$(cat $SYS/chunk_bytes)" = 131072 ] || fail "a refused set changed chunk_bytes"
# Without CAP_NET_ADMIN (nobody, no capabilities): refused, nothing changes.
if command -v setpriv >/dev/null; then
	timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$CTL" set chunk_bytes 65536 >"$KCOLL_OUT/ctl-set-unpriv.txt" 2>&1
	rc=$?
	[ $rc = 1 ] || fail "unprivileged set: exit $rc, wanted 1"
	grep -q 'Operation not permitted' "$KCOLL_OUT/ctl-set-unpriv.txt" ||
		fail "unprivileged set: $(cat "$KCOLL_OUT/ctl-set-unpriv.txt")"
	[ "$(cat $SYS/chunk_bytes)" = 131072 ] || fail "an unprivileged set changed chunk_bytes"
	# Reading needs no privilege.
	timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$CTL" get chunk_bytes >"$KCOLL_OUT/ctl-get-unpriv.txt" 2>&1 ||
		fail "unprivileged get failed: $(cat "$KCOLL_OUT/ctl-get-unpriv.txt")"
else
	log "SKIP unprivileged set: no setpriv"
fi
echo 65536 >$SYS/chunk_bytes

# ------------------------------------------------------------ kcolld
conf=/tmp/kcolld.conf
cat >$conf <<EOF
# kcolld configuration of the ctl scenario
metrics_port = $PORT
devices = rxe0
chunk_bytes = 262144
EOF
"$KCOLLD" -f -c $conf >"$KCOLL_OUT/kcolld.log" 2>&1 &
kcolld_pid=$!
wait_for "$KCOLL_OUT/kcolld.log" "applied 1 of 1 tunables from $conf" 20 ||
	fail "kcolld did not apply its configuration: $(tail -3 "$KCOLL_OUT/kcolld.log")"
[ "$(cat $SYS/chunk_bytes)" = 262144 ] || fail "kcolld: chunk_bytes is $(cat $SYS/chunk_bytes), not 262144"
grep -q 'device rxe0 is not in use' "$KCOLL_OUT/kcolld.log" && fail "kcolld does not find rxe0"
metrics >"$KCOLL_OUT/metrics-1.txt" 2>&1
grep -q '^kcoll_up 1$' "$KCOLL_OUT/metrics-1.txt" || fail "kcolld /metrics: no kcoll_up 1"
grep -q '^kcoll_ops_total{device="rxe0"} ' "$KCOLL_OUT/metrics-1.txt" ||
	fail "kcolld /metrics: no kcoll_ops_total for rxe0"
grep -q '^kcoll_op_latency_seconds_bucket{le="+Inf"} ' "$KCOLL_OUT/metrics-1.txt" ||
	fail "kcolld /metrics: no latency histogram"

# monitor, while 2 ranks on this VM run an allreduce.
"$CTL" monitor >"$KCOLL_OUT/monitor.log" 2>&1 &
mon_pid=$!
"$CTL" -j monitor >"$KCOLL_OUT/monitor-json.log" 2>&1 &
monj_pid=$!
sleep 1
export KCOLL_NRANKS=2 KCOLL_SECRET=6b636f6c6c2d766d2d746573742d3031
export KCOLL_BOOTSTRAP_TIMEOUT_MS=60000
pids=()
for r in 0 1; do
	KCOLL_RANK=$r KCOLL_ROOT=$KCOLL_IP:29700 timeout -k 10 300 "$PERF" \
		-M -c allreduce -b 1M -e 1M -n 40 -w 2 >"$KCOLL_OUT/perf-rank$r.log" 2>&1 &
	pids+=($!)
done
# A communicator shows while the ranks run (unless they are done first).
seen=0
while kill -0 "${pids[0]}" 2>/dev/null; do
	"$CTL" comm >"$KCOLL_OUT/ctl-comm-running.txt" 2>&1
	if grep -q 'rank [01]/2 state ready dev rxe0' "$KCOLL_OUT/ctl-comm-running.txt"; then
		"$CTL" -d comm >"$KCOLL_OUT/ctl-comm-details.txt" 2>&1
		"$CTL" -j -d comm >"$KCOLL_OUT/ctl-comm-json.txt" 2>&1
		seen=1
		break
	fi
	sleep 0.1
done
for i in 0 1; do
	wait "${pids[$i]}" || fail "kcoll-perf rank $i failed (perf-rank$i.log)"
done
if [ $seen = 1 ]; then
	grep -q "member rank 1 $KCOLL_IP port [0-9]* local [01] connected" \
		"$KCOLL_OUT/ctl-comm-details.txt" ||
		fail "kcollctl -d comm: no member line for rank 1: $(head -4 "$KCOLL_OUT/ctl-comm-details.txt")"
	json_ok <"$KCOLL_OUT/ctl-comm-json.txt" || fail "kcollctl -j -d comm is not JSON"
else
	log "the ranks finished before kcollctl comm saw them"
fi
wait_for "$KCOLL_OUT/monitor.log" "destroyed" 10
sleep 1
kill -INT "$mon_pid" "$monj_pid"
wait "$mon_pid" || fail "kcollctl monitor did not exit 0 on SIGINT"
wait "$monj_pid" || fail "kcollctl -j monitor did not exit 0 on SIGINT"
mon_pid="" monj_pid=""
[ "$(grep -c ': created by pid [0-9]* on rxe0' "$KCOLL_OUT/monitor.log")" -ge 2 ] ||
	fail "kcollctl monitor: not 2 comm-created events: $(head -4 "$KCOLL_OUT/monitor.log")"
[ "$(grep -c 'rank [01]/2: destroyed' "$KCOLL_OUT/monitor.log")" -ge 2 ] ||
	fail "kcollctl monitor: not 2 comm-destroyed events: $(head -4 "$KCOLL_OUT/monitor.log")"
grep -q '"event":"comm_created"' "$KCOLL_OUT/monitor-json.log" ||
	fail "kcollctl -j monitor: no comm_created"
grep -q ': created by pid' "$KCOLL_OUT/kcolld.log" || fail "kcolld did not log the comm-created events"
ctl stats-after 0 -j stats
json_ok <"$KCOLL_OUT/ctl-stats-after.txt" || fail "kcollctl -j stats (after) is not JSON"
metrics >"$KCOLL_OUT/metrics-2.txt" 2>&1
ops=$(sed -n 's/^kcoll_ops_total{device="rxe0"} //p' "$KCOLL_OUT/metrics-2.txt")
[ "${ops:-0}" -gt 0 ] || fail "kcolld /metrics: rxe0 ops '$ops' after the allreduces"
log "rxe0 ops after the run: $ops"

# Module unload and reload under kcolld.
kcoll_mod_unload
wait_for "$KCOLL_OUT/kcolld.log" "kcoll module gone" 10 ||
	fail "kcolld did not notice the module going: $(tail -3 "$KCOLL_OUT/kcolld.log")"
metrics >"$KCOLL_OUT/metrics-gone.txt" 2>&1
grep -q '^kcoll_up 0$' "$KCOLL_OUT/metrics-gone.txt" || fail "kcolld /metrics without the module: no kcoll_up 0"
kcoll_mod_load
wait_for "$KCOLL_OUT/kcolld.log" "kcoll module is back" 10 ||
	fail "kcolld did not notice the module coming back: $(tail -3 "$KCOLL_OUT/kcolld.log")"
wait_for "$KCOLL_OUT/kcolld.log" "re-applying $conf" 1 || fail "kcolld: no re-apply announced"
for i in $(seq 1 50); do
	[ "$(grep -c "applied 1 of 1 tunables from $conf" "$KCOLL_OUT/kcolld.log")" -ge 2 ] && break
	sleep 0.1
done
[ "$(grep -c "applied 1 of 1 tunables from $conf" "$KCOLL_OUT/kcolld.log")" -ge 2 ] ||
	fail "kcolld did not re-apply its configuration after the reload"
[ "$(cat $SYS/chunk_bytes)" = 262144 ] ||
	fail "after the reload chunk_bytes is $(cat $SYS/chunk_bytes), not kcolld's 262144"
metrics >"$KCOLL_OUT/metrics-3.txt" 2>&1
grep -q '^kcoll_up 1$' "$KCOLL_OUT/metrics-3.txt" || fail "kcolld /metrics after the reload: no kcoll_up 1"

kill -TERM "$kcolld_pid"
wait "$kcolld_pid" || fail "kcolld did not exit 0 on SIGTERM"
grep -q 'stopping' "$KCOLL_OUT/kcolld.log" || fail "kcolld did not log its stop"
sed 's/^/[kcolld] /' "$KCOLL_OUT/kcolld.log" | head -40
kcoll_mod_unload
kcoll_finish
