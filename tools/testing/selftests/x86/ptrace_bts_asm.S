/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Tracee code for the ptrace_bts_* programs. Written in assembly so that
 * every branch the tests expect has a global label at its source and at
 * its target and the compiler can add none.
 *
 * Every routine is "int3; <s label> body; int3; <e label> ret": the tracer
 * configures tracing at the first breakpoint stop and reads the trace at
 * the second, so the trace holds exactly the branches of the body. The
 * ud2 after a branch is never reached; it turns a branch that is wrongly
 * not taken into a SIGILL.
 *
 * Assembles as 32-bit and as 64-bit code; the test binaries are built
 * without PIE, so absolute addresses fit in 32 bits.
 */
#include <asm/unistd.h>

#define L(name)		.globl name; name:
#define FUNC(name)	.globl name; .type name, @function; name:

#ifdef __x86_64__
# define AX		%rax
# define CX		%rcx
# define SI		%rsi
# define DI		%rdi
# define SP		%rsp
# define JCXZ		jrcxz
# define LRET		lretq
# define WORD		8
# define WORDVAL	quad
# define LOADADDR(sym, reg)	lea sym(%rip), reg
/* Raw system call, number in %eax, arguments in %edi, %esi. */
# define SYSCALL	syscall
# define ARG1		%rdi
# define ARG2		%rsi
# define LOADPTR(sym, reg)	mov sym(%rip), reg
/* %rbx is not touched in 64-bit mode */
# define PUSHBX
# define POPBX
#else
# define AX		%eax
# define CX		%ecx
# define SI		%esi
# define DI		%edi
# define SP		%esp
# define JCXZ		jecxz
# define LRET		lret
# define WORD		4
# define WORDVAL	long
# define LOADADDR(sym, reg)	mov $sym, reg
# define SYSCALL	int $0x80
# define ARG1		%ebx
# define ARG2		%ecx
# define LOADPTR(sym, reg)	mov sym, reg
# define PUSHBX		push %ebx
# define POPBX		pop %ebx
#endif

#define X86_EFLAGS_TF	0x100

	.text

/* Direct jumps: short (rel8), near (rel32), backwards. */
FUNC(bts_jmp)
	int3
L(jmp_s)
L(jmp_f0)
	jmp	jmp_t0
	ud2
L(jmp_f2)
	jmp	jmp_t2
	ud2
L(jmp_t0)
L(jmp_f1)
	{disp32} jmp jmp_t1
	ud2
L(jmp_t1)
	/* backwards */
L(jmp_f3)
	jmp	jmp_f2
	ud2
L(jmp_t2)
	int3
L(jmp_e)
	ret

/* Conditional jumps: only the taken ones are branches. */
FUNC(bts_jcc)
	int3
L(jcc_s)
	xor	%eax, %eax
L(jcc_f0)
	jz	jcc_t0
	ud2
L(jcc_t0)
	jnz	jcc_bad
	cmp	$1, %eax
L(jcc_f1)
	jb	jcc_t1
	ud2
L(jcc_t1)
	ja	jcc_bad
	{disp32} jae jcc_bad
L(jcc_f2)
	{disp32} jne jcc_t2
	ud2
L(jcc_t2)
	int3
L(jcc_e)
	ret
jcc_bad:
	ud2

/* Near calls and returns, nested. */
FUNC(bts_call)
	int3
L(call_s)
L(call_f0)
	call	call_fn1
L(call_r0)
	int3
L(call_e)
	ret
L(call_fn1)
L(call_f1)
	call	call_fn2
L(call_r1)
L(call_f2)
	ret
L(call_fn2)
L(call_f3)
	ret

/* Indirect jumps and calls through a register and through memory. */
FUNC(bts_ind)
	int3
L(ind_s)
	LOADADDR(ind_t0, AX)
L(ind_f0)
	jmp	*AX
	ud2
L(ind_t0)
	LOADADDR(ind_fn, AX)
L(ind_f1)
	call	*AX
L(ind_r1)
	LOADADDR(ind_t2, AX)
	push	AX
L(ind_f2)
	jmp	*(SP)
	ud2
L(ind_t2)
	LOADADDR(ind_fn2, AX)
	mov	AX, (SP)
L(ind_f3)
	call	*(SP)
L(ind_r3)
	/* ind_fn2's "ret $WORD" dropped the pointer slot */
	int3
L(ind_e)
	ret
L(ind_fn)
L(ind_f1r)
	ret
L(ind_fn2)
L(ind_f3r)
	ret	$WORD

/* loop, loope/loopne, jcxz; "loop" to itself. */
FUNC(bts_loop)
	int3
L(loop_s)
	mov	$3, %ecx
L(loop_t0)
	nop
L(loop_f0)
	loop	loop_t0
	xor	%ecx, %ecx
L(loop_f1)
	JCXZ	loop_t1
	ud2
L(loop_t1)
	inc	%ecx
	JCXZ	loop_bad
	mov	$2, %ecx
	/* taken once (%ecx 2 -> 1), then not (1 -> 0) */
L(loop_f2)
	loop	loop_f2
	mov	$2, %ecx
	cmp	%eax, %eax
L(loop_f3)
	loope	loop_t3
	ud2
L(loop_t3)
	loopne	loop_bad
	int3
L(loop_e)
	ret
loop_bad:
	ud2

/*
 * Far transfers to the same code segment: a far return, a far indirect
 * jump and a far indirect call through a m16:32 pointer (32-bit operand
 * size also in 64-bit mode, where it is the form all vendors implement),
 * and the far return from that call.
 */
FUNC(bts_far)
	int3
L(far_s)
	push	SI
	xor	%esi, %esi
	mov	%cs, %si
	push	SI
	LOADADDR(far_t0, AX)
	push	AX
L(far_f0)
	LRET
	ud2
L(far_t0)
	sub	$8, SP
	LOADADDR(far_t1, AX)
	movl	%eax, (SP)
	movw	%si, 4(SP)
L(far_f1)
	ljmpl	*(SP)
	ud2
L(far_t1)
	add	$8, SP
#ifdef __x86_64__
	/*
	 * A far call and return with 32-bit operands push and pop 32-bit
	 * halves; QEMU's TCG also truncates RSP to 32 bits for them. Run
	 * them on a stack below 4 GiB (bts_low_stack), where both are right.
	 */
	mov	%rsp, %rdi
	mov	bts_low_stack(%rip), %rsp
#endif
	sub	$8, SP
	LOADADDR(far_fn, AX)
	movl	%eax, (SP)
	movw	%si, 4(SP)
L(far_f2)
	lcalll	*(SP)
L(far_r2)
	add	$8, SP
#ifdef __x86_64__
	mov	%rdi, %rsp
#endif
	pop	SI
	int3
L(far_e)
	ret
L(far_fn)
L(far_f3)
	lretl

/* String instructions: REP iterations are not branches. */
FUNC(bts_rep)
	int3
L(rep_s)
	push	SI
	push	DI
	LOADADDR(rep_buf, DI)
	mov	$32, %ecx
	mov	$0x5a, %eax
	rep stosb
	LOADADDR(rep_buf, SI)
	LOADADDR(rep_buf+32, DI)
	mov	$32, %ecx
	rep movsb
	LOADADDR(rep_buf, SI)
	LOADADDR(rep_buf+32, DI)
	mov	$32, %ecx
	repe cmpsb
	pop	DI
	pop	SI
L(rep_f0)
	jmp	rep_t0
	ud2
L(rep_t0)
	int3
L(rep_e)
	ret

/*
 * A jump to itself: spins until the tracer clears CF at a stop, then
 * falls through.
 */
FUNC(bts_self)
	int3
L(self_s)
	stc
L(self_f0)
	jc	self_f0
L(self_f1)
	jmp	self_t1
	ud2
L(self_t1)
	int3
L(self_e)
	ret

/*
 * Branches whose target is the next instruction: recorded if and only if
 * taken, like any other.
 */
FUNC(bts_next)
	int3
L(next_s)
	xor	%eax, %eax
L(next_f0)
	jz	next_t0
L(next_t0)
	inc	%eax
	jz	next_t1
next_t1:
L(next_f2)
	jmp	next_t2
L(next_t2)
L(next_f3)
	call	next_t3
L(next_t3)
	pop	AX
	int3
L(next_e)
	ret

/*
 * Kernel entries between branches: a system call, a page fault on a page
 * the tracee has not touched yet (bts_fault_addr), and in 64-bit mode
 * also the int $0x80 path. None may leave a record.
 */
FUNC(bts_kentry)
	int3
L(kentry_s)
	PUSHBX
L(kentry_f0)
	jmp	kentry_t0
L(kentry_t0)
	mov	$__NR_getppid, %eax
	SYSCALL
L(kentry_f1)
	jmp	kentry_t1
L(kentry_t1)
	LOADPTR(bts_fault_addr, AX)
	movb	$1, (AX)
L(kentry_f2)
	jmp	kentry_t2
L(kentry_t2)
#ifdef __x86_64__
	mov	$20, %eax	/* __NR_getpid of the 32-bit ABI */
	int	$0x80
#else
	mov	$__NR_getpid, %eax
	int	$0x80
#endif
L(kentry_f3)
	jmp	kentry_t3
L(kentry_t3)
	POPBX
	int3
L(kentry_e)
	ret

/*
 * Signal delivery and sigreturn: the tracee sends itself SIGUSR1; the
 * handler and restorer below are installed with SA_RESTORER, so every
 * user instruction between the two breakpoints is known.
 */
FUNC(bts_sig)
	int3
L(sig_s)
	PUSHBX
L(sig_f0)
	jmp	sig_t0
L(sig_t0)
	mov	$__NR_getpid, %eax
	SYSCALL
	mov	AX, ARG1
	mov	$10, ARG2		/* SIGUSR1 */
	mov	$__NR_kill, %eax
	SYSCALL
L(sig_f1)
	jmp	sig_t1
L(sig_t1)
	POPBX
	int3
L(sig_e)
	ret

FUNC(bts_sig_handler)
L(sigh_f0)
	jmp	sigh_t0
L(sigh_t0)
L(sigh_f1)
	ret

FUNC(bts_sig_restorer)
	mov	$__NR_rt_sigreturn, %eax
	SYSCALL
	ud2

/*
 * ICEBP (INT1, F1): a debug exception that is the program's own SIGTRAP,
 * twice, with a branch between. bts_icebp_handler counts them in
 * bts_icebp_count and returns through bts_sig_restorer.
 */
FUNC(bts_icebp)
	int3
L(icebp_s)
	.byte	0xf1
L(icebp_f0)
	jmp	icebp_t0
	ud2
L(icebp_t0)
	.byte	0xf1
L(icebp_a)
	int3
L(icebp_e)
	ret

FUNC(bts_icebp_handler)
	LOADADDR(bts_icebp_count, AX)
	incl	(AX)
L(icebph_f0)
	ret

#ifndef __x86_64__
/*
 * A stack segment with a base of its own: bts_ldt_ss(sel, esp) loads SS
 * with the LDT selector sel and ESP with esp, pushes the flags (known ones:
 * the xor's) there and pops them, jumps, and goes back to the flat stack;
 * then a system call and a jump.
 */
FUNC(bts_ldt_ss)
	push	%ebx
	push	%esi
	mov	12(%esp), %eax
	mov	16(%esp), %ecx
	int3
L(ldtss_s)
	mov	%ss, %ebx
	mov	%esp, %esi
	mov	%eax, %ss
	mov	%ecx, %esp
	xor	%eax, %eax
	pushf
	popf
L(ldtss_f0)
	jmp	ldtss_t0
	ud2
L(ldtss_t0)
	mov	%ebx, %ss
	mov	%esi, %esp
	mov	$__NR_getpid, %eax
	int	$0x80
L(ldtss_f1)
	jmp	ldtss_t1
	ud2
L(ldtss_t1)
	pop	%esi
	pop	%ebx
	int3
L(ldtss_e)
	ret
#endif

	.data
	.balign	4
L(bts_icebp_count)
	.long	0
	.text

/*
 * The tracee sets TF itself: the single-step traps it asks for (six, one
 * after each instruction from the nop through the popf that clears TF)
 * must come exactly as they would without branch tracing.
 */
FUNC(bts_usertf)
	int3
L(utf_s)
	pushf
	orl	$X86_EFLAGS_TF, (SP)
	popf
	nop
L(utf_f0)
	jmp	utf_t0
	ud2
L(utf_t0)
	nop
	pushf
	andl	$~X86_EFLAGS_TF, (SP)
	popf
	int3
L(utf_e)
	ret

/* For PTRACE_SINGLESTEP/SINGLEBLOCK: the tracer knows every instruction. */
FUNC(bts_step)
	int3
L(step_s)
	xor	%eax, %eax
L(step_f0)
	jz	step_t0
	ud2
L(step_t0)
	nop
L(step_f1)
	jmp	step_t1
	ud2
L(step_t1)
	int3
L(step_e)
	ret

/*
 * For PTRACE_SINGLEBLOCK: a not-taken jcc, REP MOVS with a count of 4, a
 * taken jcc, a system call, a call, a return and an indirect jump. Where
 * DEBUGCTL.BTF is honoured a block step stops at the branch targets
 * block_t0, block_fn, block_r2 and block_t3, at block_sc (the system call's
 * step is reported at its exit, not by #DB) and at the int3 (block_e).
 */
FUNC(bts_block)
	int3
L(block_s)
	push	SI
	push	DI
	xor	%eax, %eax
	jnz	block_bad
	LOADADDR(rep_buf, SI)
	LOADADDR(rep_buf+32, DI)
	mov	$4, %ecx
	rep movsb
L(block_f0)
	jz	block_t0
	ud2
L(block_t0)
	mov	$__NR_getpid, %eax
	SYSCALL
L(block_sc)
	nop
L(block_n1)
L(block_f1)
	call	block_fn
L(block_r2)
	LOADADDR(block_t3, AX)
L(block_f3)
	jmp	*AX
	ud2
L(block_t3)
	pop	DI
	pop	SI
	int3
L(block_e)
	ret
L(block_fn)
	nop
L(block_f2)
	ret
block_bad:
	ud2

/*
 * bts_many(n), n >= 1: a loop between the breakpoints that leaves
 * n records in all: n - 1 taken jumps from many_f0 back to many_t0, then
 * one from many_f1 to many_t1.
 */
FUNC(bts_many)
#ifdef __x86_64__
	mov	%edi, %ecx
#else
	mov	4(%esp), %ecx
#endif
	int3
L(many_s)
L(many_t0)
	dec	%ecx
L(many_f0)
	jnz	many_t0
L(many_f1)
	jmp	many_t1
	ud2
L(many_t1)
	int3
L(many_e)
	ret

/*
 * A 2 ms nanosleep between two branches, so that the tracee is scheduled
 * out and in again for PTRACE_BTS_O_SCHED.
 */
FUNC(bts_sleep)
	int3
L(sleep_s)
	PUSHBX
L(sleep_f0)
	jmp	sleep_t0
L(sleep_t0)
	LOADADDR(sleep_ts, ARG1)
	xor	ARG2, ARG2
	mov	$__NR_nanosleep, %eax
	SYSCALL
L(sleep_f1)
	jmp	sleep_t1
L(sleep_t1)
	POPBX
	int3
L(sleep_e)
	ret

/*
 * VEX instructions whose opcode byte, read in the one-byte map, is a
 * branch, PUSHF or POPF. None of them is: the only branch is the JE, which
 * is taken only if the word the VFNMADD132PS "PUSHF" has at the top of the
 * stack still holds TF's bit.
 */
FUNC(bts_vex)
	int3
L(vex_s)
	vzeroupper				/* C5 F8 77: not JA */
	vpor	%xmm0, %xmm0, %xmm0		/* C5 F9 EB: not JMP */
	vpcmpeqb %xmm0, %xmm0, %xmm1		/* C5 F9 74: not JZ */
	push	$X86_EFLAGS_TF
	vfnmadd132ps %xmm1, %xmm1, %xmm1	/* C4 E2 71 9C: not PUSHF */
	vfnmadd132ss %xmm1, %xmm1, %xmm1	/* C4 E2 71 9D: not POPF */
	pop	AX
	cmp	$X86_EFLAGS_TF, AX
L(vex_f0)
	je	vex_t0
	ud2
L(vex_t0)
	int3
L(vex_e)
	ret

/*
 * MOV SS holds the single-step trap back until after the next instruction:
 * the JMP after the first one must be recorded, and the PUSHF after the
 * second must store the program's TF (clear), or the JZ is not taken.
 */
FUNC(bts_movss)
	int3
L(movss_s)
	mov	%ss, %eax
	mov	%eax, %ss
L(movss_f0)
	jmp	movss_t0
	ud2
L(movss_t0)
	mov	%eax, %ss
	pushf
	pop	AX
	test	$X86_EFLAGS_TF, AX
L(movss_f1)
	jz	movss_t1
	ud2
L(movss_t1)
	int3
L(movss_e)
	ret

/*
 * Instructions for uprobes (ptrace_bts_code.c puts a uprobe on each _f/_n
 * label but _f3): a direct jmp and call, which the kernel emulates, and a
 * mov, an indirect jmp and a ret, which it steps out of line. The unprobed
 * jmp at the end shows that the trace goes on.
 */
FUNC(bts_uprobe)
	int3
L(uprobe_s)
	LOADADDR(uprobe_t1, AX)
L(uprobe_f0)
	jmp	uprobe_t0
	ud2
L(uprobe_t0)
L(uprobe_n0)
	mov	AX, CX
L(uprobe_f1)
	jmp	*AX
	ud2
L(uprobe_t1)
L(uprobe_f2)
	call	uprobe_fn
L(uprobe_r2)
L(uprobe_f3)
	jmp	uprobe_t3
	ud2
L(uprobe_t3)
	int3
L(uprobe_e)
	ret
L(uprobe_fn)
L(uprobe_f4)
	ret

/*
 * A jump to the page in the first argument, after an int3: the tracer
 * single-steps the jump and moves the IP on to nofetch_e, so the page is
 * never fetched from.
 */
FUNC(nofetch_jump)
#ifdef __x86_64__
	mov	%rdi, %rax
#else
	mov	4(%esp), %eax
#endif
	int3
L(nofetch_jmp)
	jmp	*AX
	ud2
L(nofetch_e)
	ret

#ifdef __x86_64__
/*
 * R11 holding what the flags would be with TF set, while the emulated
 * backend's single steps enter the kernel after each instruction.
 */
FUNC(bts_r11)
	int3
L(r11_s)
	xor	%eax, %eax		/* flags: IF, ZF, PF: 0x246 */
	mov	$(0x246 | X86_EFLAGS_TF), %r11
	nop
	int3
L(r11_e)
	ret

/* SYSCALL's R11 is the flags it saved, which must not show the forced TF. */
FUNC(bts_syscall_r11)
	int3
L(r11sys_s)
	mov	$__NR_getpid, %eax
	syscall
	int3
L(r11sys_e)
	ret
#endif

	.data
	.balign	8
sleep_ts:		/* struct timespec: 0 s, 50 ms */
	.WORDVAL 0, 50000000

	.bss
	.balign	64
rep_buf:
	.skip	64
	.section .note.GNU-stack, "", @progbits
