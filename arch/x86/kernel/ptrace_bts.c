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
 * with the last use. An event stop for a full buffer (PTRACE_BTS_O_STOP)
 * is a thread flag, TIF_DS_STOP, that the tracee acts on when it next
 * returns to user mode; it holds nothing.
 *
 * This file has the trace's lifetime, its configuration and the event
 * stop; ptrace_bts_read.c the reading of the records and the regset.
 */

#define pr_fmt(fmt) "ptrace_bts: " fmt

#include <linux/build_bug.h>
#include <linux/capability.h>
#include <linux/errno.h>
#include <linux/init.h>
#include <linux/minmax.h>
#include <linux/perf_event.h>
#include <linux/ptrace.h>
#include <linux/refcount.h>
#include <linux/sched.h>
#include <linux/sched/coredump.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/security.h>
#include <linux/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/uprobes.h>
#include <linux/workqueue.h>

#include <asm/ds.h>
#include <asm/ds_emulate.h>
#include <asm/ptrace.h>
#include <asm/ptrace-bts.h>

#include "ptrace_bts.h"

/*
 * No padding, and each __u64 at a multiple of 8: one layout for 32-bit
 * and 64-bit tracers.
 */
static_assert(sizeof(struct ptrace_bts_config) == PTRACE_BTS_CONFIG_SIZE_VER2);
static_assert(offsetof(struct ptrace_bts_config, next) == 24);

static struct workqueue_struct *ptrace_bts_wq;

/*
 * The trace of a tracee that may be running or exiting: its pointer may be
 * taken out and its last user dropped meanwhile (the thread reaped by
 * another's exec, a tracer's death on another CPU). Drop with
 * ptrace_bts_put().
 */
struct ptrace_bts *ptrace_bts_hold(struct task_struct *child)
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

/* Process context. The last user releases the trace and its charge. */
void ptrace_bts_put(struct ptrace_bts *pb)
{
	if (!refcount_dec_and_test(&pb->users))
		return;
	/* Waits for a queued overflow notification: none is queued after. */
	ds_release(pb->tracer);
	mmdrop(pb->mm);
	put_task_struct(pb->task);
	kfree_rcu(pb, rcu);
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
	clear_tsk_thread_flag(child, TIF_DS_STOP);
}

/* --- configuration --- */

/*
 * The stop comes before the tracee is back in user mode only where the
 * overflow notification is a hard interrupt on the tracee's CPU: not from
 * a thread (PREEMPT_RT), not from the tick (no local APIC).
 */
static bool ptrace_bts_pause_seen_ok(void)
{
	return !IS_ENABLED(CONFIG_PREEMPT_RT) &&
	       arch_irq_work_has_interrupt();
}

/*
 * Is the trace still paused, as the stop would announce? *@next is the
 * event message: the number the next record gets, as STATUS reports it.
 */
static bool ptrace_bts_paused(struct ptrace_bts *pb, unsigned long *next)
{
	struct ds_geometry geom;

	if (ds_get_geometry(pb->tracer, &geom) ||
	    !(geom.status & DS_STATUS_PAUSED))
		return false;
	*next = 0;
	if (!ptrace_bts_check_read(current, pb, &geom))
		*next = pb->seq_base + geom.seq;
	return true;
}

/* Is a uprobe single-stepping its copy of the probed instruction? */
static bool ptrace_bts_uprobe_stepping(void)
{
#ifdef CONFIG_UPROBES
	return current->utask && current->utask->active_uprobe;
#else
	return false;
#endif
}

/*
 * Whether the event stop is due now. uprobe_deny_signal()'s rule: no
 * ptrace stop while a uprobe steps its copied instruction, which the stop
 * would leave with the uprobe's TF and IP for the tracer to see and
 * change. The stop is put off until the step is done: the tracee comes
 * back through here with TIF_UPROBE (arch_exit_to_user_mode_work()).
 */
static bool ptrace_bts_stop_due(struct ptrace_bts *pb, unsigned long ti_work,
				bool *deferred)
{
	bool asked = ti_work & _TIF_DS_STOP;

	if (ptrace_bts_uprobe_stepping()) {
		pb->stop_deferred |= asked;
		return false;
	}
	*deferred = pb->stop_deferred;
	pb->stop_deferred = false;
	return asked || *deferred;
}

/*
 * PTRACE_BTS_O_STOP: the event stop, from the tracee's last work on its
 * way to user mode (arch_exit_to_user_mode_work()). Not from task work:
 * ptrace_notify() runs task work before every ptrace stop, and a stop
 * there would come in front of a syscall or event stop the tracee is
 * already committed to, which the tracer's answer to the BTS stop could
 * not prevent. Only while the trace is paused: a DRAIN, a CLEAR or a new
 * buffer since the notification leaves nothing to announce, and a CONFIG
 * without O_STOP asks for none.
 */
void ptrace_bts_event_stop(unsigned long ti_work)
{
	bool stop, deferred = false;
	unsigned long next;
	struct ptrace_bts *pb;

	if (ti_work & _TIF_DS_STOP)
		clear_thread_flag(TIF_DS_STOP);
	pb = ptrace_bts_hold(current);
	if (!pb)
		return;
	stop = ptrace_bts_stop_due(pb, ti_work, &deferred) &&
	       READ_ONCE(pb->flags) & PTRACE_BTS_O_STOP &&
	       ptrace_bts_paused(pb, &next);
	/*
	 * The first way back to user mode after the pause (the notification's
	 * interrupt, or the return from the system call the tracee slept in):
	 * no branch was missed, and the DRAIN that resumes must not show a
	 * gap, unless the tracee ran through the pause before. A stop put
	 * off for a uprobe's step comes after an instruction in user mode.
	 */
	if (stop && !deferred && ptrace_bts_pause_seen_ok())
		ds_pause_seen(pb->tracer);
	/* Not held over the stop: a CONFIG there may replace the trace. */
	ptrace_bts_put(pb);
	if (!stop)
		return;
	ptrace_notify(SIGTRAP | (PTRACE_EVENT_BTS << 8), next);
	/*
	 * Resumed without a DRAIN or CLEAR, the tracee runs on with the
	 * recording paused, whichever trace it has now: that misses branches.
	 */
	pb = ptrace_bts_hold(current);
	if (pb) {
		ds_pause_missed(pb->tracer);
		ptrace_bts_put(pb);
	}
}

/*
 * Ask for the event stop. TIF_DS_STOP, not a signal's notification, which
 * would make a tracee sleeping in epoll_wait() and the like return EINTR
 * (a scheduling record can fill the buffer as it goes to sleep): the stop
 * comes on its way back to user mode; one running in user mode on another
 * CPU is sent there by the kick.
 */
static void ptrace_bts_queue_stop(struct ptrace_bts *pb)
{
	set_tsk_thread_flag(pb->task, TIF_DS_STOP);
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
	u32 old_flags;
	int err;

	if (!pb)
		return -EINVAL;
	/* Stopped at an exec (ds_exec_thread()): only a new buffer traces. */
	if (ptrace_bts_geometry(pb, &geom) ||
	    geom.status & DS_STATUS_DETACHED ||
	    ptrace_bts_check_room(cfg->flags, geom.capacity))
		return -EINVAL;
	old_flags = pb->flags;
	err = ptrace_bts_reconfig(pb, cfg, ds_update);
	if (err)
		return err;
	/*
	 * A pause announced one way, by a queued stop that now finds
	 * O_STOP gone or by a signal already sent, is announced again the
	 * new way: no DRAIN may ever come to end it otherwise.
	 */
	if ((old_flags ^ pb->flags) & PTRACE_BTS_O_OVERFLOW &&
	    geom.status & DS_STATUS_PAUSED) {
		/* The tracee may have run through the pause since. */
		ds_pause_missed(pb->tracer);
		ptrace_bts_overflow(pb->tracer, pb);
	}
	return 0;
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
	/* A charge may still be on its way out: ptrace_bts_request_ds(). */
	if (err == -EDQUOT) {
		flush_workqueue(ptrace_bts_wq);
		err = ptrace_bts_reconfig(pb, cfg, ds_resize);
	}
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
	refcount_set(&pb->users, 1);
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

/*
 * Has the tracer of @child CAP_SYS_PTRACE in @ns? Unlike ptracer_capable(),
 * a task nobody traces any more has no tracer to lend it privilege: a
 * request that needs no stop may run on as the link ends (an exec's
 * de_thread() reaping the old leader), and __ptrace_unlink() clearing the
 * credentials must not make a check pass that failed before.
 */
static bool ptrace_bts_tracer_capable(struct task_struct *child,
				      struct user_namespace *ns)
{
	const struct cred *cred;
	bool ok;

	rcu_read_lock();
	cred = rcu_dereference(child->ptracer_cred);
	ok = cred && !security_capable(cred, ns, CAP_SYS_PTRACE,
				       CAP_OPT_NOAUDIT);
	rcu_read_unlock();
	return ok;
}

/* May the tracer of @child see the control flow of the image @mm? */
static bool ptrace_bts_mm_readable(struct task_struct *child,
				   struct mm_struct *mm)
{
	return get_dumpable(mm) == SUID_DUMP_USER ||
	       ptrace_bts_tracer_capable(child, mm->user_ns);
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
			ptrace_bts_tracer_capable(child, &init_user_ns));
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
int ptrace_bts_check_read(struct task_struct *child, struct ptrace_bts *pb,
			  const struct ds_geometry *geom)
{
	bool ok;

	if (!pb)
		return 0;
	ok = ptrace_bts_mm_readable(child, pb->mm);
	/*
	 * Stopped at a private exec, the images since have no records, also
	 * once the thread exits; stopped at exit, the last image has.
	 */
	if (ok && (!(geom->status & DS_STATUS_DETACHED) ||
		   (child->flags & PF_EXITING &&
		    !(geom->status & DS_STATUS_EXEC_STOPPED))))
		ok = ptrace_bts_may_read(child);
	return ok ? 0 : -EPERM;
}

/*
 * A size-versioned argument: at least @min bytes, at most a page, and the
 * bytes beyond what this kernel knows zero (copy_struct_from_user()).
 */
int ptrace_bts_copy_arg(void *dst, size_t size, const void __user *src,
			unsigned long len, size_t min)
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

static long ptrace_bts_clear(struct task_struct *child)
{
	struct ptrace_bts *pb = ptrace_bts_get(child);

	return pb ? ds_clear(pb->tracer) : 0;
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
