/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The workload of bts_bench, in bts_bench_asm.S: bench_iters iterations of
 * 5 instructions. bench_traced brackets it with breakpoints for the ptrace
 * tracers; bench_plain is the same loop for the in-process one, which stops
 * at bench_plain_end.
 */
#ifndef BTS_BENCH_H
#define BTS_BENCH_H

extern unsigned int bench_iters;
extern const char bench_end[], bench_plain_end[];
void bench_traced(void);
void bench_plain(void);

#endif /* BTS_BENCH_H */
