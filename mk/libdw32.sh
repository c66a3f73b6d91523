#!/bin/bash
# Fetch Debian's 32-bit static libdw and the archives it needs into <dir>
# (cached), for btrace_32's file:line (tools/bts, linked -static -m32):
# <dir>/usr/include and <dir>/usr/lib/i386-linux-gnu. The packages come
# through a private i386 apt state under $BUILD/apt/libdw32 (mk/apt.sh), so
# dpkg's architectures and /etc/apt stay as they were; nothing is installed.
# Its own state, not busybox32's: the two run at the same time in make test.
# Usage: libdw32.sh <dir>
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$(realpath -m "$1")
# What libdw.a and libelf.a call: pkg-config --static --libs libdw.
pkgs=(libdw-dev libelf-dev zlib1g-dev liblzma-dev libbz2-dev)
lib=$dir/usr/lib/i386-linux-gnu
# The stamp names the packages: another list fetches again.
[ "$(cat "$dir/.packages" 2>/dev/null)" = "${pkgs[*]}" ] && exit 0

APT_WHO=libdw32
. "$top/mk/apt.sh"

state=${BUILD:-$top/build}/apt/libdw32
echo "libdw32: fetching ${pkgs[*]} (i386) through a private apt state ($state)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
apt_fetch_i386 "$state" "$tmp" "${pkgs[@]}"
for a in libdw libelf libz liblzma libbz2; do
	[ -f "$tmp/x/usr/lib/i386-linux-gnu/$a.a" ] ||
		apt_die "no $a.a for i386 in ${pkgs[*]/%/:i386}"
done
# libdw.a's first member, or the wrong packages.
ar p "$tmp/x/usr/lib/i386-linux-gnu/libdw.a" \
	"$(ar t "$tmp/x/usr/lib/i386-linux-gnu/libdw.a" | head -1)" >"$tmp/member.o"
apt_is_elf_i386 "$tmp/member.o" ||
	apt_die "libdw-dev:i386 holds no 32-bit i386 libdw.a"
rm -rf "$dir"
mkdir -p "$lib"
cp -a "$tmp/x/usr/include" "$dir/usr/"
cp -a "$tmp"/x/usr/lib/i386-linux-gnu/*.a "$lib/"
echo "${pkgs[*]}" >"$dir/.packages"
