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
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
apt_fetch_i386 "$state" "$tmp" busybox-static
apt_is_elf_i386 "$tmp/x/bin/busybox" ||
	apt_die "busybox-static:i386 holds no 32-bit i386 /bin/busybox"
mkdir -p "$dir"
install -m 755 "$tmp/x/bin/busybox" "$dir/busybox"
