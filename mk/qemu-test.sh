#!/bin/bash
# The BTS machine model's own test: build the freestanding test kernel in
# vm/qemu/test/ and boot it (multiboot) on
#   1. the model, -cpu $BTS_CPU,bts=on, two vCPUs, once per set of readings
#      of the SDM (bts-cpl=, pmi-skid=, bts-trap-from=, arch-pmu=; the
#      guest learns them from its command line): every case must pass;
#   2. the model with the buffer or the DS area on a bad page, or across a
#      page boundary into one, or on a page whose accessed and dirty flags
#      are clear: QEMU must stop with "BTS: DS store fault" and exit status
#      1, naming the A/D flags for that last case only;
#   3. the model without bts=on, and stock Debian QEMU: the test must report
#      that BTS is absent and that DEBUGCTL/DS_AREA behave as before (and,
#      on the model, that ICEBP raises #DB).
# Prints one TAP stream ("ok N - name" / "not ok N - name") and exits
# non-zero on any failure.
#
# QEMU=<binary> skips building the model (mk/qemu.sh) and tests that binary.
# STOCK_QEMU=<binary> (default /usr/bin/qemu-system-x86_64; "" skips it).
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$top/build}
out=$build/qemu-test
src=$top/vm/qemu/test
cpu=${BTS_CPU:-Skylake-Client}
stock=${STOCK_QEMU-/usr/bin/qemu-system-x86_64}

if [ -z "${QEMU:-}" ]; then
	"$top/mk/qemu.sh" || exit 1
	QEMU=$build/qemu/qemu-system-x86_64
fi

# --- build the test kernel ----------------------------------------------------
mkdir -p "$out"
cflags=(-m64 -O2 -g -ffreestanding -fno-pic -fno-pie -fno-stack-protector
	-fno-asynchronous-unwind-tables -mno-red-zone -mgeneral-regs-only
	-fno-builtin -fno-tree-loop-distribute-patterns -nostdinc -isystem "$(gcc -print-file-name=include)"
	-Wall -Wextra -Wno-unused-parameter -Werror)
set -e
objs=()
for f in boot.S seq.S xfer_seq.S trap_seq.S pmu_seq.S lib.c main.c xfer.c trap.c \
	 buffer.c smp.c pmu.c; do
	gcc "${cflags[@]}" -c "$src/$f" -o "$out/${f%.*}.o"
	objs+=("$out/${f%.*}.o")
done
ld -nostdlib -static -no-pie --build-id=none -z max-page-size=0x1000 \
	--no-warn-rwx-segments \
	-T "$src/link.ld" -o "$out/bts-test.elf" "${objs[@]}"
objcopy -O binary "$out/bts-test.elf" "$out/bts-test.bin"
set +e

# --- run ------------------------------------------------------------------------
n=0
fail=0
echo "TAP version 13"

tap() {		# tap <ok 0|1> <name>
	n=$((n + 1))
	if [ "$1" = 1 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		fail=1
	fi
}

# boot <name> <qemu> <cpu> [append [smp]]: serial to $out/<name>.log,
# stderr to $out/<name>.err, exit status in $rc
boot() {
	local name=$1 qemu=$2 cpu=$3 append=${4:-} smp=${5:-1}
	local args=(-L /usr/share/qemu -L /usr/share/seabios -nic none
		-accel tcg -cpu "$cpu" -smp "$smp" -m 64 -display none -no-reboot
		-monitor none -serial "file:$out/$name.log"
		-device isa-debug-exit,iobase=0xf4,iosize=0x04
		-kernel "$out/bts-test.bin")
	[ -n "$append" ] && args+=(-append "$append")
	rm -f "$out/$name.log" "$out/$name.err"
	timeout 120 "$qemu" "${args[@]}" </dev/null 2>"$out/$name.err"
	rc=$?
}

# Re-number the guest's TAP lines into ours, prefixing the run's name, and
# hold the guest to its own plan: a guest that stops early, or whose plan
# does not count its results, fails here.
relay() {	# relay <name> <prefix>
	local line plan= results=0
	while IFS= read -r line; do
		line=${line%$'\r'}
		case $line in
		"ok "*)     tap 1 "$2: ${line#ok * - }"; results=$((results + 1)) ;;
		"not ok - "*) tap 0 "$2: ${line#not ok - }"; results=$((results + 1)) ;;
		"not ok "*) tap 0 "$2: ${line#not ok * - }"; results=$((results + 1)) ;;
		"1.."*)     plan=${line#1..} ;;
		"# "*)      echo "$line" ;;
		esac
	done <"$out/$1.log"
	tap $([ "$plan" = "$results" ] && echo 1 || echo 0) \
		"$2: the guest's plan (1..${plan:-missing}) counts its $results results"
}

# 1. the model, under each reading the SDM leaves open.  The first set is
# the model's defaults (bts-cpl=source, pmi-skid=0, bts-trap-from=next),
# which the guest assumes when its command line does not say.  Every
# property gets each of its readings in some boot; each boot checks all of
# the semantics under its readings.
readings=(
	"arch-pmu=on"
	"bts-cpl=target,pmi-skid=5,bts-trap-from=insn,arch-pmu=on"
	"bts-cpl=either,pmi-skid=2,bts-trap-from=next"
)
i=0
for r in "${readings[@]}"; do
	i=$((i + 1))
	boot "model-$i" "$QEMU" "$cpu,bts=on,$r" "${r//,/ } smp=2" 2
	relay "model-$i" "bts,$r"
	tap $([ $rc -eq 33 ] && echo 1 || echo 0) "bts,$r: test kernel exits PASS (status $rc)"
	[ $rc -eq 33 ] || sed 's/^/# stderr: /' "$out/model-$i.err" | grep -v "TCG doesn't support" | head -20
done

# Not a test: what the PMU costs while no counter is enabled, as the same
# loop's time in model-1 (arch-pmu=on) over model-3 (no arch-pmu), each the
# fastest of three runs. Two boots, so host noise of a few percent shows.
idle_pmu=$(sed -n 's/^# bench: idle loop ticks: \([0-9]*\).*/\1/p' "$out/model-1.log")
idle_none=$(sed -n 's/^# bench: idle loop ticks: \([0-9]*\).*/\1/p' "$out/model-3.log")
if [ -n "$idle_pmu" ] && [ -n "$idle_none" ]; then
	echo "# bench: arch-pmu=on with no counter enabled:" \
		"$(awk -v a="$idle_pmu" -v b="$idle_none" 'BEGIN { printf "%.2f", a / b }')x" \
		"the loop without arch-pmu"
fi

# The guest's expectations follow the readings it is told.  That they can
# tell the readings apart at all is shown by telling it the defaults while
# the model runs another reading: each such boot must fail.  The threshold
# readings other than the default are not modelled in the guest: only the
# kernel's runs bts-alt and pmu-alt use them, and these boots show that the
# guest's threshold cases would notice them.
mutants=(
	"bts-cpl=target" "bts-cpl=either" "pmi-skid=3" "bts-trap-from=insn"
	"bts-threshold=store" "bts-threshold=cross"
)
for r in "${mutants[@]}"; do
	boot "mutant-${r//=/-}" "$QEMU" "$cpu,bts=on,$r" "arch-pmu=off"
	fails=$(grep -c "^not ok" "$out/mutant-${r//=/-}.log")
	tap $([ $rc -eq 35 ] && [ "$fails" -gt 0 ] && echo 1 || echo 0) \
		"the guest told the defaults notices $r ($fails cases fail, status $rc)"
done

# 2. store faults stop the machine
# A page whose accessed/dirty flags are clear must be reported as such, and
# the other faults must not be (their pages have A and D set).
for f in unmapped-buffer readonly-buffer unmapped-ds straddle-buffer straddle-ds clear-ad clear-d; do
	boot "fault-$f" "$QEMU" "$cpu,bts=on" "fault=$f"
	ok=0
	if [ $rc -eq 1 ] && grep -q "BTS: DS store fault at" "$out/fault-$f.err"; then
		ok=1
	fi
	if grep -q "accessed or dirty flag clear" "$out/fault-$f.err"; then
		[[ $f = clear-* ]] || ok=0
	else
		[[ $f != clear-* ]] || ok=0
	fi
	tap $ok "fault=$f: QEMU reports 'BTS: DS store fault' and exits 1 (status $rc)"
	grep "BTS:" "$out/fault-$f.err" | head -1 | sed 's/^/# /'
	grep -h "^not ok" "$out/fault-$f.log" | sed 's/^/# guest: /'
done

# 3. no bts=on: BTS absent, behaviour unchanged
boot nobts "$QEMU" "$cpu" "icebp=db"
relay nobts "model without bts=on"
tap $([ $rc -eq 37 ] && echo 1 || echo 0) "model without bts=on: reports BTS absent (status $rc)"

if [ -n "$stock" ] && [ -x "$stock" ]; then
	boot stock "$stock" "$cpu"
	relay stock "stock QEMU"
	tap $([ $rc -eq 37 ] && echo 1 || echo 0) "stock QEMU: reports BTS absent (status $rc)"
fi

echo "1..$n"
if [ $fail -ne 0 ]; then
	echo "# FAILED; logs in $out" >&2
	exit 1
fi
exit 0
