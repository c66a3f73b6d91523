/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The traced code sequences and the handlers they reach.
 *
 * Every sequence turns tracing on with DEBUGCTL = %edi, runs control
 * transfers at global labels, and turns tracing off again before it
 * returns.  Between those two WRMSRs the only control transfers are the
 * ones the test expects to see recorded: the handlers below are
 * straight-line code ending in IRETQ or SYSRETQ.  main.c builds the
 * expected records from the labels.
 */
#include "test.h"

	.text
	.code64

/* One direct JMP. */
GLABEL seq_direct
	TRACE_ON
GLABEL sd_site
	jmp	sd_to
	ud2
GLABEL sd_to
	TRACE_OFF
	ret

/*
 * Conditional jumps: one not taken, one short and one near (rel32) taken,
 * and a LOOP that is taken once and then falls through.
 */
GLABEL seq_jcc
	TRACE_ON
	xorl	%eax, %eax		/* ZF = 1 */
GLABEL sj_nt_site
	jnz	sj_nt_to		/* not taken: no record */
GLABEL sj_short_site
	jz	sj_short_to		/* taken, 2-byte form */
	ud2
GLABEL sj_short_to
	xorl	%eax, %eax
GLABEL sj_near_site
	.byte	0x0f, 0x84		/* jz rel32 */
	.long	sj_near_to - (. + 4)
	ud2
GLABEL sj_nt_to
	ud2
	.skip	200, 0x90
GLABEL sj_near_to
	movl	$2, %ecx
GLABEL sj_loop_site
	loop	sj_loop_site		/* taken once (ECX 2 -> 1), then not */
	TRACE_OFF
	ret

/* Indirect JMP and CALL, RET, direct CALL. */
GLABEL seq_indirect
	TRACE_ON
	leaq	si_jmp_to(%rip), %rax
GLABEL si_jmp_site
	jmp	*%rax
	ud2
GLABEL si_jmp_to
GLABEL si_call_site
	call	*si_fptr(%rip)
GLABEL si_after_call
GLABEL si_dcall_site
	call	si_func2
GLABEL si_after_dcall
	TRACE_OFF
	ret

GLABEL si_func
GLABEL si_ret_site
	ret
GLABEL si_func2
	nop
GLABEL si_ret2_site
	ret

/*
 * INT3, INT $0x80, #UD and a handled #PF, each returning with IRETQ.
 * %rsi holds an address whose page is not present.
 */
GLABEL seq_exceptions
	TRACE_ON
GLABEL sx_int3_site
	int3
GLABEL sx_int80_site
	int	$0x80
GLABEL sx_ud_site
	ud2
GLABEL sx_pf_site
	movq	(%rsi), %rbx		/* 48 8b 1e: 3 bytes */
GLABEL sx_after_pf
	TRACE_OFF
	ret

/* Six direct JMPs in a row: buffer-end and threshold tests. */
GLABEL seq_jmp6
	TRACE_ON
	.irp n, 0, 1, 2, 3, 4, 5
GLABEL w\n
	jmp	1f
1:
	.endr
GLABEL w6
	TRACE_OFF
GLABEL w6_off
	ret

/* Same, with interrupts enabled around it (fixed-vector PMI test). */
GLABEL seq_jmp6_sti
	sti
	call	seq_jmp6
	cli
	ret

/* A JMP that the fault tests expect never to return from. */
GLABEL seq_fault
	TRACE_ON
	jmp	1f
1:	TRACE_OFF
	ret

/* ---- Handlers (straight-line: no branch but the final return) ---- */

GLABEL bp_handler
GLABEL bp_iret_site
	iretq

GLABEL int80_handler
GLABEL int80_iret_site
	iretq

GLABEL ud_handler
	addq	$2, (%rsp)		/* skip UD2 */
GLABEL ud_iret_site
	iretq

GLABEL pf_handler
	addq	$8, %rsp		/* error code */
	addq	$3, (%rsp)		/* skip the faulting MOV */
GLABEL pf_iret_site
	iretq

/* Expected #GP from WRMSR (2 bytes): count it and skip the instruction. */
GLABEL gp_handler
	addq	$8, %rsp
	addq	$2, (%rsp)
	incl	gp_count(%rip)
	iretq

/* The BTS threshold PMI delivered as NMI. */
GLABEL nmi_handler
	pushq	%rax
	incl	nmi_count(%rip)
	movq	DS_PAGE + 8, %rax	/* bts_index at delivery */
	movq	%rax, pmi_index(%rip)
	popq	%rax
GLABEL nmi_iret_site
	iretq

/* The BTS threshold PMI delivered as a fixed vector. */
GLABEL pmi_handler
	pushq	%rax
	incl	pmi_count(%rip)
	movq	DS_PAGE + 8, %rax
	movq	%rax, pmi_index(%rip)
	movl	$APIC_BASE + APIC_EOI, %eax
	movl	$0, (%rax)
	popq	%rax
GLABEL pmi_iret_site
	iretq

/* ---- User mode ---- */

/*
 * run_user(entry = %rdi, debugctl = %rsi, cs = %rdx): turn tracing on,
 * IRETQ to ring 3 at cs:entry.  The user code comes back with INT $USER_EXIT_VECTOR, whose
 * handler turns tracing off and returns from run_user().
 */
GLABEL run_user
	pushq	%rbx
	pushq	%rbp
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	movq	%rsp, saved_ksp(%rip)
	pushq	$USER_DS
	leaq	user_stack_top(%rip), %rax
	pushq	%rax
	pushq	user_rflags(%rip)	/* 0x2: IF clear */
	pushq	%rdx
	pushq	%rdi
	movl	%esi, %edi
	TRACE_ON
GLABEL ru_iret_site
	iretq

GLABEL user_exit_handler
	TRACE_OFF
	movq	saved_ksp(%rip), %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbp
	popq	%rbx
	ret

/* SYSCALL lands here (IA32_LSTAR) and goes straight back. */
GLABEL syscall_entry
GLABEL sysret_site
	sysretq

/*
 * Ring-3 code entered with IF set and an interrupt pending (taken before
 * its first instruction), then a #UD (the handler skips the UD2).
 */
GLABEL user_irq
GLABEL ui_ud_site
	ud2
GLABEL ui_exit_site
	int	$USER_EXIT_VECTOR

/* Ring-3 code: JMP, SYSCALL (and SYSRET back), then leave. */
GLABEL user_seq
GLABEL u_jmp_site
	jmp	u_jmp_to
	ud2
GLABEL u_jmp_to
GLABEL u_syscall_site
	syscall
GLABEL u_after_syscall
GLABEL u_exit_site
	int	$USER_EXIT_VECTOR

	.data
	.align 8
si_fptr:
	.quad	si_func
saved_ksp:
	.quad	0
	.globl user_rflags
user_rflags:
	.quad	0x2
	.globl gp_count, nmi_count, pmi_count, pmi_index
gp_count:
	.long	0
nmi_count:
	.long	0
pmi_count:
	.long	0
	.align 8
pmi_index:
	.quad	0

	.section .note.GNU-stack, "", @progbits
