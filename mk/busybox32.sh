#!/bin/bash
# Fetch Debian's 32-bit busybox-static for the i386 test VM into <dir>/busybox
# (cached).  The package comes through a private i386 apt state under
# $BUILD/apt/i386 (mk/apt.sh), so dpkg's architectures and /etc/apt stay as
# they were; nothing is installed.
# Usage: busybox32.sh <dir>
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$(realpath -m "$1")
[ -x "$dir/busybox" ] && exit 0

APT_WHO=busybox32
. "$top/mk/apt.sh"

state=${BUILD:-$top/build}/apt/i386
echo "busybox32: fetching busybox-static:i386 through a private apt state ($state)"
apt_private_init "$state" deb i386

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# apt's _apt sandbox must get through to the download folder.
chmod 755 "$tmp"
apt_download_dir "$tmp/deb"
(cd "$tmp/deb" && apt_retry "busybox-static:i386" \
	apt-get -c "$state/apt.conf" -q download busybox-static:i386)
dpkg-deb -x "$tmp"/deb/busybox-static_*_i386.deb "$tmp/x"
# ELFCLASS32 (byte 4 = 1) and EM_386 (byte 18 = 3), or the wrong package.
elf=$(od -An -tx1 -j4 -N1 "$tmp/x/bin/busybox" | tr -d ' ')
elf+=$(od -An -tx1 -j18 -N1 "$tmp/x/bin/busybox" | tr -d ' ')
[ "$elf" = 0103 ] ||
	apt_die "busybox-static:i386 holds no 32-bit i386 /bin/busybox (ELF class and machine: $elf)"
mkdir -p "$dir"
install -m 755 "$tmp/x/bin/busybox" "$dir/busybox"
