// SPDX-License-Identifier: GPL-2.0
/*
 * A KUnit stress suite of the Debug Store allocator's API.
 *
 * The other suites check what one caller sees, one step at a time. This one
 * lets several kernel threads share a few tracer slots and issue a bounded,
 * seeded stream of random requests, releases, updates, clears, suspends,
 * resumes and reads, through the public <asm/ds.h> API only, while the
 * traced kernel threads come and go, a CPU goes offline and online, and a
 * thread takes and gives back perf's reservation of the Debug Store. Every
 * answer is checked against what <asm/ds.h> promises, and nothing may be
 * left behind. On a CPU without BTS the per-task tracers use the emulated
 * backend and per-CPU requests fail with -EOPNOTSUPP; on a CPU with BTS
 * both use the hardware. Kernel-mode tracing is for per-CPU tracers only
 * (-EINVAL for a task), and on a CPU affected by Meltdown only with
 * "ds.meltdown_kernel=1" (-EPERM without).
 * Meant for a kernel with KASAN, lockdep and fault injection.
 * "ds_stress_kunit.seed=" and
 * "ds_stress_kunit.ops=" on the kernel command line repeat or lengthen a
 * run.
 */

#include <kunit/test.h>
#include <linux/atomic.h>
#include <linux/cpu.h>
#include <linux/cpufeature.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/prandom.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/sizes.h>

#include <asm/ds.h>

/* Worker threads per case, and the slots they share. */
#define DS_STRESS_WORKERS	4
#define DS_STRESS_TASK_SLOTS	6
#define DS_STRESS_CPU_SLOTS	2
#define DS_STRESS_SLOTS		(DS_STRESS_TASK_SLOTS + DS_STRESS_CPU_SLOTS)
/* Bytes of one BTS record, the 64-bit format both backends write. */
#define DS_STRESS_RECORD_SIZE	sizeof(struct ds_bts_record)
/* CPU hotplug toggles of the hotplug thread per case, and its pause. */
#define DS_STRESS_HOTPLUG_TOGGLES	6
#define DS_STRESS_HOTPLUG_PAUSE_MS	20
/* How long the perf thread holds the Debug Store, and how long it waits. */
#define DS_STRESS_PERF_HOLD_MS		2
#define DS_STRESS_PERF_PAUSE_MS		5
/* Most buffers are small; one in DS_STRESS_BIG_ONE is up to the maximum. */
#define DS_STRESS_SMALL_SIZE	SZ_16K
#define DS_STRESS_BIG_ONE	16

static unsigned int seed = 1;
module_param(seed, uint, 0444);
MODULE_PARM_DESC(seed, "seed of the random operations");

static unsigned int ops = 2400;
module_param(ops, uint, 0444);
MODULE_PARM_DESC(ops, "operations per case, shared by the worker threads");

/* What a worker does to a slot. */
enum ds_stress_op {
	DS_STRESS_REQUEST,
	DS_STRESS_RELEASE,
	DS_STRESS_UPDATE,
	DS_STRESS_CLEAR,
	DS_STRESS_SUSPEND,
	DS_STRESS_RESUME,
	DS_STRESS_GEOMETRY,
	DS_STRESS_READ,
	DS_STRESS_TARGET,
	DS_STRESS_NR_OPS,
};

/**
 * struct ds_stress_slot - a tracer and what it traces
 * @lock:	serialises the workers' operations on the slot
 * @cpu:	a per-CPU slot's CPU; -1 for a per-task slot
 * @task:	a per-task slot's traced kernel thread (a reference), or NULL
 * @tracer:	the handle, or NULL
 * @buffer:	the caller's trace buffer of @tracer, or NULL for the
 *		allocator's; freed after ds_release()
 * @suspended:	ds_suspend() without ds_resume() since the request
 */
struct ds_stress_slot {
	struct mutex		lock;	/* the slot's operations */
	int			cpu;
	struct task_struct	*task;
	struct ds_tracer	*tracer;
	void			*buffer;
	bool			suspended;
};

/**
 * struct ds_stress - one case's shared state
 * @test:	the case
 * @slots:	the slots; a case uses @first to @last - 1
 * @first:	first slot in use
 * @last:	one past the last slot in use
 * @hotplug_cpu: the CPU the hotplug thread toggles, or -1
 * @left:	operations still to issue, all workers together
 * @done:	operations issued
 * @granted:	requests that returned a tracer
 * @notified:	notification callbacks run
 * @toggles:	CPU hotplug toggles that succeeded
 * @kernel_granted: per-CPU kernel-mode requests granted
 * @kernel_refused: per-CPU kernel-mode requests refused with -EPERM
 * @perf_granted: reservations of the perf thread that succeeded
 * @perf_refused: reservations of the perf thread refused with -EBUSY
 */
struct ds_stress {
	struct kunit		*test;
	struct ds_stress_slot	slots[DS_STRESS_SLOTS];
	int			first;
	int			last;
	int			hotplug_cpu;
	atomic_t		left;
	atomic_t		done;
	atomic_t		granted;
	atomic_t		notified;
	atomic_t		toggles;
	atomic_t		kernel_granted;
	atomic_t		kernel_refused;
	atomic_t		perf_granted;
	atomic_t		perf_refused;
};

/**
 * struct ds_stress_worker - one worker thread
 * @s:		the case's state
 * @rnd:	its own random stream, from the seed and its number
 * @thread:	the thread
 */
struct ds_stress_worker {
	struct ds_stress	*s;
	struct rnd_state	rnd;
	struct task_struct	*thread;
};

static u32 ds_stress_below(struct rnd_state *rnd, u32 n)
{
	return n ? prandom_u32_state(rnd) % n : 0;
}

/* A traced kernel thread: runs a little kernel code now and then. */
static int ds_stress_target(void *arg)
{
	while (!kthread_should_stop())
		usleep_range(200, 2000);
	return 0;
}

/* From irq_work: count only; the slot's owner clears or resumes. */
static void ds_stress_notify(struct ds_tracer *tracer, void *cookie)
{
	struct ds_stress *s = cookie;

	atomic_inc(&s->notified);
}

/* Randomly broken requests: one in DS_STRESS_BROKEN, in one of six ways. */
#define DS_STRESS_BROKEN	8
#define DS_STRESS_BREAKAGES	6

static bool ds_stress_break(struct rnd_state *rnd, struct ds_config *cfg)
{
	switch (ds_stress_below(rnd, DS_STRESS_BROKEN * DS_STRESS_BREAKAGES)) {
	case 0:
		cfg->size = 0;
		break;
	case 1:
		cfg->size = DS_MAX_BUFFER_SIZE + 1 + ds_stress_below(rnd, SZ_4K);
		break;
	case 2:
		/* None, or the first flag above the ones there are. */
		cfg->flags = ds_stress_below(rnd, 2) ? 0 :
			     cfg->flags | (DS_FLAGS_MASK + 1);
		break;
	case 3:
		cfg->backend = DS_BACKEND_EMULATED + 1;
		break;
	case 4:
		cfg->overflow = DS_OVERFLOW_NOTIFY + 1;
		break;
	case 5:
		cfg->overflow = DS_OVERFLOW_WRAP;
		cfg->notify = ds_stress_notify;
		break;
	default:
		return false;
	}
	return true;
}

/* A random request; false when it is invalid by <asm/ds.h>. */
static bool ds_stress_config(struct ds_stress *s, struct rnd_state *rnd,
			     struct ds_config *cfg, bool per_cpu)
{
	memset(cfg, 0, sizeof(*cfg));
	if (ds_stress_below(rnd, DS_STRESS_BIG_ONE))
		cfg->size = ds_stress_below(rnd, DS_STRESS_SMALL_SIZE) + 1;
	else
		cfg->size = ds_stress_below(rnd, DS_MAX_BUFFER_SIZE) + 1;
	cfg->flags = per_cpu ? DS_KERNEL : DS_USER;
	switch (ds_stress_below(rnd, 4)) {
	case 0:
		cfg->flags |= DS_KERNEL | DS_USER;
		break;
	case 1:
		if (!per_cpu)
			cfg->flags |= DS_TIMESTAMPS;
		break;
	}
	cfg->backend = ds_stress_below(rnd, DS_BACKEND_EMULATED + 1);
	if (ds_stress_below(rnd, 2)) {
		cfg->overflow = DS_OVERFLOW_NOTIFY;
		cfg->notify = ds_stress_notify;
		cfg->cookie = s;
		cfg->threshold = ds_stress_below(rnd, cfg->size /
						 DS_STRESS_RECORD_SIZE + 1);
	}
	if (ds_stress_break(rnd, cfg))
		return false;
	/* A task's tracer never records kernel mode. */
	if (!per_cpu && cfg->flags & DS_KERNEL)
		return false;
	return cfg->size >= DS_STRESS_RECORD_SIZE;
}

/*
 * Kernel-mode records of a per-CPU tracer on a CPU affected by Meltdown:
 * refused with -EPERM unless the administrator set ds.meltdown_kernel.
 */
static bool ds_stress_meltdown_policy(const struct ds_config *cfg, bool per_cpu)
{
	return per_cpu && cfg->flags & DS_KERNEL &&
	       boot_cpu_has_bug(X86_BUG_CPU_MELTDOWN);
}

/* An error a request may return, as <asm/ds.h> lists them. */
static bool ds_stress_request_errno(long err, bool per_cpu)
{
	switch (err) {
	case -EINVAL:
	case -EBUSY:
	case -EOPNOTSUPP:
	case -ENOMEM:
		return true;
	case -ESRCH:
		return !per_cpu;
	case -ENODEV:
		return per_cpu;
	}
	return false;
}

static void ds_stress_release(struct ds_stress_slot *slot)
{
	ds_release(slot->tracer);
	slot->tracer = NULL;
	kvfree(slot->buffer);
	slot->buffer = NULL;
	slot->suspended = false;
}

static void ds_stress_request(struct ds_stress_worker *w,
			      struct ds_stress_slot *slot)
{
	struct kunit *test = w->s->test;
	bool per_cpu = slot->cpu >= 0;
	struct task_struct *task;
	struct ds_tracer *tracer;
	struct ds_config cfg;
	void *buffer = NULL;
	bool valid;
	long err;

	if (slot->tracer || (!per_cpu && !slot->task))
		return;
	valid = ds_stress_config(w->s, &w->rnd, &cfg, per_cpu);
	/* Now and then the caller's own buffer, which is not charged. */
	if (!ds_stress_below(&w->rnd, 4) && cfg.size &&
	    cfg.size <= DS_MAX_BUFFER_SIZE) {
		buffer = kvzalloc(cfg.size, GFP_KERNEL);
		if (!buffer)
			return;
		cfg.buffer = buffer;
	}
	if (per_cpu)
		tracer = ds_request_bts_cpu(slot->cpu, &cfg);
	else
		tracer = ds_request_bts_task(slot->task, &cfg);
	if (IS_ERR(tracer)) {
		err = PTR_ERR(tracer);
		kvfree(buffer);
		/* <asm/ds.h> does not order -EPERM and -EINVAL. */
		if (err == -EPERM &&
		    ds_stress_meltdown_policy(&cfg, per_cpu)) {
			atomic_inc(&w->s->kernel_refused);
			return;
		}
		KUNIT_EXPECT_TRUE_MSG(test,
				      ds_stress_request_errno(err, per_cpu),
				      "request: %ld", err);
		if (!valid)
			KUNIT_EXPECT_EQ(test, err, -EINVAL);
		return;
	}
	KUNIT_EXPECT_TRUE_MSG(test, valid, "an invalid request was granted");
	if (per_cpu && cfg.flags & DS_KERNEL)
		atomic_inc(&w->s->kernel_granted);
	/* A reference of its own, or NULL once the thread is gone. */
	task = ds_tracer_task(tracer);
	KUNIT_EXPECT_TRUE(test, per_cpu ? !task :
			  !task || task == slot->task);
	if (task)
		put_task_struct(task);
	slot->tracer = tracer;
	slot->buffer = buffer;
	slot->suspended = false;
	atomic_inc(&w->s->granted);
}

/* The geometry is consistent; returns it for the caller's checks. */
static void ds_stress_geometry(struct ds_stress_worker *w,
			       struct ds_stress_slot *slot,
			       struct ds_geometry *geom)
{
	struct kunit *test = w->s->test;

	/* Workers only expect: an assertion would end the case's thread. */
	memset(geom, 0, sizeof(*geom));
	KUNIT_EXPECT_EQ(test, ds_get_geometry(slot->tracer, geom), 0);
	geom->capacity = max_t(size_t, geom->capacity, 1);
	KUNIT_EXPECT_TRUE_MSG(test, geom->backend == DS_BACKEND_HARDWARE ||
			      geom->backend == DS_BACKEND_EMULATED,
			      "backend %d", geom->backend);
	KUNIT_EXPECT_EQ(test, geom->record_size, DS_STRESS_RECORD_SIZE);
	KUNIT_EXPECT_LE(test, geom->count, geom->capacity);
	KUNIT_EXPECT_LT(test, geom->index, geom->capacity);
	KUNIT_EXPECT_LE(test, geom->threshold, geom->capacity);
	/* DROPPED: a hardware staging buffer filled before its PMI. */
	KUNIT_EXPECT_EQ(test, geom->status & ~(DS_STATUS_SUSPENDED |
					       DS_STATUS_PAUSED |
					       DS_STATUS_DETACHED),
			geom->backend == DS_BACKEND_HARDWARE ?
			(geom->status & DS_STATUS_DROPPED) : 0);
	KUNIT_EXPECT_EQ(test, !!(geom->status & DS_STATUS_SUSPENDED),
			slot->suspended);
	if (slot->cpu >= 0)
		KUNIT_EXPECT_FALSE(test, geom->status & DS_STATUS_DETACHED);
	if (slot->suspended || geom->status & DS_STATUS_PAUSED)
		KUNIT_EXPECT_FALSE(test, ds_tracer_recording(slot->tracer));
}

/*
 * Records below the count read; one at the count does not, where the count
 * cannot grow under us (suspended, or the task gone).
 */
static void ds_stress_read(struct ds_stress_worker *w,
			   struct ds_stress_slot *slot)
{
	struct kunit *test = w->s->test;
	struct ds_bts_record rec;
	struct ds_geometry geom;
	size_t i;

	ds_stress_geometry(w, slot, &geom);
	if (geom.count) {
		i = ds_stress_below(&w->rnd, geom.count);
		KUNIT_EXPECT_EQ(test, ds_read_record(slot->tracer, i, &rec,
						     sizeof(rec)),
				DS_STRESS_RECORD_SIZE);
		KUNIT_EXPECT_EQ(test, ds_read_record(slot->tracer, i, &rec,
						     sizeof(rec) - 1),
				-EINVAL);
	}
	if (slot->suspended || geom.status & DS_STATUS_DETACHED)
		KUNIT_EXPECT_EQ(test, ds_read_record(slot->tracer, geom.count,
						     &rec, sizeof(rec)),
				-EINVAL);
	KUNIT_EXPECT_EQ(test, ds_read_record(slot->tracer, geom.capacity, &rec,
					     sizeof(rec)), -EINVAL);
}

static void ds_stress_update(struct ds_stress_worker *w,
			     struct ds_stress_slot *slot)
{
	struct ds_geometry before, after;
	struct ds_config cfg;
	int err;

	ds_stress_config(w->s, &w->rnd, &cfg, slot->cpu >= 0);
	ds_stress_geometry(w, slot, &before);
	err = ds_update(slot->tracer, &cfg);
	KUNIT_EXPECT_TRUE_MSG(w->s->test, !err || err == -EINVAL,
			      "update: %d", err);
	/* The records stay. */
	ds_stress_geometry(w, slot, &after);
	KUNIT_EXPECT_EQ(w->s->test, after.capacity, before.capacity);
	if (slot->suspended)
		KUNIT_EXPECT_EQ(w->s->test, after.count, before.count);
}

/* The traced thread exits (the tracer stays, detached) or a new one starts. */
static void ds_stress_retarget(struct ds_stress_worker *w,
			       struct ds_stress_slot *slot)
{
	struct task_struct *task;

	if (slot->cpu >= 0)
		return;
	if (slot->task) {
		kthread_stop_put(slot->task);
		slot->task = NULL;
		return;
	}
	/* A new thread needs a new tracer; the old one stays readable. */
	if (slot->tracer)
		ds_stress_release(slot);
	task = kthread_run(ds_stress_target, NULL, "ds_stress_target");
	if (IS_ERR(task))
		return;
	get_task_struct(task);
	slot->task = task;
}

static void ds_stress_op(struct ds_stress_worker *w,
			 struct ds_stress_slot *slot, enum ds_stress_op op)
{
	struct kunit *test = w->s->test;
	struct ds_geometry geom;
	bool quiet;

	if (op == DS_STRESS_REQUEST || op == DS_STRESS_TARGET || !slot->tracer) {
		if (op == DS_STRESS_TARGET)
			ds_stress_retarget(w, slot);
		else
			ds_stress_request(w, slot);
		return;
	}
	switch (op) {
	case DS_STRESS_RELEASE:
		ds_stress_release(slot);
		break;
	case DS_STRESS_UPDATE:
		ds_stress_update(w, slot);
		break;
	case DS_STRESS_CLEAR:
		/*
		 * Quiet only if it was before the clear: kthread_stop()
		 * returns before the thread's exit detaches its tracer, and
		 * a timestamp of a switch in between lands after the clear.
		 */
		ds_stress_geometry(w, slot, &geom);
		quiet = slot->suspended || geom.status & DS_STATUS_DETACHED;
		KUNIT_EXPECT_EQ(test, ds_clear(slot->tracer), 0);
		ds_stress_geometry(w, slot, &geom);
		if (quiet) {
			KUNIT_EXPECT_EQ(test, geom.count, 0);
			KUNIT_EXPECT_EQ(test, geom.lost, 0);
		}
		KUNIT_EXPECT_FALSE(test, geom.status & DS_STATUS_PAUSED &&
				   geom.count < geom.threshold);
		break;
	case DS_STRESS_SUSPEND:
		KUNIT_EXPECT_EQ(test, ds_suspend(slot->tracer), 0);
		slot->suspended = true;
		ds_stress_geometry(w, slot, &geom);
		break;
	case DS_STRESS_RESUME:
		KUNIT_EXPECT_EQ(test, ds_resume(slot->tracer), 0);
		slot->suspended = false;
		ds_stress_geometry(w, slot, &geom);
		break;
	case DS_STRESS_GEOMETRY:
		ds_stress_geometry(w, slot, &geom);
		break;
	default:
		ds_stress_read(w, slot);
		break;
	}
}

static int ds_stress_worker(void *arg)
{
	struct ds_stress_worker *w = arg;
	struct ds_stress *s = w->s;
	struct ds_stress_slot *slot;
	enum ds_stress_op op;

	while (atomic_dec_return(&s->left) >= 0) {
		slot = &s->slots[s->first +
				 ds_stress_below(&w->rnd, s->last - s->first)];
		op = ds_stress_below(&w->rnd, DS_STRESS_NR_OPS);
		mutex_lock(&slot->lock);
		ds_stress_op(w, slot, op);
		mutex_unlock(&slot->lock);
		atomic_inc(&s->done);
		cond_resched();
	}
	return 0;
}

/* Takes the hotplug CPU offline and online again while the workers run. */
static int ds_stress_hotplug(void *arg)
{
	struct ds_stress *s = arg;
	int i;

	for (i = 0; i < DS_STRESS_HOTPLUG_TOGGLES && !kthread_should_stop();
	     i++) {
		msleep(DS_STRESS_HOTPLUG_PAUSE_MS);
		if (remove_cpu(s->hotplug_cpu))
			continue;
		msleep(DS_STRESS_HOTPLUG_PAUSE_MS);
		if (!add_cpu(s->hotplug_cpu))
			atomic_inc(&s->toggles);
	}
	while (!kthread_should_stop())
		msleep(DS_STRESS_HOTPLUG_PAUSE_MS);
	return 0;
}

/*
 * perf's reservation and release, as perf's first and last hardware event
 * make them, in the middle of requests, releases, lingering setups and
 * CPU hotplug. Started after the hotplug thread and stopped before it.
 */
static int ds_stress_perf(void *arg)
{
	struct ds_stress *s = arg;
	int err;

	while (!kthread_should_stop()) {
		err = ds_perf_reserve(DS_BTS);
		if (!err) {
			atomic_inc(&s->perf_granted);
			KUNIT_EXPECT_TRUE(s->test, ds_perf_holds(DS_BTS));
			msleep(DS_STRESS_PERF_HOLD_MS);
			ds_perf_release(DS_BTS);
		} else {
			KUNIT_EXPECT_EQ(s->test, err, -EBUSY);
			atomic_inc(&s->perf_refused);
		}
		msleep(DS_STRESS_PERF_PAUSE_MS);
	}
	return 0;
}

static void ds_stress_run(struct kunit *test, int first, int last)
{
	struct ds_stress_worker *workers;
	struct task_struct *hotplug = NULL, *perf = NULL;
	struct ds_stress_slot *slot;
	struct ds_stress *s;
	int i;

	s = kunit_kzalloc(test, sizeof(*s), GFP_KERNEL);
	workers = kunit_kcalloc(test, DS_STRESS_WORKERS, sizeof(*workers),
				GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, s);
	KUNIT_ASSERT_NOT_NULL(test, workers);
	s->test = test;
	s->first = first;
	s->last = last;
	s->hotplug_cpu = -1;
	atomic_set(&s->left, ops);
	for (i = 0; i < DS_STRESS_SLOTS; i++) {
		mutex_init(&s->slots[i].lock);
		s->slots[i].cpu = i < DS_STRESS_TASK_SLOTS ? -1 :
				  (i - DS_STRESS_TASK_SLOTS) % nr_cpu_ids;
	}

	/* The last CPU, never the boot CPU, unless it cannot go offline. */
	if (num_online_cpus() > 1)
		s->hotplug_cpu = cpumask_last(cpu_online_mask);
	if (s->hotplug_cpu > 0) {
		hotplug = kthread_run(ds_stress_hotplug, s, "ds_stress_hotplug");
		KUNIT_ASSERT_FALSE(test, IS_ERR(hotplug));
		get_task_struct(hotplug);
	}
	/* Not while a perf event holds the Debug Store: it is not ours. */
	if (!ds_perf_holds(DS_BTS)) {
		perf = kthread_run(ds_stress_perf, s, "ds_stress_perf");
		KUNIT_ASSERT_FALSE(test, IS_ERR(perf));
		get_task_struct(perf);
	}
	for (i = 0; i < DS_STRESS_WORKERS; i++) {
		workers[i].s = s;
		prandom_seed_state(&workers[i].rnd, (u64)seed << 8 | i);
		workers[i].thread = kthread_run(ds_stress_worker, &workers[i],
						"ds_stress/%d", i);
		KUNIT_EXPECT_FALSE(test, IS_ERR(workers[i].thread));
		if (!IS_ERR(workers[i].thread))
			get_task_struct(workers[i].thread);
	}
	for (i = 0; i < DS_STRESS_WORKERS; i++)
		if (!IS_ERR(workers[i].thread))
			kthread_stop_put(workers[i].thread);
	if (perf)
		kthread_stop_put(perf);
	if (hotplug)
		kthread_stop_put(hotplug);

	for (i = first; i < last; i++) {
		slot = &s->slots[i];
		ds_stress_release(slot);
		if (slot->task)
			kthread_stop_put(slot->task);
	}
	kunit_info(test, "seed %u: %d operations, %d tracers granted, %d notifications, %d CPU hotplug toggles, per-CPU kernel mode %d granted, %d refused, perf reservations %d granted, %d refused\n",
		   seed, atomic_read(&s->done), atomic_read(&s->granted),
		   atomic_read(&s->notified), atomic_read(&s->toggles),
		   atomic_read(&s->kernel_granted),
		   atomic_read(&s->kernel_refused),
		   atomic_read(&s->perf_granted),
		   atomic_read(&s->perf_refused));
	KUNIT_EXPECT_EQ(test, atomic_read(&s->done), ops);
	/* One policy for the whole run: granted or refused, never both. */
	KUNIT_EXPECT_FALSE(test, atomic_read(&s->kernel_granted) &&
			   atomic_read(&s->kernel_refused));
}

/* Nothing is left behind: this task and every CPU can be traced again. */
static void ds_stress_nothing_left(struct kunit *test)
{
	struct ds_config cfg = {
		.size		= SZ_4K,
		.overflow	= DS_OVERFLOW_WRAP,
		.flags		= DS_USER,
	};
	struct ds_tracer *tracer;
	int cpu;

	tracer = ds_request_bts_task(current, &cfg);
	KUNIT_EXPECT_FALSE_MSG(test, IS_ERR(tracer), "task: %ld",
			       PTR_ERR(tracer));
	ds_release(tracer);
	cfg.flags = DS_KERNEL | DS_USER;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_task(current, &cfg)),
			-EINVAL);

	/* User mode: what is left must not depend on the Meltdown policy. */
	cfg.flags = DS_USER;
	cfg.backend = DS_BACKEND_HARDWARE;
	for_each_online_cpu(cpu) {
		tracer = ds_request_bts_cpu(cpu, &cfg);
		if (!boot_cpu_has(X86_FEATURE_BTS))
			KUNIT_EXPECT_EQ(test, PTR_ERR(tracer), -EOPNOTSUPP);
		else
			KUNIT_EXPECT_FALSE_MSG(test, IS_ERR(tracer),
					       "CPU %d: %ld", cpu,
					       PTR_ERR(tracer));
		ds_release(tracer);
	}
}

/* Per-task tracers of kernel threads that come and go. */
static void ds_stress_test_tasks(struct kunit *test)
{
	ds_stress_run(test, 0, DS_STRESS_TASK_SLOTS);
	ds_stress_nothing_left(test);
}

/* Per-CPU tracers, with a CPU going offline and online under them. */
static void ds_stress_test_cpus(struct kunit *test)
{
	ds_stress_run(test, DS_STRESS_TASK_SLOTS, DS_STRESS_SLOTS);
	ds_stress_nothing_left(test);
}

/* Both at once: per-task and per-CPU BTS tracers exclude each other. */
static void ds_stress_test_mixed(struct kunit *test)
{
	ds_stress_run(test, 0, DS_STRESS_SLOTS);
	ds_stress_nothing_left(test);
}

static struct kunit_case ds_stress_test_cases[] = {
	KUNIT_CASE_SLOW(ds_stress_test_tasks),
	KUNIT_CASE_SLOW(ds_stress_test_cpus),
	KUNIT_CASE_SLOW(ds_stress_test_mixed),
	{}
};

static struct kunit_suite ds_stress_test_suite = {
	.name		= "x86_ds_stress",
	.test_cases	= ds_stress_test_cases,
};

kunit_test_suites(&ds_stress_test_suite);

MODULE_DESCRIPTION("KUnit stress tests of the Debug Store allocator's API");
MODULE_LICENSE("GPL");
