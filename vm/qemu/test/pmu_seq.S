/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Known code for the PMU model's counting cases (pmu.c): every one of them
 * retires a number of instructions and branches that the cases compute.
 */
#include "test.h"

/* pmu_loop(n = %rdi >= 1): 2n instructions (DEC, JNZ), n branches, + RET. */
GLABEL pmu_loop
GLABEL pmu_loop_dec
	decq	%rdi
GLABEL pmu_loop_jnz
	jnz	pmu_loop_dec
GLABEL pmu_loop_ret
	ret

/*
 * Ring 3, for run_user(): MOV, then N times DEC and JNZ, then INT: 2N + 2
 * instructions, N + 1 branches.
 */
GLABEL user_loop_short
	movl	$PMU_SHORT, %ecx
1:	decl	%ecx
	jnz	1b
	int	$USER_EXIT_VECTOR

GLABEL user_loop_long
	movl	$PMU_LONG, %ecx
1:	decl	%ecx
	jnz	1b
	int	$USER_EXIT_VECTOR

/* NOP, UD2 (the #UD handler skips it: it never retires), NOP, INT: 3. */
GLABEL user_ud
	nop
	ud2
	nop
	int	$USER_EXIT_VECTOR

/* pmu_rep(n = %rdi >= 1): MOV, REP STOSB of n bytes at SPARE_PAGE, RET. */
GLABEL pmu_rep
	movq	%rdi, %rcx
	movl	$SPARE_PAGE, %edi
	rep stosb
	ret
