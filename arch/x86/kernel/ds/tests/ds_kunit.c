// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite x86_ds of the Debug Store allocator: requests, ownership and
 * conflicts, validation, the task lifecycle, the emulated backend and
 * reconfiguration. It runs on the simulated CPU of ds_kunit_sim.c.
 */

#include <kunit/test.h>
#include <linux/completion.h>
#include <linux/cpu.h>
#include <linux/cred.h>
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/reboot.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/syscore_ops.h>
#include <linux/vmalloc.h>

#include <asm/cpu_entry_area.h>
#include <asm/debugreg.h>
#include <asm/io.h>
#include <asm/msr.h>
#include <asm/nmi.h>

#include "../internal.h"

#include "ds_kunit.h"

/* --- ownership and conflicts --- */

static void ds_test_request_release(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	struct ds_geometry geom;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	ds_test_expect_task(test, tracer, current);
	KUNIT_EXPECT_TRUE(test, test_thread_flag(TIF_DS_TRACE));
	KUNIT_EXPECT_TRUE(test, ds_tracer_recording(tracer));
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.backend, DS_BACKEND_HARDWARE);
	KUNIT_EXPECT_EQ(test, geom.record_size, DS_BTS_RECORD_SIZE);
	KUNIT_EXPECT_EQ(test, geom.capacity, 64);
	KUNIT_EXPECT_EQ(test, geom.count, 0);
	KUNIT_EXPECT_EQ(test, geom.status, 0);
	ds_test_release(test, tracer);
	KUNIT_EXPECT_NULL(test, rcu_access_pointer(current->thread.ds_ctx));
	KUNIT_EXPECT_FALSE(test, test_thread_flag(TIF_DS_TRACE));
}

static void ds_test_same_owner_twice(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EBUSY);
	cfg.backend = DS_BACKEND_AUTO;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EBUSY);
}

static void ds_test_task_vs_cpu(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	int cpu = raw_smp_processor_id();
	struct ds_tracer *task, *pcpu;

	task = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(task));
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(cpu, &cfg)), -EBUSY);
	ds_test_release(test, task);

	pcpu = ds_test_keep(test, ds_request_bts_cpu(cpu, &cfg));
	KUNIT_ASSERT_FALSE(test, IS_ERR(pcpu));
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EBUSY);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(cpu, &cfg)), -EBUSY);
}

static void ds_test_auto_falls_back(struct kunit *test)
{
	struct ds_test *dt = test->priv;

	KUNIT_ASSERT_EQ(test, ds_register_backend(&ds_fake_backend), 0);
	KUNIT_ASSERT_EQ(test, ds_perf_reserve(DS_BTS), 0);
	dt->perf_held = true;

	ds_test_task_falls_back(test);
	KUNIT_EXPECT_FALSE(test, ds_bts_fac->active);
	/* Emulated tracers never block perf. */
	ds_perf_release(DS_BTS);
	dt->perf_held = false;
	KUNIT_EXPECT_EQ(test, ds_perf_reserve(DS_BTS), 0);
	dt->perf_held = true;
}

/* A CPU tracer holds the staging buffer: a task gets the emulation. */
static void ds_test_auto_beside_cpu_tracer(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *cpu_tracer;

	KUNIT_ASSERT_EQ(test, ds_register_backend(&ds_fake_backend), 0);
	cpu_tracer = ds_test_keep(test, ds_request_bts_cpu(0, &cfg));
	KUNIT_ASSERT_FALSE(test, IS_ERR(cpu_tracer));
	ds_test_task_falls_back(test);
}

static void ds_test_no_hardware(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_hw_caps none = { };

	ds_test_install(none);
	KUNIT_EXPECT_FALSE(test, ds_hw_present(DS_BTS));
	KUNIT_EXPECT_FALSE(test, ds_hw_present(DS_PEBS));
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EOPNOTSUPP);
	cfg.backend = DS_BACKEND_AUTO;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EOPNOTSUPP);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(0, &cfg)),
			-EOPNOTSUPP);
	cfg.backend = DS_BACKEND_EMULATED;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EOPNOTSUPP);
}

static void ds_test_bad_config(struct kunit *test)
{
	struct ds_config good = ds_test_cfg(DS_TEST_SIZE);
	struct ds_config cfg;

	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, NULL)), -EINVAL);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_task(NULL, &good)),
			-EINVAL);
	cfg = good;
	cfg.flags = DS_FLAGS_MASK + 1;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EINVAL);
	cfg.flags = DS_TIMESTAMPS;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EINVAL);
	cfg.flags = DS_USER | DS_TIMESTAMPS;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(0, &cfg)), -EINVAL);
	cfg = good;
	cfg.threshold = 1;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EINVAL);
	cfg = good;
	cfg.overflow = DS_OVERFLOW_NOTIFY;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EINVAL);
	cfg.notify = ds_test_notify;
	cfg.threshold = DS_TEST_SIZE / DS_BTS_RECORD_SIZE + 1;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EINVAL);
	cfg = good;
	cfg.overflow = DS_OVERFLOW_NOTIFY + 1;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EINVAL);
	cfg = good;
	cfg.backend = DS_BACKEND_EMULATED + 1;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EINVAL);
}

static void ds_test_bad_handle(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	struct ds_bts_record rec;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	ds_release(NULL);
	ds_release(ERR_PTR(-EBUSY));
	KUNIT_EXPECT_EQ(test, ds_suspend(NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, ds_resume(ERR_PTR(-EINVAL)), -EINVAL);
	KUNIT_EXPECT_EQ(test, ds_clear(NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, ds_get_geometry(tracer, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, ds_read_record(NULL, 0, &rec, sizeof(rec)),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, ds_read_record(tracer, 0, &rec, sizeof(rec)),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, ds_read_record(tracer, 0, &rec, 1), -EINVAL);
	KUNIT_EXPECT_FALSE(test, ds_hw_present(DS_NR_KINDS));
}

static void ds_test_cpu_invalid(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);

	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(-1, &cfg)), -EINVAL);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(nr_cpu_ids, &cfg)),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(INT_MAX, &cfg)),
			-EINVAL);
}

static int ds_test_last_cpu(void)
{
	int cpu, last = -1;

	for_each_online_cpu(cpu)
		last = cpu;
	return last;
}

static void ds_test_cpu_offline(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	int cpu = ds_test_last_cpu();
	struct ds_tracer *tracer;
	struct ds_cpu *dc;

	if (!IS_ENABLED(CONFIG_HOTPLUG_CPU) || cpu <= 0)
		kunit_skip(test, "needs a second CPU that can go offline");
	dc = per_cpu_ptr(&ds_cpus, cpu);
	tracer = ds_test_keep(test, ds_request_bts_cpu(cpu, &cfg));
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_TRUE(test, !!dc->kinds);
	KUNIT_EXPECT_PTR_EQ(test, dc->loaded[DS_BTS], tracer);

	if (remove_cpu(cpu))
		kunit_skip(test, "CPU %d cannot go offline", cpu);
	/* Going offline stopped BTS and cleared IA32_DS_AREA. */
	KUNIT_EXPECT_FALSE(test, !!dc->kinds);
	KUNIT_EXPECT_NULL(test, dc->loaded[DS_BTS]);
	KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_ds_area, cpu), 0);
	KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_debugctl, cpu), DS_SIM_OTHER_BITS);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(cpu, &cfg)),
			-ENODEV);

	KUNIT_ASSERT_EQ(test, add_cpu(cpu), 0);
	KUNIT_EXPECT_TRUE(test, !!dc->kinds);
	KUNIT_EXPECT_PTR_EQ(test, dc->loaded[DS_BTS], tracer);
}

/* --- interrupting CPUs --- */

static atomic_t ds_test_ipis;

static int ds_test_ipi_cpu;

static void ds_test_sync_cpu(int cpu)
{
	atomic_inc(&ds_test_ipis);
	WRITE_ONCE(ds_test_ipi_cpu, cpu);
	smp_call_function_single(cpu, ds_cpu_sync, NULL, 1);
}

/*
 * Requests, reads and releases interrupt only the CPU that has the tracer
 * loaded: a CPU tracer's own, the CPU where a traced task runs, none for a
 * task that is not running or for an emulated tracer.
 */
static void ds_test_ipi_targets(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	int cpu = cpumask_last(cpu_online_mask);
	struct task_struct *sleeper;
	struct ds_tracer *tracer;
	struct ds_geometry geom;

	kunit_activate_static_stub(test, ds_sync_cpu, ds_test_sync_cpu);

	atomic_set(&ds_test_ipis, 0);
	tracer = ds_test_keep(test, ds_request_bts_cpu(cpu, &cfg));
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_get_geometry(tracer, &geom), 0);
	KUNIT_EXPECT_EQ(test, ds_suspend(tracer), 0);
	ds_test_release(test, tracer);
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_test_ipis), 4);
	KUNIT_EXPECT_EQ(test, READ_ONCE(ds_test_ipi_cpu), cpu);

	sleeper = kthread_create(ds_test_never_runs, NULL, "ds_test_sleeper");
	KUNIT_ASSERT_FALSE(test, IS_ERR(sleeper));
	get_task_struct(sleeper);
	KUNIT_EXPECT_NE(test, wait_task_inactive(sleeper, TASK_UNINTERRUPTIBLE),
			0);
	atomic_set(&ds_test_ipis, 0);
	tracer = ds_test_keep(test, ds_request_bts_task(sleeper, &cfg));
	KUNIT_EXPECT_FALSE(test, IS_ERR(tracer));
	if (!IS_ERR(tracer)) {
		KUNIT_EXPECT_EQ(test, ds_get_geometry(tracer, &geom), 0);
		KUNIT_EXPECT_EQ(test, ds_suspend(tracer), 0);
		KUNIT_EXPECT_EQ(test, ds_resume(tracer), 0);
		KUNIT_EXPECT_EQ(test, ds_clear(tracer), 0);
		ds_test_release(test, tracer);
	}
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_test_ipis), 0);
	kthread_stop(sleeper);
	put_task_struct(sleeper);

	migrate_disable();
	cpu = smp_processor_id();
	atomic_set(&ds_test_ipis, 0);
	tracer = ds_test_task(test, &cfg);
	KUNIT_EXPECT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_get_geometry(tracer, &geom), 0);
	ds_test_release(test, tracer);
	migrate_enable();
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_test_ipis), 3);
	KUNIT_EXPECT_EQ(test, READ_ONCE(ds_test_ipi_cpu), cpu);

	KUNIT_ASSERT_EQ(test, ds_register_backend(&ds_fake_backend), 0);
	cfg.backend = DS_BACKEND_EMULATED;
	atomic_set(&ds_test_ipis, 0);
	tracer = ds_test_task(test, &cfg);
	KUNIT_EXPECT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_get_geometry(tracer, &geom), 0);
	KUNIT_EXPECT_EQ(test, ds_clear(tracer), 0);
	ds_test_release(test, tracer);
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_test_ipis), 0);
}

static void ds_test_odd_size(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(521);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	struct ds_geometry geom;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.capacity, 521 / DS_BTS_RECORD_SIZE);
	KUNIT_EXPECT_EQ(test, geom.record_size, DS_BTS_RECORD_SIZE);
}

static void ds_test_one_record(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_BTS_RECORD_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	struct ds_geometry geom;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 0, 3), 3);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.capacity, 1);
	KUNIT_EXPECT_EQ(test, geom.count, 1);
	KUNIT_EXPECT_EQ(test, geom.lost, 2);
	KUNIT_EXPECT_EQ(test, geom.index, 0);
	/* Overwritten in the trace buffer: counted exactly. */
	KUNIT_EXPECT_EQ(test, geom.status, 0);
	ds_test_expect_branch(test, tracer, 0, 2);
}

static void ds_test_bad_sizes(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(0);

	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EINVAL);
	cfg.size = DS_BTS_RECORD_SIZE - 1;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EINVAL);
	cfg.size = DS_MAX_BUFFER_SIZE + 1;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EINVAL);
	cfg.size = DS_MAX_BUFFER_SIZE;
	KUNIT_EXPECT_FALSE(test, IS_ERR(ds_test_task(test, &cfg)));
}

static int ds_test_child_fn(void *arg)
{
	struct ds_test_child *child = arg;

	child->inherited = rcu_access_pointer(current->thread.ds_ctx) ||
			   test_thread_flag(TIF_DS_TRACE);
	child->task = get_task_struct(current);
	complete(&child->ready);
	wait_for_completion(&child->go);
	complete(&child->done);
	/* Returning would mean "exit to user mode" for a kernel_thread(). */
	do_exit(0);
}

static struct ds_test_child *ds_test_fork(struct kunit *test)
{
	struct ds_test_child *child;

	child = kunit_kzalloc(test, sizeof(*child), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, child);
	init_completion(&child->ready);
	init_completion(&child->go);
	init_completion(&child->done);
	KUNIT_ASSERT_GT(test, kernel_thread(ds_test_child_fn, child,
					    "ds_kunit_child", SIGCHLD), 0);
	wait_for_completion(&child->ready);
	return child;
}

static void ds_test_fork_not_inherited(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	struct ds_test_child *child;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	child = ds_test_fork(test);
	KUNIT_EXPECT_FALSE(test, child->inherited);
	complete(&child->go);
	wait_for_completion(&child->done);
	put_task_struct(child->task);
	/* The parent's trace is untouched. */
	ds_test_expect_task(test, tracer, current);
	KUNIT_EXPECT_TRUE(test, test_thread_flag(TIF_DS_TRACE));
}

static void ds_test_detached(struct ds_tracer *tracer, void *cookie)
{
	struct ds_test *dt = cookie;

	dt->detached++;
}

static void ds_test_release_on_exit(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_test_child *child = ds_test_fork(test);
	struct ds_test *dt = test->priv;
	struct ds_tracer *tracer;
	int tries;

	cfg.detached = ds_test_detached;
	cfg.cookie = dt;
	tracer = ds_test_keep(test, ds_request_bts_task(child->task, &cfg));
	KUNIT_EXPECT_FALSE(test, IS_ERR(tracer));
	complete(&child->go);
	wait_for_completion(&child->done);
	if (IS_ERR(tracer))
		goto put_child;
	for (tries = 0; tries < DS_TEST_EXIT_TRIES; tries++) {
		if (ds_test_geom(test, tracer).status & DS_STATUS_DETACHED)
			break;
		msleep(DS_TEST_EXIT_WAIT_MS);
	}
	/* Exit released the hardware; the trace stays until ds_release(). */
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).status,
			DS_STATUS_DETACHED);
	ds_test_expect_task(test, tracer, NULL);
	KUNIT_EXPECT_FALSE(test, ds_tracer_recording(tracer));
	KUNIT_EXPECT_EQ(test, ds_bts_fac->users, 0);
	KUNIT_EXPECT_NULL(test, rcu_access_pointer(child->task->thread.ds_ctx));
	KUNIT_EXPECT_EQ(test, ds_suspend(tracer), 0);
	/* Told once, at the exit; the release says nothing more. */
	KUNIT_EXPECT_EQ(test, dt->detached, 1);
	ds_test_release(test, tracer);
	KUNIT_EXPECT_EQ(test, dt->detached, 1);
put_child:
	put_task_struct(child->task);
}

/* --- the emulated backend --- */

static void ds_test_emulated(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(4 * DS_BTS_RECORD_SIZE);
	struct ds_tracer *tracer;
	struct ds_bts_record rec;

	ds_fake_started = 0;
	ds_fake_stopped = 0;
	KUNIT_EXPECT_EQ(test, ds_emulated_write_bts(current, 1, 2), -ENOENT);
	KUNIT_ASSERT_EQ(test, ds_register_backend(&ds_fake_backend), 0);
	KUNIT_EXPECT_EQ(test, ds_register_backend(&ds_fake_backend), -EBUSY);
	cfg.backend = DS_BACKEND_EMULATED;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(0, &cfg)),
			-EOPNOTSUPP);
	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_fake_started, 1);
	KUNIT_EXPECT_FALSE(test, ds_bts_fac->active);

	KUNIT_EXPECT_EQ(test, ds_emulated_write_bts(current, 10, 20), 0);
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).count, 1);
	KUNIT_EXPECT_EQ(test, ds_read_record(tracer, 0, &rec, sizeof(rec)),
			(ssize_t)sizeof(rec));
	KUNIT_EXPECT_EQ(test, rec.from, 10);
	KUNIT_EXPECT_EQ(test, rec.to, 20);
	KUNIT_EXPECT_EQ(test, ds_suspend(tracer), 0);
	KUNIT_EXPECT_EQ(test, ds_emulated_write_bts(current, 30, 40), -ENOSPC);
	KUNIT_EXPECT_EQ(test, ds_unregister_backend(&ds_fake_backend), -EBUSY);

	ds_test_release(test, tracer);
	KUNIT_EXPECT_EQ(test, ds_fake_stopped, 1);
	KUNIT_EXPECT_EQ(test, ds_unregister_backend(&ds_fake_backend), 0);
	KUNIT_EXPECT_EQ(test, ds_unregister_backend(&ds_fake_backend), -EINVAL);
}

/* --- user-mode filtering, reconfiguration --- */

/* A user-only tracer never sees a branch with a kernel end point. */
static void ds_test_user_filter(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(8 * DS_BTS_RECORD_SIZE);
	u64 kaddr = (u64)TASK_SIZE_MAX + PAGE_SIZE;
	struct ds_tracer *tracer;
	unsigned long flags;

	cfg.flags = DS_USER;
	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	local_irq_save(flags);
	/* A system call and its return, around one user branch. */
	KUNIT_EXPECT_TRUE(test, ds_sim_branch(DS_TEST_FROM, kaddr, true));
	KUNIT_EXPECT_TRUE(test, ds_sim_branch(kaddr, DS_TEST_FROM + 2, true));
	KUNIT_EXPECT_TRUE(test, ds_sim_branch(DS_TEST_FROM + 3,
					      DS_TEST_FROM + 3 +
					      DS_TEST_TO_OFFSET, true));
	local_irq_restore(flags);
	ds_sim_settle(tracer);
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).count, 1);
	ds_test_expect_branch(test, tracer, 0, 3);
}

/* ds_update() keeps the records and changes the overflow mode. */
static void ds_test_update(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(4 * DS_BTS_RECORD_SIZE);
	struct ds_test *dt = test->priv;
	struct ds_tracer *tracer;
	struct ds_geometry geom;

	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 0, 4), 4);

	KUNIT_EXPECT_EQ(test, ds_update(NULL, &cfg), -EINVAL);
	cfg.flags = DS_USER | DS_KERNEL;
	KUNIT_EXPECT_EQ(test, ds_update(tracer, &cfg), -EINVAL);
	cfg.flags = DS_USER;
	cfg.overflow = DS_OVERFLOW_NOTIFY;
	KUNIT_EXPECT_EQ(test, ds_update(tracer, &cfg), -EINVAL);

	/* Full already: notify mode pauses and notifies at once. */
	cfg.notify = ds_test_notify;
	cfg.cookie = dt;
	KUNIT_EXPECT_EQ(test, ds_update(tracer, &cfg), 0);
	ds_sim_settle(tracer);
	KUNIT_EXPECT_EQ(test, dt->notified, 1);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.count, 4);
	KUNIT_EXPECT_EQ(test, geom.threshold, 4);
	KUNIT_EXPECT_EQ(test, geom.status, DS_STATUS_PAUSED);
	ds_test_expect_branch(test, tracer, 0, 0);

	/* Back to wrap-around: recording goes on, the oldest go. */
	cfg = ds_test_cfg(0);
	cfg.flags |= DS_TIMESTAMPS;
	KUNIT_EXPECT_EQ(test, ds_update(tracer, &cfg), 0);
	KUNIT_EXPECT_TRUE(test, ds_tracer_recording(tracer));
	KUNIT_EXPECT_EQ(test, ds_tracer_flags(tracer),
			DS_USER | DS_TIMESTAMPS);
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 4, 1), 1);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.count, 4);
	KUNIT_EXPECT_EQ(test, geom.status, 0);
	ds_test_expect_branch(test, tracer, 3, 4);
}

/* A function that must not be called. */
static void ds_test_notify_never(struct ds_tracer *tracer, void *cookie)
{
	struct kunit *test = kunit_get_current_test();

	if (test)
		KUNIT_FAIL(test, "notified with cookie %p", cookie);
}

/*
 * A notification queued at the threshold runs only after ds_update()
 * changed the mode: it announces nothing then, and must not call the old
 * function, the new one with the old cookie, or none at all.
 */
static void ds_test_update_queued_notify(struct kunit *test)
{
	struct ds_tracer *tracer = ds_test_notifier(test, 4, 2);
	struct ds_test *dt = test->priv, *other;
	struct ds_config cfg;

	other = kunit_kzalloc(test, sizeof(*other), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, other);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 0, 2), 2);
	KUNIT_EXPECT_EQ(test, dt->notified, 1);

	/* Still paused; another cookie takes over. */
	cfg = ds_test_cfg(0);
	cfg.overflow = DS_OVERFLOW_NOTIFY;
	cfg.threshold = 2;
	cfg.notify = ds_test_notify;
	cfg.cookie = other;
	KUNIT_EXPECT_EQ(test, ds_update(tracer, &cfg), 0);
	tracer->notify_work.func(&tracer->notify_work);
	KUNIT_EXPECT_EQ(test, dt->notified, 1);
	KUNIT_EXPECT_EQ(test, other->notified, 1);

	/* Wrap-around: no pause left to announce, no function. */
	cfg = ds_test_cfg(0);
	KUNIT_EXPECT_EQ(test, ds_update(tracer, &cfg), 0);
	tracer->notify_work.func(&tracer->notify_work);
	KUNIT_EXPECT_EQ(test, other->notified, 1);

	/* Notify mode again, below the threshold: nothing to announce. */
	KUNIT_EXPECT_EQ(test, ds_clear(tracer), 0);
	cfg.overflow = DS_OVERFLOW_NOTIFY;
	cfg.threshold = 2;
	cfg.notify = ds_test_notify_never;
	KUNIT_EXPECT_EQ(test, ds_update(tracer, &cfg), 0);
	tracer->notify_work.func(&tracer->notify_work);
}

/* The emulated backend steps a task only while its tracer records. */
static void ds_test_emulated_recording(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(4 * DS_BTS_RECORD_SIZE);
	struct ds_tracer *tracer;

	KUNIT_EXPECT_FALSE(test, ds_emulated_recording(current));
	KUNIT_ASSERT_EQ(test, ds_register_backend(&ds_fake_backend), 0);
	/* A hardware tracer is not the emulation's business. */
	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_FALSE(test, ds_emulated_recording(current));
	ds_test_release(test, tracer);

	cfg.backend = DS_BACKEND_EMULATED;
	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_TRUE(test, ds_emulated_recording(current));
	KUNIT_EXPECT_EQ(test, ds_suspend(tracer), 0);
	KUNIT_EXPECT_FALSE(test, ds_emulated_recording(current));
	KUNIT_EXPECT_EQ(test, ds_resume(tracer), 0);
	KUNIT_EXPECT_TRUE(test, ds_emulated_recording(current));
	ds_test_release(test, tracer);
	KUNIT_EXPECT_FALSE(test, ds_emulated_recording(current));
}

static struct kunit_case ds_test_cases[] = {
	KUNIT_CASE(ds_test_request_release),
	KUNIT_CASE(ds_test_same_owner_twice),
	KUNIT_CASE(ds_test_task_vs_cpu),
	KUNIT_CASE(ds_test_auto_falls_back),
	KUNIT_CASE(ds_test_auto_beside_cpu_tracer),
	KUNIT_CASE(ds_test_no_hardware),
	KUNIT_CASE(ds_test_bad_config),
	KUNIT_CASE(ds_test_bad_handle),
	KUNIT_CASE(ds_test_cpu_invalid),
	KUNIT_CASE(ds_test_cpu_offline),
	KUNIT_CASE(ds_test_ipi_targets),
	KUNIT_CASE(ds_test_odd_size),
	KUNIT_CASE(ds_test_one_record),
	KUNIT_CASE(ds_test_bad_sizes),
	KUNIT_CASE(ds_test_fork_not_inherited),
	KUNIT_CASE(ds_test_release_on_exit),
	KUNIT_CASE(ds_test_emulated),
	KUNIT_CASE(ds_test_user_filter),
	KUNIT_CASE(ds_test_update),
	KUNIT_CASE(ds_test_update_queued_notify),
	KUNIT_CASE(ds_test_emulated_recording),
	{}
};

static struct kunit_suite ds_test_suite = {
	.name		= "x86_ds",
	.init		= ds_test_init,
	.exit		= ds_test_exit,
	.test_cases	= ds_test_cases,
};

/*
 * At boot only: run again from debugfs, the suite would stand in for the
 * hardware under perf events that user space may open at any moment.
 */
kunit_test_init_section_suites(&ds_test_suite);
