/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The loop perf_pmu_exact counts: pmu_loop(n >= 1) retires n times DEC and
 * JNZ, then RET.
 */
	.text
	.globl	pmu_loop
	.type	pmu_loop, @function
pmu_loop:
	dec	%rdi
	.globl	pmu_loop_jnz
pmu_loop_jnz:
	jnz	pmu_loop
	ret
	.globl	pmu_loop_end
pmu_loop_end:
	.size	pmu_loop, pmu_loop_end - pmu_loop

	.section .note.GNU-stack,"",%progbits
