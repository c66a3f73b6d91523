// SPDX-License-Identifier: GPL-2.0
/*
 * Debug Store allocator: the trace buffer, its overflow policy, locked
 * memory accounting, and reading.
 *
 * The trace buffer does the overflow policy: wrap-around (oldest records are
 * overwritten and counted lost) or notification (at a threshold the client's
 * callback runs from irq_work and recording pauses until it clears or
 * resumes). The staging buffer never wraps: BTINT is always set and its
 * threshold leaves a margin, so a PMI collects it before it fills.
 */

#define pr_fmt(fmt) "ds: " fmt

#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/gfp.h>
#include <linux/irq_work.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/vmalloc.h>

#include <kunit/static_stub.h>

#include <asm/ds.h>

#include "internal.h"

/* --- the trace buffer --- */

/*
 * Notify when the count crosses the threshold, not while it stays above:
 * a client that resumes without draining fills the rest of the buffer.
 */
static void ds_buf_check_threshold(struct ds_tracer *tracer, size_t before)
{
	lockdep_assert_held(&tracer->lock);

	if (tracer->overflow != DS_OVERFLOW_NOTIFY || tracer->paused ||
	    before >= tracer->threshold || tracer->count < tracer->threshold)
		return;
	WRITE_ONCE(tracer->paused, true);
	tracer->pause_gap = true;
	tracer->pause_ran = false;
	irq_work_queue(&tracer->notify_work);
}

void ds_buf_append(struct ds_tracer *tracer, const void *src, size_t n)
{
	size_t before = tracer->count;

	lockdep_assert_held(&tracer->lock);

	for (; n; n--, src += tracer->rec_size) {
		if (tracer->count == tracer->capacity &&
		    tracer->overflow == DS_OVERFLOW_NOTIFY) {
			/* Keep what the client has not seen: drop the rest. */
			tracer->lost += n;
			tracer->unwritten += n;
			tracer->gap = true;
			break;
		}
		if (tracer->count < tracer->capacity)
			tracer->count++;
		else
			tracer->lost++;
		memcpy(tracer->buf + tracer->head * tracer->rec_size, src,
		       tracer->rec_size);
		tracer->seq++;
		if (++tracer->head == tracer->capacity)
			tracer->head = 0;
	}
	ds_buf_check_threshold(tracer, before);
}

/*
 * BTS_OFF_OS drops the branches the CPU takes in kernel mode, but a branch
 * into the kernel (a system call, an interrupt) is taken in user mode: drop
 * the records with a kernel end point, as perf does.
 */
void ds_buf_append_user(struct ds_tracer *tracer,
			const struct ds_bts_record *rec, size_t n)
{
	lockdep_assert_held(&tracer->lock);

	for (; n; n--, rec++)
		if (ds_bts_user_branch(rec->from, rec->to))
			ds_buf_append(tracer, rec, 1);
}

/*
 * A %DS_BTS_GAP record, for a tracer that asked for them (%DS_GAPS). Not
 * into a full buffer in notify mode: the drop would count it lost, and the
 * drop's own gap is marked at the reset.
 */
void ds_buf_append_gap(struct ds_tracer *tracer, enum ds_gap why, u32 datum,
		       u64 ip)
{
	struct ds_bts_record rec = {
		.from = DS_BTS_EVENT_MARKER | DS_BTS_GAP,
		.to = ip,
		.flags = why | (u64)datum << DS_GAP_DATUM_SHIFT,
	};

	lockdep_assert_held(&tracer->lock);

	if (!(tracer->flags & DS_GAPS))
		return;
	if (tracer->overflow == DS_OVERFLOW_NOTIFY &&
	    tracer->count == tracer->capacity) {
		/* Marked at the reset, as a drop. */
		tracer->gap = true;
		return;
	}
	ds_buf_append(tracer, &rec, 1);
}

/*
 * A pause that ends without a reset (a resume, a switch to wrap-around):
 * the numbers cannot skip one with records held, the mark says it.
 */
void ds_buf_unpause(struct ds_tracer *tracer)
{
	lockdep_assert_held(&tracer->lock);

	if (!tracer->paused)
		return;
	WRITE_ONCE(tracer->paused, false);
	if (!(tracer->gap || tracer->pause_gap) || !ds_recording(tracer) ||
	    !(tracer->flags & DS_GAPS))
		return;
	/* Marked: forgotten. Else the next reset skips a number for it. */
	ds_buf_append_gap(tracer, DS_GAP_PAUSED, 0, 0);
	tracer->gap = false;
	tracer->pause_gap = false;
}

void ds_buf_reset(struct ds_tracer *tracer)
{
	bool gap = tracer->gap || tracer->pause_gap;

	lockdep_assert_held(&tracer->lock);

	tracer->head = 0;
	tracer->count = 0;
	tracer->lost = 0;
	/*
	 * Branches were dropped, or not recorded while paused, after the
	 * records the reset drops: no record is held, so a number can be
	 * skipped, and a reader sees the gap.
	 */
	if (gap)
		tracer->seq++;
	tracer->gap = false;
	tracer->pause_gap = false;
	WRITE_ONCE(tracer->dropped, false);
	WRITE_ONCE(tracer->paused, false);
	/* The first record after the pause says so. */
	if (gap && ds_recording(tracer))
		ds_buf_append_gap(tracer, DS_GAP_PAUSED, 0, 0);
}

/*
 * Queued when the count crossed the threshold; ds_update() may have changed
 * the mode since. Take the function and its cookie as one pair, and only
 * while the pause they announce still holds.
 */
void ds_notify_work(struct irq_work *work)
{
	struct ds_tracer *tracer = container_of(work, struct ds_tracer,
						notify_work);
	ds_notify_fn notify = NULL;
	unsigned long flags;
	void *cookie = NULL;

	raw_spin_lock_irqsave(&tracer->lock, flags);
	if (tracer->overflow == DS_OVERFLOW_NOTIFY && tracer->paused) {
		notify = tracer->notify;
		cookie = tracer->cookie;
	}
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	if (notify)
		notify(tracer, cookie);
}

/*
 * Redirected by the KUnit suite to fail allocations on purpose. The memory
 * cgroup of the requester pays for the pages of a task's tracer (@gfp, see
 * ds_gfp()). The size is the requester's
 * choice: a failure is its -ENOMEM, not a warning on the console, and a
 * full memory cgroup refuses it rather than call its OOM killer.
 */
VISIBLE_IF_KUNIT void *ds_buffer_alloc(size_t size, gfp_t gfp)
{
	KUNIT_STATIC_STUB_REDIRECT(ds_buffer_alloc, size, gfp);
	return __vmalloc(size, gfp | __GFP_ZERO | __GFP_NOWARN |
			 __GFP_RETRY_MAYFAIL);
}

/*
 * Charge the user, as perf, io_uring and BPF do: a budget per mm would be
 * new with every fork and exec of the requester. CAP_IPC_LOCK lifts the
 * limit, not the count. Over the limit is -EDQUOT, not -ENOMEM: a debugger
 * tells its user to raise the limit, not that memory ran out. @credit pages
 * are charged already to a buffer the new one replaces: only the growth is
 * asked of the limit, or a resize would fail where freeing first succeeds.
 */
static int ds_user_charge(struct user_struct *user, unsigned long pages,
			  unsigned long credit)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	unsigned long cur = atomic_long_read(&user->locked_vm);
	unsigned long grow = pages > credit ? pages - credit : 0;
	bool unlimited = !grow;

	do {
		/* Asked only when it matters: the LSM logs a denial. */
		if ((grow > limit || cur > limit - grow) && !unlimited) {
			if (!capable(CAP_IPC_LOCK))
				return -EDQUOT;
			unlimited = true;
		}
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur,
					  cur + pages));
	return 0;
}

static int ds_account_mem(struct ds_charge *c, size_t bytes,
			  const struct ds_charge *old)
{
	struct mm_struct *mm = current->mm;
	unsigned long pages = PFN_UP(bytes);
	struct user_struct *user;
	int err;

	/* Kernel threads have no locked-memory limit to charge. */
	if (!mm)
		return 0;
	user = current_user();
	err = ds_user_charge(user, pages,
			     old && old->user == user ? old->pages : 0);
	if (err)
		return err;
	c->user = get_uid(user);
	/* The refund must find this mm even after the requester exits. */
	mmgrab(mm);
	c->mm = mm;
	c->pages = pages;
	/* Shown as VmPin, as io_uring does: mlock() counts VmLck alone. */
	atomic64_add(pages, &mm->pinned_vm);
	return 0;
}

void ds_unaccount_mem(struct ds_charge *c)
{
	if (!c->user)
		return;
	atomic64_sub(c->pages, &c->mm->pinned_vm);
	mmdrop(c->mm);
	c->mm = NULL;
	atomic_long_sub(c->pages, &c->user->locked_vm);
	free_uid(c->user);
	c->user = NULL;
}

/*
 * A buffer of @bytes, charged to the caller's user into @c if @charge;
 * @old is the charge of the buffer it replaces, or NULL.
 */
void *ds_buf_get(size_t bytes, bool charge, struct ds_charge *c,
		 const struct ds_charge *old)
{
	void *buf;
	int err;

	if (charge) {
		err = ds_account_mem(c, bytes, old);
		if (err)
			return ERR_PTR(err);
	}
	buf = ds_buffer_alloc(bytes, ds_gfp(charge));
	if (!buf) {
		ds_unaccount_mem(c);
		return ERR_PTR(-ENOMEM);
	}
	return buf;
}

int ds_buf_alloc(struct ds_tracer *tracer, const struct ds_config *cfg,
		 bool charge)
{
	void *buf;

	if (cfg->buffer) {
		tracer->buf = cfg->buffer;
		return 0;
	}
	buf = ds_buf_get(tracer->capacity * tracer->rec_size, charge,
			 &tracer->charge, NULL);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	tracer->buf = buf;
	tracer->own_buf = true;
	return 0;
}

/**
 * ds_buf_replace() - put an empty buffer in place of the tracer's
 * @tracer:   the tracer, its lock held
 * @buf:      the new buffer
 * @capacity: its size in records
 * @c:	      its charge; on return, the old buffer's
 *
 * The old records go; their numbers stay taken, and one more is skipped,
 * as a new request would: a reader of the old buffer sees a gap whatever
 * it had read. The lost and unwritten counts start again.
 *
 * Return: the old buffer, for the caller to free once the lock is dropped.
 */
void *ds_buf_replace(struct ds_tracer *tracer, void *buf, size_t capacity,
		     struct ds_charge *c)
{
	void *old = tracer->buf;

	lockdep_assert_held(&tracer->lock);

	tracer->buf = buf;
	tracer->capacity = capacity;
	swap(tracer->charge, *c);
	tracer->head = 0;
	tracer->count = 0;
	tracer->lost = 0;
	tracer->unwritten = 0;
	tracer->seq++;
	tracer->gap = false;
	tracer->pause_gap = false;
	WRITE_ONCE(tracer->dropped, false);
	WRITE_ONCE(tracer->paused, false);
	return old;
}

static void ds_tracer_free_rcu(struct rcu_head *head)
{
	struct ds_tracer *tracer = container_of(head, struct ds_tracer, rcu);

	if (tracer->own_buf)
		vfree(tracer->buf);
	kfree(tracer);
}

/*
 * A context switch or the emulated backend that found the tracer published
 * before its detach may still look at it, with interrupts disabled: free
 * it after they are done.
 */
void ds_tracer_free(struct ds_tracer *tracer)
{
	ds_unaccount_mem(&tracer->charge);
	call_rcu(&tracer->rcu, ds_tracer_free_rcu);
}

/* Enter the new overflow mode; a full buffer in notify mode pauses now. */
void ds_buf_set_overflow(struct ds_tracer *tracer,
			 const struct ds_config *cfg)
{
	lockdep_assert_held(&tracer->lock);

	tracer->overflow = cfg->overflow;
	tracer->notify = cfg->notify;
	tracer->cookie = cfg->cookie;
	if (cfg->overflow != DS_OVERFLOW_NOTIFY) {
		tracer->threshold = 0;
		ds_buf_unpause(tracer);
		return;
	}
	tracer->threshold = cfg->threshold ?: tracer->capacity;
	if (tracer->count >= tracer->threshold && !tracer->paused) {
		WRITE_ONCE(tracer->paused, true);
		tracer->pause_gap = true;
		tracer->pause_ran = false;
		irq_work_queue(&tracer->notify_work);
	}
}

/*
 * Whether the pause is a gap of its own: only if the task ran while it
 * lasted. Once it has, nothing said later vouches for it.
 */
static void ds_pause_set_ran(struct ds_tracer *tracer, bool ran)
{
	unsigned long flags;

	if (IS_ERR_OR_NULL(tracer))
		return;
	raw_spin_lock_irqsave(&tracer->lock, flags);
	if (tracer->paused) {
		tracer->pause_ran |= ran;
		tracer->pause_gap = tracer->pause_ran;
	}
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
}

void ds_pause_seen(struct ds_tracer *tracer)
{
	/* Records dropped at the full buffer are a gap all the same. */
	ds_pause_set_ran(tracer, false);
}
EXPORT_SYMBOL_GPL(ds_pause_seen);

void ds_pause_missed(struct ds_tracer *tracer)
{
	ds_pause_set_ran(tracer, true);
}
EXPORT_SYMBOL_GPL(ds_pause_missed);

static unsigned int ds_status(const struct ds_tracer *tracer)
{
	unsigned int status = 0;

	if (READ_ONCE(tracer->suspended))
		status |= DS_STATUS_SUSPENDED;
	if (READ_ONCE(tracer->paused))
		status |= DS_STATUS_PAUSED;
	if (!READ_ONCE(tracer->attached))
		status |= DS_STATUS_DETACHED;
	if (READ_ONCE(tracer->exec_stopped))
		status |= DS_STATUS_EXEC_STOPPED;
	if (READ_ONCE(tracer->dropped))
		status |= DS_STATUS_DROPPED;
	return status;
}

/* A snapshot; under the tracer's lock, its counts agree with each other. */
static void ds_geometry_fill(struct ds_tracer *tracer,
			     struct ds_geometry *geom)
{
	unsigned long flags;

	geom->backend = tracer->backend == &ds_hw_backend ?
			DS_BACKEND_HARDWARE : DS_BACKEND_EMULATED;
	geom->record_size = tracer->rec_size;
	/* ds_resize() changes the capacity with the rest. */
	raw_spin_lock_irqsave(&tracer->lock, flags);
	geom->capacity = tracer->capacity;
	geom->threshold = tracer->threshold;
	geom->count = tracer->count;
	geom->index = tracer->head;
	geom->lost = tracer->lost;
	geom->seq = tracer->seq;
	geom->unwritten = tracer->unwritten;
	geom->status = ds_status(tracer);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
}

/* Is @task off its CPU, its last switch out, and so its collection, done? */
static bool ds_task_off_cpu(struct task_struct *task)
{
#ifdef CONFIG_SMP
	/* Pairs with the release in finish_task(), after switch_to(). */
	return !smp_load_acquire(&task->on_cpu);
#else
	return task != current;
#endif
}

/* Moves at every switch out of @task, before that switch collects. */
static unsigned long ds_task_switches(struct task_struct *task)
{
	return READ_ONCE(task->nvcsw) + READ_ONCE(task->nivcsw);
}

/*
 * The geometry of a task's tracer whose task is off its CPU, without
 * ds_alloc_mutex and without a look at the CPUs: nothing of the task is staged,
 * since its switch out collected before the scheduler let go of it. A
 * tracer reading a stopped tracee record by record pays only this. The
 * snapshot counts if the task was off its CPU before and after it, with no
 * switch in between, and the tracer still attached: ds_detach() marks the
 * tracer detached before it collects.
 */
static bool ds_geometry_unlocked(struct ds_tracer *tracer,
				 struct ds_geometry *geom)
{
	struct task_struct *task;
	unsigned long switches;
	bool ok = false;

	if (tracer->cpu >= 0)
		return false;
	task = ds_tracer_task(tracer);
	if (!task)
		return false;
	switches = ds_task_switches(task);
	/* The count, then the look: a switch after it moves the count. */
	smp_rmb();
	if (ds_task_off_cpu(task)) {
		ds_geometry_fill(tracer, geom);
		/* The snapshot, then the second look. */
		smp_rmb();
		ok = ds_task_off_cpu(task) &&
		     ds_task_switches(task) == switches &&
		     !(geom->status & DS_STATUS_DETACHED);
	}
	put_task_struct(task);
	return ok;
}

int ds_get_geometry(struct ds_tracer *tracer, struct ds_geometry *geom)
{
	if (IS_ERR_OR_NULL(tracer) || !geom)
		return -EINVAL;
	might_sleep();

	if (ds_geometry_unlocked(tracer, geom))
		return 0;
	/*
	 * The emulated backend stores under the tracer's lock and stages
	 * nothing: a running tracee's snapshot needs no global lock either,
	 * and a tracer polling one holds up no other.
	 */
	if (tracer->backend != &ds_hw_backend) {
		ds_geometry_fill(tracer, geom);
		return 0;
	}
	/*
	 * The snapshot is taken under ds_alloc_mutex too: ds_detach() marks the
	 * tracer detached before it collects the hardware's last records,
	 * and a reader must not see it detached with a count still to grow.
	 */
	mutex_lock(&ds_alloc_mutex);
	ds_tracer_sync(tracer);
	ds_geometry_fill(tracer, geom);
	mutex_unlock(&ds_alloc_mutex);
	return 0;
}
EXPORT_SYMBOL_GPL(ds_get_geometry);

/* Copy up to @n records from index @first on, oldest first; under @lock. */
static size_t ds_buf_copy(struct ds_tracer *tracer, size_t first, void *buf,
			  size_t n)
{
	size_t slot, done, chunk;

	lockdep_assert_held(&tracer->lock);

	if (first >= tracer->count)
		return 0;
	n = min(n, tracer->count - first);
	/* The oldest record sits @count slots behind the head. */
	slot = tracer->head + tracer->capacity - tracer->count + first;
	if (slot >= tracer->capacity)
		slot -= tracer->capacity;
	for (done = 0; done < n; done += chunk) {
		chunk = min(n - done, tracer->capacity - slot);
		memcpy(buf + done * tracer->rec_size,
		       tracer->buf + slot * tracer->rec_size,
		       chunk * tracer->rec_size);
		slot = 0;
	}
	return n;
}

ssize_t ds_read_record(struct ds_tracer *tracer, size_t i, void *buf,
		       size_t size)
{
	unsigned long flags;
	size_t n;

	if (IS_ERR_OR_NULL(tracer) || !buf || size < tracer->rec_size)
		return -EINVAL;

	raw_spin_lock_irqsave(&tracer->lock, flags);
	n = ds_buf_copy(tracer, i, buf, 1);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	return n ? tracer->rec_size : -EINVAL;
}
EXPORT_SYMBOL_GPL(ds_read_record);

ssize_t ds_read_records(struct ds_tracer *tracer, size_t first, void *buf,
			size_t size)
{
	unsigned long flags;
	size_t n;

	if (IS_ERR_OR_NULL(tracer) || !buf || size < tracer->rec_size)
		return -EINVAL;

	n = min_t(size_t, size, PAGE_SIZE) / tracer->rec_size;
	raw_spin_lock_irqsave(&tracer->lock, flags);
	n = ds_buf_copy(tracer, first, buf, n);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	return n;
}
EXPORT_SYMBOL_GPL(ds_read_records);

ssize_t ds_read_seq(struct ds_tracer *tracer, u64 *seq, void *buf,
		    size_t size)
{
	unsigned long flags;
	u64 oldest;
	size_t n;

	if (IS_ERR_OR_NULL(tracer) || !seq || !buf || size < tracer->rec_size)
		return -EINVAL;

	n = min_t(size_t, size, PAGE_SIZE) / tracer->rec_size;
	raw_spin_lock_irqsave(&tracer->lock, flags);
	/* The records held are numbered @seq - @count to @seq - 1. */
	oldest = tracer->seq - tracer->count;
	if (*seq > tracer->seq) {
		raw_spin_unlock_irqrestore(&tracer->lock, flags);
		return -EINVAL;
	}
	*seq = max(*seq, oldest);
	n = ds_buf_copy(tracer, *seq - oldest, buf, n);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	return n;
}
EXPORT_SYMBOL_GPL(ds_read_seq);

bool ds_tracer_recording(const struct ds_tracer *tracer)
{
	return !IS_ERR_OR_NULL(tracer) && ds_recording(tracer);
}
EXPORT_SYMBOL_GPL(ds_tracer_recording);

struct task_struct *ds_tracer_task(struct ds_tracer *tracer)
{
	struct task_struct *task;
	unsigned long flags;

	if (IS_ERR_OR_NULL(tracer))
		return NULL;
	/* ds_detach() drops its reference after clearing it, under the lock. */
	raw_spin_lock_irqsave(&tracer->lock, flags);
	task = tracer->task;
	if (task)
		get_task_struct(task);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	return task;
}

unsigned int ds_tracer_flags(const struct ds_tracer *tracer)
{
	return IS_ERR_OR_NULL(tracer) ? 0 : tracer->flags;
}

static int ds_emulated_store(struct ds_tracer *tracer, u64 from, u64 to)
{
	struct ds_bts_record rec = { .from = from, .to = to };
	int err = -ENOSPC;

	raw_spin_lock(&tracer->lock);
	if (ds_recording(tracer)) {
		ds_buf_append(tracer, &rec, 1);
		err = 0;
	}
	raw_spin_unlock(&tracer->lock);
	return err;
}

int ds_emulated_write_bts(struct task_struct *task, u64 from, u64 to)
{
	struct ds_tracer *tracer = NULL;
	struct ds_context *ctx;
	unsigned long flags;
	int err = -ENOENT;

	if (!task)
		return -ENOENT;
	/* Interrupts off: ds_detach() waits for us before freeing. */
	local_irq_save(flags);
	ctx = ds_task_ctx(task);
	if (ctx)
		tracer = rcu_dereference_sched(ctx->tracer[DS_BTS]);
	if (tracer && tracer->backend != &ds_hw_backend)
		err = ds_emulated_store(tracer, from, to);
	local_irq_restore(flags);
	return err;
}

bool ds_emulated_recording(struct task_struct *task)
{
	struct ds_tracer *tracer = NULL;
	struct ds_context *ctx;
	unsigned long flags;
	bool ret;

	/* Interrupts off: ds_detach() waits for us before freeing. */
	local_irq_save(flags);
	ctx = ds_task_ctx(task);
	if (ctx)
		tracer = rcu_dereference_sched(ctx->tracer[DS_BTS]);
	ret = tracer && tracer->backend != &ds_hw_backend &&
	      ds_recording(tracer);
	local_irq_restore(flags);
	return ret;
}

