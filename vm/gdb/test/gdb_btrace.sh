#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# gdb's "record btrace bts" over PTRACE_BTS, as a user runs it: gdb's
# instruction and call histories, record goto and reverse execution on
# known programs, checked exactly. Oracles: the programs' own call
# structure and source lines, and gdb's "record full", which steps every
# instruction in software, for the PCs that reverse-stepi replays.
#
#   gdb_btrace.sh [ptrace|perf]      the BTS source of every session but
#                                    gdbserver's (default ptrace)
#
# With perf, a last case is the differential oracle: gdb over perf's BTS
# event and gdb over PTRACE_BTS print the same instruction and call
# histories, byte for byte, for the same session.
#
# TAP on stdout; kselftest's runner runs it without arguments.
set -u
dir=$(cd "$(dirname "$0")" && pwd)
source=${1:-ptrace}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$dir" || exit 1

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n $1"; }
not_ok() {
	n=$((n + 1)); failed=$((failed + 1))
	echo "not ok $n $1 # $2"
}
# check NAME WANT-FILE GOT-FILE: equal, or a diff and not ok (false)
check() {
	if cmp -s "$2" "$3"; then
		ok "$1"
	else
		diff -u "$2" "$3" | head -40 | sed 's/^/# /'
		not_ok "$1" "output differs from the expected"
		return 1
	fi
}
# The line of marker MARK in a test program's source.
line_of() { grep -n "$2" "$dir/$1" | cut -d: -f1; }
# section NAME FILE: what a session printed after its "echo @NAME\n" and
# before the next such mark.
section() { sed -n "/^@$1\$/,/^@/p" "$2" | grep -v '^@'; }

# gdb PROGRAM COMMAND-FILE OUT [ARGS]: a batch session, its output in OUT
# without gdb's chatter about threads and processes.
gdb_run() {
	prog=$1 cmds=$2 out=$3
	shift 3
	gdb -nx -batch -iex "set record btrace bts source $source" \
		-x "$cmds" --args "$dir/$prog" "$@" >"$out.raw" 2>&1
	grep -v -e '^\[New Thread' -e '^\[Thread .* exited' -e '^\[Inferior' \
		-e '^\[Detaching after' -e '^warning: Error disabling address' \
		"$out.raw" >"$out"
}

# Which backend the kernel should give: the CPU's BTS where the kernel
# drives it (an Intel CPU listing bts and dtes64) and ds.force_emulation
# is off, else the emulation.
force=$(cat /sys/module/ds/parameters/force_emulation 2>/dev/null)
if grep -q GenuineIntel /proc/cpuinfo && grep -qw bts /proc/cpuinfo &&
	grep -qw dtes64 /proc/cpuinfo && [ "$force" != Y ] && [ "$force" != 1 ]; then
	backend=hardware
	recorder="recorded by the hardware"
else
	backend=emulated
	recorder="emulated by the kernel"
fi
echo "# gdb: source $source, backend $backend"

echo "TAP version 13"
if [ "$source" = perf ]; then echo "1..10"; else echo "1..9"; fi

# --- btrace-demo: histories, goto, reverse execution ------------------------
cat >"$work/demo.gdb" <<EOF
break record_here
run
record btrace bts
break stop_here
continue
echo @info\n
info record
echo @calls\n
record function-call-history /c 1,40
EOF
gdb_run btrace-demo "$work/demo.gdb" "$work/demo.out"

# info record: for PTRACE_BTS the source and backend, the buffer size (the
# default 64 KiB, rounded down to whole 24-byte records) and no losses; a
# perf recording prints as gdb always did. Then the counts: 80
# instructions (record full's count) in 13 calls.
printf '%s\n' "Active record target: record-btrace" \
	"Recording format: Branch Trace Store." >"$work/info.want"
case $source in
ptrace)
	src_line="Source: ptrace, $recorder."
	printf '%s\n' "$src_line" "Buffer size: 65520." "Losses: 0." >>"$work/info.want"
	;;
*)
	src_line="Buffer size: 64kB."
	echo "$src_line" >>"$work/info.want"
	;;
esac
echo "Recorded 80 instructions in 13 functions (0 gaps) for thread 1 (process PID)." \
	>>"$work/info.want"
section info "$work/demo.out" | sed 's/(process [0-9]*)/(process PID)/' >"$work/info.got"
check info_record "$work/info.want" "$work/info.got"

# The call history: record_here's return, then main's calls, nested.
cat >"$work/calls.want" <<'EOF'
1	  record_here
2	main
3	  sum_squares
4	    square
5	  sum_squares
6	    square
7	  sum_squares
8	    square
9	  sum_squares
10	main
11	  square
12	main
13	  stop_here
EOF
section calls "$work/demo.out" >"$work/calls.got"
check function_call_history "$work/calls.want" "$work/calls.got"

# record goto begin/end, reverse-finish, reverse-next, reverse-step: the
# lines each lands on must be record full's, and goto begin and end must
# be the breakpoints' lines, where recording started and stopped.
cat >"$work/goto.cmds" <<'EOF'
break stop_here
continue
record goto begin
info line *$pc
record goto end
info line *$pc
reverse-finish
info line *$pc
reverse-next
info line *$pc
reverse-next
info line *$pc
reverse-step
info line *$pc
record goto end
info line *$pc
EOF
for how in "btrace bts" full; do
	printf '%s\n' "break record_here" "run" "record $how" >"$work/goto.gdb"
	cat "$work/goto.cmds" >>"$work/goto.gdb"
	gdb_run btrace-demo "$work/goto.gdb" "$work/goto-${how%% *}.out"
	sed -n 's/^\(Line [0-9]*\) of.*/\1/p' "$work/goto-${how%% *}.out" \
		>"$work/goto-${how%% *}.got"
done
# record_here's and stop_here's closing lines
begin_line=$(($(line_of btrace-demo.c '^static void record_here') + 2))
end_line=$(($(line_of btrace-demo.c '^static void stop_here') + 2))
if [ "$(sed -n 1,2p "$work/goto-full.got" | tr '\n' ' ')" != \
	"Line $begin_line Line $end_line " ] || [ "$(wc -l <"$work/goto-full.got")" -ne 7 ]; then
	sed 's/^/# /' "$work/goto-full.got"
	not_ok record_goto_reverse "record full did not land where expected"
else
	check record_goto_reverse "$work/goto-full.got" "$work/goto-btrace.got"
fi

# reverse-stepi from stop_here back to where recording started: the PCs
# btrace replays must be the ones record full recorded.
cat >"$work/stepi.cmds" <<'EOF'
break stop_here
continue
set $i = 0
while $i < 300
  reverse-stepi
  printf "pc %lx\n", $pc
  set $i = $i + 1
end
EOF
for how in "btrace bts" full; do
	{
		echo "break record_here"
		echo "run"
		echo "record $how"
		cat "$work/stepi.cmds"
	} >"$work/stepi.gdb"
	gdb_run btrace-demo "$work/stepi.gdb" "$work/stepi-${how%% *}.out"
	grep '^pc ' "$work/stepi-${how%% *}.out" | uniq >"$work/stepi-${how%% *}.pcs"
done
if [ "$(wc -l <"$work/stepi-full.pcs")" -lt 50 ]; then
	not_ok reverse_stepi_vs_record_full "record full replayed only $(wc -l <"$work/stepi-full.pcs") PCs"
else
	check reverse_stepi_vs_record_full "$work/stepi-full.pcs" "$work/stepi-btrace.pcs"
fi

# The instruction history, oldest first: the addresses of the instructions
# record full stepped back through, in the order they ran.
cat >"$work/insn.gdb" <<'EOF'
break record_here
run
record btrace bts
break stop_here
continue
echo @insns\n
record instruction-history 1,1000
EOF
gdb_run btrace-demo "$work/insn.gdb" "$work/insn.out"
section insns "$work/insn.out" |
	sed -n 's/^[0-9]*\t *0x0*\([0-9a-f]*\) .*/pc \1/p' >"$work/insn.got"
# reverse-stepi's PCs, newest first, end with the oldest repeated.
awk '{ pc[NR] = $0 } END { for (i = NR; i > 0; i--) print pc[i] }' \
	"$work/stepi-full.pcs" >"$work/insn.want"
check instruction_history "$work/insn.want" "$work/insn.got"

# --- btrace-threads: each thread's own recording ----------------------------
cat >"$work/threads.gdb" <<'EOF'
break main
run
record btrace bts
break thread_a_bp
break thread_b_bp
continue
echo @info\n
info record
echo @thread\n
record function-call-history 1,1000
continue
echo @thread\n
record function-call-history 1,1000
EOF
gdb_run btrace-threads "$work/threads.gdb" "$work/threads.out"
# Each stop's thread: its own calls, in order (the routine, the barrier's
# wait, which is not in the list, the routine again), and none of the
# other's. The threads run at once, so either may stop first: one line
# per stop, sorted.
awk -F'\t' '/^@/ { if (h) print line; h = ($1 == "@thread"); line = ""; next }
	h && /^[0-9]+\t/ && $2 ~ /^(thread_[ab]|twice|thrice|thread_[ab]_bp)$/ {
		line = line (line == "" ? "" : " ") $2 }
	END { if (h) print line }' "$work/threads.out" | sort >"$work/threads.got"
cat >"$work/threads.want" <<'EOF'
thread_a thread_a twice thread_a thread_a_bp
thread_b thread_b thrice thread_b thrice thread_b thread_b_bp
EOF
# The thread's info record says which source records it (the size line
# for perf, which names none).
if section info "$work/threads.out" | grep -q "^$src_line\$"; then
	check threads "$work/threads.want" "$work/threads.got"
else
	not_ok threads "no '$src_line' in a thread's info record"
fi

# --- btrace-crash: how a call through a corrupted pointer got there ---------
# The history ends with the call in dispatch; the instruction at 0, where
# the thread stopped, is the current one, not part of the history (as in
# gdb's own gdb.btrace/segv.exp), and reverse-stepi goes back to the call.
cat >"$work/crash.gdb" <<'EOF'
break main
run
record btrace bts
continue
echo @calls\n
record function-call-history /c 1,100
echo @back\n
reverse-stepi
x/i $pc
EOF
gdb_run btrace-crash "$work/crash.gdb" "$work/crash.out"
section calls "$work/crash.out" | cut -f2 >"$work/crash.got"
cat >"$work/crash.want" <<'EOF'
main
  dispatch
    good_handler
  dispatch
main
  corrupt
main
  dispatch
    good_handler
  dispatch
main
  dispatch
EOF
if ! grep -q "SIGSEGV" "$work/crash.out"; then
	not_ok crash_call_history "no SIGSEGV"
elif ! section back "$work/crash.out" | grep -q '<dispatch+[0-9]*>:	call   \*%rdx'; then
	section back "$work/crash.out" | sed 's/^/# /'
	not_ok crash_call_history "reverse-stepi did not go back to the call"
else
	check crash_call_history "$work/crash.want" "$work/crash.got"
fi

# --- btrace-forkexec: the parent's recording across fork; the child execs ---
cat >"$work/fork.gdb" <<'EOF'
break before_fork
run
record btrace bts
break after_child
continue
print status
echo @calls\n
record function-call-history 1,1000
EOF
gdb_run btrace-forkexec "$work/fork.gdb" "$work/fork.out" "$dir/btrace-demo"
first=$(section calls "$work/fork.out" | head -1 | cut -f2)
last=$(section calls "$work/fork.out" | tail -1 | cut -f2)
if grep -q '^\$1 = 0$' "$work/fork.out" && [ "$first" = before_fork ] &&
	[ "$last" = after_child ] && grep -qE '	(__libc_fork|_Fork|fork)$' "$work/fork.out"; then
	ok fork_exec
else
	sed 's/^/# /' "$work/fork.out.raw" | tail -40
	not_ok fork_exec "status, first '$first' or last '$last' call wrong"
fi

# --- gdbserver: the same recording through the remote protocol --------------
# gdbserver chooses the source itself (auto): ptrace where perf is not.
cat >"$work/remote.gdb" <<EOF
target remote | gdbserver - $dir/btrace-demo
break record_here
continue
record btrace bts
break stop_here
continue
echo @calls\n
record function-call-history /c 1,40
EOF
gdb -nx -batch -x "$work/remote.gdb" >"$work/remote.raw" 2>&1
section calls "$work/remote.raw" >"$work/remote.got"
check gdbserver_call_history "$work/calls.want" "$work/remote.got"

# --- perf against ptrace: the same histories -------------------------------
if [ "$source" = perf ]; then
	cat >"$work/hist.gdb" <<'EOF'
break record_here
run
record btrace bts
break stop_here
continue
echo @hist\n
record instruction-history /f 1,1000
record function-call-history /ilc 1,100
EOF
	gdb_run btrace-demo "$work/hist.gdb" "$work/hist-perf.out"
	source=ptrace
	gdb_run btrace-demo "$work/hist.gdb" "$work/hist-ptrace.out"
	source=perf
	section hist "$work/hist-perf.out" >"$work/hist-perf.got"
	section hist "$work/hist-ptrace.out" >"$work/hist-ptrace.got"
	if [ "$(wc -l <"$work/hist-perf.got")" -lt 50 ]; then
		not_ok perf_vs_ptrace_histories "perf's history has $(wc -l <"$work/hist-perf.got") lines"
	else
		check perf_vs_ptrace_histories "$work/hist-perf.got" "$work/hist-ptrace.got"
	fi
fi

[ "$failed" -eq 0 ]
