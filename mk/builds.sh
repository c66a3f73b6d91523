#!/bin/bash
# The build matrix of the series: the x86_64 test config without X86_DS
# (arch/x86/kernel/ds/perf.c is still built for perf, X86_DS_CORE) and with perf's uncore, RAPL and
# cstate drivers, the test config without X86_DS_EMULATE, make run's config
# (no lockdep), and an i386 config with X86_DS and without those.  Each must
# build; the files the series adds or changes must also be clean under W=1
# and sparse (C=2) in every config.
# Usage: builds.sh <src> <build dir>
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
src=$(realpath "$1") build=$(realpath "$2")
jobs=${JOBS:-$(nproc)}
# objects the series adds or changes that are built in a given config
objs=(arch/x86/kernel/ds/perf.o arch/x86/kernel/ds/core.o arch/x86/kernel/ds/buffer.o
      arch/x86/kernel/ds/hw.o arch/x86/kernel/ds/hw_setup.o arch/x86/kernel/ds/emulate.o
      arch/x86/kernel/ds/decode.o arch/x86/kernel/ptrace_bts.o
      arch/x86/kernel/process.o arch/x86/kernel/ptrace.o arch/x86/kernel/traps.o
      arch/x86/events/intel/ds.o arch/x86/events/intel/bts.o)

one() {
	# Object trees of their own: make test's and make run's kernels of
	# the same names have other fragments (vm/small.config) and ccache.
	local name=$1 arch=$2 obj=$build/obj-check-$1 log=$build/build-$1.log
	shift 2
	echo "builds: $name ($arch: $*)"
	ARCH=$arch "$top/mk/kconfig.sh" "$src" "$obj" "$@"
	if ! flock /tmp/kbuild.lock make -s -C "$src" O="$obj" ARCH="$arch" -j"$jobs" vmlinux >"$log" 2>&1; then
		tail -30 "$log"
		echo "builds: $name FAILED (log: $log)"
		return 1
	fi
	local present=()
	for o in "${objs[@]}"; do
		[ -f "$obj/$o" ] && present+=("$o")
	done
	flock /tmp/kbuild.lock make -s -C "$src" O="$obj" ARCH="$arch" W=1 C=2 \
		"${present[@]}" >"$log.w1" 2>&1 || true
	# Findings in upstream headers the objects include are not ours: keep
	# those in files the series adds or changes.
	local touched
	touched=$(git -C "$src" diff --name-only base HEAD)
	sed "s|^$src/||" "$log.w1" | grep -E "warning:|error:" |
		grep -F -f <(echo "$touched" | sed 's/$/:/') >"$log.ours" || true
	if [ -s "$log.ours" ]; then
		cat "$log.ours"
		echo "builds: $name has W=1/sparse findings in ${present[*]}"
		return 1
	fi
	echo "builds: $name clean (W=1 + sparse on ${present[*]})"
}

one nods x86_64 "$top/vm/kernel.config" "$top/vm/no-ds.config"
# without the emulated backend, which make test turns off at boot instead
one noemu x86_64 "$top/vm/kernel.config" "$top/vm/no-emulate.config"
# make run's kernel: the only one without lockdep
one run x86_64 "$top/vm/kernel.config" "$top/vm/run.config"
one i386 i386 "$top/vm/kernel.config" "$top/vm/i386.config"
