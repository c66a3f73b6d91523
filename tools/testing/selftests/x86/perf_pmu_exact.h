/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PERF_PMU_EXACT_H
#define PERF_PMU_EXACT_H

/* perf_pmu_exact_asm.S */
void pmu_loop(unsigned long n);
extern char pmu_loop_jnz[], pmu_loop_end[];

#endif
