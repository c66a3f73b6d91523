#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The guest's half of make bench (mk/bench.py): runs the phases named on
# its command line and prints "bench: KEY VALUE" lines, which the host
# pairs with those of other phases and boots into ratios.
#
# Usage: bench.sh [-r REPS] [-s] PHASE...
#   micro            untraced pipe ping-pong, getppid, fork+exit on CPU 0
#   beside:BACKEND   the same, alternately alone and with a task traced on
#                    BACKEND (hw, emu) running on CPU 1
#   programs:TOOLS   busybox gunzip, sort and md5sum and coreutils' tac
#                    (dynamically linked) on fixed input, under each tool
#                    of the comma list:
#                    none, bts-hw, bts-emu, step, gdb-plain, gdb-full,
#                    gdb-perf, gdb-ptrace
#   reads:BACKEND    bench-reads
#   scale:BACKEND    1, 2, 4 and 8 threads of bench-spin, untraced and traced
#   floor            bts_bench: the #DB round trip and the emulation's cost
# -s (smoke): one repetition of tiny inputs, every result checked; for
# make test, where the programs must work and their timings mean nothing.
set -u
reps=3 smoke=
while [ $# -gt 0 ]; do
	case $1 in
	-r) reps=$2; shift 2 ;;
	-s) smoke=1 reps=1; shift ;;
	*) break ;;
	esac
done
fail=0
say() { echo "bench: $*"; }
bad() { echo "bench: FAIL $*"; fail=1; }

# key=value pairs of a bench-trace line as "bench: PREFIX.key value" lines
emit() {
	prefix=$1 line=$2
	for kv in $line; do
		say "$prefix.${kv%%=*} ${kv#*=}"
	done
}

# The inputs: the same bytes in every boot. Under TCG a single-stepped
# instruction costs about 250 us: each program runs 50,000 to 300,000.
inputs() {
	awk 'BEGIN { x = 12345
		for (i = 0; i < 600; i++) {
			x = (x * 1103515245 + 12345) % 2147483648
			printf "%d the quick brown fox %x\n", x, x
		} }' >/tmp/all.txt
	head -c "$1" /tmp/all.txt >/tmp/in.txt
	head -20 /tmp/all.txt | awk '{ print $1 }' >/tmp/nums.txt
	busybox gzip -c /tmp/in.txt >/tmp/in.gz
}

# busybox (static) and coreutils' tac (libc.so and ld.so)
program() {
	case $1 in
	gunzip) echo "busybox gunzip -c /tmp/in.gz" ;;
	sort) echo "busybox sort -n /tmp/nums.txt" ;;
	md5sum) echo "busybox md5sum /tmp/in.txt" ;;
	tac) echo "${TAC:-/usr/bin/tac} /tmp/in.txt" ;;
	esac
}
PROGRAMS="gunzip sort md5sum tac"
# gdb 13's record full records neither rseq(2) and prlimit64(2), which
# glibc's start calls, nor AVX instructions, which glibc's string
# functions use where the CPU has them: the programs register no rseq and
# use no AVX, under every tool alike. Every tool records the same window,
# from the program's opening of its input (after the start) to its end:
# gdb by a catchpoint, bench-trace by -a.
TUNABLES="glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX2,-AVX,\
-AVX_Fast_Unaligned_Load,-EVEX,-BMI2,-FMA,-F16C,-MOVBE:glibc.pthread.rseq=0"

# gdb's batch session over PROGRAM: to its opening of its input, then the
# recording (none for gdb-plain), then on to its exit_group().
gdb_cmds() {
	echo "set pagination off"
	echo "set confirm off"
	echo "catch syscall openat"
	echo 'condition 1 $_regex((char *) $rsi, "^/tmp/")'
	echo "run"
	echo "delete 1"
	case $1 in
	gdb-full)
		echo "set record full stop-at-limit off"
		echo "set record full insn-number-max 2000000"
		echo "record full" ;;
	gdb-perf)
		echo "set record btrace bts source perf"
		echo "record btrace bts" ;;
	gdb-ptrace)
		echo "set record btrace bts source ptrace"
		echo "record btrace bts" ;;
	esac
	echo "catch syscall exit_group"
	echo "continue"
	echo "info record"
}

run_tool() {
	tool=$1 prog=$2 out=/tmp/out.$2.$1
	cmd=$(program "$prog")
	export GLIBC_TUNABLES="$TUNABLES"
	case $tool in
	none) bench-trace -m none -o "$out" -- $cmd ;;
	bts-hw) bench-trace -m bts -b hw -a /tmp/ -o "$out" -- $cmd ;;
	bts-emu) bench-trace -m bts -b emu -a /tmp/ -o "$out" -- $cmd ;;
	step) bench-trace -m step -a /tmp/ -o "$out" -- $cmd ;;
	gdb-*)
		gdb_cmds "$tool" >/tmp/cmds.gdb
		bench-trace -m none -o "$out" -- \
			gdb -nx -batch -x /tmp/cmds.gdb --args $cmd ;;
	esac
	unset GLIBC_TUNABLES
}

# What a tool's run must have printed: the program's output, or gdb's
# record of it.
check_tool() {
	tool=$1 prog=$2 line=$3 out=/tmp/out.$2.$1
	case $line in
	*status=0*) ;;
	*) bad "$prog under $tool: $line" ;;
	esac
	case $tool in
	# record full stops at exit_group() itself, the others at the catch;
	# a record full that stopped early is judged below
	gdb-full) ;;
	gdb-*) grep -q -e 'Catchpoint 2 (call to syscall exit_group)' \
		-e 'Process record: inferior program stopped' "$out" ||
		bad "$prog under $tool: $(tail -3 "$out")" ;;
	*) cmp -s "$out" "/tmp/out.$prog.ref" ||
		bad "$prog under $tool: output differs from untraced" ;;
	esac
	case $tool in
	# gdb 13's record full stops at an instruction it does not record
	# (tac's libc has one, past the AVX it is kept from): what a user
	# gets, and the table says so; the smoke's program must record.
	gdb-full) if ! grep -q 'Log contains [1-9][0-9]* instructions' "$out" ||
			grep -q 'failed to record' "$out" ||
			! grep -q 'Process record: inferior program stopped' "$out"; then
			why=$(grep -m1 -e 'does not support' -e 'failed' "$out")
			if [ -n "$smoke" ]; then bad "$prog under $tool: $why"
			else say "FAILED $prog under $tool: ${why:-no record}"; fi
		fi ;;
	gdb-perf|gdb-ptrace)
		grep -q 'Recorded [1-9][0-9]* instructions' "$out" ||
			bad "$prog under $tool: $(tail -3 "$out")" ;;
	esac
	case $tool in
	bts-*) case $line in
		*records=0\ *) bad "$prog under $tool: no records" ;;
		*lost=0\ *) ;;
		*) bad "$prog under $tool: records lost: $line" ;;
		esac ;;
	step) case $line in *steps=0\ *) bad "$prog under $tool: no steps" ;; esac ;;
	esac
}

# The tools that trap every instruction take about 1 ms per instruction
# under TCG, minutes per program: they run once (min = median), on the
# two shortest programs; the others run REPS times on all four.
phase_programs() {
	tools=$(echo "$1" | tr , ' ')
	if [ -n "$smoke" ]; then inputs 256; else inputs 1024; fi
	for prog in $PROGRAMS; do
		GLIBC_TUNABLES="$TUNABLES" $(program $prog) >/tmp/out.$prog.ref
	done
	# a smoke run takes the shortest one under every tool
	progs=$PROGRAMS
	[ -z "$smoke" ] || progs=md5sum
	r=1
	while [ $r -le $reps ]; do
		for prog in $progs; do
			for tool in $tools; do
				case $tool.$prog in
				step.md5sum|gdb-full.md5sum|step.tac|gdb-full.tac)
					[ $r = 1 ] || continue ;;
				step.*|gdb-full.*) [ -n "$smoke" ] || continue ;;
				esac
				line=$(run_tool "$tool" "$prog")
				check_tool "$tool" "$prog" "$line"
				emit "programs.$prog.$tool.$r" "$line"
				recs=$(echo "$line" | sed -n 's/.*records=\([0-9]*\).*/\1/p')
				case $tool in
				bts-hw) rec_bts_hw=$recs ;;
				bts-emu) rec_bts_emu=$recs ;;
				esac
			done
			# The two backends record the same branches of the
			# same program: the model's hardware against the
			# emulation, record for record in number.
			if [ -n "${rec_bts_hw:-}" ] && [ -n "${rec_bts_emu:-}" ] &&
				[ "$rec_bts_hw" != "$rec_bts_emu" ]; then
				bad "$prog: $rec_bts_hw records on the hardware, $rec_bts_emu emulated"
			fi
			rec_bts_hw= rec_bts_emu=
		done
		r=$((r + 1))
	done
}

micro_once() {
	key=$1 r=$2
	if [ -n "$smoke" ]; then n=200 f=20; else n=40000 f=600; fi
	for b in pipe getppid fork; do
		case $b in fork) cnt=$f ;; pipe) cnt=$((n / 4)) ;; *) cnt=$n ;; esac
		line=$(bench-micro -c 0 $b $cnt) || bad "bench-micro $b"
		emit "$key.$b.$r" "$line"
	done
}

# Three times the repetitions: TCG's noise between runs is several per
# cent, and the goal is 1%.
phase_micro() {
	r=1
	while [ $r -le $((reps * 3)) ]; do
		micro_once micro "$r"
		r=$((r + 1))
	done
}

# Alone, beside an untraced loop on CPU 1 (under TCG a busy vCPU slows the
# others), and beside the same loop traced: the last against the second is
# what tracing costs the untraced; the tracer must have recorded.
phase_beside() {
	backend=$1 r=1
	while [ $r -le $reps ]; do
		micro_once "beside-$backend.alone" "$r"
		bench-trace -m none -c 1 -- bench-spin 0 >/tmp/busy.out &
		busy=$!
		sleep 1
		micro_once "beside-$backend.busy" "$r"
		kill -TERM $busy
		wait $busy
		bench-trace -m bts -b "$backend" -c 1 -- bench-spin 0 >/tmp/beside.out &
		tracer=$!
		sleep 1
		micro_once "beside-$backend.traced" "$r"
		kill -TERM $tracer
		wait $tracer
		case $(cat /tmp/beside.out) in
		*records=0\ *|"") bad "beside:$backend: the tracer recorded nothing: $(cat /tmp/beside.out)" ;;
		esac
		# nothing of an arm may outlive it (a loop left would slow
		# every later figure, and hold the run's end)
		if pidof bench-spin >/dev/null; then
			bad "beside:$backend: a loop outlived its runner"
			killall -9 bench-spin
		fi
		r=$((r + 1))
	done
}

phase_reads() {
	if [ -n "$smoke" ]; then args="-r 1 -k 10 -m 65536"; else args="-r $reps"; fi
	bench-reads -b "$1" $args >/tmp/reads.out || bad "bench-reads -b $1"
	while read -r k v; do say "reads-$1.$k $v"; done </tmp/reads.out
}

# Cost per traced instruction against threads: each thread runs the loop
# ITERS and 2 x ITERS times traced, and REF x ITERS times untraced; the
# difference of the two traced runs has no start or exit in it. The
# untraced loop is the machine's own reference (under TCG four vCPUs share
# the host's cores). The emulation costs about 15 us per instruction with
# four vCPUs, the model's hardware some 20 times less: short loops, once.
phase_scale() {
	backend=$1
	if [ -n "$smoke" ]; then iters=1000 ref=10
	elif [ "$backend" = emu ]; then iters=2500 ref=400
	else iters=50000 ref=20; fi
	for t in 1 2 4 8; do
		for run in none:$((iters * ref)) bts:$iters bts:$((iters * 2)); do
			m=${run%:*} i=${run#*:}
			line=$(bench-trace -m $m -b "$backend" -- bench-spin -t $t $i)
			case $m.$line in
			*status=0*) ;;
			*) bad "bench-spin -t $t $i under $m: $line" ;;
			esac
			case $m.$line in
			bts.*records=0\ *) bad "bench-spin -t $t $i under bts: no records" ;;
			esac
			emit "scale-$backend.$t.$m$i.1" "$line insns=$((t * i * 5))"
		done
	done
	say "scale-$backend.iters $iters"
	say "scale-$backend.ref $ref"
}

# floor_value KEY PATTERN: bts_bench's figure on the line PATTERN matches
floor_value() {
	v=$(sed -n "s/.*$2 *(*\([0-9.]*\) us.*/\1/p" /tmp/floor.out)
	[ -n "$v" ] || bad "floor: no '$2' figure in: $(cat /tmp/floor.out)"
	say "floor.$1 $v"
}

phase_floor() {
	if [ -n "$smoke" ]; then set -- 200 20 50; else set --; fi
	bts_bench "$@" >/tmp/floor.out || bad "bts_bench"
	say "floor.pti $(sed -n 's/^bts_bench: page table isolation //p' /tmp/floor.out)"
	floor_value untraced_us_insn "untraced run .*us"
	floor_value bts_us_insn "(a) PTRACE_BTS_\* tracing"
	floor_value step_us_insn "(b) PTRACE_SINGLESTEP tracer"
	floor_value db_us_insn "(c) in-process TF + SIGTRAP"
}

say "kernel $(uname -r) cpus $(grep -c ^processor /proc/cpuinfo)" \
	"ds $([ -d /sys/module/ds ] && echo y || echo n)"
for phase in "$@"; do
	echo "bench: phase $phase begins at $(cut -d' ' -f1 /proc/uptime) s"
	case $phase in
	micro) phase_micro ;;
	beside:*) phase_beside "${phase#beside:}" ;;
	programs:*) phase_programs "${phase#programs:}" ;;
	reads:*) phase_reads "${phase#reads:}" ;;
	scale:*) phase_scale "${phase#scale:}" ;;
	floor) phase_floor ;;
	*) bad "unknown phase $phase" ;;
	esac
done
echo "bench: phases end at $(cut -d' ' -f1 /proc/uptime) s"
[ $fail = 0 ] && say "result ok" || say "result failed"
exit $fail
