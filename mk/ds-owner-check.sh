#!/bin/bash
# The Debug Store allocator (arch/x86/kernel/ds/, its KUnit suites included)
# is the only writer of IA32_DS_AREA and of DEBUGCTL's five BTS bits
# (TR, BTS, BTINT, BTS_OFF_OS, BTS_OFF_USR): no other file of the patched
# tree may name them, except the places listed here, none of which writes
# the host's MSR.  Fails on any other mention, so a new writer is noticed.
# Usage: ds-owner-check.sh <src>
set -euo pipefail
src=$1
cd "$src"

# <file>: why its mention of MSR_IA32_DS_AREA is no write of the host's MSR
declare -A allowed=(
	[arch/x86/include/asm/msr-index.h]="the definition"
	[arch/x86/events/intel/core.c]="the VM-entry switch list: the CPU loads the guest's value on entry and perf's area on exit"
	[arch/x86/kvm/x86.c]="the list of guest MSRs KVM saves and restores"
	[arch/x86/kvm/vmx/pmu_intel.c]="the guest's virtual MSR, kept in KVM's vPMU"
	[arch/x86/xen/pmu.c]="a Xen PV guest's virtual MSR"
)
bad=0
while IFS=: read -r file line _; do
	case $file in arch/x86/kernel/ds/*) continue ;; esac
	if [ -z "${allowed[$file]:-}" ]; then
		echo "ds-owner-check: $file:$line names MSR_IA32_DS_AREA outside arch/x86/kernel/ds/"
		bad=1
	fi
done < <(grep -rn --include='*.[chS]' -e 'MSR_IA32_DS_AREA' -e '\b0x0*600\b.*DS_AREA' arch drivers kernel virt 2>/dev/null)
while IFS=: read -r file line _; do
	case $file in
	arch/x86/include/asm/msr-index.h | arch/x86/kernel/ds/*) ;;
	*)
		echo "ds-owner-check: $file:$line names a BTS bit of DEBUGCTL outside arch/x86/kernel/ds/"
		bad=1
		;;
	esac
done < <(grep -rnE --include='*.[chS]' 'DEBUGCTLMSR_(TR|BTS|BTINT|BTS_OFF_OS|BTS_OFF_USR)\b' arch drivers kernel virt 2>/dev/null)
[ $bad -eq 0 ] && echo "ds-owner-check: only arch/x86/kernel/ds/ writes IA32_DS_AREA and DEBUGCTL's BTS bits"
exit $bad
