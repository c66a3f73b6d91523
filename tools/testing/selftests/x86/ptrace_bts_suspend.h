/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The loop of ptrace_bts_suspend_asm.S and the labels at its branches, for
 * ptrace_bts_suspend.c.
 */
#ifndef PTRACE_BTS_SUSPEND_H
#define PTRACE_BTS_SUSPEND_H

/* Shared by the tracer and the tracee; the assembly knows the offsets. */
struct s3_loop_state {
	/* Iterations the tracee started; written by the tracee only. */
	long	iters;
	/* Set by the tracer: leave the loop at the end of this iteration. */
	long	stop;
};

/* _s at the first breakpoint, _e at the second; _f<n> -> _t<n> a branch. */
extern const char s3_loop_s[], s3_loop_t0[], s3_loop_f0[], s3_loop_f1[],
		  s3_loop_t1[], s3_loop_e[];

void s3_loop(struct s3_loop_state *s);

#endif /* PTRACE_BTS_SUSPEND_H */
