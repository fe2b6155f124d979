#!/bin/bash
# make deb-test: the packages' life on a machine (root; not part of make
# check: it installs packages on this machine, and DKMS builds the module
# for every kernel, twice). Prints TAP lines, then "N passed, N failed".
#  1. apt install the four packages of make deb (build/deb): DKMS builds
#     and installs the module for every kernel with headers;
#  2. a program built against the installed libcoll-dev only (pkg-config),
#     run in two VMs (tests/vm/scenarios/installed.sh): their root is this
#     machine's, so modprobe loads the DKMS module and the program the
#     installed libcoll0 - no file of the build tree is used;
#  3. an upgrade to a newer version of the packages (the same tree built
#     as VERSION+1) keeps a changed /etc/kcoll/kcolld.conf, and DKMS holds
#     the new version's module;
#  4. apt purge: nothing of them is left (files, DKMS tree, modules,
#     configuration).
# The guests see the host's root read-only, so the packages are installed
# here rather than inside a guest; what the guest checks is what the
# installation left on the shared root.
# Usage: tools/deb-test.sh [KVER]  (the VM kernel; default the first)
# shellcheck disable=SC2086	# $pkgs: several package names on purpose
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/deb-test
debs=$top/build/deb
pkgs="kcoll-dkms libcoll0 libcoll-dev kcoll-tools"
pass=0 fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
nok() { echo "not ok - $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else nok "$what"; fi; }

[ "$(id -u)" = 0 ] || { echo "deb-test: needs root" >&2; exit 2; }
if dpkg-query -W -f='${Status}\n' $pkgs 2>/dev/null | grep -q "ok installed"; then
	echo "ok - deb-test # SKIP kcoll packages are installed on this machine already: not touching them"
	exit 0
fi
kvers=$(for d in /lib/modules/*/build; do [ -d "$d" ] && basename "$(dirname "$d")"; done | sort -V)
kver=${1:-$(echo "$kvers" | head -1)}
rm -rf "$out"
mkdir -p "$out"

purge() { apt-get purge -y -q $pkgs >"$out/purge.log" 2>&1; }
trap 'purge' EXIT

# The packages, and a second version of them for the upgrade.
"$top/tools/mkdeb.sh" "$debs" >"$out/mkdeb.log" 2>&1 || { nok "make deb"; exit 1; }
ver=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version)
rm -rf "$out/next"
mkdir -p "$out/next"
(cd "$top" && git ls-files -z --cached --others --exclude-standard |
	xargs -0 cp --parents -t "$out/next")
{
	printf 'kcoll (%s+1) unstable; urgency=medium\n\n  * deb-test: the next version.\n\n' "$ver"
	printf ' -- kcoll developers <kcoll-maintainers@example.org>  %s\n\n' "$(date -R)"
	cat "$top/debian/changelog"
} >"$out/next/debian/changelog"
(cd "$out/next" && dpkg-buildpackage -us -uc -b >"$out/next.log" 2>&1) ||
	{ nok "building version $ver+1"; exit 1; }

# 1. Install.
if apt-get install -y -q "$debs"/kcoll-dkms_"$ver"_all.deb "$debs"/libcoll0_"$ver"_*.deb \
	"$debs"/libcoll-dev_"$ver"_*.deb "$debs"/kcoll-tools_"$ver"_*.deb \
	>"$out/install.log" 2>&1; then
	ok "apt install of the four packages ($ver)"
else
	nok "apt install of the four packages ($ver) (see $out/install.log)"
	tail -20 "$out/install.log" | sed 's/^/#   /'
fi
dkms status -m kcoll >"$out/dkms-status.txt" 2>&1
for k in $kvers; do
	check "DKMS built and installed kcoll $ver for $k" \
		grep -q "kcoll/[^,]*, $k, x86_64: installed" "$out/dkms-status.txt"
	check "modinfo finds it for $k" \
		sh -c "modinfo -k '$k' -F filename kcoll | grep -q /updates/dkms/"
done
check "systemd unit installed (enabled, not started)" test -f /lib/systemd/system/kcolld.service
if command -v systemd-analyze >/dev/null; then
	systemd-analyze verify /lib/systemd/system/kcolld.service >"$out/verify.txt" 2>&1
	check "systemd-analyze verify kcolld.service" test ! -s "$out/verify.txt"
	sed 's/^/#   /' "$out/verify.txt"
fi
check "kcolld -t accepts the packaged /etc/kcoll/kcolld.conf" \
	/usr/sbin/kcolld -t -c /etc/kcoll/kcolld.conf
check "man pages: coll_allreduce(3), kcollctl(8)" \
	test -f /usr/share/man/man3/coll_allreduce.3.gz -a -f /usr/share/man/man8/kcollctl.8.gz

# 2. A program against the installed headers and library, in two VMs.
# shellcheck disable=SC2046
if cc -O2 -o "$out/installed-coll" "$top/tests/deb/installed-coll.c" \
	$(pkg-config --cflags --libs libcoll) 2>"$out/cc.log"; then
	ok "a program builds against the installed libcoll-dev (pkg-config libcoll)"
else
	nok "a program builds against the installed libcoll-dev"
	sed 's/^/#   /' "$out/cc.log"
fi
if "$top/tests/vm/vmrun.sh" -k "$kver" -n 2 -o "$out/vm" -t 900 \
	-a "$out/installed-coll" "$top/tests/vm/scenarios/installed.sh" >"$out/vm.log" 2>&1; then
	ok "2 VMs ($kver): modprobe of the DKMS module, 4 ranks of it on the installed libcoll"
else
	nok "2 VMs ($kver) with the installed packages (see $out/vm)"
	cat "$out"/vm/vm*/status 2>/dev/null | sed 's/^/#   /'
fi

# 3. Upgrade: a changed configuration stays.
echo "# deb-test: changed by the administrator" >>/etc/kcoll/kcolld.conf
if apt-get install -y -q "$out"/kcoll-dkms_"$ver"+1_all.deb "$out"/libcoll0_"$ver"+1_*.deb \
	"$out"/libcoll-dev_"$ver"+1_*.deb "$out"/kcoll-tools_"$ver"+1_*.deb \
	>"$out/upgrade.log" 2>&1; then
	ok "upgrade to $ver+1"
else
	nok "upgrade to $ver+1 (see $out/upgrade.log)"
fi
check "the upgrade kept the changed /etc/kcoll/kcolld.conf" \
	grep -q "changed by the administrator" /etc/kcoll/kcolld.conf
check "dpkg reports version $ver+1" \
	sh -c "dpkg-query -W -f='\${Version}' kcoll-tools | grep -qx '$ver+1'"
dkms status -m kcoll >"$out/dkms-status2.txt" 2>&1
for k in $kvers; do
	check "after the upgrade DKMS holds kcoll for $k" \
		grep -q "kcoll/[^,]*, $k, x86_64: installed" "$out/dkms-status2.txt"
done

# 4. Purge: nothing left.
files=$(dpkg -L $pkgs 2>/dev/null | sort -u)
trap - EXIT
if purge; then ok "apt purge of the four packages"; else nok "apt purge (see $out/purge.log)"; fi
left=""
for f in $files; do
	[ -d "$f" ] && continue
	[ -e "$f" ] && left="$left $f"
done
check "no file of the packages left" test -z "$left"
[ -z "$left" ] || echo "#   left:$left"
check "no DKMS tree left (/var/lib/dkms/kcoll, /usr/src/kcoll-*)" \
	sh -c '! ls -d /var/lib/dkms/kcoll /usr/src/kcoll-* 2>/dev/null | grep -q .'
check "no module left under /lib/modules" \
	sh -c '! find /lib/modules -name "kcoll.ko*" -path "*updates*" | grep -q .'
check "no configuration left (/etc/kcoll, /etc/default/kcolld)" \
	sh -c '! ls -d /etc/kcoll /etc/default/kcolld 2>/dev/null | grep -q .'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
