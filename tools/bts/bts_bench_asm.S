/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The workload of bts_bench (see bts_bench.h): a loop of 5 instructions,
 * one taken branch per iteration, run bench_iters times; between two
 * breakpoints in bench_traced, up to bench_plain_end in bench_plain.
 */
#ifdef __x86_64__
# define ITERS	bench_iters(%rip)
#else
# define ITERS	bench_iters
#endif

/* The one workload: the traced and the plain run must time the same loop. */
.macro BENCH_LOOP
	mov ITERS, %ecx
1:	add $1, %eax
	add $2, %edx
	xor %eax, %edx
	dec %ecx
	jnz 1b
.endm

	.text
	.globl bench_traced
bench_traced:
	int3
	BENCH_LOOP
	int3
	.globl bench_end
bench_end:
	ret
	.globl bench_plain
bench_plain:
	BENCH_LOOP
	.globl bench_plain_end
bench_plain_end:
	ret

	.section .note.GNU-stack, "", @progbits
