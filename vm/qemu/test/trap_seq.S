/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Traps, interrupts and the handlers that expect them.
 *
 * fix_<name> is a straight-line handler (no branch but its IRETQ) for an
 * exception or interrupt a case provokes on purpose.  It notes what the
 * processor handed it (vector, error code, saved RIP/CS/RSP, RCX, CR2,
 * DR6, DEBUGCTL), resets DR6, clears TF in the saved RFLAGS (a single-step
 * case steps once) and resumes at fix_to if set, else at the saved RIP +
 * fix_skip.
 */
#include "test.h"

/* frame after the three pushes: 0 RDX, 8 RCX, 16 RAX, 24 error code,
 * 32 RIP, 40 CS, 48 RFLAGS, 56 RSP, 64 SS */
.macro FIX name, vec, ec=0, eoi=0, map=0
GLABEL fix_\name
	.if \ec == 0
	pushq	$0
	.endif
	pushq	%rax
	pushq	%rcx
	pushq	%rdx
	movl	$\vec, fix_vec(%rip)
	incl	fix_count(%rip)
	movq	8(%rsp), %rax
	movq	%rax, fix_rcx(%rip)
	movq	24(%rsp), %rax
	movq	%rax, fix_err(%rip)
	movq	32(%rsp), %rax
	movq	%rax, fix_rip(%rip)
	movq	40(%rsp), %rax
	movq	%rax, fix_cs(%rip)
	movq	56(%rsp), %rax
	movq	%rax, fix_rsp(%rip)
	movq	%cr2, %rax
	movq	%rax, fix_cr2(%rip)
	movq	%dr6, %rax
	movq	%rax, fix_dr6(%rip)
	movl	$0xffff0ff0, %eax
	movq	%rax, %dr6
	movl	$MSR_DEBUGCTL, %ecx
	rdmsr
	movl	%eax, fix_debugctl(%rip)
	.if \eoi
	movl	$APIC_BASE + APIC_EOI, %eax
	movl	$0, (%rax)
	.endif
	.if \map
	/* map LATE_PAGE: the faulting instruction goes on when it resumes */
	movq	$LATE_PAGE | 3, %rax
	movq	%rax, pt + (LATE_PAGE - DS_PAGE) / 4096 * 8(%rip)
	invlpg	LATE_PAGE
	.endif
	movq	32(%rsp), %rax
	addq	fix_skip(%rip), %rax
	movq	fix_to(%rip), %rcx
	testq	%rcx, %rcx
	cmovnzq	%rcx, %rax
	movq	%rax, 32(%rsp)
	andq	$~0x100, 48(%rsp)
	popq	%rdx
	popq	%rcx
	popq	%rax
	addq	$8, %rsp
GLABEL fix_\name\()_iret
	iretq
.endm

	.text
	.code64

	FIX db, 1
	FIX of, 4
	FIX ud, 6
	FIX gp, 13, ec=1
	FIX pf, 14, ec=1
	FIX pfmap, 14, ec=1, map=1
	FIX timer, TIMER_VECTOR, eoi=1

.macro TF_ON
	pushfq
	orq	$0x100, (%rsp)
	popfq
.endm

/*
 * Single-step: POPF sets TF, so the instruction after it is the first to
 * trap.  One NOP, then a taken JMP.
 */
GLABEL seq_step
	TRACE_ON
	TF_ON
GLABEL st_insn
	nop
GLABEL st_next
	TF_ON
GLABEL st_jmp_site
	jmp	st_jmp_to
	ud2
GLABEL st_jmp_to
	nop
	TRACE_OFF
	ret

/* A write to watched, with DR0/DR7 set by trap.c: a data breakpoint trap */
GLABEL seq_watch
	TRACE_ON
GLABEL dw_site
	movl	$1, watched(%rip)
GLABEL dw_next
	nop
	TRACE_OFF
	ret

/*
 * DEBUGCTL.BTF with TF: no trap after the NOP, the XOR, the not-taken
 * JNZ, the MOVs and REP STOSB; the first one after the taken JMP.
 */
GLABEL seq_btf
	TRACE_ON
	TF_ON
GLABEL bf_nop
	nop
	xorl	%eax, %eax
GLABEL bf_nt_site
	jnz	bf_bad
	movl	$3, %ecx
	leaq	bf_scratch(%rip), %rdi
	rep stosb
GLABEL bf_jmp_site
	jmp	bf_to
GLABEL bf_bad
	ud2
GLABEL bf_to
	nop
	TRACE_OFF
	ret

/* The timer interrupt is pending: it comes in after the STI shadow */
GLABEL seq_sti
	TRACE_ON
GLABEL tm_sti_site
	sti
	nop
GLABEL tm_after
	cli
	TRACE_OFF
	ret

/*
 * REP MOVSB of %rcx bytes from %rsi to %rdx, interrupts enabled (after
 * STI's shadow: QEMU holds a pending interrupt for the whole REP in it).
 */
GLABEL seq_rep
	movq	%rdx, %r8
	movq	%rcx, %r9
	TRACE_ON
	movq	%r8, %rdi
	movq	%r9, %rcx
	sti
	nop
GLABEL rep_site
	rep movsb
	cli
	TRACE_OFF
	ret

/* Write MSR %esi = %rdx halfway through: a PMI held back goes out there */
GLABEL seq_msrw
	movq	%rdx, %r8
	movl	%esi, %r9d
	TRACE_ON
GLABEL mw_jmp1
	jmp	mw_a
GLABEL mw_a
	movl	%r9d, %ecx
	movl	%r8d, %eax
	shrq	$32, %r8
	movl	%r8d, %edx
	wrmsr
GLABEL mw_b
	jmp	mw_c
GLABEL mw_c
	TRACE_OFF
	ret

/* Ring 3: RDPMC of counter 0; the values land in user_pmc */
GLABEL user_rdpmc
	xorl	%ecx, %ecx
	movl	$0xdead, %eax
	movl	$0xbeef, %edx
	rdpmc
	movl	%eax, user_pmc(%rip)
	movl	%edx, user_pmc + 4(%rip)
	int	$USER_EXIT_VECTOR

/* The per-CPU PMI handler of the two-vCPU case (NMI) */
GLABEL nmi_percpu
	pushq	%rax
	pushq	%rcx
	pushq	%rdx
	movl	$APIC_BASE + APIC_ID, %eax
	movl	(%rax), %eax
	shrl	$24, %eax
	andl	$1, %eax
	movq	%rax, %rdx
	incl	cpu_nmi_count(, %rdx, 4)
	movl	$MSR_DS_AREA, %ecx
	pushq	%rdx
	rdmsr
	popq	%rcx
	movq	8(%rax), %rax			/* bts_index */
	movq	%rax, cpu_pmi_index(, %rcx, 8)
	movl	$APIC_BASE + APIC_LVTPC, %eax
	movl	(%rax), %edx
	movl	%edx, cpu_lvtpc(, %rcx, 4)
	popq	%rdx
	popq	%rcx
	popq	%rax
GLABEL nmi_percpu_iret
	iretq

	.data
	.align 8
	.globl fix_vec, fix_count, fix_debugctl, fix_err, fix_rip, fix_cs
	.globl fix_rsp, fix_rcx, fix_cr2, fix_dr6, fix_to, fix_skip
	.globl watched, user_pmc, cpu_nmi_count, cpu_pmi_index, cpu_lvtpc
fix_err:	.quad 0
fix_rip:	.quad 0
fix_cs:		.quad 0
fix_rsp:	.quad 0
fix_rcx:	.quad 0
fix_cr2:	.quad 0
fix_dr6:	.quad 0
fix_to:		.quad 0
fix_skip:	.quad 0
user_pmc:	.quad 0
cpu_pmi_index:	.quad 0, 0
fix_vec:	.long 0
fix_count:	.long 0
fix_debugctl:	.long 0
watched:	.long 0
cpu_nmi_count:	.long 0, 0
cpu_lvtpc:	.long 0, 0
bf_scratch:	.quad 0

	.section .note.GNU-stack, "", @progbits
