// SPDX-License-Identifier: GPL-2.0
/*
 * Debug Store (BTS/PEBS) resource allocator: tracers, requests and the
 * task lifecycle.
 *
 * The allocator (this directory) is the only writer of IA32_DS_AREA and of
 * the TR, BTS, BTINT, BTS_OFF_OS and BTS_OFF_USR bits of IA32_DEBUGCTL.
 * Clients request a BTS
 * tracer for a task or for a CPU and get an opaque handle. PEBS has one
 * client, perf: its records come from counters, which perf owns, so a PEBS
 * buffer is of use only to whoever programs them; the allocator places
 * perf's PEBS buffer in the save area beside the BTS half.
 *
 * Ownership and lifetime. Requests, releases and state changes run under
 * ds_alloc_mutex. The context switch, the IPIs and the emulated backend read the
 * published tracers with interrupts disabled. A state change publishes
 * first and then runs ds_cpu_sync() on every online CPU and waits for it;
 * since each CPU re-derives its hardware state from the published state with
 * interrupts off, afterwards no CPU uses the old state and no reader still
 * holds an unpublished tracer. The context switch hook is gated by
 * TIF_DS_TRACE, so an untraced task pays nothing; the flag is cleared only
 * after that synchronisation, so a tracer is never left loaded across the
 * switch to another task.
 *
 * The rest of the allocator: the trace buffer (buffer.c), the per-CPU
 * hardware state (hw.c), the hardware backend's shared resources and
 * perf's arbitration (hw_setup.c), and the calls perf's Intel driver makes
 * (perf.c).
 */

#define pr_fmt(fmt) "ds: " fmt

#include <linux/cpu.h>
#include <linux/gfp.h>
#include <linux/irq_work.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/coredump.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/timekeeping.h>
#include <linux/vmalloc.h>

#include <asm/ds.h>

#include "internal.h"

/* Serialises requests, releases, state changes and backend registration. */
DEFINE_MUTEX(ds_alloc_mutex);
/* The emulated backend and its attached tracers; under ds_alloc_mutex. */
VISIBLE_IF_KUNIT const struct ds_backend *ds_emulated;
VISIBLE_IF_KUNIT unsigned int ds_nr_emulated;

/*
 * Kernel-mode records of per-CPU tracers sit in the staging buffers, which
 * page table isolation maps into every process: on a CPU affected by
 * Meltdown any user can read them. Only the administrator may accept that.
 */
VISIBLE_IF_KUNIT bool ds_meltdown_kernel;
module_param_named(meltdown_kernel, ds_meltdown_kernel, bool, 0644);
/* --- request validation --- */

static int ds_config_check(enum ds_kind kind, bool per_cpu,
			   const struct ds_config *cfg)
{
	if (!cfg || cfg->flags & ~DS_FLAGS_MASK ||
	    !(cfg->flags & (DS_KERNEL | DS_USER)))
		return -EINVAL;
	/*
	 * A task's tracer serves whoever may read the task's memory, which
	 * gives no right to the kernel's control flow (perf refuses kernel
	 * BTS outright).
	 */
	if (cfg->flags & DS_KERNEL && !per_cpu)
		return -EINVAL;
	/* Scheduling events and gaps only make sense for a task. */
	if (cfg->flags & (DS_TIMESTAMPS | DS_GAPS) && per_cpu)
		return -EINVAL;
	if (cfg->backend > DS_BACKEND_EMULATED)
		return -EINVAL;
	if (!cfg->size || cfg->size > DS_MAX_BUFFER_SIZE)
		return -EINVAL;

	switch (cfg->overflow) {
	case DS_OVERFLOW_WRAP:
		return cfg->threshold || cfg->notify ? -EINVAL : 0;
	case DS_OVERFLOW_NOTIFY:
		return cfg->notify ? 0 : -EINVAL;
	default:
		return -EINVAL;
	}
}

static struct ds_tracer *ds_tracer_alloc(enum ds_kind kind, bool per_cpu,
					 const struct ds_config *cfg)
{
	struct ds_tracer *tracer;
	int size, err;

	err = ds_config_check(kind, per_cpu, cfg);
	if (err)
		return ERR_PTR(err);
	if (kind != DS_BTS)
		return ERR_PTR(-EINVAL);
	size = DS_BTS_RECORD_SIZE;
	if (cfg->flags & DS_KERNEL && ds_caps.meltdown &&
	    !READ_ONCE(ds_meltdown_kernel))
		return ERR_PTR(-EPERM);
	if (cfg->size < size || cfg->threshold > cfg->size / size)
		return ERR_PTR(-EINVAL);

	tracer = kzalloc(sizeof(*tracer), ds_gfp(!per_cpu));
	if (!tracer)
		return ERR_PTR(-ENOMEM);
	tracer->kind = kind;
	tracer->cpu = -1;
	tracer->flags = cfg->flags;
	tracer->overflow = cfg->overflow;
	tracer->notify = cfg->notify;
	tracer->cookie = cfg->cookie;
	tracer->detached = cfg->detached;
	tracer->rec_size = size;
	tracer->capacity = cfg->size / size;
	if (cfg->overflow == DS_OVERFLOW_NOTIFY)
		tracer->threshold = cfg->threshold ?: tracer->capacity;
	raw_spin_lock_init(&tracer->lock);
	init_irq_work(&tracer->notify_work, ds_notify_work);

	err = ds_buf_alloc(tracer, cfg, !per_cpu);
	if (err) {
		kfree(tracer);
		return ERR_PTR(err);
	}
	return tracer;
}

static const struct ds_backend *ds_choose_backend(enum ds_kind kind,
						  bool per_cpu,
						  enum ds_backend_id want)
{
	const struct ds_backend *emu = ds_emulated;
	bool hw = ds_kind_present(kind);

	lockdep_assert_held(&ds_alloc_mutex);

	if (per_cpu || (emu && !(emu->kinds & BIT(kind))))
		emu = NULL;
	switch (want) {
	case DS_BACKEND_HARDWARE:
		return hw ? &ds_hw_backend : ERR_PTR(-EOPNOTSUPP);
	case DS_BACKEND_EMULATED:
		return emu ?: ERR_PTR(-EOPNOTSUPP);
	default:
		/* Prefer the hardware, unless perf holds it and we can emulate. */
		if (hw && (ds_hw_is_free(kind) || !emu))
			return &ds_hw_backend;
		return emu ?: ERR_PTR(-EOPNOTSUPP);
	}
}

static int ds_backend_start(struct ds_tracer *tracer)
{
	int err;

	if (tracer->backend == &ds_hw_backend)
		return ds_hw_backend_start(tracer);
	err = tracer->backend->start(tracer);
	if (!err)
		ds_nr_emulated++;
	return err;
}

static void ds_backend_stop(struct ds_tracer *tracer)
{
	if (tracer->backend == &ds_hw_backend) {
		ds_hw_backend_stop(tracer);
		return;
	}
	tracer->backend->stop(tracer);
	ds_nr_emulated--;
}

/* --- attaching and detaching --- */

static void ds_unpublish(struct ds_tracer *tracer, struct ds_context **freep)
{
	struct task_struct *task = tracer->task;
	struct ds_context *ctx;
	struct ds_cpu *dc;
	enum ds_kind kind;

	*freep = NULL;
	if (!task) {
		dc = per_cpu_ptr(&ds_cpus, tracer->cpu);
		RCU_INIT_POINTER(dc->cpu_tracer[tracer->kind], NULL);
		return;
	}
	ctx = ds_dereference(task->thread.ds_ctx);
	RCU_INIT_POINTER(ctx->tracer[tracer->kind], NULL);
	for (kind = 0; kind < DS_NR_KINDS; kind++)
		if (ds_dereference(ctx->tracer[kind]))
			return;
	RCU_INIT_POINTER(task->thread.ds_ctx, NULL);
	*freep = ctx;
}

/* Stop a tracer for good; its buffer stays readable until ds_release(). */
static void ds_detach(struct ds_tracer *tracer)
{
	struct task_struct *task;
	struct ds_context *ctx;
	unsigned long flags;

	lockdep_assert_held(&ds_alloc_mutex);
	lockdep_assert_cpus_held();

	if (!tracer->attached)
		return;
	/* The emulated backend stores nothing from now on, under the lock. */
	raw_spin_lock_irqsave(&tracer->lock, flags);
	WRITE_ONCE(tracer->attached, false);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	ds_unpublish(tracer, &ctx);
	/* Collect its records where it is loaded; nowhere loads it again. */
	ds_sync_loaded(tracer);
	if (ctx) {
		/* Only now: a switch must not skip a CPU that still had it. */
		clear_tsk_thread_flag(tracer->task, TIF_DS_TRACE);
		/* Switches and the emulated backend may still be reading it. */
		kfree_rcu(ctx, rcu);
	}
	ds_backend_stop(tracer);
	raw_spin_lock_irqsave(&tracer->lock, flags);
	task = tracer->task;
	tracer->task = NULL;
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	if (task)
		put_task_struct(task);
}

static int ds_attach_cpu(struct ds_tracer *tracer, int cpu)
{
	struct ds_cpu *dc;
	int err;

	lockdep_assert_held(&ds_alloc_mutex);
	lockdep_assert_cpus_held();

	if (cpu < 0 || cpu >= nr_cpu_ids || !cpu_possible(cpu))
		return -EINVAL;
	if (!cpu_online(cpu))
		return -ENODEV;
	dc = per_cpu_ptr(&ds_cpus, cpu);
	if (ds_dereference(dc->cpu_tracer[tracer->kind]))
		return -EBUSY;
	tracer->cpu = cpu;
	err = ds_backend_start(tracer);
	if (err)
		return err;
	WRITE_ONCE(tracer->attached, true);
	rcu_assign_pointer(dc->cpu_tracer[tracer->kind], tracer);
	/* The CPU is held online: it loads the tracer now. */
	ds_sync_cpu(cpu);
	return 0;
}

static struct ds_context *ds_task_slot(struct task_struct *task,
				       enum ds_kind kind)
{
	struct ds_context *ctx = ds_dereference(task->thread.ds_ctx);

	if (ctx && ds_dereference(ctx->tracer[kind]))
		return ERR_PTR(-EBUSY);
	return ctx ?: kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT) ?: ERR_PTR(-ENOMEM);
}

static int ds_attach_task(struct ds_tracer *tracer, struct task_struct *task)
{
	struct ds_context *ctx;
	int err;

	lockdep_assert_held(&ds_alloc_mutex);
	lockdep_assert_cpus_held();

	if (task->flags & PF_EXITING)
		return -ESRCH;
	ctx = ds_task_slot(task, tracer->kind);
	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	get_task_struct(task);
	tracer->task = task;
	err = ds_backend_start(tracer);
	if (err)
		goto put_task;

	WRITE_ONCE(tracer->attached, true);
	rcu_assign_pointer(ctx->tracer[tracer->kind], tracer);
	rcu_assign_pointer(task->thread.ds_ctx, ctx);
	set_tsk_thread_flag(task, TIF_DS_TRACE);
	/*
	 * Pairs with the barrier in ds_detach_task(): either the exiting task
	 * sees its context and detaches us, or we see PF_EXITING here.
	 */
	smp_mb();
	if (task->flags & PF_EXITING) {
		ds_detach(tracer);
		return -ESRCH;
	}
	if (tracer->backend == &ds_hw_backend)
		ds_sync_task(task);
	return 0;

put_task:
	tracer->task = NULL;
	put_task_struct(task);
	if (ctx != ds_dereference(task->thread.ds_ctx))
		kfree(ctx);
	return err;
}

/* --- requests --- */

static int ds_attach(struct ds_tracer *tracer, struct task_struct *task,
		     int cpu, enum ds_backend_id want)
{
	const struct ds_backend *backend;
	int err;

	mutex_lock(&ds_alloc_mutex);
	backend = ds_choose_backend(tracer->kind, !task, want);
	if (IS_ERR(backend)) {
		err = PTR_ERR(backend);
		goto unlock_mutex;
	}
	if (backend == &ds_hw_backend)
		ds_stage_prepare(tracer->kind);
	cpus_read_lock();
	tracer->backend = backend;
	if (task)
		err = ds_attach_task(tracer, task);
	else
		err = ds_attach_cpu(tracer, cpu);
	/*
	 * The hardware was taken after the choice (perf reserves it without
	 * ds_alloc_mutex) or is a CPU tracer's, or its staging buffers could not be
	 * had (-EAGAIN from ds_hw_get(), out of memory): emulate, as the
	 * choice would have.
	 */
	if ((err == -EBUSY || err == -EAGAIN) && want == DS_BACKEND_AUTO &&
	    backend == &ds_hw_backend && task) {
		backend = ds_choose_backend(tracer->kind, false,
					    DS_BACKEND_EMULATED);
		if (!IS_ERR(backend)) {
			tracer->backend = backend;
			err = ds_attach_task(tracer, task);
		}
	}
	if (err == -EAGAIN)
		err = -ENOMEM;
	cpus_read_unlock();
	ds_stage_discard(tracer->kind);
unlock_mutex:
	mutex_unlock(&ds_alloc_mutex);
	return err;
}

static struct ds_tracer *ds_request(enum ds_kind kind,
				    struct task_struct *task, int cpu,
				    const struct ds_config *cfg)
{
	struct ds_tracer *tracer;
	int err;

	might_sleep();

	tracer = ds_tracer_alloc(kind, !task, cfg);
	if (IS_ERR(tracer))
		return tracer;
	err = ds_attach(tracer, task, cpu, cfg->backend);
	if (err) {
		/* An attach undone at PF_EXITING may have queued a notification. */
		irq_work_sync(&tracer->notify_work);
		ds_tracer_free(tracer);
		return ERR_PTR(err);
	}
	return tracer;
}

struct ds_tracer *ds_request_bts_task(struct task_struct *task,
				      const struct ds_config *cfg)
{
	if (!task)
		return ERR_PTR(-EINVAL);
	return ds_request(DS_BTS, task, -1, cfg);
}
EXPORT_SYMBOL_GPL(ds_request_bts_task);

struct ds_tracer *ds_request_bts_cpu(int cpu, const struct ds_config *cfg)
{
	return ds_request(DS_BTS, NULL, cpu, cfg);
}
EXPORT_SYMBOL_GPL(ds_request_bts_cpu);

void ds_release(struct ds_tracer *tracer)
{
	if (IS_ERR_OR_NULL(tracer))
		return;
	might_sleep();

	mutex_lock(&ds_alloc_mutex);
	cpus_read_lock();
	ds_detach(tracer);
	cpus_read_unlock();
	mutex_unlock(&ds_alloc_mutex);
	/* A notification queued by the last collection may still run. */
	irq_work_sync(&tracer->notify_work);
	ds_tracer_free(tracer);
}
EXPORT_SYMBOL_GPL(ds_release);

/* --- control and reading --- */

/* Pull pending hardware records and apply the tracer's new state. */
void ds_tracer_sync(struct ds_tracer *tracer)
{
	lockdep_assert_held(&ds_alloc_mutex);

	if (tracer->attached && tracer->backend == &ds_hw_backend)
		ds_sync_loaded(tracer);
}

static int ds_set_suspended(struct ds_tracer *tracer, bool suspended)
{
	unsigned long flags;

	if (IS_ERR_OR_NULL(tracer))
		return -EINVAL;
	might_sleep();

	mutex_lock(&ds_alloc_mutex);
	WRITE_ONCE(tracer->suspended, suspended);
	if (!suspended) {
		raw_spin_lock_irqsave(&tracer->lock, flags);
		ds_buf_unpause(tracer);
		raw_spin_unlock_irqrestore(&tracer->lock, flags);
	}
	ds_tracer_sync(tracer);
	mutex_unlock(&ds_alloc_mutex);
	return 0;
}

int ds_suspend(struct ds_tracer *tracer)
{
	return ds_set_suspended(tracer, true);
}
EXPORT_SYMBOL_GPL(ds_suspend);

int ds_resume(struct ds_tracer *tracer)
{
	return ds_set_suspended(tracer, false);
}
EXPORT_SYMBOL_GPL(ds_resume);

/* Apply the tracer's state to this CPU's hardware if it is loaded here. */
static void ds_tracer_sync_local(struct ds_tracer *tracer)
{
	struct ds_cpu *dc;
	unsigned long flags;

	local_irq_save(flags);
	dc = this_cpu_ptr(&ds_cpus);
	if (dc->loaded[tracer->kind] == tracer)
		ds_cpu_sync(NULL);
	local_irq_restore(flags);
}

void ds_suspend_atomic(struct ds_tracer *tracer)
{
	unsigned long flags;

	/* Under the lock: an emulated store either finished or sees it. */
	raw_spin_lock_irqsave(&tracer->lock, flags);
	WRITE_ONCE(tracer->suspended, true);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	if (tracer->backend == &ds_hw_backend)
		ds_tracer_sync_local(tracer);
}
EXPORT_SYMBOL_GPL(ds_suspend_atomic);

void ds_resume_atomic(struct ds_tracer *tracer)
{
	unsigned long flags;

	raw_spin_lock_irqsave(&tracer->lock, flags);
	WRITE_ONCE(tracer->suspended, false);
	ds_buf_unpause(tracer);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	if (tracer->backend == &ds_hw_backend)
		ds_tracer_sync_local(tracer);
}
EXPORT_SYMBOL_GPL(ds_resume_atomic);

int ds_clear(struct ds_tracer *tracer)
{
	unsigned long flags;

	if (IS_ERR_OR_NULL(tracer))
		return -EINVAL;
	might_sleep();

	mutex_lock(&ds_alloc_mutex);
	/* Records stored before the clear go away with it. */
	ds_tracer_sync(tracer);
	raw_spin_lock_irqsave(&tracer->lock, flags);
	ds_buf_reset(tracer);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	/* The hardware may resume after a pause, with a fresh threshold. */
	ds_tracer_sync(tracer);
	mutex_unlock(&ds_alloc_mutex);
	return 0;
}
EXPORT_SYMBOL_GPL(ds_clear);

int ds_update(struct ds_tracer *tracer, const struct ds_config *cfg)
{
	struct ds_config check;
	unsigned long flags;
	int err;

	if (IS_ERR_OR_NULL(tracer) || !cfg)
		return -EINVAL;
	check = *cfg;
	check.buffer = NULL;
	check.size = tracer->capacity * tracer->rec_size;
	err = ds_config_check(tracer->kind, tracer->cpu >= 0, &check);
	if (err || cfg->threshold > tracer->capacity)
		return -EINVAL;
	if ((cfg->flags ^ tracer->flags) & (DS_KERNEL | DS_USER))
		return -EINVAL;
	might_sleep();

	mutex_lock(&ds_alloc_mutex);
	/* Collect with the old settings first. */
	ds_tracer_sync(tracer);
	raw_spin_lock_irqsave(&tracer->lock, flags);
	WRITE_ONCE(tracer->flags, cfg->flags);
	ds_buf_set_overflow(tracer, cfg);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	ds_tracer_sync(tracer);
	mutex_unlock(&ds_alloc_mutex);
	/*
	 * A notification queued before the change may still be running with
	 * the old function and cookie; the caller may free that cookie now.
	 */
	irq_work_sync(&tracer->notify_work);
	return 0;
}
EXPORT_SYMBOL_GPL(ds_update);

int ds_resize(struct ds_tracer *tracer, const struct ds_config *cfg)
{
	struct ds_charge charge = {};
	unsigned long flags;
	size_t capacity;
	void *buf;
	int err;

	if (IS_ERR_OR_NULL(tracer) || !cfg || cfg->buffer || !tracer->own_buf)
		return -EINVAL;
	err = ds_config_check(tracer->kind, tracer->cpu >= 0, cfg);
	if (err)
		return err;
	capacity = cfg->size / tracer->rec_size;
	if (!capacity || cfg->threshold > capacity)
		return -EINVAL;
	if ((cfg->flags ^ tracer->flags) & (DS_KERNEL | DS_USER))
		return -EINVAL;
	might_sleep();

	/* All that can fail comes before the tracer changes. */
	buf = ds_buf_get(capacity * tracer->rec_size, tracer->cpu < 0, &charge,
			 &tracer->charge);
	if (IS_ERR(buf))
		return PTR_ERR(buf);

	mutex_lock(&ds_alloc_mutex);
	/* Collected into the old buffer, and gone with it. */
	ds_tracer_sync(tracer);
	raw_spin_lock_irqsave(&tracer->lock, flags);
	WRITE_ONCE(tracer->flags, cfg->flags);
	buf = ds_buf_replace(tracer, buf, capacity, &charge);
	ds_buf_set_overflow(tracer, cfg);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	/* The hardware may resume after a pause, with the new threshold. */
	ds_tracer_sync(tracer);
	mutex_unlock(&ds_alloc_mutex);
	/* As in ds_update(): the caller may free the old cookie now. */
	irq_work_sync(&tracer->notify_work);
	/* Every access to the buffer is under the lock: none is left. */
	vfree(buf);
	ds_unaccount_mem(&charge);
	return 0;
}
EXPORT_SYMBOL_GPL(ds_resize);

/* --- task lifecycle --- */

static void ds_stamp(struct task_struct *task, enum ds_bts_qualifier qual)
{
	struct ds_context *ctx = ds_task_ctx(task);
	struct ds_tracer *tracer;
	struct ds_bts_record rec;

	lockdep_assert_irqs_disabled();

	tracer = ctx ? rcu_dereference_sched(ctx->tracer[DS_BTS]) : NULL;
	if (!tracer || !(READ_ONCE(tracer->flags) & DS_TIMESTAMPS))
		return;
	rec.from = DS_BTS_EVENT_MARKER | qual;
	rec.to = ktime_get_mono_fast_ns();
	rec.flags = task_pid_nr(task);
	/* Under the lock: ds_detach() stops the appends there. */
	raw_spin_lock(&tracer->lock);
	if (ds_recording(tracer))
		ds_buf_append(tracer, &rec, 1);
	else if (READ_ONCE(tracer->paused))
		tracer->gap = true;	/* a record the pause dropped */
	raw_spin_unlock(&tracer->lock);
}

void ds_switch_to(struct task_struct *prev, struct task_struct *next)
{
	struct ds_cpu *dc = this_cpu_ptr(&ds_cpus);

	lockdep_assert_irqs_disabled();

	/* BTS is off while the staging buffer changes hands. */
	ds_cpu_stop(dc);
	ds_stamp(prev, DS_BTS_TASK_DEPARTS);
	ds_stamp(next, DS_BTS_TASK_ARRIVES);
	ds_cpu_start(dc, next);
}

void __ds_mark_gap(enum ds_gap why, u32 datum, u64 ip)
{
	struct task_struct *task = current;
	struct ds_tracer *tracer;
	struct ds_context *ctx;
	struct ds_cpu *dc;
	unsigned long flags;
	bool loaded;

	/* Interrupts off: an RCU-sched reader, and no switch meanwhile. */
	local_irq_save(flags);
	ctx = ds_task_ctx(task);
	tracer = ctx ? rcu_dereference_sched(ctx->tracer[DS_BTS]) : NULL;
	if (tracer && READ_ONCE(tracer->flags) & DS_GAPS) {
		dc = this_cpu_ptr(&ds_cpus);
		/*
		 * The branches of before, staged on this CPU, come first; the
		 * hardware is programmed again after the mark, which may
		 * have reached the threshold, as a switch does.
		 */
		loaded = READ_ONCE(dc->loaded[DS_BTS]) == tracer;
		if (loaded)
			ds_cpu_stop(dc);
		/* Not after ds_detach(): it stops the appends under the lock. */
		raw_spin_lock(&tracer->lock);
		if (ds_recording(tracer))
			ds_buf_append_gap(tracer, why, datum, ip);
		else if (READ_ONCE(tracer->paused))
			tracer->gap = true;	/* a mark the pause dropped */
		raw_spin_unlock(&tracer->lock);
		if (loaded)
			ds_cpu_start(dc, task);
	}
	local_irq_restore(flags);
}

static void ds_detach_task(struct task_struct *task, bool at_exec)
{
	struct ds_tracer *tracer;
	struct ds_context *ctx;
	enum ds_kind kind;

	/* Pairs with the barrier in ds_attach_task(); see there. */
	smp_mb();
	if (!rcu_access_pointer(task->thread.ds_ctx))
		return;

	mutex_lock(&ds_alloc_mutex);
	cpus_read_lock();
	for (kind = 0; kind < DS_NR_KINDS; kind++) {
		/* The last detach frees the context. */
		ctx = ds_dereference(task->thread.ds_ctx);
		tracer = ctx ? ds_dereference(ctx->tracer[kind]) : NULL;
		if (!tracer)
			continue;
		/* Before the detach: a status that says detached says why. */
		WRITE_ONCE(tracer->exec_stopped, at_exec);
		ds_detach(tracer);
		/* Under ds_alloc_mutex: the owner's ds_release() waits for it. */
		if (tracer->detached)
			tracer->detached(tracer, READ_ONCE(tracer->cookie));
	}
	cpus_read_unlock();
	mutex_unlock(&ds_alloc_mutex);
}

void ds_exec_thread(void)
{
	struct task_struct *task = current;
	bool private;

	if (!rcu_access_pointer(task->thread.ds_ctx))
		return;
	private = get_dumpable(task->mm) != SUID_DUMP_USER;
	ds_mark_gap(private ? DS_GAP_EXEC_STOPPED : DS_GAP_EXEC, 0, 0);
	if (private)
		ds_detach_task(task, true);
}

void ds_fork_thread(struct task_struct *child)
{
	RCU_INIT_POINTER(child->thread.ds_ctx, NULL);
	clear_tsk_thread_flag(child, TIF_DS_TRACE);
}

void ds_exit_thread(struct task_struct *task)
{
	ds_detach_task(task, false);
}

/* --- the emulated backend --- */

int ds_register_backend(const struct ds_backend *backend)
{
	int err = 0;

	if (!backend || !backend->start || !backend->stop ||
	    !backend->kinds || backend->kinds & ~ds_hw_backend.kinds)
		return -EINVAL;

	mutex_lock(&ds_alloc_mutex);
	if (ds_emulated)
		err = -EBUSY;
	else
		WRITE_ONCE(ds_emulated, backend);
	mutex_unlock(&ds_alloc_mutex);
	return err;
}

int ds_unregister_backend(const struct ds_backend *backend)
{
	int err = 0;

	mutex_lock(&ds_alloc_mutex);
	if (!backend || backend != ds_emulated)
		err = -EINVAL;
	else if (ds_nr_emulated)
		err = -EBUSY;
	else
		WRITE_ONCE(ds_emulated, NULL);
	mutex_unlock(&ds_alloc_mutex);
	return err;
}

