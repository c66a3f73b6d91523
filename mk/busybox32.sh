#!/bin/bash
# Fetch Debian's 32-bit busybox-static for the i386 test VM into <dir>/busybox
# (cached).  apt only hands out i386 packages once the architecture is known
# to dpkg, so add it if it is missing; nothing is installed.
# Usage: busybox32.sh <dir>
set -euo pipefail
dir=$(realpath -m "$1")
[ -x "$dir/busybox" ] && exit 0

sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
if ! dpkg --print-foreign-architectures | grep -qx i386; then
	echo "busybox32: adding the i386 architecture to dpkg (for apt-get download)"
	$sudo dpkg --add-architecture i386
	$sudo apt-get update -qq
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# _apt cannot write to a private mktemp directory; let it.
chmod 777 "$tmp"
(cd "$tmp" && apt-get download -qq busybox-static:i386)
dpkg-deb -x "$tmp"/busybox-static_*_i386.deb "$tmp/x"
mkdir -p "$dir"
install -m 755 "$tmp/x/bin/busybox" "$dir/busybox"
