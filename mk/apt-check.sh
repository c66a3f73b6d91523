#!/bin/bash
# Prove that the project's package set-up survives a broken apt source and
# leaves the host's package configuration as it found it (make apt-check,
# also run by make check).
#
# Through a private apt configuration (APT_CONFIG: the host's sources plus a
# file: source that does not exist), so that every "apt-get update" fails:
#  1. mk/deps.sh resolves every package it installs (simulated, in a private
#     state that mirrors the host's: nothing is installed or marked);
#  2. mk/busybox32.sh fetches busybox-static:i386 into a scratch build folder;
#  3. mk/qemu.sh and mk/gdb.sh fetch the pinned QEMU and gdb source packages
#     there;
#  4. a package that does not exist fails, named in the error;
# and afterwards /etc/apt and dpkg's foreign architectures are unchanged.
# Each step must also show the broken source's failure, or the check proves
# nothing.  Every apt call works in a private state under a scratch folder:
# the check needs no root and changes nothing of the host's apt state.  It
# needs the network the host's apt sources need, and downloads about 85 MB
# (indexes, busybox, the QEMU and gdb sources).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

APT_WHO=apt-check
. "$top/mk/apt.sh"

tmp=$(mktemp -d /tmp/ds-apt-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# apt's _apt sandbox (when root) must get through to the private states.
chmod 755 "$tmp"
failed=0

ok() { echo "apt-check: ok: $*"; }
bad() { echo "apt-check: FAIL: $*" >&2; failed=1; }

# Every entry under /etc/apt with its type, size, time and link target:
# readable without root (auth.conf.d is not), and it sees new folders and
# links too.
etc_apt_digest() {
	find /etc/apt -xdev -printf '%p %y %s %T@ %l\n' | LC_ALL=C sort | sha256sum
}

# run <log> <command...>: run, keeping stdout and stderr in <log>.
run() {
	local log=$1

	shift
	"$@" >"$log" 2>&1
}

# saw_broken <log>: did apt meet the broken source in that step?
saw_broken() {
	grep -q 'nonexistent/ds-apt-check' "$1"
}

before_etc=$(etc_apt_digest)
before_arch=$(dpkg --print-foreign-architectures | paste -sd' ')

# --- the broken source, through a private apt configuration -------------------
eval "$(apt-config shell SL Dir::Etc::sourcelist/f SP Dir::Etc::sourceparts/d)"
parts=$tmp/sources.list.d
mkdir -p "$parts"
for f in "$SP"/*.list "$SP"/*.sources; do
	[ -e "$f" ] && ln -s "$f" "$parts/"
done
cat >"$parts/zz-ds-apt-check-broken.sources" <<-EOF
# mk/apt-check.sh: a source that cannot be fetched.
Types: deb
URIs: file:/nonexistent/ds-apt-check
Suites: stable
Components: main
EOF
cat >"$tmp/apt.conf" <<-EOF
Dir::Etc::sourcelist "$SL";
Dir::Etc::sourceparts "$parts";
EOF
export APT_CONFIG=$tmp/apt.conf
export BUILD=$tmp/build
# The check fails fast: one retry, a second apart.
export APT_BACKOFF=1

# --- 1. deps ---------------------------------------------------------------------
if run "$tmp/deps.log" env DEPS_SIMULATE="$tmp/deps-state" "$top/mk/deps.sh"; then
	if saw_broken "$tmp/deps.log"; then
		ok "deps: every package resolves although apt-get update failed"
	else
		bad "deps: the broken source did not take part"; cat "$tmp/deps.log"
	fi
else
	bad "deps failed:"; cat "$tmp/deps.log"
fi

# --- 2. busybox-static:i386 -------------------------------------------------------
if run "$tmp/busybox.log" "$top/mk/busybox32.sh" "$tmp/busybox32" &&
	[ -x "$tmp/busybox32/busybox" ]; then
	if saw_broken "$tmp/busybox.log"; then
		ok "busybox32: busybox-static:i386 fetched although apt-get update failed"
	else
		bad "busybox32: the broken source did not take part"; cat "$tmp/busybox.log"
	fi
else
	bad "busybox32 failed:"; cat "$tmp/busybox.log"
fi

# --- 3. the QEMU and gdb source packages --------------------------------------------
# check_source <name> <script> <VAR>: <script> with <VAR>_FETCH_ONLY=1 fetches
# <name>'s source package although apt-get update failed.
check_source() {
	local name=$1 script=$2 var=$3 log=$tmp/$1.log

	if run "$log" env "${var}_FETCH_ONLY=1" "$top/mk/$script" &&
		ls "$BUILD/$name-src/${name}_"*.dsc >/dev/null 2>&1; then
		if saw_broken "$log"; then
			ok "$name: $(basename "$BUILD/$name-src/${name}_"*.dsc) fetched although apt-get update failed"
		else
			bad "$name: the broken source did not take part"; cat "$log"
		fi
	else
		bad "$name source fetch failed:"; cat "$log"
	fi
}
check_source qemu qemu.sh QEMU
check_source gdb gdb.sh GDB

# --- 4. a missing package is the error, and named -----------------------------------
missing=ds-apt-check-no-such-package
# A subshell: apt_retry ends the shell it runs in when it gives up.
if (apt_retry "package $missing" apt-get -c "$tmp/deps-state/apt.conf" install -s -q "$missing") \
	>"$tmp/missing.log" 2>&1; then
	bad "installing $missing succeeded"
elif grep -q "could not get package $missing" "$tmp/missing.log" &&
	grep -q "Unable to locate package $missing" "$tmp/missing.log"; then
	ok "a package that does not exist fails with its name and apt's error"
else
	bad "the error for $missing does not name it or show apt's error:"; cat "$tmp/missing.log"
fi

# --- the host as it was ---------------------------------------------------------------
if [ "$(etc_apt_digest)" = "$before_etc" ]; then
	ok "nothing under /etc/apt changed"
else
	bad "/etc/apt changed"
fi
after_arch=$(dpkg --print-foreign-architectures | paste -sd' ')
if [ "$after_arch" = "$before_arch" ]; then
	ok "dpkg's foreign architectures unchanged (${after_arch:-none})"
else
	bad "dpkg's foreign architectures changed: '$before_arch' -> '$after_arch'"
fi
status=0
grep -rnE 'add-[a]rchitecture' "$top/mk" "$top/Makefile" "$top/.ci" || status=$?
case $status in
0) bad "the project adds a dpkg architecture somewhere (above)" ;;
1) ok "nothing in the project adds a dpkg architecture" ;;
*) bad "could not search the project for dpkg architecture changes" ;;
esac

[ $failed -eq 0 ] || { echo "apt-check: FAILED" >&2; exit 1; }
echo "apt-check: all ok"
