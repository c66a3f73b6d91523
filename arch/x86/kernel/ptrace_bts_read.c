// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace: reading the records. PTRACE_BTS_STATUS,
 * _SIZE, _GET, _DRAIN and _READ, and the NT_X86_BTS regset that
 * PTRACE_GETREGSET and core dumps read. The records are converted from the
 * Debug Store's format (struct ds_bts_record) to the ABI's (struct
 * bts_struct) a batch at a time, outside the tracer's lock.
 */

#define pr_fmt(fmt) "ptrace_bts: " fmt

#include <linux/build_bug.h>
#include <linux/errno.h>
#include <linux/minmax.h>
#include <linux/pid_namespace.h>
#include <linux/regset.h>
#include <linux/sched.h>
#include <linux/sched/coredump.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/time_namespace.h>
#include <linux/uaccess.h>

#include <asm/ds.h>
#include <asm/ptrace.h>
#include <asm/ptrace-bts.h>

#include "ptrace_bts.h"

/* Records converted at a time. */
#define PTRACE_BTS_DRAIN_BATCH		(PAGE_SIZE / sizeof(struct bts_struct))
/* Snapshots a READ takes of a running tracee that overruns them. */
#define PTRACE_BTS_READ_TRIES		4

/* One layout for 32-bit and 64-bit tracers, as struct ptrace_bts_config. */
static_assert(sizeof(struct ptrace_bts_read) == PTRACE_BTS_READ_SIZE_VER0);
static_assert(offsetof(struct ptrace_bts_read, lost) == 40);
/* The Debug Store's reasons for a gap are the ABI's. */
static_assert(DS_GAP_EXEC == PTRACE_BTS_GAP_EXEC &&
	      DS_GAP_EXEC_STOPPED == PTRACE_BTS_GAP_EXEC_STOPPED &&
	      DS_GAP_SIGNAL == PTRACE_BTS_GAP_SIGNAL &&
	      DS_GAP_SIGRETURN == PTRACE_BTS_GAP_SIGRETURN &&
	      DS_GAP_LOST == PTRACE_BTS_GAP_LOST &&
	      DS_GAP_PAUSED == PTRACE_BTS_GAP_PAUSED);

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
	if (geom->status & DS_STATUS_EXEC_STOPPED)
		*state |= PTRACE_BTS_S_STOPPED_EXEC;
	if (geom->status & DS_STATUS_DETACHED && child->flags & PF_EXITING)
		*state |= PTRACE_BTS_S_EXITED;
	if (ptrace_bts_check_read(child, pb, geom)) {
		*state |= PTRACE_BTS_S_UNREADABLE;
		return;
	}
	*next = pb->seq_base + geom->seq;
	*lost = geom->unwritten;
}

long ptrace_bts_status(struct task_struct *child,
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

long ptrace_bts_size(struct task_struct *child, struct ptrace_bts *pb)
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

long ptrace_bts_get_one(struct task_struct *child,
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

/*
 * Copy records from sequence number *@seq on into @ubuf, up to @max and
 * below @end, in batches; *@seq becomes the number of the first one
 * copied, *@next the number after the last. A batch that does not
 * continue the one before (a running tracee's buffer wrapped meanwhile)
 * ends the read.
 */
static long ptrace_bts_read_seq(struct ptrace_bts *pb, u32 tid, u64 *seq,
				u64 *next, u64 end,
				struct bts_struct __user *ubuf, size_t max)
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
		if (!n || at != *next || at >= end)
			break;
		n = min_t(u64, n, end - at);
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

long ptrace_bts_drain(struct task_struct *child,
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
	n = ptrace_bts_read_seq(pb, ptrace_bts_tid(child), &seq, &next,
				geom.seq, ubuf, geom.count);
	if (n < 0)
		return n;
	/* The tracee is stopped: the records counted are all there. */
	if (n != geom.count)
		return -EINVAL;
	err = ds_clear(pb->tracer);
	return err ?: n;
}

/*
 * One snapshot of the trace, and the read of its records below the
 * snapshot's next: the permission and the state were asked of it, and a
 * running tracee's records would otherwise keep coming. -EAGAIN where a
 * running tracee overwrote all of them before the read (on the hardware,
 * a collection adds a staging buffer's worth at once): a new snapshot
 * has records to give.
 */
static long ptrace_bts_read_snapshot(struct task_struct *child,
				     struct ptrace_bts *pb,
				     struct ptrace_bts_read *rd)
{
	struct ds_geometry geom;
	u64 next, seq, end;
	size_t max;
	long ret;

	ret = ptrace_bts_geometry(pb, &geom);
	if (!ret)
		ret = ptrace_bts_check_read(child, pb, &geom);
	if (ret)
		return ret;
	if (rd->size < sizeof(struct bts_struct) || rd->__reserved)
		return -EINVAL;
	/* An i386 kernel's pointers have 32 bits. */
	if (rd->buf != (unsigned long)rd->buf)
		return -EFAULT;
	ptrace_bts_position(child, pb, &geom, &rd->state, &next, &rd->lost);
	if (rd->seq > next)
		return -ERANGE;
	rd->first = next;
	rd->next = next;
	if (!pb || rd->seq == next)
		return 0;

	/* Numbers below the base are an older allocation's: gone. */
	seq = rd->seq > pb->seq_base ? rd->seq - pb->seq_base : 0;
	end = next - pb->seq_base;
	/* Clamped before dividing: no 64-bit division on i386. */
	max = (size_t)min_t(u64, rd->size, SIZE_MAX) /
	      sizeof(struct bts_struct);
	ret = ptrace_bts_read_seq(pb, ptrace_bts_tid(child), &seq, &next, end,
				  u64_to_user_ptr(rd->buf), max);
	if (ret < 0)
		return ret;
	rd->first = pb->seq_base + seq;
	rd->next = pb->seq_base + next;
	return !ret && seq >= end ? -EAGAIN : ret;
}

long ptrace_bts_read(struct task_struct *child, struct ptrace_bts *pb,
		     void __user *urd, unsigned long len)
{
	int tries = PTRACE_BTS_READ_TRIES;
	struct ptrace_bts_read rd;
	long ret;

	ret = ptrace_bts_copy_arg(&rd, sizeof(rd), urd, len,
				  PTRACE_BTS_READ_SIZE_VER0);
	if (ret)
		return ret;
	do {
		ret = ptrace_bts_read_snapshot(child, pb, &rd);
	} while (ret == -EAGAIN && --tries);
	/* Still overrun: the reader's records are lost, as rd.first says. */
	if (ret == -EAGAIN)
		ret = 0;
	if (ret < 0)
		return ret;
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
