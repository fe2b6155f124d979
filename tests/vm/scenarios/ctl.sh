#!/bin/bash
# The control plane against the real module, in one VM: kcollctl (dev,
# stats, get/set with and without CAP_NET_ADMIN, out-of-range values, the
# devices tunable shown per device, comm while 2 local ranks run,
# monitor), the fault events a subscriber sees (an operation timed out,
# naming the rank that never came, also in kcollctl comm and libcoll's
# report while the communicator lives; a peer lost to SIGKILL; rxe0
# removed and added again) and kcolld (configuration applied, listen_port
# and devices included: the ranks then connect on the new port;
# Prometheus endpoint; module unloaded and loaded again under it: it must
# notice both, re-subscribe and re-apply its configuration).
#
#   tests/vm/vmrun.sh -k KVER -n 1 -o build/vmtest/ctl -t 600 \
#       tests/vm/scenarios/ctl.sh
#
# Logs: kcolld.log, monitor.log, monitor-faults.log, perf-rank<r>.log,
# timeout-rank<r>.log, die-rank<r>.log and one file per check
# under $KCOLL_OUT.
. "$kcoll_top/tests/vm/guest-lib.sh"

CTL=$KCOLL_TOP/build/daemon/kcollctl
KCOLLD=$KCOLL_TOP/build/daemon/kcolld
PERF=$KCOLL_TOP/build/tools/kcoll-perf
COLLTEST=$KCOLL_TOP/build/tests/bin/kcoll-colltest
SYS=/sys/class/misc/kcoll
PORT=9464
kcolld_pid="" mon_pid="" monj_pid=""

kcoll_net_up
kcoll_rxe_up
kcoll_mod_load
for b in "$CTL" "$KCOLLD" "$PERF" "$COLLTEST"; do
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

# wait_re FILE EXTENDED_REGEX SECONDS
wait_re() {
	local i
	for i in $(seq 1 $(($3 * 10))); do
		grep -qE -- "$2" "$1" 2>/dev/null && return 0
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
listen_port = 18516
EOF
"$KCOLLD" -f -c $conf >"$KCOLL_OUT/kcolld.log" 2>&1 &
kcolld_pid=$!
wait_for "$KCOLL_OUT/kcolld.log" "applied 2 of 2 tunables from $conf" 20 ||
	fail "kcolld did not apply its configuration: $(tail -3 "$KCOLL_OUT/kcolld.log")"
[ "$(cat $SYS/chunk_bytes)" = 262144 ] || fail "kcolld: chunk_bytes is $(cat $SYS/chunk_bytes), not 262144"
grep -q 'device rxe0 is not in use' "$KCOLL_OUT/kcolld.log" && fail "kcolld does not find rxe0"
# listen_port moved the listener; devices restricted kcoll to rxe0.
[ "$(cat $SYS/listen_port)" = 18516 ] || fail "kcolld: listen_port is $(cat $SYS/listen_port), not 18516"
wait_for "$KCOLL_OUT/kcolld.log" "new communicators use only rxe0 (devices, $conf:3)" 5 ||
	fail "kcolld did not set the devices tunable: $(tail -3 "$KCOLL_OUT/kcolld.log")"
[ "$(cat $SYS/devices)" = rxe0 ] || fail "kcolld: sysfs devices is '$(cat $SYS/devices)', not rxe0"
dmesg | grep -q 'kcoll: listening on port 18516' || fail "the module did not log its new listen port"
ctl dev-enabled 0 dev
grep -q '^[0-9]*: rxe0: .* enabled' "$KCOLL_OUT/ctl-dev-enabled.txt" ||
	fail "kcollctl dev: rxe0 not enabled: $(cat "$KCOLL_OUT/ctl-dev-enabled.txt")"
# Out of the devices tunable, rxe0 shows disabled, as text and JSON.
ctl set-devices 0 set devices nosuch0
ctl dev-disabled 0 dev
grep -q '^[0-9]*: rxe0: .* disabled' "$KCOLL_OUT/ctl-dev-disabled.txt" ||
	fail "kcollctl dev: rxe0 not disabled: $(cat "$KCOLL_OUT/ctl-dev-disabled.txt")"
ctl dev-disabled-json 0 -j dev
grep -q '"enabled":false' "$KCOLL_OUT/ctl-dev-disabled-json.txt" ||
	fail "kcollctl -j dev: rxe0 not \"enabled\":false: $(cat "$KCOLL_OUT/ctl-dev-disabled-json.txt")"
ctl set-devices-bad 1 set devices 'rxe0 *'
ctl set-devices-back 0 set devices rxe0
[ "$(cat $SYS/devices)" = rxe0 ] || fail "kcollctl set devices rxe0: sysfs says '$(cat $SYS/devices)'"
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
		-M -c allreduce -b 1M -e 1M -n 1000 -w 2 >"$KCOLL_OUT/perf-rank$r.log" 2>&1 &
	pids+=($!)
done
# A communicator shows while the ranks run (unless they are done first).
seen=0
while kill -0 "${pids[0]}" 2>/dev/null; do
	"$CTL" comm >"$KCOLL_OUT/ctl-comm-running.txt" 2>&1
	if grep -q 'rank [01]/2 state ready dev rxe0' "$KCOLL_OUT/ctl-comm-running.txt"; then
		"$CTL" -d comm >"$KCOLL_OUT/ctl-comm-details.txt" 2>&1
		"$CTL" -j -d comm >"$KCOLL_OUT/ctl-comm-json.txt" 2>&1
		# Still there for both (local ranks are quick: the run
		# may end in between; then look again while it lasts).
		if grep -q 'rank [01]/2 state ready' "$KCOLL_OUT/ctl-comm-details.txt" &&
			grep -q '"rank"' "$KCOLL_OUT/ctl-comm-json.txt"; then
			seen=1
			break
		fi
	fi
	sleep 0.1
done
for i in 0 1; do
	wait "${pids[$i]}" || fail "kcoll-perf rank $i failed (perf-rank$i.log)"
done
if [ $seen = 1 ]; then
	grep -q "member rank 1 $KCOLL_IP port 18516 local [01] connected" \
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
# The module's profile of those collectives, through netlink: kcollctl
# and kcolld's metrics; its parts add up to at most its total.
python3 - "$KCOLL_OUT/ctl-stats-after.txt" <<'PY' || fail "kcollctl -j stats: no sound profile"
import json, sys
d = json.load(open(sys.argv[1]))
p = d["node"]["profile"]
# rxe0 ran every one of them: its own profile is the node's.
assert d["devices"][0]["stats"]["profile"]["ops"] == p["ops"], d["devices"]
parts = sum(p[k] for k in ("queued_ns", "wait_ns", "move_ns", "sigs_ns", "settle_ns"))
assert p["ops"] > 0 and p["phases"] >= p["ops"], p
assert 0 < parts <= p["total_ns"] and p["land_ns"] <= p["wait_ns"] + p["move_ns"], p
PY
ctl stats-profile 0 stats
grep -qE '^    profile [0-9]+ collectives, [0-9.]+ phases, per collective \(us\): total [0-9]+ = queued' \
	"$KCOLL_OUT/ctl-stats-profile.txt" || fail "kcollctl stats: no profile line"
grep -q '^kcoll_collective_seconds_total{part="wait"} ' "$KCOLL_OUT/metrics-2.txt" ||
	fail "kcolld /metrics: no kcoll_collective_seconds_total"

# ------------------------------------------------------------ fault events
"$CTL" monitor >"$KCOLL_OUT/monitor-faults.log" 2>&1 &
mon_pid=$!
"$CTL" -j monitor >"$KCOLL_OUT/monitor-faults-json.log" 2>&1 &
monj_pid=$!
sleep 1
# ranks NAME N PORT ARGS...: N local ranks of kcoll-colltest, pids in $pids.
ranks() {
	local name=$1 n=$2 port=$3 r
	shift 3
	pids=()
	for r in $(seq 0 $((n - 1))); do
		KCOLL_NRANKS=$n KCOLL_RANK=$r KCOLL_ROOT=$KCOLL_IP:$port \
			timeout -k 10 300 "$COLLTEST" "$@" >"$KCOLL_OUT/$name-rank$r.log" 2>&1 &
		pids+=($!)
	done
}

# An operation times out: 3 ranks, rank 2 never joins the allreduce (2 s
# timeout). While the ranks keep their communicators ($hold exists),
# kcollctl must name rank 2 as missing in each one's last error, and
# libcoll's report did (kcoll-colltest -T checks it and prints it).
hold=/tmp/kcoll-hold
touch $hold
KCOLL_TEST_HOLD=$hold ranks timeout 3 29701 -T
for r in 0 1; do
	wait_for "$KCOLL_OUT/timeout-rank$r.log" "report:" 60 ||
		fail "timeout: rank $r has no report after 60 s: $(tail -3 "$KCOLL_OUT/timeout-rank$r.log")"
	grep -q "report: .*timeout.*; rank 2 missing; waiting for 1 rank(s): 2$" "$KCOLL_OUT/timeout-rank$r.log" ||
		fail "timeout: libcoll's report of rank $r does not name rank 2: $(grep report: "$KCOLL_OUT/timeout-rank$r.log")"
done
ctl comm-timeout 0 -d comm
n=$(grep -cE '^    last error seq [0-9]+ allreduce: Connection timed out \(-110\), missing ranks 2$' \
	"$KCOLL_OUT/ctl-comm-timeout.txt")
[ "$n" = 2 ] || fail "kcollctl -d comm: $n of 2 timed-out communicators name rank 2 as missing: $(cat "$KCOLL_OUT/ctl-comm-timeout.txt")"
# Without -d too: the last failure and who never arrived.
ctl comm-timeout-plain 0 comm
n=$(grep -cE '^    last error seq [0-9]+ allreduce: Connection timed out \(-110\), missing ranks 2$' \
	"$KCOLL_OUT/ctl-comm-timeout-plain.txt")
[ "$n" = 2 ] || fail "kcollctl comm: $n of 2 timed-out communicators name rank 2 as missing: $(cat "$KCOLL_OUT/ctl-comm-timeout-plain.txt")"
# The same for one communicator by id, as text and as JSON.
id=$(sed -n 's|^comm \([0-9]*\) uid .* rank 0/3 .*|\1|p' "$KCOLL_OUT/ctl-comm-timeout.txt")
[ -n "$id" ] || fail "kcollctl comm: no rank 0/3 communicator: $(cat "$KCOLL_OUT/ctl-comm-timeout.txt")"
ctl comm-show-timeout 0 -d comm show "$id"
grep -q 'missing ranks 2$' "$KCOLL_OUT/ctl-comm-show-timeout.txt" ||
	fail "kcollctl -d comm show $id: no missing rank 2: $(cat "$KCOLL_OUT/ctl-comm-show-timeout.txt")"
ctl comm-show-timeout-json 0 -j -d comm show "$id"
if command -v python3 >/dev/null; then
	python3 -c 'import json, sys
c = json.load(sys.stdin)[0]
le = c["last_error"]
sys.exit(not (c["rank"] == 0 and le["missing"] == [2] and le["errno"] == -110))' \
		<"$KCOLL_OUT/ctl-comm-show-timeout-json.txt" ||
		fail "kcollctl -j -d comm show $id: last_error.missing is not [2]: $(cat "$KCOLL_OUT/ctl-comm-show-timeout-json.txt")"
else
	grep -qE '"missing": ?\[ ?2 ?\]' "$KCOLL_OUT/ctl-comm-show-timeout-json.txt" ||
		fail "kcollctl -j -d comm show $id: no \"missing\": [2]"
fi
rm -f $hold
for r in 0 1 2; do
	wait "${pids[$r]}" || fail "timeout: rank $r failed: $(grep -E '^(not )?ok' "$KCOLL_OUT/timeout-rank$r.log")"
done
# The first rank whose timer fires reports it (its ABORT ends the other's).
wait_re "$KCOLL_OUT/monitor-faults.log" "rank [01]/3: op [0-9]+ allreduce timed out after 2000 ms, missing ranks 2$" 10 ||
	fail "kcollctl monitor: no timeout event naming rank 2: $(grep 'timed out' "$KCOLL_OUT/monitor-faults.log")"
grep -q "timed out .*missing ranks 2" "$KCOLL_OUT/kcolld.log" ||
	fail "kcolld did not log the timeout event"

# A peer dies of SIGKILL in the middle of an allreduce: rank 0 is told,
# and so is a subscriber, with the rank that died.
KCOLL_TEST_DIE="kill" ranks die 2 29702 -X
for r in 0 1; do
	wait "${pids[$r]}" || fail "die: rank $r failed: $(grep -E '^(not )?ok' "$KCOLL_OUT/die-rank$r.log")"
done
grep -q 'died of SIGKILL as planned' "$KCOLL_OUT/die-rank1.log" || fail "die: rank 1 did not die of SIGKILL"
wait_for "$KCOLL_OUT/monitor-faults.log" "rank 0/2: lost peer rank 1" 10 ||
	fail "kcollctl monitor: no peer-lost event naming rank 1: $(grep lost "$KCOLL_OUT/monitor-faults.log")"

# rxe0 goes away and comes back (nothing uses it now).
ctl dev-before 0 dev
idx=$(sed -n 's/^\([0-9]*\): rxe0: .*/\1/p' "$KCOLL_OUT/ctl-dev-before.txt")
rdma link delete rxe0 || fail "rdma link delete rxe0"
wait_for "$KCOLL_OUT/monitor-faults.log" "device rxe0 (index $idx) removed" 10 ||
	fail "kcollctl monitor: no removal of rxe0 (index $idx): $(grep device "$KCOLL_OUT/monitor-faults.log")"
ctl dev-none 0 dev
grep -q 'rxe0' "$KCOLL_OUT/ctl-dev-none.txt" && fail "kcollctl dev still lists rxe0 after its removal"
kcoll_rxe_up || fail "rxe0 did not come back"
wait_re "$KCOLL_OUT/monitor-faults.log" "device rxe0 \(index [0-9]+\) added$" 10 ||
	fail "kcollctl monitor: no addition of rxe0: $(grep device "$KCOLL_OUT/monitor-faults.log")"
grep -q '"event":"dev_removed"' "$KCOLL_OUT/monitor-faults-json.log" &&
	grep -q '"event":"dev_added"' "$KCOLL_OUT/monitor-faults-json.log" &&
	grep -q '"event":"op_timeout"' "$KCOLL_OUT/monitor-faults-json.log" &&
	grep -q '"event":"peer_lost"' "$KCOLL_OUT/monitor-faults-json.log" ||
	fail "kcollctl -j monitor misses a fault event: $(cut -c1-60 "$KCOLL_OUT/monitor-faults-json.log")"
ctl dev-back 0 dev
grep -q '^[0-9]*: rxe0: .*port ACTIVE' "$KCOLL_OUT/ctl-dev-back.txt" ||
	fail "kcollctl dev: rxe0 not back ACTIVE: $(cat "$KCOLL_OUT/ctl-dev-back.txt")"
kill -INT "$mon_pid" "$monj_pid"
wait "$mon_pid" || fail "kcollctl monitor (faults) did not exit 0 on SIGINT"
wait "$monj_pid" || fail "kcollctl -j monitor (faults) did not exit 0 on SIGINT"
mon_pid="" monj_pid=""
sed 's/^/[monitor] /' "$KCOLL_OUT/monitor-faults.log" | grep -v 'created\|destroyed'

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
	[ "$(grep -c "applied 2 of 2 tunables from $conf" "$KCOLL_OUT/kcolld.log")" -ge 2 ] && break
	sleep 0.1
done
[ "$(grep -c "applied 2 of 2 tunables from $conf" "$KCOLL_OUT/kcolld.log")" -ge 2 ] ||
	fail "kcolld did not re-apply its configuration after the reload"
[ "$(cat $SYS/chunk_bytes)" = 262144 ] ||
	fail "after the reload chunk_bytes is $(cat $SYS/chunk_bytes), not kcolld's 262144"
[ "$(cat $SYS/listen_port)" = 18516 ] ||
	fail "after the reload listen_port is $(cat $SYS/listen_port), not kcolld's 18516"
wait_for "$SYS/devices" rxe0 5 ||
	fail "after the reload devices is '$(cat $SYS/devices)', not kcolld's rxe0"
metrics >"$KCOLL_OUT/metrics-3.txt" 2>&1
grep -q '^kcoll_up 1$' "$KCOLL_OUT/metrics-3.txt" || fail "kcolld /metrics after the reload: no kcoll_up 1"

kill -TERM "$kcolld_pid"
wait "$kcolld_pid" || fail "kcolld did not exit 0 on SIGTERM"
grep -q 'stopping' "$KCOLL_OUT/kcolld.log" || fail "kcolld did not log its stop"
sed 's/^/[kcolld] /' "$KCOLL_OUT/kcolld.log" | head -40
kcoll_mod_unload
kcoll_finish
