#!/bin/bash
# Install the host packages the build, the VM and the tests need (Debian 12).
# Idempotent: only missing packages are installed.  A failed index refresh is
# a warning (mk/apt.sh); a package that cannot be installed is the error.
#
# DEPS_SIMULATE=<dir> resolves every package as if missing with "apt-get
# install -s" in a private apt state in <dir> that mirrors the host's (its
# deb entries and its dpkg status), changing nothing on the host and needing
# no root: mk/apt-check.sh uses it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
APT_WHO=deps
. "$top/mk/apt.sh"

packages=(
	# kernel build
	build-essential bc bison flex libelf-dev libssl-dev cpio xz-utils
	dwarves rsync kmod python3 perl git
	# 32-bit selftests, statically linked
	gcc-multilib libc6-dev-i386
	# checks
	sparse python3-ply python3-git codespell
	# the documentation (make check: mk/docs-check.sh)
	python3-sphinx
	# the compiler cache of the kernels and QEMU
	ccache
	# the VM
	qemu-system-x86 busybox-static
	# btrace's file:line (tools/bts): libdw and what its static archive
	# needs (libelf-dev, zlib1g-dev and liblzma-dev come with libdw-dev)
	libdw-dev libbz2-dev
	# make bench's plots
	gnuplot-nox
)

missing=()
for p in "${packages[@]}"; do
	[[ $p == \#* ]] && continue
	[ -z "${DEPS_SIMULATE:-}" ] &&
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
		missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

if [ -n "${DEPS_SIMULATE:-}" ]; then
	echo "deps: resolving ${missing[*]} (simulated in $DEPS_SIMULATE)"
	apt_private_init "$DEPS_SIMULATE" deb "" /var/lib/dpkg/status
	apt_retry "package(s) ${missing[*]}" apt-get -c "$DEPS_SIMULATE/apt.conf" \
		install -s -q --no-install-recommends "${missing[@]}"
	exit 0
fi
apt_update
echo "deps: installing ${missing[*]}"
apt_install "${missing[@]}"
