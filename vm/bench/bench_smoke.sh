#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# make bench's programs in make test: each phase of bench.sh on tiny
# inputs, once. What is checked is that they work (every program's output
# the same under every tool, gdb's recordings made, the reads and requests
# answered), not what they measure. TAP on stdout, a case a phase; the
# kselftest runner runs it without arguments.
#
# The phases are the machine's: where the kernel drives the CPU's BTS
# (an Intel CPU with bts and dtes64), the hardware backend's, with gdb over
# perf's BTS event (the machine must have it); else the emulated backend's.
dir=$(cd "$(dirname "$0")" && pwd)
export PATH="$dir:$PATH" TAC="$dir/tac"

if grep -q GenuineIntel /proc/cpuinfo && grep -qw bts /proc/cpuinfo &&
	grep -qw dtes64 /proc/cpuinfo; then
	set -- "beside:hw" "programs:none,bts-hw,bts-emu,gdb-plain,gdb-perf,gdb-ptrace" \
		"reads:hw" "scale:hw"
else
	set -- micro "beside:emu" \
		"programs:none,bts-emu,step,gdb-plain,gdb-full,gdb-ptrace" \
		"reads:emu" "scale:emu" floor
fi

echo "TAP version 13"
echo "1..$#"
n=0
for phase in "$@"; do
	n=$((n + 1))
	if bench.sh -s "$phase" >/tmp/bench_smoke.log 2>&1; then
		echo "ok $n $phase"
	else
		grep 'FAIL' /tmp/bench_smoke.log | sed 's/^/# /'
		echo "not ok $n $phase"
	fi
done
