/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Debug Store (BTS/PEBS): the in-kernel interface.
 *
 * One owner, arch/x86/kernel/ds/, drives IA32_DS_AREA and the BTS bits of
 * IA32_DEBUGCTL. PEBS records come from counters, which perf owns: perf is
 * the PEBS client, through the ds_perf_*() calls below.
 *
 * With CONFIG_X86_DS, the Debug Store resource allocator: clients request
 * Branch Trace Store buffers for a task or for a CPU and get a handle
 * back. See Documentation/arch/x86/debug-store.rst.
 */
#ifndef _ASM_X86_DS_H
#define _ASM_X86_DS_H

#include <linux/bits.h>
#include <linux/err.h>
#include <linux/sizes.h>
#include <linux/types.h>

#include <asm/page.h>

struct task_struct;
struct ds_tracer;

/**
 * enum ds_kind - the two record streams of the Debug Store
 * @DS_BTS:	Branch Trace Store records
 * @DS_PEBS:	Precise Event Based Sampling records
 * @DS_NR_KINDS: number of kinds
 */
enum ds_kind {
	DS_BTS,
	DS_PEBS,
	DS_NR_KINDS,
};

/**
 * enum ds_overflow - what happens when the trace buffer fills up
 * @DS_OVERFLOW_WRAP:	the oldest records are overwritten and counted lost
 * @DS_OVERFLOW_NOTIFY: once the buffer holds the threshold number of records
 *			the notify callback runs and recording pauses until
 *			ds_clear() or ds_resume(); records that find the
 *			buffer full are dropped and counted lost
 */
enum ds_overflow {
	DS_OVERFLOW_WRAP,
	DS_OVERFLOW_NOTIFY,
};

/**
 * enum ds_backend_id - who produces the records of a tracer
 * @DS_BACKEND_AUTO:	  the hardware if the CPU has it and it is free,
 *			  else a registered emulated backend
 * @DS_BACKEND_HARDWARE:  the CPU's Debug Store only
 * @DS_BACKEND_EMULATED:  a registered software backend only
 */
enum ds_backend_id {
	DS_BACKEND_AUTO,
	DS_BACKEND_HARDWARE,
	DS_BACKEND_EMULATED,
};

/* Request flags, struct ds_config::flags */
#define DS_KERNEL		BIT(0)	/* record in kernel mode */
#define DS_USER			BIT(1)	/* record in user mode */
#define DS_TIMESTAMPS		BIT(2)	/* BTS: task arrives/departs records */
#define DS_GAPS			BIT(3)	/* BTS: a task's gaps, ds_mark_gap() */
#define DS_FLAGS_MASK		(DS_KERNEL | DS_USER | DS_TIMESTAMPS | DS_GAPS)

/* Status bits, struct ds_geometry::status */
#define DS_STATUS_SUSPENDED	BIT(0)	/* ds_suspend() without ds_resume() */
#define DS_STATUS_PAUSED	BIT(1)	/* notify threshold reached */
#define DS_STATUS_DETACHED	BIT(2)	/* the traced task has exited */
/* A staging buffer filled: lost is approximate, see struct ds_geometry. */
#define DS_STATUS_DROPPED	BIT(3)
/* With DS_STATUS_DETACHED: detached at an exec (ds_exec_thread()) */
#define DS_STATUS_EXEC_STOPPED	BIT(4)

/* The largest trace buffer one request may ask for, in bytes. */
#define DS_MAX_BUFFER_SIZE	SZ_4M

/**
 * struct ds_bts_record - one BTS record, the 64-bit (DTES64) format
 * @from:	linear address of the branch instruction, or an event marker
 * @to:		linear address of the branch target, or the event time
 * @flags:	hardware flags, or the pid for an event record
 *
 * ds_bts_record_event() tells branch records from the scheduling events
 * that %DS_TIMESTAMPS adds. The emulated backend writes the same layout.
 */
struct ds_bts_record {
	u64	from;
	u64	to;
	u64	flags;
};

/*
 * A scheduling event record has all bits of @from set except the low
 * qualifier nibble: an address no branch can have, the last bytes of the
 * address space being unmapped on 64-bit and out of reach on 32-bit.
 */
#define DS_BTS_EVENT_MARKER	GENMASK_ULL(63, 4)
#define DS_BTS_EVENT_QUAL_MASK	GENMASK_ULL(3, 0)

/**
 * enum ds_bts_qualifier - kinds of BTS record
 * @DS_BTS_BRANCH:	 a branch from @from to @to
 * @DS_BTS_TASK_ARRIVES: the traced task was scheduled in
 * @DS_BTS_TASK_DEPARTS: the traced task was scheduled out
 * @DS_BTS_GAP:		 execution did not go on from the record before by a
 *			 branch (%DS_GAPS): @to is where it went on, 0 if not
 *			 known, @flags the &enum ds_gap and, from bit 8 on,
 *			 its datum
 */
enum ds_bts_qualifier {
	DS_BTS_BRANCH,
	DS_BTS_TASK_ARRIVES,
	DS_BTS_TASK_DEPARTS,
	DS_BTS_GAP,
};

/**
 * enum ds_gap - why a task's trace has a gap
 * @DS_GAP_EXEC:	 the task exec()ed a new image, which runs from here
 * @DS_GAP_EXEC_STOPPED: the task exec()ed an image its user may not read:
 *			 the trace stops here (ds_exec_thread())
 * @DS_GAP_SIGNAL:	 a signal handler was entered, at @to; datum: the
 *			 signal
 * @DS_GAP_SIGRETURN:	 a signal handler returned, to @to
 * @DS_GAP_LOST:	 the hardware dropped records here, how many unknown
 * @DS_GAP_PAUSED:	 recording was paused before this (a full buffer in
 *			 notify mode) and branches may be missing
 */
enum ds_gap {
	DS_GAP_EXEC = 1,
	DS_GAP_EXEC_STOPPED,
	DS_GAP_SIGNAL,
	DS_GAP_SIGRETURN,
	DS_GAP_LOST,
	DS_GAP_PAUSED,
};

#define DS_GAP_REASON_MASK	GENMASK_ULL(7, 0)
#define DS_GAP_DATUM_SHIFT	8

/**
 * ds_bts_record_event() - classify a BTS record
 * @rec: the record
 *
 * Event records carry the time in ns (CLOCK_MONOTONIC, read with
 * ktime_get_mono_fast_ns()) in @to and the pid in @flags.
 *
 * Return: the qualifier of @rec.
 */
static inline enum ds_bts_qualifier
ds_bts_record_event(const struct ds_bts_record *rec)
{
	if ((rec->from & DS_BTS_EVENT_MARKER) != DS_BTS_EVENT_MARKER)
		return DS_BTS_BRANCH;
	return rec->from & DS_BTS_EVENT_QUAL_MASK;
}

/**
 * ds_bts_user_branch() - may a tracer of user mode see this branch
 * @from: the branch source
 * @to:   the branch target
 *
 * Branches that enter or leave the kernel (system calls, interrupts,
 * exceptions, their returns) have a kernel end point; user-mode-only
 * tracers never see them.
 *
 * Return: true if both end points are user addresses.
 */
static inline bool ds_bts_user_branch(u64 from, u64 to)
{
	return from < TASK_SIZE_MAX && to < TASK_SIZE_MAX;
}

/**
 * typedef ds_notify_fn - overflow notification
 * @tracer: the tracer whose buffer reached its threshold
 * @cookie: &struct ds_config.cookie
 *
 * Runs from irq_work: hard interrupt context on !PREEMPT_RT, so it must
 * not sleep and must not call back into the allocator except through
 * ds_tracer_recording(). Typical use: send a signal, wake a waiter.
 */
typedef void (*ds_notify_fn)(struct ds_tracer *tracer, void *cookie);

/**
 * struct ds_config - a request for a Debug Store tracer
 * @buffer:	 caller-provided trace buffer in kernel memory that stays
 *		 mapped until ds_release() (vmalloc or kmalloc), or NULL for
 *		 one the allocator allocates (charged to the requester for a
 *		 task's tracer, see ds_request_bts_task())
 * @size:	 size of the trace buffer in bytes, at most
 *		 %DS_MAX_BUFFER_SIZE; rounded down to whole records
 * @threshold:	 %DS_OVERFLOW_NOTIFY: notify once the buffer holds this many
 *		 records, 0 meaning when full; must be 0 for %DS_OVERFLOW_WRAP
 * @overflow:	 the overflow mode
 * @notify:	 the callback for %DS_OVERFLOW_NOTIFY, NULL otherwise
 * @cookie:	 passed to @notify and @detached
 * @detached:	 optional: called when the allocator detaches a task's tracer
 *		 on its own, at the task's exit or at an exec of an image its
 *		 user may not read (see ds_exec_thread()); not at ds_release().
 *		 Process context, in the task, under the allocator's mutex
 *		 and cpus_read_lock(): it must not call the ds_*() functions
 *		 nor take the CPU hotplug lock, only note the fact or queue
 *		 work. The handle stays valid until ds_release().
 * @flags:	 %DS_KERNEL (per-CPU tracers only), %DS_USER (at least one),
 *		 %DS_TIMESTAMPS (BTS of a task)
 * @backend:	 the backend to use
 */
struct ds_config {
	void			*buffer;
	size_t			size;
	size_t			threshold;
	enum ds_overflow	overflow;
	ds_notify_fn		notify;
	void			*cookie;
	ds_notify_fn		detached;
	unsigned int		flags;
	enum ds_backend_id	backend;
};

/**
 * struct ds_geometry - the state of a tracer's trace buffer
 * @backend:	 %DS_BACKEND_HARDWARE or %DS_BACKEND_EMULATED
 * @record_size: bytes per record, sizeof(struct ds_bts_record)
 * @capacity:	 records the buffer holds
 * @count:	 valid records, at most @capacity
 * @index:	 the slot the next record goes to
 * @threshold:	 notification threshold in records (0 for wrap mode)
 * @lost:	 records overwritten or dropped since the last ds_clear();
 *		 exact, unless %DS_STATUS_DROPPED: a staging buffer filled
 *		 before its threshold PMI was handled, and the hardware
 *		 dropped none or any number of records after it, which @lost
 *		 counts as one each time. Branches taken while the tracer is
 *		 suspended or paused are neither recorded nor lost; nor are
 *		 those a CPU takes in kernel mode, for a %DS_KERNEL tracer,
 *		 from its threshold interrupt until the collection restarts
 *		 BTS (interrupts disabled: user mode resumes only after it)
 * @status:	 %DS_STATUS_* bits
 * @seq:	 the sequence number the next record gets, counted from 0 at
 *		 the request: the @count records held are numbered
 *		 @seq - @count to @seq - 1, oldest first. Neither ds_clear()
 *		 nor a resume resets it. A clear after a notification paused
 *		 the tracer or records were dropped at a full buffer skips a
 *		 number, so that the gap shows; records a full staging
 *		 buffer dropped do not.
 * @unwritten:	 records dropped without being written since the request:
 *		 at a full buffer in notify mode, and as @lost counts them
 *		 for a full staging buffer. Overwritten records are not in
 *		 it; they are the numbers below @seq - @count.
 */
struct ds_geometry {
	enum ds_backend_id	backend;
	size_t			record_size;
	size_t			capacity;
	size_t			count;
	size_t			index;
	size_t			threshold;
	u64			lost;
	unsigned int		status;
	u64			seq;
	u64			unwritten;
};

#ifdef CONFIG_X86_DS

/**
 * ds_request_bts_task() - request branch tracing for a task
 * @task: the task to trace; a reference is taken
 * @cfg:  the buffer, overflow mode, filtering and backend
 *
 * The trace covers @task in user mode on every CPU it runs on. A child of
 * @task never inherits it; it survives an execve(), but not of an image the
 * task's user may not read (see ds_exec_thread()); it stops when @task
 * exits, and the handle stays valid (and readable) until ds_release(). The
 * caller decides who may see @task's control flow: ptrace asks what
 * PTRACE_PEEKTEXT asks. The buffer is charged to the requester's user.
 *
 * Context: process context, may sleep.
 * Return: a handle, or ERR_PTR() with -EINVAL (bad @cfg, %DS_KERNEL), -EBUSY (@task
 * already has a BTS tracer, a per-CPU BTS tracer exists, perf holds the BTS
 * half of the Debug Store, or perf's intel_pt or intel_bts excludes BTS),
 * -EOPNOTSUPP (no hardware and no emulated backend), -ESRCH
 * (@task is exiting), -EDQUOT (RLIMIT_MEMLOCK exceeded without
 * CAP_IPC_LOCK), -ENOMEM (no memory).
 */
struct ds_tracer *ds_request_bts_task(struct task_struct *task,
				      const struct ds_config *cfg);

/**
 * ds_request_bts_cpu() - request branch tracing for a CPU
 * @cpu: the CPU to trace, whatever runs on it
 * @cfg: the buffer, overflow mode and filtering; hardware only
 *
 * The buffer is not charged to the requester's locked memory.
 *
 * Context: process context, may sleep.
 * Return: a handle, or ERR_PTR() with -EINVAL (bad @cfg or @cpu not
 * possible), -EPERM (%DS_KERNEL on a CPU affected by Meltdown, unless
 * ds.meltdown_kernel is set), -ENODEV (@cpu offline), -EBUSY (@cpu already has a BTS tracer,
 * a per-task BTS tracer exists, perf holds the BTS half, or intel_pt or
 * intel_bts excludes BTS),
 * -EOPNOTSUPP (no BTS hardware), -ENOMEM.
 */
struct ds_tracer *ds_request_bts_cpu(int cpu, const struct ds_config *cfg);

/**
 * ds_release() - stop tracing and free a tracer
 * @tracer: the handle; NULL and ERR_PTR() values are ignored
 *
 * Frees the buffer the allocator allocated and refunds its locked-memory
 * charge to the mm it was charged to, even if that mm has exited.
 *
 * Context: process context, may sleep.
 */
void ds_release(struct ds_tracer *tracer);

/**
 * ds_suspend() - stop recording, keep the buffer
 * @tracer: the handle
 *
 * Context: process context, may sleep.
 * Return: 0, or -EINVAL for a bad handle.
 */
int ds_suspend(struct ds_tracer *tracer);

/**
 * ds_resume() - resume recording after ds_suspend() or a notification
 * @tracer: the handle
 *
 * Context: process context, may sleep.
 * Return: 0, or -EINVAL for a bad handle.
 */
int ds_resume(struct ds_tracer *tracer);

/**
 * ds_suspend_atomic() - stop recording now, from any context but NMI
 * @tracer: the handle
 *
 * The emulated backend records nothing more from the return of this call,
 * and neither does the hardware on this CPU. On another CPU where @tracer's
 * task runs, the hardware stops at the next context switch or threshold
 * collection there; records it stores until then still reach the buffer.
 * ds_resume() or ds_resume_atomic() ends it.
 *
 * Context: any context except NMI.
 */
void ds_suspend_atomic(struct ds_tracer *tracer);

/**
 * ds_resume_atomic() - resume recording, from any context but NMI
 * @tracer: the handle
 *
 * As ds_resume(); the hardware of a tracer loaded on another CPU resumes at
 * the next context switch or threshold collection there.
 *
 * Context: any context except NMI.
 */
void ds_resume_atomic(struct ds_tracer *tracer);

/**
 * ds_clear() - empty the trace buffer and reset the lost-record count
 * @tracer: the handle
 *
 * Also ends a notification pause; ds_suspend() stays in effect.
 *
 * Context: process context, may sleep.
 * Return: 0, or -EINVAL for a bad handle.
 */
int ds_clear(struct ds_tracer *tracer);

/**
 * ds_get_geometry() - collect pending records and describe the buffer
 * @tracer: the handle
 * @geom:   filled in
 *
 * Records the hardware has stored but the allocator has not yet copied
 * into the trace buffer are collected first. Once @geom reports
 * %DS_STATUS_DETACHED, every record is collected: the count grows no more.
 * For the tracer of a task that is not running (a tracee in a ptrace
 * stop), and for any tracer of the emulated backend, there is nothing to
 * collect, and the call takes no global lock and interrupts no CPU.
 *
 * Context: process context, may sleep.
 * Return: 0, or -EINVAL for a bad handle or NULL @geom.
 */
int ds_get_geometry(struct ds_tracer *tracer, struct ds_geometry *geom);

/**
 * ds_read_record() - copy one record out of the trace buffer
 * @tracer: the handle
 * @i:      0 for the oldest record, count - 1 for the newest
 * @buf:    destination
 * @size:   bytes available at @buf, at least the record size
 *
 * Does not collect: call ds_get_geometry() first. For a stable view of a
 * running tracee, suspend the tracer (or stop the task) while reading.
 *
 * Context: any context but NMI.
 * Return: the record size, or -EINVAL (bad handle, @i >= count, @size too
 * small).
 */
ssize_t ds_read_record(struct ds_tracer *tracer, size_t i, void *buf,
		       size_t size);

/**
 * ds_read_records() - copy consecutive records out of the trace buffer
 * @tracer: the handle
 * @first:  index of the first record, 0 for the oldest
 * @buf:    destination
 * @size:   bytes available at @buf
 *
 * Copies records @first, @first + 1, ... while they exist and fit in @size,
 * at most a page of them per call: the copy runs with interrupts disabled.
 * Does not collect, as ds_read_record().
 *
 * Context: any context but NMI.
 * Return: the number of records copied (0 when @first >= count), or -EINVAL
 * (bad handle, @size below one record).
 */
ssize_t ds_read_records(struct ds_tracer *tracer, size_t first, void *buf,
			size_t size);

/**
 * ds_read_seq() - copy records by their sequence number
 * @tracer: the handle
 * @seq:    in: the first sequence number wanted; out: the number of the
 *	    first record copied, which is larger where the records wanted
 *	    were overwritten, drained or cleared
 * @buf:    destination
 * @size:   bytes available at @buf
 *
 * Copies the records numbered *@seq on, oldest first, while they exist
 * and fit in @size, at most a page of them per call, in one snapshot: a
 * reader that asks again from *@seq plus the number copied misses nothing
 * that was not overwritten or cleared meanwhile, and sees when it was.
 * Does not collect, as ds_read_record(). See &struct ds_geometry for the
 * numbering.
 *
 * Context: any context but NMI.
 * Return: the number of records copied (0 when *@seq is the next number),
 * or -EINVAL (bad handle, *@seq beyond the next number, @size below one
 * record).
 */
ssize_t ds_read_seq(struct ds_tracer *tracer, u64 *seq, void *buf,
		    size_t size);

/**
 * ds_hw_present() - does the CPU's Debug Store record @kind
 * @kind: %DS_BTS or %DS_PEBS
 *
 * Whether it is free is another matter: a request may still get -EBUSY.
 *
 * Return: true if the CPU stores @kind records in the 64-bit format the
 * allocator drives: for %DS_BTS, a %DS_BACKEND_HARDWARE request can be
 * had; for %DS_PEBS, perf may reserve the PEBS half.
 */
bool ds_hw_present(enum ds_kind kind);

/**
 * ds_tracer_recording() - is the tracer recording right now
 * @tracer: the handle
 *
 * Context: any context.
 * Return: true unless suspended, paused by a notification or detached.
 */
bool ds_tracer_recording(const struct ds_tracer *tracer);

/**
 * ds_tracer_task() - the traced task of a per-task tracer
 * @tracer: the handle
 *
 * Context: any context but NMI.
 * Return: the task with a reference, which the caller drops with
 * put_task_struct(), or NULL for a per-CPU or detached tracer.
 */
struct task_struct *ds_tracer_task(struct ds_tracer *tracer);

/**
 * ds_update() - change how a tracer records, keeping its records
 * @tracer: the handle
 * @cfg:    the new @flags, @overflow, @threshold, @notify and @cookie;
 *	    @buffer, @size and @backend are ignored
 *
 * %DS_KERNEL and %DS_USER cannot change. Switching to %DS_OVERFLOW_NOTIFY
 * with the buffer already at the threshold pauses at once and notifies.
 *
 * Context: process context, may sleep.
 * Return: 0, or -EINVAL (bad handle or @cfg).
 */
int ds_update(struct ds_tracer *tracer, const struct ds_config *cfg);

/**
 * ds_resize() - give the tracer a new, empty buffer
 * @tracer: the handle, of an allocation that made its own buffer
 * @cfg:    as for ds_update(), with the new @size; no @buffer, @backend
 *	    is ignored
 *
 * The tracer, its backend and what it is attached to stay; the records go,
 * their numbers stay taken and one more is skipped, so that a reader sees
 * the gap. The charge moves to the new buffer: against RLIMIT_MEMLOCK, the
 * old buffer's pages count as freed if the caller's user bore them. Not
 * concurrently with another call on the same handle.
 *
 * Context: process context, may sleep.
 * Return: 0; -EINVAL for a bad handle or configuration, or a tracer whose
 * buffer is its owner's; -EDQUOT over RLIMIT_MEMLOCK; -ENOMEM. On failure
 * the tracer and its records are as they were.
 */
int ds_resize(struct ds_tracer *tracer, const struct ds_config *cfg);

/**
 * ds_perf_reserve() - perf asks for one half of the Debug Store
 * @kind: %DS_BTS for perf's BTS event and intel_bts, %DS_PEBS for its
 *	  precise events
 *
 * The BTS and the PEBS half are handed out separately: perf may hold the
 * PEBS half while the allocator's hardware tracers use the BTS half, in
 * the same save area. The PEBS half has no other client. For the BTS half,
 * perf and the allocator's hardware tracers take turns: perf gets it only
 * while there are no such tracers, and their requests fail with -EBUSY
 * (ptrace falls back to the emulated backend) while perf holds it. The
 * holder drives its half through the ds_perf_*() calls below. The
 * allocator keeps the BTS half set up for a while after its last tracer is
 * gone; a reservation then tears it down on the spot, with the CPU hotplug
 * lock held or not. If the allocator is tearing it down itself, the
 * reservation waits for the end of that teardown, and hardware requests
 * fail with -EBUSY while it waits. The
 * reservation is not counted: perf takes a half once, for its first event
 * that uses it, and gives it back after the last.
 *
 * Context: process context, may sleep.
 * Return: 0; -EBUSY while hardware tracers of @kind exist or are being
 * set up, or while perf holds that half already; -EINVAL for a bad @kind.
 */
int ds_perf_reserve(enum ds_kind kind);

/**
 * ds_perf_holds() - whether perf's ds_perf_reserve() of a half succeeded
 * @kind: %DS_BTS or %DS_PEBS
 *
 * Return: true between a successful ds_perf_reserve(@kind) and
 * ds_perf_release(@kind).
 */
bool ds_perf_holds(enum ds_kind kind);

/**
 * ds_perf_release() - perf has released its buffers of one half
 * @kind: %DS_BTS or %DS_PEBS, as reserved
 *
 * Context: process context, may sleep.
 */
void ds_perf_release(enum ds_kind kind);

/**
 * ds_switch_to() - context switch hook, from __switch_to_xtra()
 * @prev: the task scheduled out
 * @next: the task scheduled in
 *
 * Called only when @prev or @next has %TIF_DS_TRACE.
 *
 * Context: interrupts disabled.
 */
void ds_switch_to(struct task_struct *prev, struct task_struct *next);

/**
 * ds_exit_thread() - detach the tracers of an exiting task
 * @task: the task, from exit_thread()
 *
 * Context: process context, may sleep.
 */
void ds_exit_thread(struct task_struct *task);

/**
 * ds_exec_thread() - detach the tracers of a task whose new image is private
 *
 * From arch_setup_new_exec(), before the new image runs. An image that the
 * task's user may not read (not %SUID_DUMP_USER: set-user-ID, unreadable)
 * must not show its control flow to tracers that were set up for the old
 * one, as perf_event_exit_task() does for perf's events. The records taken
 * before stay readable.
 *
 * Context: process context, may sleep.
 */
void ds_exec_thread(void);

void __ds_mark_gap(enum ds_gap why, u32 datum, u64 ip);

/**
 * ds_mark_gap() - record that the current task's execution jumps
 * @why:   the reason
 * @datum: its datum (the signal of %DS_GAP_SIGNAL), else 0
 * @ip:	   where execution goes on, 0 if not known
 *
 * For the tracers of the current task that asked for %DS_GAPS: the kernel
 * moves its IP (a signal frame, sigreturn), which no branch record shows.
 * The hardware's records of before go into the buffer first.
 *
 * Context: process context, the current task. Inline: every signal of
 * every task comes here; only a traced one goes on.
 */
static __always_inline void ds_mark_gap(enum ds_gap why, u32 datum, u64 ip)
{
	if (test_thread_flag(TIF_DS_TRACE))
		__ds_mark_gap(why, datum, ip);
}

/**
 * ds_pause_seen() - the task did not run while the trace was paused
 * @tracer: a task's tracer, paused at its threshold (%DS_OVERFLOW_NOTIFY)
 *
 * A pause normally leaves a gap: the task's branches are not recorded
 * until ds_clear() resumes, and the reset skips a sequence number (and
 * marks %DS_GAP_PAUSED). A client that stopped the task at the
 * notification, before it ran on in user mode, says so: the pause itself
 * then missed nothing, and only records dropped at the full buffer still
 * make a gap. Not after ds_pause_missed() for the same pause.
 *
 * Context: any context but NMI; the traced task itself, before it returns
 * to user mode after the pause.
 */
void ds_pause_seen(struct ds_tracer *tracer);

/**
 * ds_pause_missed() - the task runs on while the trace is paused
 * @tracer: a task's tracer
 *
 * Undoes ds_pause_seen() where the client lets the task run before it
 * resumed the recording: the pause misses branches after all, whatever a
 * later ds_pause_seen() says.
 *
 * Context: any context but NMI.
 */
void ds_pause_missed(struct ds_tracer *tracer);

/**
 * ds_fork_thread() - a new task starts without tracers
 * @child: the new task, from copy_thread(), not yet running
 *
 * dup_task_struct() copied the parent's thread_struct and flags; the
 * parent's tracers are not the child's.
 */
void ds_fork_thread(struct task_struct *child);

#else /* !CONFIG_X86_DS */

static inline struct ds_tracer *
ds_request_bts_task(struct task_struct *task, const struct ds_config *cfg)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static inline struct ds_tracer *
ds_request_bts_cpu(int cpu, const struct ds_config *cfg)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static inline void ds_release(struct ds_tracer *tracer) { }

static inline int ds_suspend(struct ds_tracer *tracer)
{
	return -EOPNOTSUPP;
}

static inline int ds_resume(struct ds_tracer *tracer)
{
	return -EOPNOTSUPP;
}

static inline int ds_clear(struct ds_tracer *tracer)
{
	return -EOPNOTSUPP;
}

static inline int ds_get_geometry(struct ds_tracer *tracer,
				  struct ds_geometry *geom)
{
	return -EOPNOTSUPP;
}

static inline ssize_t ds_read_record(struct ds_tracer *tracer, size_t i,
				     void *buf, size_t size)
{
	return -EOPNOTSUPP;
}

static inline ssize_t ds_read_records(struct ds_tracer *tracer, size_t first,
				      void *buf, size_t size)
{
	return -EOPNOTSUPP;
}

static inline ssize_t ds_read_seq(struct ds_tracer *tracer, u64 *seq,
				  void *buf, size_t size)
{
	return -EOPNOTSUPP;
}

static inline bool ds_hw_present(enum ds_kind kind)
{
	return false;
}

static inline bool ds_tracer_recording(const struct ds_tracer *tracer)
{
	return false;
}

static inline struct task_struct *ds_tracer_task(struct ds_tracer *tracer)
{
	return NULL;
}

static inline int ds_update(struct ds_tracer *tracer,
			    const struct ds_config *cfg)
{
	return -EOPNOTSUPP;
}

/* Without the allocator perf owns the Debug Store unconditionally. */
static inline int ds_perf_reserve(enum ds_kind kind)
{
	return 0;
}

static inline bool ds_perf_holds(enum ds_kind kind)
{
	return true;
}

static inline void ds_perf_release(enum ds_kind kind) { }
static inline void ds_switch_to(struct task_struct *prev,
				struct task_struct *next) { }
static inline void ds_exit_thread(struct task_struct *task) { }
static inline void ds_suspend_atomic(struct ds_tracer *tracer) { }
static inline void ds_resume_atomic(struct ds_tracer *tracer) { }
static inline void ds_exec_thread(void) { }
static inline void ds_mark_gap(enum ds_gap why, u32 datum, u64 ip) { }
static inline void ds_pause_seen(struct ds_tracer *tracer) { }
static inline void ds_pause_missed(struct ds_tracer *tracer) { }
static inline void ds_fork_thread(struct task_struct *child) { }

#endif /* CONFIG_X86_DS */

#ifdef CONFIG_X86_DS_CORE

struct debug_store;

/*
 * perf's Intel driver, the per-CPU client that lays out the save area
 * itself. It fills and drains the area directly; the hardware goes through
 * these, since arch/x86/kernel/ds/ is the only writer of IA32_DS_AREA, of
 * the BTS bits of DEBUGCTL and of the Debug Store's cpu_entry_area slots.
 * With CONFIG_X86_DS a half's calls are for the holder of
 * ds_perf_reserve() of that half only; IA32_DS_AREA, which both halves
 * need, is counted: it stays loaded while perf or the allocator uses one.
 */

/**
 * ds_perf_area() - the DS save area of a CPU
 * @cpu: the CPU
 *
 * Return: the area at its cpu_entry_area address, the one the CPU is given
 * (it is mapped in the user page tables too).
 */
struct debug_store *ds_perf_area(int cpu);

/**
 * ds_perf_map_buffer() - map a buffer into a CPU's cpu_entry_area slot
 * @cpu:  the CPU
 * @kind: %DS_BTS or %DS_PEBS: which slot
 * @buf:  page-aligned, physically contiguous memory
 * @size: bytes, at most the slot's size
 *
 * Context: process context, may sleep.
 * Return: the slot's address, for the save area's base fields, or NULL if
 * @buf does not fit the slot or @kind is neither half.
 */
void *ds_perf_map_buffer(int cpu, enum ds_kind kind, void *buf, size_t size);

/**
 * ds_perf_unmap_buffer() - unmap a slot that ds_perf_map_buffer() mapped
 * @cpu:  the CPU
 * @kind: %DS_BTS or %DS_PEBS
 * @size: as mapped
 *
 * Flushes the slot from every CPU's TLB: the caller may free the buffer on
 * return.
 *
 * Context: process context, may sleep.
 */
void ds_perf_unmap_buffer(int cpu, enum ds_kind kind, size_t size);

/**
 * ds_perf_install() - point a CPU's IA32_DS_AREA at ds_perf_area()
 * @cpu: the CPU; the current one from its CPU-starting callback
 *
 * Counts perf as a user of the MSR; the allocator's tracers may be one
 * already, with the same value.
 *
 * Context: as smp_call_function_single() with wait.
 */
void ds_perf_install(int cpu);

/**
 * ds_perf_uninstall() - perf no longer needs a CPU's IA32_DS_AREA
 * @cpu: the CPU
 *
 * Clears the MSR unless the allocator's tracers still use the area.
 *
 * Context: as smp_call_function_single() with wait.
 */
void ds_perf_uninstall(int cpu);

/**
 * ds_perf_restore() - load this CPU's IA32_DS_AREA again after resume
 * @area: ds_perf_area() of this CPU, or NULL for none
 *
 * Context: interrupts disabled.
 */
void ds_perf_restore(struct debug_store *area);

/**
 * ds_perf_bts_enable() - turn on BTS into this CPU's save area
 * @user:      record branches taken in user mode
 * @kernel:    record branches taken in kernel mode
 * @interrupt: raise a PMI at the BTS interrupt threshold (BTINT)
 *
 * Adds to the BTS bits already set, as perf always did.
 *
 * Context: interrupts disabled or NMI.
 */
void ds_perf_bts_enable(bool user, bool kernel, bool interrupt);

/**
 * ds_perf_bts_disable() - turn off BTS on this CPU
 *
 * Context: interrupts disabled or NMI.
 */
void ds_perf_bts_disable(void);

/**
 * ds_emergency_stop() - stop BTS and PEBS on this CPU, whoever set them
 *
 * The last step of a CPU that will not run this kernel again: a kexec'd
 * or crash kernel must not receive records in its memory, and perf's task
 * events may have scheduled PEBS in after the reboot notifier. Called from
 * machine_kexec(), stop_this_cpu() and the crash path. Clears the BTS bits
 * of DEBUGCTL, IA32_PEBS_ENABLE and IA32_DS_AREA.
 *
 * Context: interrupts disabled or NMI.
 */
void ds_emergency_stop(void);

#else /* !CONFIG_X86_DS_CORE */

static inline void ds_emergency_stop(void) { }

#endif /* CONFIG_X86_DS_CORE */

#endif /* _ASM_X86_DS_H */
