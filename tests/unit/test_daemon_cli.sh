#!/bin/bash
# SPDX-License-Identifier: MIT
# kcollctl and kcolld on the host, linked with the model of the kcoll
# netlink family (build/unit/kcollctl-fake, kcolld-fake; see
# tests/unit/kcoll_nl_fake.c for its contents): output formats, JSON,
# exit codes, error messages, configuration handling and the Prometheus
# endpoint. One "ok N - ..." line per check.
# Usage: test_daemon_cli.sh BUILD_UNIT_DIR
set -u
bin=${1:?usage: $0 BUILD_UNIT_DIR}
ctl=$bin/kcollctl-fake
kd=$bin/kcolld-fake
tmp=$(mktemp -d /tmp/kcoll-daemon-XXXXXX)
kd_pid=""
trap '[ -n "$kd_pid" ] && kill "$kd_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
n=0 fail=0
unset KC_FAKE_ABSENT KC_FAKE_UNPRIV

result() {	# name ok(0/1) [details file]
	n=$((n + 1))
	if [ "$2" = 0 ]; then
		echo "ok $n - $1"
	else
		echo "not ok $n - $1"
		[ -n "${3:-}" ] && tail -20 "$3" | sed 's/^/#   /'
		fail=$((fail + 1))
	fi
}

# check NAME WANT_RC FIXED_STRING COMMAND...: exit status and a line of
# output (stdout and stderr) containing FIXED_STRING ("" for none).
check() {
	local name=$1 want=$2 pat=$3 rc ok=1
	shift 3
	timeout 60 "$@" >"$tmp/out" 2>&1
	rc=$?
	if [ "$rc" = "$want" ] && { [ -z "$pat" ] || grep -qF -- "$pat" "$tmp/out"; }; then
		ok=0
	else
		echo "# exit $rc, wanted $want; looked for '$pat'" >>"$tmp/out"
	fi
	result "$name" $ok "$tmp/out"
}

# JSON checks use python3 where there is one.
json_check() {	# name python-expression-on-d COMMAND...
	local name=$1 expr=$2 rc
	shift 2
	if ! command -v python3 >/dev/null; then
		n=$((n + 1))
		echo "ok $n - $name # SKIP no python3"
		return
	fi
	"$@" >"$tmp/json" 2>&1
	python3 -c "import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if ($expr) else 1)" "$tmp/json" >"$tmp/json.py" 2>&1
	rc=$?
	cat "$tmp/json.py" >>"$tmp/json"
	result "$name" $rc "$tmp/json"
}

check "dev lists both devices" 0 \
	"3: rxe0: node_guid 5054:00ff:fe12:3456 port ACTIVE comms 2" "$ctl" dev
check "dev counters" 0 "    ops 11 bytes 4096 errors 1 timeouts 1" "$ctl" dev show
check "dev NAME filters" 0 "port DOWN" "$ctl" dev show mlx5_0
check "dev: a device in the devices tunable" 0 "comms 2 enabled" "$ctl" dev
check "dev: a device not in the devices tunable" 0 "comms 0 disabled" "$ctl" dev
check "dev unknown NAME fails" 1 "no device 'ib9' in use by kcoll" \
	"$ctl" dev show ib9
check "comm summary" 0 \
	"comm 7 uid 0x1122334455667788 pid 4242 rank 1/4 state ready dev rxe0 inflight 2" \
	"$ctl" comm
check "comm -d: IPv4-mapped member" 0 \
	"    member rank 0 10.9.0.1 port 18515 local 0 connected" "$ctl" -d comm
check "comm -d: IPv6 member" 0 \
	"    member rank 2 fe80::1 port 18515 local 0 disconnected" "$ctl" -d comm
check "comm -d: operation in flight" 0 \
	"    op seq 17 allreduce algo ring prio 0 bytes 1048576 age 1200ms timeout 5000ms missing 2,3" \
	"$ctl" -d comm
check "comm -d: last error" 0 \
	"    last error seq 12 allgather: Connection timed out (-110), missing ranks 2" \
	"$ctl" -d comm show 7
check "comm ID" 0 "comm 9 uid 0x0000000000abcdef pid 4343 rank 0/2 state connecting" \
	"$ctl" comm 9
check "comm unknown ID" 1 "kcollctl: no communicator 5" "$ctl" comm 5
check "comm bad ID is usage" 2 "'x7' is not a communicator id" "$ctl" comm x7
check "stats node line" 0 \
	"node: ops 11 bytes 4096 errors 1 timeouts 1 inflight 2 contexts 3 comms 2" \
	"$ctl" stats
check "stats histogram" 0 "    latency 64-128us: 7, 128-256us: 3, 1.02-2.05ms: 1" \
	"$ctl" stats
check "stats empty histogram" 0 "    latency no samples" "$ctl" stats
check "stats profile" 0 "    profile 10 collectives, 2.0 phases, per collective (us): total 500 = queued 0 + wait 200 + move 250 (land 0) + sigs 0 + settle 0 + other 50" \
	"$ctl" stats
check "get all" 0 "algo/allreduce = auto" "$ctl" get
check "get KNOB prints the value only" 0 "" \
	bash -c "[ \"\$('$ctl' get chunk_bytes)\" = 65536 ]"
check "get unknown" 1 "kcollctl: unknown tunable 'nope'" "$ctl" get nope
check "set" 0 "" "$ctl" set chunk_bytes 131072
check "set out of range: kernel's reason" 1 \
	"kcollctl: set chunk_bytes: Invalid argument (chunk_bytes: 4096 to 4194304)" \
	"$ctl" set chunk_bytes 1
check "set without CAP_NET_ADMIN" 1 \
	"kcollctl: set chunk_bytes: Operation not permitted (needs CAP_NET_ADMIN)" \
	env KC_FAKE_UNPRIV=1 "$ctl" set chunk_bytes 8192
check "set unknown" 1 "kcollctl: unknown tunable 'nope'" "$ctl" set nope 1
check "set without value is usage" 2 "set: expected KNOB VALUE" "$ctl" set chunk_bytes
check "set too many arguments is usage" 2 "set: too many arguments" "$ctl" set a b c
check "module not loaded" 1 \
	"kcollctl: kcoll module not loaded (generic netlink family 'kcoll' not found)" \
	env KC_FAKE_ABSENT=1 "$ctl" stats
check "unknown command is usage" 2 "unknown or ambiguous command 'frob'" "$ctl" frob
check "ambiguous prefix is usage" 2 "unknown or ambiguous command 's'" "$ctl" s
check "unique prefix" 0 "node: ops 11" "$ctl" st
check "bad option is usage" 2 "" "$ctl" -Z dev
check "no command is usage" 2 "Usage: kcollctl" "$ctl"
check "-h" 0 "Usage: kcollctl" "$ctl" -h
check "-V" 0 "kcollctl (kcoll) unit, netlink family kcoll version 1" "$ctl" -V
check "-j is one line" 0 "" bash -c "[ \$('$ctl' -j stats | wc -l) = 1 ]"
check "-p is indented" 0 '  "node": {' "$ctl" -p stats

check "monitor without the module" 1 "kcoll module not loaded" \
	env KC_FAKE_ABSENT=1 "$ctl" monitor
"$ctl" monitor >"$tmp/mon" 2>&1 &
mon=$!
sleep 0.5
kill -INT "$mon"
wait "$mon"
result "monitor stops with status 0 on SIGINT" $? "$tmp/mon"

json_check "-j dev" 'd[0]["name"] == "rxe0" and d[0]["node_guid"] == "5054:00ff:fe12:3456" and d[1]["port_state"] == "DOWN" and d[0]["enabled"] is True and d[1]["enabled"] is False' \
	"$ctl" -j dev
json_check "-j stats" 'd["node"]["inflight"] == 2 and d["node"]["latency"][0] == {"from_us": 64, "to_us": 128, "count": 7} and d["devices"][1]["stats"]["ops"] == 0 and d["node"]["profile"]["wait_ns"] == 2000000' \
	"$ctl" -j stats
json_check "-j -d comm" 'd[0]["members"][2]["addr"] == "fe80::1" and d[0]["members"][2]["connected"] is False and d[0]["ops"][0]["missing"] == [2, 3] and d[0]["last_error"]["error"] == "Connection timed out" and "members" in d[1]' \
	"$ctl" -j -d comm
json_check "-j comm without -d" '"members" not in d[0] and d[0]["uid"] == "0x1122334455667788"' \
	"$ctl" -j comm
json_check "-p get" 'd == {"chunk_bytes": "65536", "op_timeout_ms": "0", "prio_sched": "1", "algo/allreduce": "auto", "devices": "*"}' \
	"$ctl" -p get
json_check "-j get KNOB" 'd == {"prio_sched": "1"}' "$ctl" -j get prio_sched

# kcolld: configuration.
cat >"$tmp/good.conf" <<'CONF'
# kcolld test
chunk_bytes = 131072
devices = rxe0, mlx9
algo/allreduce = ring   # forced
CONF
printf 'chunk_bytes = 131072\n\nnot_a_knob = 1\nprio_sched = 5\n' >"$tmp/bad-values.conf"
printf 'prio_sched = 1\nmetrics_port = 99999\n' >"$tmp/bad-syntax.conf"
check "kcolld -t" 0 "$tmp/good.conf: OK (2 tunables)" "$kd" -t -c "$tmp/good.conf"
check "kcolld -t: error names file and line" 1 \
	"$tmp/bad-syntax.conf:2: metrics_port: '99999' is not a port number (1-65535)" \
	"$kd" -t -c "$tmp/bad-syntax.conf"
check "kcolld -c missing file" 1 "$tmp/none.conf: No such file or directory" \
	"$kd" -t -c "$tmp/none.conf"
check "kcolld bad port is usage" 2 "bad port" "$kd" -p 70000
check "kcolld --once applies the configuration" 0 \
	"applied 2 of 2 tunables from $tmp/good.conf" "$kd" --once -c "$tmp/good.conf"
check "kcolld --once sets the devices tunable" 0 \
	"new communicators use only rxe0,mlx9 (devices, $tmp/good.conf:3)" \
	"$kd" --once -c "$tmp/good.conf"
check "kcolld --once warns about an absent device" 0 \
	"$tmp/good.conf:3: device mlx9 is not in use by kcoll" "$kd" --once -c "$tmp/good.conf"
check "kcolld --once prints the metrics" 0 'kcoll_ops_total{device="rxe0"} 11' \
	"$kd" --once -c "$tmp/good.conf"
check "kcolld --once: unknown tunable, with its line" 1 \
	"$tmp/bad-values.conf:3: not_a_knob = 1: no such tunable" \
	"$kd" --once -c "$tmp/bad-values.conf"
check "kcolld --once: refused value, kernel's reason" 1 \
	"$tmp/bad-values.conf:4: prio_sched = 5: Invalid argument (prio_sched: 0 to 1)" \
	"$kd" --once -c "$tmp/bad-values.conf"
check "kcolld --once: partial application counted" 1 \
	"applied 1 of 3 tunables from $tmp/bad-values.conf" \
	"$kd" --once -c "$tmp/bad-values.conf"
check "kcolld --once without the module" 1 "kcoll_up 0" \
	env KC_FAKE_ABSENT=1 "$kd" --once -c "$tmp/good.conf"
check "kcolld: journal priority prefixes" 1 \
	"<4>kcoll module not loaded (generic netlink family 'kcoll' not found)" \
	env KC_FAKE_ABSENT=1 "$kd" --once -c "$tmp/good.conf"

# kcolld: the HTTP endpoint, SIGHUP, SIGTERM.
http_get() {	# port path [method]: the whole response on stdout
	local port=$1 path=$2 method=${3:-GET}
	exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf '%s %s HTTP/1.1\r\nHost: x\r\n\r\n' "$method" "$path" >&3
	timeout 10 cat <&3
	exec 3<&-
}
port=0
for _ in 1 2 3 4 5; do
	port=$((20000 + RANDOM % 30000))
	"$kd" -f -c "$tmp/good.conf" -p "$port" 2>"$tmp/kd.log" &
	kd_pid=$!
	for _ in $(seq 1 50); do
		grep -q "starting; metrics on 127.0.0.1 port $port\$" "$tmp/kd.log" && break
		kill -0 "$kd_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$kd_pid" 2>/dev/null && break
	wait "$kd_pid"
	kd_pid=""
done
if [ -z "$kd_pid" ]; then
	result "kcolld serves HTTP (could not start)" 1 "$tmp/kd.log"
else
	http_get "$port" /metrics >"$tmp/http" 2>&1
	grep -q $'^HTTP/1.1 200 OK\r$' "$tmp/http" &&
		grep -q $'^Content-Type: text/plain; version=0.0.4; charset=utf-8\r$' "$tmp/http" &&
		grep -q '^kcoll_up 1$' "$tmp/http" &&
		grep -q '^kcoll_op_latency_seconds_bucket{le="+Inf"} 11$' "$tmp/http"
	result "kcolld GET /metrics" $? "$tmp/http"
	http_get "$port" /nothing >"$tmp/http" 2>&1
	grep -q $'^HTTP/1.1 404 Not Found\r$' "$tmp/http"
	result "kcolld 404" $? "$tmp/http"
	http_get "$port" /metrics POST >"$tmp/http" 2>&1
	grep -q $'^HTTP/1.1 405 Method Not Allowed\r$' "$tmp/http"
	result "kcolld 405" $? "$tmp/http"
	http_get "$port" /metrics HEAD >"$tmp/http" 2>&1
	grep -q $'^HTTP/1.1 200 OK\r$' "$tmp/http" && ! grep -q '^kcoll_up' "$tmp/http"
	result "kcolld HEAD has no body" $? "$tmp/http"
	# Connections that send nothing do not keep a scraper out: the
	# longest silent one gives way to a new one (until 2026-12-05 each
	# held its slot for 10 s, and 16 of them refused every scrape).
	idle=()
	for _ in $(seq 1 16); do
		exec {fd}<>"/dev/tcp/127.0.0.1/$port" && idle+=("$fd")
	done
	sleep 0.3
	http_get "$port" /metrics >"$tmp/http" 2>&1
	for fd in "${idle[@]}"; do exec {fd}<&-; done
	grep -q $'^HTTP/1.1 200 OK\r$' "$tmp/http"
	result "kcolld answers beside 16 silent connections" $? "$tmp/http"
	cp "$tmp/bad-syntax.conf" "$tmp/good.conf"
	kill -HUP "$kd_pid"
	for _ in $(seq 1 50); do
		grep -q "keeping the previous configuration" "$tmp/kd.log" && break
		sleep 0.1
	done
	grep -q "good.conf:2: metrics_port: '99999' is not a port number" "$tmp/kd.log" &&
		grep -q "keeping the previous configuration" "$tmp/kd.log"
	result "kcolld SIGHUP with a bad file keeps the old one" $? "$tmp/kd.log"
	printf 'prio_sched = 0\n' >"$tmp/good.conf"
	kill -HUP "$kd_pid"
	for _ in $(seq 1 50); do
		grep -q "applied 1 of 1 tunables" "$tmp/kd.log" && break
		sleep 0.1
	done
	grep -q "applied 1 of 1 tunables from $tmp/good.conf" "$tmp/kd.log"
	result "kcolld SIGHUP re-applies" $? "$tmp/kd.log"
	kill -TERM "$kd_pid"
	wait "$kd_pid"
	rc=$?
	kd_pid=""
	[ $rc = 0 ] && grep -q "<5>Terminated: stopping" "$tmp/kd.log"
	result "kcolld stops cleanly on SIGTERM" $? "$tmp/kd.log"
fi

# The metrics port held by someone else (any local user can take it: it
# is unprivileged): the configuration is applied all the same, and the
# port is taken once it is free (until 2026-12-06 kcolld exited before
# applying anything, and its unit's restarts did the same).
if ! command -v python3 >/dev/null; then
	echo "ok $((n + 1)) # SKIP kcolld with its port taken: no python3 to hold the port"
	n=$((n + 1))
else
for _ in 1 2 3 4 5; do	# a random port someone else has: another
	port=$((20000 + RANDOM % 30000))
	python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
print("held", flush=True); time.sleep(60)' "$port" >"$tmp/holder.out" 2>&1 &
	holder=$!
	for _ in $(seq 1 50); do
		grep -q held "$tmp/holder.out" && break
		kill -0 "$holder" 2>/dev/null || break
		sleep 0.1
	done
	grep -q held "$tmp/holder.out" && break
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
done
grep -q held "$tmp/holder.out" || result "a port held for kcolld" 1 "$tmp/holder.out"
printf 'prio_sched = 1\n' >"$tmp/held.conf"
"$kd" -f -c "$tmp/held.conf" -p "$port" 2>"$tmp/kd2.log" &
kd_pid=$!
for _ in $(seq 1 50); do
	grep -q "applied 1 of 1 tunables" "$tmp/kd2.log" && break
	sleep 0.1
done
kill -0 "$kd_pid" 2>/dev/null &&
	grep -q "applied 1 of 1 tunables from $tmp/held.conf" "$tmp/kd2.log" &&
	grep -q "cannot listen on 127.0.0.1 port $port: Address already in use; trying again every 5 s" "$tmp/kd2.log" &&
	grep -q "starting; metrics on 127.0.0.1 port $port once it is free" "$tmp/kd2.log"
result "kcolld applies its configuration while the metrics port is taken" $? "$tmp/kd2.log"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
for _ in $(seq 1 80); do
	grep -q "metrics on 127.0.0.1 port $port\$" "$tmp/kd2.log" && break
	sleep 0.1
done
http_get "$port" /metrics >"$tmp/http" 2>&1
grep -q $'^HTTP/1.1 200 OK\r$' "$tmp/http" && grep -q '^kcoll_up 1$' "$tmp/http"
result "kcolld serves metrics once the port is free" $? "$tmp/kd2.log"
kill -TERM "$kd_pid"
wait "$kd_pid"
kd_pid=""
fi

echo "test_daemon_cli: $((n - fail)) passed, $fail failed"
[ $fail = 0 ]
