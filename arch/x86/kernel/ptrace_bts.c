// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing of a debuggee through ptrace: the PTRACE_BTS_* requests,
 * see arch/x86/include/uapi/asm/ptrace-bts.h and
 * Documentation/arch/x86/ptrace-bts.rst.
 *
 * Each traced thread has at most one struct ptrace_bts, in
 * thread_struct::ptrace_bts, holding a Debug Store tracer (asm/ds.h) with
 * its buffer charged to the tracer's locked memory. Requests run in the
 * tracer, one at a time; all but STATUS, SIZE and READ with the tracee
 * frozen in a ptrace stop. Those three read a running tracee's trace too,
 * and an exited one's: exit_thread() stops the recording (ds_exit_thread())
 * and the trace stays until the tracer reaps the thread. The tracer stops
 * using the trace on the first of:
 *
 * - PTRACE_BTS_CONFIG without PTRACE_BTS_O_TRACE, or a reallocation;
 * - PTRACE_DETACH: ptrace_disable(), in the tracer, at once;
 * - any other end of the ptrace link (the tracee is reaped, the tracer
 *   exits or is killed): __ptrace_unlink() runs under tasklist_lock, so the
 *   recording stops there and the rest is queued to a workqueue.
 *
 * Whoever takes the pointer out of the thread (xchg) drops the link's use
 * of the trace. A request on a tracee that is not stopped, and a core dump,
 * hold a use of their own, taken under RCU; the trace and its charge go
 * with the last use. A queued event stop for a full buffer
 * (PTRACE_BTS_O_STOP), task work the tracee runs on its way to user mode,
 * holds only the struct's memory.
 */

#define pr_fmt(fmt) "ptrace_bts: " fmt

#include <linux/build_bug.h>
#include <linux/capability.h>
#include <linux/errno.h>
#include <linux/init.h>
#include <linux/minmax.h>
#include <linux/perf_event.h>
#include <linux/pid_namespace.h>
#include <linux/ptrace.h>
#include <linux/refcount.h>
#include <linux/regset.h>
#include <linux/sched.h>
#include <linux/sched/coredump.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/security.h>
#include <linux/signal.h>
#include <linux/slab.h>
#include <linux/task_work.h>
#include <linux/time_namespace.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>

#include <asm/ds.h>
#include <asm/ds_emulate.h>
#include <asm/ptrace.h>
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
/* Records DRAIN converts at a time. */
#define PTRACE_BTS_DRAIN_BATCH		(PAGE_SIZE / sizeof(struct bts_struct))

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
 * @stop_work:	  the tracee's own work that stops it for a full buffer
 * @stop_queued:  @stop_work is queued; a callback_head is queued once
 * @users:	  the users of the trace: the ptrace link, and each request
 *		  or core dump reading it; the trace goes with the last
 * @ref:	  the memory's: one for all @users, one for a queued
 *		  @stop_work, which the tracee runs on its own and may run
 *		  after the trace went
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
	struct callback_head	stop_work;
	atomic_t		stop_queued;
	refcount_t		users;
	refcount_t		ref;
	struct rcu_head		rcu;
};

/*
 * No padding, and each __u64 at a multiple of 8: one layout for 32-bit
 * and 64-bit tracers.
 */
static_assert(sizeof(struct ptrace_bts_config) == PTRACE_BTS_CONFIG_SIZE_VER2);
static_assert(offsetof(struct ptrace_bts_config, next) == 24);
static_assert(sizeof(struct ptrace_bts_read) == PTRACE_BTS_READ_SIZE_VER0);
static_assert(offsetof(struct ptrace_bts_read, lost) == 40);
/* The Debug Store's reasons for a gap are the ABI's. */
static_assert(DS_GAP_EXEC == PTRACE_BTS_GAP_EXEC &&
	      DS_GAP_EXEC_STOPPED == PTRACE_BTS_GAP_EXEC_STOPPED &&
	      DS_GAP_SIGNAL == PTRACE_BTS_GAP_SIGNAL &&
	      DS_GAP_SIGRETURN == PTRACE_BTS_GAP_SIGRETURN &&
	      DS_GAP_LOST == PTRACE_BTS_GAP_LOST &&
	      DS_GAP_PAUSED == PTRACE_BTS_GAP_PAUSED);

static struct workqueue_struct *ptrace_bts_wq;

static struct ptrace_bts *ptrace_bts_get(struct task_struct *child)
{
	return READ_ONCE(child->thread.ptrace_bts);
}

/*
 * The trace of a tracee that may be running or exiting: its pointer may be
 * taken out and its last user dropped meanwhile (the thread reaped by
 * another's exec, a tracer's death on another CPU). Drop with
 * ptrace_bts_put().
 */
static struct ptrace_bts *ptrace_bts_hold(struct task_struct *child)
{
	struct ptrace_bts *pb;

	rcu_read_lock();
	pb = ptrace_bts_get(child);
	if (pb && !refcount_inc_not_zero(&pb->users))
		pb = NULL;
	rcu_read_unlock();
	return pb;
}

/* The backend tracing @child, 0 (%PTRACE_BTS_BACKEND_ANY) when none is. */
static u32 ptrace_bts_in_use(struct task_struct *child)
{
	struct ptrace_bts *pb = ptrace_bts_get(child);

	return pb ? pb->backend : PTRACE_BTS_BACKEND_ANY;
}

/* --- lifetime --- */

static void ptrace_bts_unref(struct ptrace_bts *pb)
{
	if (refcount_dec_and_test(&pb->ref)) {
		put_task_struct(pb->task);
		kfree_rcu(pb, rcu);
	}
}

/*
 * Process context. The last user releases the Debug Store tracer and the
 * charge at once, whatever a queued event stop still holds: a trace whose
 * link ended must not stay until a sleeping tracee runs again.
 */
static void ptrace_bts_put(struct ptrace_bts *pb)
{
	if (!refcount_dec_and_test(&pb->users))
		return;
	/* Waits for a queued overflow notification: none is queued after. */
	ds_release(pb->tracer);
	mmdrop(pb->mm);
	ptrace_bts_unref(pb);
}

static void ptrace_bts_release_work(struct work_struct *work)
{
	ptrace_bts_put(container_of(work, struct ptrace_bts, release_work));
}

/* Take the context out of @child and free it. */
static void ptrace_bts_release(struct task_struct *child)
{
	struct ptrace_bts *pb = xchg(&child->thread.ptrace_bts, NULL);

	if (pb)
		ptrace_bts_put(pb);
}

void ptrace_bts_detach(struct task_struct *child)
{
	ptrace_bts_release(child);
}

/*
 * Under tasklist_lock: the release sleeps, so it waits for the workqueue,
 * but the recording stops now. The child is no longer traced; it must not
 * be single-stepped, signalled for a full buffer or leave records behind
 * in the meantime.
 */
void ptrace_bts_untrace(struct task_struct *child)
{
	struct ptrace_bts *pb = xchg(&child->thread.ptrace_bts, NULL);

	if (!pb)
		return;
	ds_suspend_atomic(pb->tracer);
	queue_work(ptrace_bts_wq, &pb->release_work);
}

void ptrace_bts_fork(struct task_struct *child)
{
	child->thread.ptrace_bts = NULL;
}

/* --- configuration --- */

/*
 * The stop work runs before the tracee is back in user mode only where the
 * overflow notification is a hard interrupt on the tracee's CPU: not from
 * a thread (PREEMPT_RT), not from the tick (no local APIC).
 */
static bool ptrace_bts_pause_seen_ok(void)
{
	return !IS_ENABLED(CONFIG_PREEMPT_RT) &&
	       arch_irq_work_has_interrupt();
}

/*
 * PTRACE_BTS_O_STOP, in the tracee on its way to user mode: the event stop.
 * The stop is the tracer's only while the trace it was queued for is still
 * the tracee's; a link that ended, or a new allocation, cancels it. Not at
 * exit, where task_work_run() runs what is left.
 */
static void ptrace_bts_stop(struct callback_head *head)
{
	struct ptrace_bts *pb = container_of(head, struct ptrace_bts,
					     stop_work);

	atomic_set(&pb->stop_queued, 0);
	/* A CONFIG may have taken O_STOP away since: no stop then. */
	if (!(current->flags & PF_EXITING) &&
	    READ_ONCE(current->thread.ptrace_bts) == pb &&
	    READ_ONCE(pb->flags) & PTRACE_BTS_O_STOP &&
	    refcount_inc_not_zero(&pb->users)) {
		/*
		 * The work runs on the first way back to user mode after the
		 * pause (the notification's interrupt, or the return from
		 * the system call the tracee slept in): no branch was
		 * missed, and the DRAIN that resumes must not show a gap.
		 */
		if (ptrace_bts_pause_seen_ok())
			ds_pause_seen(pb->tracer);
		ptrace_bts_put(pb);
		ptrace_notify(SIGTRAP | (PTRACE_EVENT_BTS << 8), 0);
		/*
		 * Resumed without a DRAIN or CLEAR, the tracee runs on with the
		 * recording paused: that does miss branches.
		 */
		if (READ_ONCE(current->thread.ptrace_bts) == pb &&
		    refcount_inc_not_zero(&pb->users)) {
			ds_pause_missed(pb->tracer);
			ptrace_bts_put(pb);
		}
	}
	ptrace_bts_unref(pb);
}

/*
 * Queue the event stop. The work holds the memory, not the trace, until it
 * has run: it may wait for a sleeping tracee long after the link ended.
 */
static void ptrace_bts_queue_stop(struct ptrace_bts *pb)
{
	if (atomic_xchg(&pb->stop_queued, 1))
		return;
	refcount_inc(&pb->ref);
	/*
	 * TWA_RESUME, not TWA_SIGNAL: a signal's notification would make a
	 * tracee sleeping in epoll_wait() and the like return EINTR (a
	 * scheduling record can fill the buffer as it goes to sleep). The
	 * stop comes on its way back to user mode; one running in user mode
	 * on another CPU is sent there by the kick.
	 */
	if (task_work_add(pb->task, &pb->stop_work, TWA_RESUME)) {
		atomic_set(&pb->stop_queued, 0);
		/* Never the last: the users' is dropped after irq_work_sync(). */
		ptrace_bts_unref(pb);
		return;
	}
	kick_process(pb->task);
}

/* PTRACE_BTS_O_SIGNAL: a siginfo a handler can tell from the kernel's own. */
static void ptrace_bts_signal(struct task_struct *child, u32 sig)
{
	struct kernel_siginfo info;

	clear_siginfo(&info);
	info.si_signo = sig;
	info.si_errno = ENOBUFS;
	info.si_code = SI_KERNEL;
	do_send_sig_info(sig, &info, child, PIDTYPE_PID);
}

/*
 * The buffer is full: the Debug Store paused recording until a DRAIN or
 * CLEAR. The tracee stops (O_STOP) or gets the signal (O_SIGNAL). irq_work
 * context.
 */
static void ptrace_bts_overflow(struct ds_tracer *tracer, void *cookie)
{
	struct ptrace_bts *pb = cookie;
	struct task_struct *child = pb->task;
	/* A CONFIG changing either clears it before the mode changes. */
	u32 sig = READ_ONCE(pb->signal);
	bool stop = READ_ONCE(pb->flags) & PTRACE_BTS_O_STOP;

	/*
	 * __ptrace_unlink() takes the context out under tasklist_lock: a
	 * child whose link ended meanwhile gets no signal and no stop.
	 */
	read_lock(&tasklist_lock);
	if (READ_ONCE(child->thread.ptrace_bts) == pb) {
		if (stop)
			ptrace_bts_queue_stop(pb);
		else if (sig)
			ptrace_bts_signal(child, sig);
	}
	read_unlock(&tasklist_lock);
}

static void ptrace_bts_ds_config(struct ptrace_bts *pb,
				 const struct ptrace_bts_config *cfg,
				 struct ds_config *dcfg)
{
	memset(dcfg, 0, sizeof(*dcfg));
	/* Rounded down to whole records, at least one. */
	dcfg->size = max_t(size_t, cfg->size, sizeof(struct bts_struct));
	dcfg->flags = DS_USER;
	if (cfg->flags & PTRACE_BTS_O_SCHED)
		dcfg->flags |= DS_TIMESTAMPS;
	if (cfg->flags & PTRACE_BTS_O_GAPS)
		dcfg->flags |= DS_GAPS;
	if (cfg->flags & PTRACE_BTS_O_OVERFLOW) {
		dcfg->overflow = DS_OVERFLOW_NOTIFY;
		dcfg->notify = ptrace_bts_overflow;
		dcfg->cookie = pb;
	}
}

/*
 * A buffer that pauses when full must hold a branch after what a resume
 * puts in it first (the pause's mark, the arrival record), or the tracee
 * would stop again and again without running.
 */
static int ptrace_bts_check_room(u32 flags, size_t records)
{
	size_t need = 1;

	if (!(flags & PTRACE_BTS_O_OVERFLOW))
		return 0;
	if (flags & PTRACE_BTS_O_GAPS)
		need++;
	if (flags & PTRACE_BTS_O_SCHED)
		need++;
	return records < need ? -EINVAL : 0;
}

static bool ptrace_bts_capable(int cap, bool audit)
{
	return audit ? capable(cap) : ns_capable_noaudit(&init_user_ns, cap);
}

/*
 * Would perf give the tracer BTS on @child? The same trace as a perf event
 * is the user-mode branch-instructions event with a period of 1 on @child,
 * which perf's Intel driver runs on BTS (a task's trace never has kernel
 * branches). perf_event_open() asks of it, in this order: a paranoid level
 * above 2 wants CAP_SYS_ADMIN (Debian's perf gives level 3 that meaning;
 * asked here on every kernel, stricter than perf where it does not), the
 * LSM hook of an open, and CAP_PERFMON or PTRACE_MODE_READ_REALCREDS access to the task
 * (perf_check_permission()). The paranoid levels below 3 restrict only
 * kernel and CPU-wide events, and this is neither.
 *
 * A request for any backend only asks whether it may have the hardware:
 * its capability checks are not audited (@audit false), as a denial is no
 * failure there, and a root debugger that never asked for privilege is not
 * marked as having used it.
 *
 * Return: 0 if perf would, -EACCES or the LSM's error if not.
 */
static int ptrace_bts_perf_allows(struct task_struct *child, bool audit)
{
	int err;

	if (READ_ONCE(sysctl_perf_event_paranoid) > 2 &&
	    !ptrace_bts_capable(CAP_SYS_ADMIN, audit))
		return -EACCES;
	err = security_perf_event_open(PERF_SECURITY_OPEN);
	if (err)
		return err;
	if (!ptrace_bts_capable(CAP_PERFMON, audit) &&
	    !ptrace_bts_capable(CAP_SYS_ADMIN, audit) &&
	    !ptrace_may_access(child, PTRACE_MODE_READ_REALCREDS))
		return -EACCES;
	return 0;
}

/**
 * ptrace_bts_choose() - the allocator's backend for a PTRACE_BTS_CONFIG
 * @child:   the tracee
 * @backend: the request's %PTRACE_BTS_BACKEND_*
 * @id:	     the backend to ask the allocator for
 * @refusal: 0, or why the hardware was refused to a request for any
 *	     backend, the error to give if there is no emulated one either
 *
 * The hardware only where perf would give the tracer BTS on @child and
 * ds.force_emulation is off; a missing BTS comes before a refused one.
 * Checked here, at the allocation, as perf checks at perf_event_open():
 * a policy that tightens later leaves running traces alone.
 *
 * Return: 0, -EOPNOTSUPP (no BTS for %PTRACE_BTS_BACKEND_HARDWARE), or
 * -EACCES (or an LSM's error) for a refused %PTRACE_BTS_BACKEND_HARDWARE.
 */
static int ptrace_bts_choose(struct task_struct *child, u32 backend,
			     enum ds_backend_id *id, int *refusal)
{
	bool hw = ds_hw_present(DS_BTS);
	int err;

	*refusal = 0;
	switch (backend) {
	case PTRACE_BTS_BACKEND_EMULATED:
		*id = DS_BACKEND_EMULATED;
		return 0;
	case PTRACE_BTS_BACKEND_HARDWARE:
		if (!hw)
			return -EOPNOTSUPP;
		/* The administrator's choice, for every tracer. */
		if (ds_emu_forced())
			return -EACCES;
		err = ptrace_bts_perf_allows(child, true);
		if (err)
			return err;
		*id = DS_BACKEND_HARDWARE;
		return 0;
	default:
		*id = DS_BACKEND_AUTO;
		if (!hw)
			return 0;
		if (ds_emu_forced()) {
			*id = DS_BACKEND_EMULATED;
			return 0;
		}
		*refusal = ptrace_bts_perf_allows(child, false);
		if (*refusal)
			*id = DS_BACKEND_EMULATED;
		return 0;
	}
}

/*
 * Which backend the allocator chose. Asked once, at allocation: a
 * geometry read collects the records of a tracee running on another CPU
 * with an IPI to that CPU, needless for a flags-only CONFIG, and a tracer
 * never changes its backend.
 */
static int ptrace_bts_backend(struct ds_tracer *tracer, u32 *backend)
{
	struct ds_geometry geom;
	int err;

	err = ds_get_geometry(tracer, &geom);
	if (err)
		return err;
	*backend = geom.backend == DS_BACKEND_HARDWARE ?
		   PTRACE_BTS_BACKEND_HARDWARE : PTRACE_BTS_BACKEND_EMULATED;
	return 0;
}

static int ptrace_bts_geometry(struct ptrace_bts *pb, struct ds_geometry *geom)
{
	if (!pb) {
		memset(geom, 0, sizeof(*geom));
		return 0;
	}
	return ds_get_geometry(pb->tracer, geom);
}

/* Where a new allocation's numbers start: after the old one's, or at 0. */
static int ptrace_bts_next_base(struct task_struct *child, u64 *base)
{
	struct ptrace_bts *pb = ptrace_bts_get(child);
	struct ds_geometry geom;
	int err;

	*base = 0;
	if (!pb)
		return 0;
	err = ds_get_geometry(pb->tracer, &geom);
	if (!err)
		*base = pb->seq_base + geom.seq + 1;
	return err;
}

static struct ds_tracer *ptrace_bts_request_ds(struct task_struct *child,
					       const struct ds_config *dcfg)
{
	struct ds_tracer *tracer = ds_request_bts_task(child, dcfg);

	/*
	 * A tracer of an earlier ptrace link may still be on its way out,
	 * holding the hardware or its charge.
	 */
	if (PTR_ERR_OR_ZERO(tracer) == -EBUSY ||
	    PTR_ERR_OR_ZERO(tracer) == -EDQUOT) {
		flush_workqueue(ptrace_bts_wq);
		tracer = ds_request_bts_task(child, dcfg);
	}
	return tracer;
}

/*
 * Apply @cfg to the trace there is with @op: ds_update(), the flags alone,
 * or ds_resize(), a new buffer. Nothing changes if @op fails.
 */
static int ptrace_bts_reconfig(struct ptrace_bts *pb,
			       const struct ptrace_bts_config *cfg,
			       int (*op)(struct ds_tracer *tracer,
					 const struct ds_config *dcfg))
{
	u32 old_signal, old_flags;
	struct ds_config dcfg;
	int err;

	/* Before the mode: the overflow callback reads them locklessly. */
	old_signal = pb->signal;
	old_flags = pb->flags;
	WRITE_ONCE(pb->signal,
		   cfg->flags & PTRACE_BTS_O_SIGNAL ? cfg->signal : 0);
	WRITE_ONCE(pb->flags, cfg->flags & PTRACE_BTS_O_STATE);
	ptrace_bts_ds_config(pb, cfg, &dcfg);
	err = op(pb->tracer, &dcfg);
	if (err) {
		WRITE_ONCE(pb->signal, old_signal);
		WRITE_ONCE(pb->flags, old_flags);
	}
	return err;
}

/* Change the flags of the existing buffer; the records stay. */
static int ptrace_bts_update(struct task_struct *child,
			     const struct ptrace_bts_config *cfg)
{
	struct ptrace_bts *pb = ptrace_bts_get(child);
	struct ds_geometry geom;

	if (!pb)
		return -EINVAL;
	/* Stopped at an exec (ds_exec_thread()): only a new buffer traces. */
	if (ptrace_bts_geometry(pb, &geom) ||
	    geom.status & DS_STATUS_DETACHED ||
	    ptrace_bts_check_room(cfg->flags, geom.capacity))
		return -EINVAL;
	return ptrace_bts_reconfig(pb, cfg, ds_update);
}

/*
 * A stop queued for the full buffer a resize dropped would announce
 * records that are gone. The tracee is stopped: the work is not running,
 * and ds_resize() waited for the notification that queued it.
 */
static void ptrace_bts_cancel_stop(struct ptrace_bts *pb)
{
	if (!task_work_cancel(pb->task, &pb->stop_work))
		return;
	atomic_set(&pb->stop_queued, 0);
	/* Never the last: the trace's users hold one. */
	ptrace_bts_unref(pb);
}

/*
 * Does a new buffer for @child keep the trace there is, on its backend?
 * Not where the request names another backend, or the hardware in use is
 * refused now, nor after an exec stopped the trace: its records are of
 * an image that the new ones must not be read with.
 */
static struct ptrace_bts *ptrace_bts_resizable(struct task_struct *child,
					       enum ds_backend_id want)
{
	struct ptrace_bts *pb = ptrace_bts_get(child);
	struct ds_geometry geom;

	if (!pb || ptrace_bts_geometry(pb, &geom) ||
	    geom.status & DS_STATUS_DETACHED)
		return NULL;
	if (want != DS_BACKEND_AUTO && want != geom.backend)
		return NULL;
	return pb;
}

/* A new buffer for the trace there is: if none can be had, it stays. */
static int ptrace_bts_resize(struct ptrace_bts *pb,
			     const struct ptrace_bts_config *cfg)
{
	int err;

	err = ptrace_bts_reconfig(pb, cfg, ds_resize);
	if (!err)
		ptrace_bts_cancel_stop(pb);
	return err;
}

static int ptrace_bts_alloc(struct task_struct *child,
			    const struct ptrace_bts_config *cfg)
{
	enum ds_backend_id backend;
	struct mm_struct *mm;
	struct ds_config dcfg;
	struct ptrace_bts *pb;
	int err, refusal;
	u64 seq_base;

	if (!cfg->size || cfg->size > DS_MAX_BUFFER_SIZE)
		return -EINVAL;
	/* Rounded as the allocation rounds: down, but at least one. */
	err = ptrace_bts_check_room(cfg->flags,
				    max_t(size_t, cfg->size,
					  sizeof(struct bts_struct)) /
				    sizeof(struct bts_struct));
	if (err)
		return err;
	/* A refused request leaves the trace there is alone. */
	err = ptrace_bts_choose(child, cfg->backend, &backend, &refusal);
	if (err)
		return err;
	pb = ptrace_bts_resizable(child, backend);
	if (pb)
		return ptrace_bts_resize(pb, cfg);
	/*
	 * The old records go; so does their charge, before the new one. Their
	 * numbers do not come back: a reader of the old trace sees a gap.
	 */
	err = ptrace_bts_next_base(child, &seq_base);
	if (err)
		return err;
	ptrace_bts_release(child);
	mm = get_task_mm(child);
	if (!mm)
		return -ESRCH;

	pb = kzalloc(sizeof(*pb), GFP_KERNEL_ACCOUNT);
	if (!pb) {
		err = -ENOMEM;
		goto put_mm;
	}
	INIT_WORK(&pb->release_work, ptrace_bts_release_work);
	init_task_work(&pb->stop_work, ptrace_bts_stop);
	refcount_set(&pb->users, 1);
	refcount_set(&pb->ref, 1);
	pb->flags = cfg->flags & PTRACE_BTS_O_STATE;
	pb->signal = cfg->flags & PTRACE_BTS_O_SIGNAL ? cfg->signal : 0;
	pb->task = get_task_struct(child);
	mmgrab(mm);
	pb->mm = mm;
	pb->seq_base = seq_base;

	ptrace_bts_ds_config(pb, cfg, &dcfg);
	dcfg.backend = backend;
	pb->tracer = ptrace_bts_request_ds(child, &dcfg);
	if (IS_ERR(pb->tracer)) {
		err = PTR_ERR(pb->tracer);
		pb->tracer = NULL;
		/* The hardware was refused, and nothing else can trace. */
		if (err == -EOPNOTSUPP && refusal)
			err = refusal;
		goto put_pb;
	}
	err = ptrace_bts_backend(pb->tracer, &pb->backend);
	if (err)
		goto put_pb;
	WRITE_ONCE(child->thread.ptrace_bts, pb);
	mmput(mm);
	return 0;

put_pb:
	/* The only user: the tracer, if any, goes with it. */
	ptrace_bts_put(pb);
put_mm:
	mmput(mm);
	return err;
}

/* May the tracer of @child see the control flow of the image @mm? */
static bool ptrace_bts_mm_readable(struct task_struct *child,
				   struct mm_struct *mm)
{
	return get_dumpable(mm) == SUID_DUMP_USER ||
	       ptracer_capable(child, mm->user_ns);
}

/*
 * The records show the tracee's control flow: ask what PTRACE_PEEKTEXT
 * asks (ptrace_access_vm()). After an exec of an image its user may not
 * read, ds_exec_thread() stopped the trace; only a tracer that may read
 * such an image starts another.
 */
static bool ptrace_bts_may_read(struct task_struct *child)
{
	struct mm_struct *mm = get_task_mm(child);
	bool ok;

	/* Past exit_mm(): the image as it stood when the thread left it. */
	if (!mm)
		return child->flags & PF_EXITING &&
		       (child->user_dumpable ||
			ptracer_capable(child, &init_user_ns));
	ok = ptrace_bts_mm_readable(child, mm);
	mmput(mm);
	return ok;
}

/**
 * ptrace_bts_check_read() - may the tracer read the records now
 * @child: the tracee
 * @pb:	   its trace, or NULL
 * @geom:  the trace's geometry
 *
 * Asked at every request that shows records or their number, as
 * PTRACE_PEEKTEXT asks at every access: PR_SET_DUMPABLE(0) or a change of
 * credentials in the middle of a trace stops the reading until the tracee
 * is dumpable again, records of before included. The image the trace was
 * allocated on must pass too, as it stood when the tracee left it; it is
 * the only one asked once the trace stopped at an exec of an image its
 * user may not read, whose records are all of the images before.
 *
 * Return: 0 or -EPERM, as CONFIG for a tracee that is not dumpable.
 */
static int ptrace_bts_check_read(struct task_struct *child,
				 struct ptrace_bts *pb,
				 const struct ds_geometry *geom)
{
	bool ok;

	if (!pb)
		return 0;
	ok = ptrace_bts_mm_readable(child, pb->mm);
	/* Stopped at a private exec, the image of now has no records. */
	if (ok && (!(geom->status & DS_STATUS_DETACHED) ||
		   child->flags & PF_EXITING))
		ok = ptrace_bts_may_read(child);
	return ok ? 0 : -EPERM;
}

/*
 * A size-versioned argument: at least @min bytes, at most a page, and the
 * bytes beyond what this kernel knows zero (copy_struct_from_user()).
 */
static int ptrace_bts_copy_arg(void *dst, size_t size,
			       const void __user *src, unsigned long len,
			       size_t min)
{
	if (len < min)
		return -EINVAL;
	if (len > PTRACE_BTS_CONFIG_SIZE_MAX)
		return -E2BIG;
	return copy_struct_from_user(dst, size, src, len);
}

static int ptrace_bts_config(struct task_struct *child,
			     const void __user *ucfg, unsigned long len)
{
	struct ptrace_bts_config cfg;
	int err;

	err = ptrace_bts_copy_arg(&cfg, sizeof(cfg), ucfg, len,
				  PTRACE_BTS_CONFIG_SIZE_VER0);
	if (err)
		return err;
	if (cfg.flags & ~PTRACE_BTS_O_MASK)
		return -EINVAL;
	if ((cfg.flags & PTRACE_BTS_O_OVERFLOW) == PTRACE_BTS_O_OVERFLOW)
		return -EINVAL;
	/* SIGKILL and SIGSTOP would take the tracee from its tracer. */
	if (cfg.flags & PTRACE_BTS_O_SIGNAL &&
	    (!cfg.signal || !valid_signal(cfg.signal) ||
	     sig_kernel_only(cfg.signal)))
		return -EINVAL;
	if (cfg.backend > PTRACE_BTS_BACKEND_EMULATED)
		return -EINVAL;
	/* Stopping works whatever the backend, and on an untraced thread. */
	if (!(cfg.flags & PTRACE_BTS_O_TRACE)) {
		ptrace_bts_release(child);
		return 0;
	}
	if (!ptrace_bts_may_read(child))
		return -EPERM;
	/*
	 * Only an allocation chooses the backend; otherwise it may be named
	 * as it is, so that a tracer can write back what STATUS read.
	 */
	if (!(cfg.flags & PTRACE_BTS_O_ALLOC) &&
	    cfg.backend != PTRACE_BTS_BACKEND_ANY &&
	    cfg.backend != ptrace_bts_in_use(child))
		return -EINVAL;
	if (cfg.flags & PTRACE_BTS_O_ALLOC)
		return ptrace_bts_alloc(child, &cfg);
	return ptrace_bts_update(child, &cfg);
}

/* --- reading --- */

/*
 * The state, the next sequence number and the drops, as the tracer sees
 * them. The number of branches the tracee took is the trace's: only a
 * tracer that may read the trace learns it.
 */
static void ptrace_bts_position(struct task_struct *child,
				struct ptrace_bts *pb,
				const struct ds_geometry *geom, u32 *state,
				u64 *next, u64 *lost)
{
	*state = 0;
	*next = 0;
	*lost = 0;
	if (!pb)
		return;
	if (geom->status & DS_STATUS_PAUSED)
		*state |= PTRACE_BTS_S_PAUSED;
	/* ds_exit_thread() or ds_exec_thread() ended the recording. */
	if (geom->status & DS_STATUS_DETACHED)
		*state |= child->flags & PF_EXITING ? PTRACE_BTS_S_EXITED :
						      PTRACE_BTS_S_STOPPED_EXEC;
	if (ptrace_bts_check_read(child, pb, geom)) {
		*state |= PTRACE_BTS_S_UNREADABLE;
		return;
	}
	*next = pb->seq_base + geom->seq;
	*lost = geom->unwritten;
}

static long ptrace_bts_status(struct task_struct *child,
			      struct ptrace_bts *pb, void __user *ucfg,
			      unsigned long len)
{
	struct ptrace_bts_config cfg = {
		.bts_size = sizeof(struct bts_struct),
	};
	struct ds_geometry geom;
	int err;

	err = ptrace_bts_geometry(pb, &geom);
	if (err)
		return err;
	if (pb) {
		cfg.size = geom.capacity * sizeof(struct bts_struct);
		cfg.flags = pb->flags;
		/* Stopped at an exec (ds_exec_thread()); the records stay. */
		if (geom.status & DS_STATUS_DETACHED)
			cfg.flags &= ~PTRACE_BTS_O_TRACE;
		cfg.signal = pb->signal;
		cfg.backend = pb->backend;
		ptrace_bts_position(child, pb, &geom, &cfg.state, &cfg.next,
				    &cfg.lost);
	}
	if (copy_to_user(ucfg, &cfg, min_t(unsigned long, len, sizeof(cfg))))
		return -EFAULT;
	return sizeof(cfg);
}

static long ptrace_bts_size(struct task_struct *child, struct ptrace_bts *pb)
{
	struct ds_geometry geom;
	int err;

	err = ptrace_bts_geometry(pb, &geom);
	if (!err)
		err = ptrace_bts_check_read(child, pb, &geom);
	return err ?: geom.count;
}

/* The tracee's thread id as the tracer sees it. */
static u32 ptrace_bts_tid(struct task_struct *child)
{
	return task_pid_nr_ns(child, task_active_pid_ns(current));
}

/*
 * An event's CLOCK_MONOTONIC as the tracer reads that clock: the records
 * are stamped with the host's, the tracer compares them with its own
 * clock_gettime(), in its time namespace.
 */
static u64 ptrace_bts_clock(u64 ns)
{
	struct timespec64 ts = ns_to_timespec64(ns);

	timens_add_monotonic(&ts);
	return timespec64_to_ns(&ts);
}

static void ptrace_bts_convert(const struct ds_bts_record *rec, u32 tid,
			       struct bts_struct *out)
{
	enum ds_bts_qualifier qual = ds_bts_record_event(rec);

	memset(out, 0, sizeof(*out));
	switch (qual) {
	case DS_BTS_BRANCH:
		out->qualifier = BTS_BRANCH;
		out->variant.lbr.from = rec->from;
		out->variant.lbr.to = rec->to;
		return;
	case DS_BTS_GAP:
		out->qualifier = BTS_GAP;
		out->variant.gap.ip = rec->to;
		out->variant.gap.reason = rec->flags & DS_GAP_REASON_MASK;
		out->variant.gap.info = rec->flags >> DS_GAP_DATUM_SHIFT;
		return;
	default:
		break;
	}
	out->qualifier = qual == DS_BTS_TASK_ARRIVES ? BTS_TASK_ARRIVES :
						       BTS_TASK_DEPARTS;
	out->variant.event.clock = ptrace_bts_clock(rec->to);
	out->variant.event.pid = tid;
}

/* Record @i, 0 the oldest, in the user's format. */
static int ptrace_bts_read_one(struct ptrace_bts *pb, size_t i, u32 tid,
			       struct bts_struct *out)
{
	struct ds_bts_record rec;
	ssize_t ret;

	ret = ds_read_record(pb->tracer, i, &rec, sizeof(rec));
	if (ret < 0)
		return ret;
	ptrace_bts_convert(&rec, tid, out);
	return 0;
}

static long ptrace_bts_get_one(struct task_struct *child,
			       struct bts_struct __user *urec,
			       unsigned long index)
{
	struct ptrace_bts *pb = ptrace_bts_get(child);
	struct ds_geometry geom;
	struct bts_struct out;
	int err;

	err = ptrace_bts_geometry(pb, &geom);
	if (!err)
		err = ptrace_bts_check_read(child, pb, &geom);
	if (err)
		return err;
	if (index >= geom.count)
		return -EINVAL;
	/* Index 0 is the newest record. */
	err = ptrace_bts_read_one(pb, geom.count - 1 - index,
				  ptrace_bts_tid(child), &out);
	if (err)
		return err;
	if (copy_to_user(urec, &out, sizeof(out)))
		return -EFAULT;
	return 0;
}

static long ptrace_bts_clear(struct task_struct *child)
{
	struct ptrace_bts *pb = ptrace_bts_get(child);

	return pb ? ds_clear(pb->tracer) : 0;
}

/*
 * Copy records from sequence number *@seq on into @ubuf, up to @max, in
 * batches; *@seq becomes the number of the first one copied, *@next the
 * number after the last. A batch that does not continue the one before
 * (a running tracee's buffer wrapped meanwhile) ends the read.
 */
static long ptrace_bts_read_seq(struct ptrace_bts *pb, u32 tid, u64 *seq,
				u64 *next, struct bts_struct __user *ubuf,
				size_t max)
{
	struct ds_bts_record *raw;
	struct bts_struct *batch;
	size_t done = 0, i;
	long err = 0;
	ssize_t n;
	u64 at;

	batch = kmalloc_array(PTRACE_BTS_DRAIN_BATCH, sizeof(*batch),
			      GFP_KERNEL);
	if (!batch)
		return -ENOMEM;
	raw = kmalloc_array(PTRACE_BTS_DRAIN_BATCH, sizeof(*raw), GFP_KERNEL);
	if (!raw) {
		err = -ENOMEM;
		goto free_batch;
	}

	*next = *seq;
	while (done < max) {
		at = *next;
		n = ds_read_seq(pb->tracer, &at, raw,
				min_t(size_t, max - done,
				      PTRACE_BTS_DRAIN_BATCH) * sizeof(*raw));
		if (n < 0) {
			err = n;
			goto free_raw;
		}
		if (!done)
			*seq = *next = at;
		if (!n || at != *next)
			break;
		for (i = 0; i < (size_t)n; i++)
			ptrace_bts_convert(&raw[i], tid, &batch[i]);
		if (copy_to_user(ubuf + done, batch, n * sizeof(*batch))) {
			err = -EFAULT;
			goto free_raw;
		}
		done += n;
		*next += n;
		cond_resched();
	}
	err = done;

free_raw:
	kfree(raw);
free_batch:
	kfree(batch);
	return err;
}

static long ptrace_bts_drain(struct task_struct *child,
			     struct bts_struct __user *ubuf, unsigned long len)
{
	struct ptrace_bts *pb = ptrace_bts_get(child);
	struct ds_geometry geom;
	u64 seq, next;
	long n;
	int err;

	err = ptrace_bts_geometry(pb, &geom);
	if (!err)
		err = ptrace_bts_check_read(child, pb, &geom);
	if (err || !geom.count)
		return err;
	if (len / sizeof(struct bts_struct) < geom.count)
		return -EINVAL;
	seq = geom.seq - geom.count;
	n = ptrace_bts_read_seq(pb, ptrace_bts_tid(child), &seq, &next, ubuf,
				geom.count);
	if (n < 0)
		return n;
	/* The tracee is stopped: the records counted are all there. */
	if (n != geom.count)
		return -EINVAL;
	err = ds_clear(pb->tracer);
	return err ?: n;
}

static long ptrace_bts_read(struct task_struct *child, struct ptrace_bts *pb,
			    void __user *urd, unsigned long len)
{
	struct ptrace_bts_read rd;
	struct ds_geometry geom;
	u64 next, seq;
	size_t max;
	long ret;

	ret = ptrace_bts_copy_arg(&rd, sizeof(rd), urd, len,
				  PTRACE_BTS_READ_SIZE_VER0);
	if (ret)
		return ret;
	ret = ptrace_bts_geometry(pb, &geom);
	if (!ret)
		ret = ptrace_bts_check_read(child, pb, &geom);
	if (ret)
		return ret;
	if (rd.size < sizeof(struct bts_struct) || rd.__reserved)
		return -EINVAL;
	/* An i386 kernel's pointers have 32 bits. */
	if (rd.buf != (unsigned long)rd.buf)
		return -EFAULT;
	ptrace_bts_position(child, pb, &geom, &rd.state, &next, &rd.lost);
	if (rd.seq > next)
		return -ERANGE;

	rd.first = rd.seq;
	rd.next = rd.seq;
	if (pb && rd.seq < next) {
		/* Numbers below the base are an older allocation's: gone. */
		seq = rd.seq > pb->seq_base ? rd.seq - pb->seq_base : 0;
		/* Clamped before dividing: no 64-bit division on i386. */
		max = (size_t)min_t(u64, rd.size, SIZE_MAX) /
		      sizeof(struct bts_struct);
		/*
		 * What the snapshot counted, no more: the permission and the
		 * state were asked of it, and a running tracee's records
		 * would otherwise keep coming.
		 */
		max = min_t(u64, max, next - rd.seq);
		ret = ptrace_bts_read_seq(pb, ptrace_bts_tid(child), &seq,
					  &next, u64_to_user_ptr(rd.buf), max);
		if (ret < 0)
			return ret;
		rd.first = pb->seq_base + seq;
		rd.next = pb->seq_base + next;
	} else {
		rd.first = next;
		rd.next = next;
	}
	if (copy_to_user(urd + offsetof(struct ptrace_bts_read, first),
			 &rd.first, sizeof(rd) -
			 offsetof(struct ptrace_bts_read, first)))
		return -EFAULT;
	return ret;
}

/* --- the NT_X86_BTS regset: PTRACE_GETREGSET and core dumps --- */

/*
 * The records a regset read gives, 0 if none may be read. In a core dump
 * the tracer is not there to ask: the rule is the one its requests obey,
 * with the credentials the ptrace link recorded.
 */
static int ptrace_bts_regset_check(struct task_struct *target,
				   struct ptrace_bts *pb,
				   const struct ds_geometry *geom)
{
	/*
	 * A core dump goes to the process's owner, not to the tracer, and
	 * the tracer's capabilities say nothing of what the owner may see:
	 * only a trace whose images were the owner's to read, the one it
	 * started on and the one dumping, is in it.
	 */
	if (same_thread_group(current, target) &&
	    (get_dumpable(pb->mm) != SUID_DUMP_USER || !current->mm ||
	     get_dumpable(current->mm) != SUID_DUMP_USER))
		return -EPERM;
	return ptrace_bts_check_read(target, pb, geom);
}

static size_t ptrace_bts_regset_count(struct task_struct *target,
				      struct ptrace_bts *pb,
				      struct ds_geometry *geom)
{
	if (!pb || ptrace_bts_geometry(pb, geom) ||
	    ptrace_bts_regset_check(target, pb, geom))
		return 0;
	return geom->count;
}

int ptrace_bts_regset_active(struct task_struct *target,
			     const struct user_regset *regset)
{
	struct ptrace_bts *pb = ptrace_bts_hold(target);
	struct ds_geometry geom;
	int n;

	n = ptrace_bts_regset_count(target, pb, &geom);
	if (pb)
		ptrace_bts_put(pb);
	return n;
}

/* In a core dump, the tracer may detach meanwhile: hold the trace. */
int ptrace_bts_regset_get(struct task_struct *target,
			  const struct user_regset *regset, struct membuf to)
{
	struct ptrace_bts *pb = ptrace_bts_hold(target);
	u32 tid = ptrace_bts_tid(target);
	struct ds_bts_record *raw;
	struct bts_struct *batch;
	struct ds_geometry geom;
	size_t n, k, i;
	ssize_t got;
	int err = 0;
	u64 seq, at;

	if (!pb)
		return -ENODATA;
	err = ptrace_bts_geometry(pb, &geom);
	if (!err)
		err = ptrace_bts_regset_check(target, pb, &geom);
	if (err)
		goto put_pb;

	raw = kmalloc_array(PTRACE_BTS_DRAIN_BATCH, sizeof(*raw), GFP_KERNEL);
	batch = kmalloc_array(PTRACE_BTS_DRAIN_BATCH, sizeof(*batch),
			      GFP_KERNEL);
	if (!raw || !batch) {
		err = -ENOMEM;
		goto free;
	}
	/*
	 * The newest that fit, up to the snapshot's last: the branches that
	 * led here. A dumping thread's own scheduling records may overwrite
	 * the oldest meanwhile: the read goes on from what is left.
	 */
	n = min_t(size_t, geom.count, to.left / sizeof(*batch));
	for (seq = geom.seq - n; seq < geom.seq; seq = at + got) {
		k = min_t(u64, geom.seq - seq, PTRACE_BTS_DRAIN_BATCH);
		at = seq;
		got = ds_read_seq(pb->tracer, &at, raw, k * sizeof(*raw));
		if (got < 0) {
			err = got;
			goto free;
		}
		if (!got || at >= geom.seq)
			break;
		got = min_t(u64, got, geom.seq - at);
		for (i = 0; i < got; i++)
			ptrace_bts_convert(&raw[i], tid, &batch[i]);
		membuf_write(&to, batch, got * sizeof(*batch));
	}
	err = to.left;
free:
	kfree(batch);
	kfree(raw);
put_pb:
	ptrace_bts_put(pb);
	return err;
}

/* The requests that work on a tracee in any state: ptrace_bts_any_state(). */
static long ptrace_bts_read_request(struct task_struct *child, long request,
				    void __user *addr, unsigned long data)
{
	struct ptrace_bts *pb = ptrace_bts_hold(child);
	long ret;

	switch (request) {
	case PTRACE_BTS_STATUS:
		ret = ptrace_bts_status(child, pb, addr, data);
		break;
	case PTRACE_BTS_SIZE:
		ret = ptrace_bts_size(child, pb);
		break;
	default:
		ret = ptrace_bts_read(child, pb, addr, data);
		break;
	}
	if (pb)
		ptrace_bts_put(pb);
	return ret;
}

long ptrace_bts_request(struct task_struct *child, long request,
			void __user *addr, unsigned long data)
{
	if (ptrace_bts_any_state(request))
		return ptrace_bts_read_request(child, request, addr, data);
	switch (request) {
	case PTRACE_BTS_CONFIG:
		return ptrace_bts_config(child, addr, data);
	case PTRACE_BTS_GET:
		return ptrace_bts_get_one(child, addr, data);
	case PTRACE_BTS_CLEAR:
		return ptrace_bts_clear(child);
	case PTRACE_BTS_DRAIN:
		return ptrace_bts_drain(child, addr, data);
	default:
		return -EIO;
	}
}

static int __init ptrace_bts_init(void)
{
	ptrace_bts_wq = alloc_workqueue("ptrace_bts", WQ_UNBOUND, 0);
	return ptrace_bts_wq ? 0 : -ENOMEM;
}
core_initcall(ptrace_bts_init);
