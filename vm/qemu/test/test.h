/* SPDX-License-Identifier: GPL-2.0 */
/* Constants shared by the assembly and C parts of the BTS model's test. */
#ifndef BTS_TEST_H
#define BTS_TEST_H

#define KERNEL_CS	0x08
#define KERNEL_DS	0x10
#define USER_DS		(0x18 | 3)
#define USER_CS		(0x20 | 3)
#define TSS_SEL		0x28
#define TSS_SIZE	104
/*
 * SYSENTER_CS: SYSENTER loads CS and SS from it and +8, SYSEXIT (to
 * compatibility mode) CS and SS from +16 and +24, so these four are in
 * that order.
 */
#define SYSENTER_CS	0x38
#define USER_CS32	(0x48 | 3)	/* compatibility mode, base 0 */
#define USER_DS32	(0x50 | 3)
#define KERNEL_CS32B	0x58		/* compatibility mode, base CS32_BASE */
#define GATE3_SEL	0x60		/* 64-bit call gate, DPL 3 -> KERNEL_CS */
#define GATE0_SEL	0x70		/* 64-bit call gate, DPL 0 -> KERNEL_CS */
#define FLAT_CS32	0x80		/* 32-bit flat code: AP start-up */
#define GDT_ENTRIES	17

/* Not a multiple of the page size, and not 0, so that EIP != linear. */
#define CS32_BASE	0x54000

#define MSR_EFER		0xc0000080
#define MSR_STAR		0xc0000081
#define MSR_LSTAR		0xc0000082
#define MSR_FMASK		0xc0000084
#define MSR_MISC_ENABLE		0x1a0
#define MSR_DEBUGCTL		0x1d9
#define MSR_DS_AREA		0x600
#define MSR_SYSENTER_CS		0x174
#define MSR_SYSENTER_ESP	0x175
#define MSR_SYSENTER_EIP	0x176
#define MSR_PMC0		0xc1
#define MSR_PERFEVTSEL0		0x186
#define MSR_FIXED_CTR0		0x309
#define MSR_FIXED_CTR_CTRL	0x38d
#define MSR_GLOBAL_STATUS	0x38e
#define MSR_GLOBAL_CTRL		0x38f
#define MSR_GLOBAL_STATUS_RESET	0x390
#define MSR_GLOBAL_STATUS_SET	0x391
#define MSR_IA32_PMC0		0x4c1
#define MSR_PEBS_ENABLE		0x3f1
#define MSR_PERF_CAPABILITIES	0x345
#define GLOBAL_OVF_BUFFER	(1ULL << 62)
/* PEBS, format 3: the record, and where the case puts the buffer. */
#define PEBS_RECORD_SIZE	0xc8
#define PEBS_BUFFER		(BTS_BUFFER + 0x4000)
#define PEBS_RECORDS		64

#define EVTSEL_USR		(1 << 16)
#define EVTSEL_OS		(1 << 17)
#define EVTSEL_INT		(1 << 20)
#define EVTSEL_EN		(1 << 22)
#define EVENT_CYCLES		0x3c
#define EVENT_INSNS		0xc0
#define EVENT_BRANCHES		0xc4
#define FIXED_OS		1
#define FIXED_USR		2
#define FIXED_PMI		8
#define GLOBAL_CTR_FRZ		(1ULL << 59)
#define DEBUGCTL_FREEZE_PERFMON_ON_PMI	(1 << 12)

/* The counted loops of pmu_seq.S: iterations */
#define PMU_SHORT		100
#define PMU_LONG		1000

#define DEBUGCTL_LBR		(1 << 0)
#define DEBUGCTL_BTF		(1 << 1)
#define DEBUGCTL_TR		(1 << 6)
#define DEBUGCTL_BTS		(1 << 7)
#define DEBUGCTL_BTINT		(1 << 8)
#define DEBUGCTL_BTS_OFF_OS	(1 << 9)
#define DEBUGCTL_BTS_OFF_USR	(1 << 10)

/* Supervisor-only 4 KiB pages (see boot.S) */
#define DS_PAGE		0x400000	/* DS buffer management area */
#define BTS_BUFFER	0x401000	/* BTS buffer, up to 60 KiB */
#define UNMAPPED_PAGE	0x410000
#define READONLY_PAGE	0x411000
#define CLEAR_AD_PAGE	0x414000	/* never touched: A and D stay clear */
#define CLEAR_D_PAGE	0x415000	/* never written: D stays clear */
#define SPARE_PAGE	0x412000	/* mapped */
#define LATE_PAGE	0x413000	/* not present until a #PF maps it */
#define AP_DS_PAGE	0x40e000	/* the AP's DS area and buffer */
#define AP_BUFFER	0x40e100

#define APIC_BASE	0xfee00000
#define APIC_ID		0x020
#define APIC_EOI	0x0b0
#define APIC_SVR	0x0f0
#define APIC_IRR	0x200
#define APIC_ICR_LO	0x300
#define APIC_ICR_HI	0x310
#define APIC_LVTT	0x320
#define APIC_LVTPC	0x340
#define APIC_TMICT	0x380
#define APIC_TDCR	0x3e0

#define AP_TRAMPOLINE	0x8000	/* SIPI vector 0x08 */

#define PMI_VECTOR	0xf0
#define TIMER_VECTOR	0xe0
#define USER_EXIT_VECTOR 0x81

/* isa-debug-exit at 0xf4: QEMU exits with (value << 1) | 1 */
#define EXIT_PASS	0x10	/* status 33 */
#define EXIT_FAIL	0x11	/* status 35 */
#define EXIT_ABSENT	0x12	/* status 37: no BTS (CPUID.1:EDX.DS clear) */

#ifdef __ASSEMBLER__
/* Tracing on with DEBUGCTL = %edi, and off; both clobber EAX, ECX, EDX. */
.macro TRACE_ON
	movl	%edi, %eax
	xorl	%edx, %edx
	movl	$MSR_DEBUGCTL, %ecx
	wrmsr
.endm

.macro TRACE_OFF
	xorl	%eax, %eax
	xorl	%edx, %edx
	movl	$MSR_DEBUGCTL, %ecx
	wrmsr
.endm

.macro GLABEL name
	.globl \name
\name\():
.endm
#endif

#endif
