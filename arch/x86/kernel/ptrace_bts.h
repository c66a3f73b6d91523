/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Branch tracing through ptrace: what the requests and the trace's
 * lifetime (ptrace_bts.c) share with the reading of its records and the
 * NT_X86_BTS regset (ptrace_bts_read.c).
 */
#ifndef _X86_KERNEL_PTRACE_BTS_H
#define _X86_KERNEL_PTRACE_BTS_H

#include <linux/compiler.h>
#include <linux/mm_types.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/types.h>
#include <linux/workqueue.h>

#include <asm/ds.h>
#include <asm/ptrace-bts.h>

/*
 * The versions of struct ptrace_bts_config: the second adds backend, the
 * third state, next and lost.
 */
#define PTRACE_BTS_CONFIG_SIZE_VER0	16
#define PTRACE_BTS_CONFIG_SIZE_VER1	20
#define PTRACE_BTS_CONFIG_SIZE_VER2	40
#define PTRACE_BTS_READ_SIZE_VER0	56
/* The largest size-versioned argument a tracer may pass. */
#define PTRACE_BTS_CONFIG_SIZE_MAX	PAGE_SIZE
#define PTRACE_BTS_O_MASK		(PTRACE_BTS_O_TRACE |		\
					 PTRACE_BTS_O_SCHED |		\
					 PTRACE_BTS_O_SIGNAL |		\
					 PTRACE_BTS_O_ALLOC |		\
					 PTRACE_BTS_O_STOP |		\
					 PTRACE_BTS_O_GAPS)
/* Flags that describe the state, for STATUS. */
#define PTRACE_BTS_O_STATE		(PTRACE_BTS_O_MASK & ~PTRACE_BTS_O_ALLOC)
/* What a full buffer does instead of wrapping around. */
#define PTRACE_BTS_O_OVERFLOW		(PTRACE_BTS_O_SIGNAL | PTRACE_BTS_O_STOP)

/**
 * struct ptrace_bts - branch tracing of one tracee thread
 * @tracer:	  the Debug Store tracer
 * @task:	  the tracee (referenced), for the overflow signal
 * @flags:	  PTRACE_BTS_O_* state flags
 * @signal:	  the overflow signal, with %PTRACE_BTS_O_SIGNAL
 * @backend:	  %PTRACE_BTS_BACKEND_HARDWARE or %PTRACE_BTS_BACKEND_EMULATED
 * @mm:		  the tracee's image at the allocation (grabbed), whose
 *		  dumpable state stays readable after the tracee leaves it
 * @seq_base:	  the tracer's sequence numbers are the allocator's plus
 *		  this: a new allocation for a traced thread goes on from the
 *		  old one's next number, skipping one
 * @release_work: deferred release after __ptrace_unlink()
 * @users:	  the users of the trace: the ptrace link, and each request
 *		  or core dump reading it; the trace goes with the last
 * @stop_deferred: an event stop waits for a uprobe's single step; the
 *		  tracee's own
 * @rcu:	  freed after a grace period: requests find it under RCU
 */
struct ptrace_bts {
	struct ds_tracer	*tracer;
	struct task_struct	*task;
	struct mm_struct	*mm;
	u64			seq_base;
	u32			flags;
	u32			signal;
	u32			backend;
	struct work_struct	release_work;
	refcount_t		users;
	bool			stop_deferred;
	struct rcu_head		rcu;
};

static inline struct ptrace_bts *ptrace_bts_get(struct task_struct *child)
{
	return READ_ONCE(child->thread.ptrace_bts);
}

static inline int ptrace_bts_geometry(struct ptrace_bts *pb, struct ds_geometry *geom)
{
	if (!pb) {
		memset(geom, 0, sizeof(*geom));
		return 0;
	}
	return ds_get_geometry(pb->tracer, geom);
}

/* ptrace_bts.c */
struct ptrace_bts *ptrace_bts_hold(struct task_struct *child);
void ptrace_bts_put(struct ptrace_bts *pb);
int ptrace_bts_check_read(struct task_struct *child, struct ptrace_bts *pb,
			  const struct ds_geometry *geom);
int ptrace_bts_copy_arg(void *dst, size_t size, const void __user *src,
			unsigned long len, size_t min);

/* ptrace_bts_read.c */
long ptrace_bts_status(struct task_struct *child, struct ptrace_bts *pb,
		       void __user *ucfg, unsigned long len);
long ptrace_bts_size(struct task_struct *child, struct ptrace_bts *pb);
long ptrace_bts_read(struct task_struct *child, struct ptrace_bts *pb,
		     void __user *urd, unsigned long len);
long ptrace_bts_get_one(struct task_struct *child,
			struct bts_struct __user *urec, unsigned long index);
long ptrace_bts_drain(struct task_struct *child,
		      struct bts_struct __user *ubuf, unsigned long len);

#endif /* _X86_KERNEL_PTRACE_BTS_H */
