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
apt_private_init "$state" deb i386

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# apt's _apt sandbox must get through to the download folder.
chmod 755 "$tmp"
apt_download_dir "$tmp/deb"
(cd "$tmp/deb" && apt_retry "${pkgs[*]/%/:i386}" \
	apt-get -c "$state/apt.conf" -q download "${pkgs[@]/%/:i386}")
for deb in "$tmp"/deb/*_i386.deb; do
	dpkg-deb -x "$deb" "$tmp/x"
done
for a in libdw libelf libz liblzma libbz2; do
	[ -f "$tmp/x/usr/lib/i386-linux-gnu/$a.a" ] ||
		apt_die "no $a.a for i386 in ${pkgs[*]/%/:i386}"
done
# ELFCLASS32 (byte 4 = 1) and EM_386 (byte 18 = 3) in libdw.a's first
# member, or the wrong packages.
ar p "$tmp/x/usr/lib/i386-linux-gnu/libdw.a" "$(ar t "$tmp/x/usr/lib/i386-linux-gnu/libdw.a" | head -1)" \
	>"$tmp/member.o"
elf=$(od -An -tx1 -j4 -N1 "$tmp/member.o" | tr -d ' ')
elf+=$(od -An -tx1 -j18 -N1 "$tmp/member.o" | tr -d ' ')
[ "$elf" = 0103 ] ||
	apt_die "libdw-dev:i386 holds no 32-bit i386 libdw.a (ELF class and machine: $elf)"
rm -rf "$dir"
mkdir -p "$lib"
cp -a "$tmp/x/usr/include" "$dir/usr/"
cp -a "$tmp"/x/usr/lib/i386-linux-gnu/*.a "$lib/"
echo "${pkgs[*]}" >"$dir/.packages"
