#!/bin/bash
# Boot the test VM.  Usage: vm.sh test|run|bench|shell <bzImage> <initramfs> <logdir>
# The console (ttyS0) goes to <logdir>/console.log and, for run and shell,
# to the terminal too; kselftest TAP also goes to ttyS1 = <logdir>/results.log.
set -euo pipefail
mode=$1 kernel=$2 initrd=$3 logdir=$4
qemu=${QEMU:-qemu-system-x86_64}
cpu=${VM_CPU:-max}
# mk/test.py sets each run's timeout from its manifest's time and the
# deadline; alone, a VM gets 25 minutes.
timeout=${VM_TIMEOUT:-1500}
# clearcpuid=smap: QEMU 7.2's TCG makes the stack accesses of a user-mode
# far transfer (LRET, LCALL) as supervisor accesses; with SMAP on they fault
# and the kernel oopses on a user instruction.  Fixed in later QEMU.
# VM_PTI=off measures the benchmark without page table isolation; VM_SMP
# (2) is the number of CPUs, 4 for make bench's scaling.
# The kernels have the NMI watchdog (and the soft-lockup detector with it),
# off unless a run turns it on (VM_WATCHDOG="nmi_watchdog=1"): under TCG
# its reports would come from the host's load, not from the guest, in runs
# that did not mean to test it. Run 'watchdog' does.
append="console=ttyS0 panic=-1 pti=${VM_PTI:-on} clearcpuid=smap vm.mode=$mode ${VM_WATCHDOG:-nowatchdog} ${VM_APPEND:-}"
[ -n "${ONLY:-}" ] && append="$append vm.only=$ONLY"
[ -n "${PROVOKE:-}" ] && append="$append vm.provoke=$PROVOKE"
# A test's own timeout in the guest (vm/init); longer where VMs share the host.
[ -n "${KSFT_TIMEOUT:-}" ] && append="$append vm.ksft_timeout=$KSFT_TIMEOUT"

# Nothing of an earlier run may be judged as this one's: start empty.
rm -rf "$logdir"
mkdir -p "$logdir"
args=(-accel tcg -cpu "$cpu" -smp "${VM_SMP:-2}" -m 1024 -no-reboot -display none
      -nic none -kernel "$kernel" -initrd "$initrd" -append "$append")

case $mode in
test)
	rc=0
	# QEMU's own complaints (the BTS model stops with "BTS: DS store
	# fault" when the kernel breaks the PTI rules) and its exit status are
	# judged by mk/report.py.
	timeout --foreground -k 10 "$timeout" "$qemu" "${args[@]}" -monitor none \
		-serial "file:$logdir/console.log" -serial "file:$logdir/results.log" \
		</dev/null 2>"$logdir/qemu.stderr" || rc=$?
	echo $rc >"$logdir/qemu.status"
	if [ $rc -eq 124 ]; then
		echo "vm: TIMEOUT after ${timeout}s" | tee -a "$logdir/console.log"
	fi
	# Where a CI run's time went, in its log.
	echo "vm: $(basename "$logdir") took ${SECONDS}s"
	exit 0
	;;
run|bench)
	timeout --foreground -k 10 "$timeout" "$qemu" "${args[@]}" -monitor none \
		-serial stdio -serial "file:$logdir/results.log" </dev/null |
		tee "$logdir/console.log"
	;;
shell)
	exec "$qemu" "${args[@]}" -serial mon:stdio -serial "file:$logdir/results.log"
	;;
esac
