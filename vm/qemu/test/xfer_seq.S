/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Control transfers the first cases (seq.S) do not cover: RET imm16, far
 * JMP/CALL/RET, IRETQ at the same privilege, call gates, compatibility
 * mode with a non-zero CS base, SYSENTER/SYSEXIT, INTO, ICEBP, and
 * branches that fault.  Same rules as seq.S: between TRACE_ON and
 * TRACE_OFF the only control transfers are the ones xfer.c expects.
 */
#include "test.h"

	.text
	.code64

/* RET imm16, far JMP/CALL/RET through memory, call gate, IRETQ */
GLABEL seq_far
	TRACE_ON
	pushq	$0
	pushq	$0
GLABEL sf_call_site
	call	sf_reti			/* returns with RET $16 */
GLABEL sf_after_call
GLABEL sf_ljmp_site
	rex64 ljmp *sf_ljmp_ptr(%rip)	/* m16:64 */
	ud2
GLABEL sf_ljmp_to
GLABEL sf_lcall_site
	rex64 lcall *sf_lcall_ptr(%rip)	/* m16:64, back with LRETQ */
GLABEL sf_after_lcall
GLABEL sf_lcall32_site
	lcall	*sf_lcall32_ptr(%rip)	/* m16:32, back with 32-bit LRET */
GLABEL sf_after_lcall32
GLABEL sf_gate_site
	lcall	*sf_gate0_ptr(%rip)	/* DPL-0 call gate, same privilege */
GLABEL sf_after_gate
	movq	%rsp, %rax
	pushq	$KERNEL_DS
	pushq	%rax
	pushfq
	pushq	$KERNEL_CS
	leaq	sf_iret_to(%rip), %rax
	pushq	%rax
GLABEL sf_iret_site
	iretq				/* same privilege */
	ud2
GLABEL sf_iret_to
	TRACE_OFF
	ret

GLABEL sf_reti
GLABEL sf_reti_site
	ret	$16
GLABEL sf_lfunc
GLABEL sf_lret_site
	lretq
GLABEL sf_lfunc32
GLABEL sf_lret32_site
	lretl
/* Both call gates lead here; LRETQ also goes back to ring 3 */
GLABEL gate_target
GLABEL gate_lret_site
	lretq

/*
 * Compatibility mode at ring 0, CS base CS32_BASE: the code is linked at
 * its linear addresses, so EIP = label - CS32_BASE and the records, which
 * hold linear addresses, hold the labels.
 */
GLABEL seq_compat
	movw	$KERNEL_DS, %ax
	movw	%ax, %ds
	movw	%ax, %es
	TRACE_ON
GLABEL sc_enter_site
	lcall	*sc_enter_ptr(%rip)
GLABEL sc_back
	TRACE_OFF
	ret

	.code32
GLABEL c_entry
GLABEL c_jmp_site
	jmp	c_jmp_to
	ud2
GLABEL c_jmp_to
GLABEL c_ljmp_site
	ljmp	$KERNEL_CS32B, $(c_ljmp_to - CS32_BASE)
	ud2
GLABEL c_ljmp_to
GLABEL c_call_site
	call	c_func
GLABEL c_after_call
GLABEL c_lcall_site
	lcall	$KERNEL_CS, $sf_lfunc32	/* to 64-bit code and back */
GLABEL c_after_lcall
GLABEL c_int_site
	int	$0x80
GLABEL c_after_int
	movl	$0x7fffffff, %eax
	addl	$1, %eax		/* OF = 1 */
GLABEL c_into_site
	into
GLABEL c_after_into
	xorl	%eax, %eax		/* OF = 0 */
GLABEL c_into_nt_site
	into				/* not taken: no record */
GLABEL c_icebp_site
	.byte	0xf1			/* ICEBP (INT1) */
GLABEL c_after_icebp
	nop		/* where a #UD handler skipping 2 bytes would land */
GLABEL c_lret_site
	lret				/* to sc_back, 64-bit */
	ud2
GLABEL c_func
GLABEL c_ret_site
	ret

/*
 * Compatibility mode at ring 3 (run_user with USER_CS32): JMP,
 * SYSENTER/SYSEXIT, a call gate into ring 0, ICEBP, INT n.
 */
GLABEL u32_seq
	movl	$USER_DS32, %eax
	movw	%ax, %ds
	movw	%ax, %es
GLABEL u32_jmp_site
	jmp	u32_jmp_to
	ud2
GLABEL u32_jmp_to
	movl	$u32_after_se, %edx	/* SYSEXIT's EIP and ESP */
	movl	%esp, %ecx
GLABEL u32_se_site
	sysenter
GLABEL u32_after_se
GLABEL u32_gate_site
	lcall	*u32_gate_ptr
GLABEL u32_after_gate
GLABEL u32_icebp_site
	.byte	0xf1
GLABEL u32_after_icebp
	nop
GLABEL u32_int_site
	int	$0x80
GLABEL u32_after_int
GLABEL u32_exit_site
	int	$USER_EXIT_VECTOR
	.code64

/* IA32_SYSENTER_EIP: straight back to compatibility mode */
GLABEL sysenter_entry
GLABEL sysexit_site
	sysexitl

/*
 * Faulting branches.  The #GP/#PF handler (fix_* in trap.S) resumes at
 * the saved RIP + fix_skip, past the faulting branch.
 */

/* RET to the non-canonical %rsi */
GLABEL seq_badret
	TRACE_ON
	pushq	%rsi
	movq	%rsp, fault_rsp(%rip)
GLABEL fb_ret_site
	ret
GLABEL fb_after_ret
	/* fix_to lands here: RSP from fault_rsp in case the RET moved it */
	movq	fault_rsp(%rip), %rsp
	popq	%rax
	TRACE_OFF
	ret

/* JMP to the non-canonical %rsi */
GLABEL seq_badjmp
	TRACE_ON
	movq	%rsp, fault_rsp(%rip)
GLABEL fb_jmp_site
	jmp	*%rsi
GLABEL fb_after_jmp
	movq	fault_rsp(%rip), %rsp
	TRACE_OFF
	ret

/* CALL to the non-canonical %rsi */
GLABEL seq_badcall
	TRACE_ON
	movq	%rsp, fault_rsp(%rip)
GLABEL fb_call_site
	call	*%rsi
GLABEL fb_after_call
	movq	fault_rsp(%rip), %rsp
	TRACE_OFF
	ret

/* Far JMP through m16:64 at %rsi and far CALL through m16:32 at %rdx */
GLABEL seq_badsel
	movq	%rdx, %r8
	TRACE_ON
GLABEL fb_ljmp_site
	rex64 ljmp *(%rsi)
GLABEL fb_after_ljmp
GLABEL fb_lcall_site
	lcall	*(%r8)
GLABEL fb_after_lcall
	TRACE_OFF
	ret

/* CALL with RSP = %rsi, on a page that is not present */
GLABEL seq_badstack
	TRACE_ON
	movq	%rsp, fault_rsp(%rip)
	movq	%rsi, %rsp
GLABEL fb_scall_site
	call	fb_never
GLABEL fb_after_scall
	movq	fault_rsp(%rip), %rsp
	TRACE_OFF
	ret
GLABEL fb_never
	ud2

	.data
	.align 8
sf_ljmp_ptr:
	.quad	sf_ljmp_to
	.word	KERNEL_CS
	.align 8
sf_lcall_ptr:
	.quad	sf_lfunc
	.word	KERNEL_CS
	.align 8
sf_lcall32_ptr:
	.long	sf_lfunc32
	.word	KERNEL_CS
	.align 8
sf_gate0_ptr:
	.long	0
	.word	GATE0_SEL
	.align 8
u32_gate_ptr:
	.long	0
	.word	GATE3_SEL | 3
	.align 8
sc_enter_ptr:
	.long	c_entry - CS32_BASE
	.word	KERNEL_CS32B
	.align 8
	.globl fault_rsp
fault_rsp:
	.quad	0

	.section .note.GNU-stack, "", @progbits
