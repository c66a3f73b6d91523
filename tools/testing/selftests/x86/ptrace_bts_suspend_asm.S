/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Tracee code for ptrace_bts_suspend.c, in assembly so that the loop's
 * branches have global labels at their sources and targets and the
 * compiler can add none. 64-bit only.
 */
#include <asm/unistd.h>

#define L(name)		.globl name; name:
#define FUNC(name)	.globl name; .type name, @function; name:
/* struct s3_loop_state */
#define ITERS		0
#define STOP		8

	.text
/*
 * s3_loop(struct s3_loop_state *s): a breakpoint, then per iteration:
 * count it in s->iters, sleep a millisecond, and jump back from
 * s3_loop_f0 to s3_loop_t0 unless s->stop is set; then a jump from
 * s3_loop_f1 to s3_loop_t1 and a second breakpoint. n iterations leave n
 * user-mode branches. The system call's own transfers have a kernel end;
 * a sleep that the freezer interrupts is restarted by the kernel or comes
 * back to the SYSCALL, neither of which is a user-mode branch.
 */
FUNC(s3_loop)
	int3
L(s3_loop_s)
L(s3_loop_t0)
	incq	ITERS(%rdi)
	push	%rdi
	lea	s3_nap(%rip), %rdi
	xor	%esi, %esi
	mov	$__NR_nanosleep, %eax
	syscall
	pop	%rdi
	cmpq	$0, STOP(%rdi)
L(s3_loop_f0)
	je	s3_loop_t0
L(s3_loop_f1)
	jmp	s3_loop_t1
	ud2
L(s3_loop_t1)
	int3
L(s3_loop_e)
	ret
	.size	s3_loop, . - s3_loop

	.section .rodata
	.balign	8
s3_nap:			/* struct timespec: 0 s, 1 ms */
	.quad	0, 1000000

	.section .note.GNU-stack, "", @progbits
