#!/bin/bash
# Install the host packages the build, the VM and the tests need (Debian 12).
# Idempotent: only missing packages are installed.
set -euo pipefail

packages=(
	# kernel build
	build-essential bc bison flex libelf-dev libssl-dev cpio xz-utils
	dwarves rsync kmod python3 perl git
	# 32-bit selftests, statically linked
	gcc-multilib libc6-dev-i386
	# checks
	sparse python3-ply python3-git codespell
	# the VM
	qemu-system-x86 busybox-static
)

missing=()
for p in "${packages[@]}"; do
	[[ $p == \#* ]] && continue
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
		missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
echo "deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
