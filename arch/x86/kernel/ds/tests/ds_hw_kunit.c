// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the Debug Store allocator on real BTS hardware.
 *
 * The x86_ds suite replaces the MSR accessors with a simulated CPU. This
 * suite does the opposite: through the public <asm/ds.h> API only, it asks
 * for DS_BACKEND_HARDWARE tracers, runs a known loop of kernel code on the
 * traced CPU or in the traced task, or a known loop of a tiny user program,
 * and checks the records the CPU stored, with page table isolation as the
 * kernel was booted. It needs a CPU that has BTS; elsewhere every case is
 * skipped.
 *
 * There is no PEBS suite: PEBS records come from counters, which perf
 * owns, so perf is the only PEBS client, and a test here would have to
 * program the counters behind perf's back.
 */

#include <kunit/test.h>
#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/cpu.h>
#include <linux/cpufeature.h>
#include <linux/cpumask.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/preempt.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/smp.h>
#include <linux/workqueue.h>

#include <asm/ds.h>
#include <asm/msr.h>

#include "ds_hw_kunit.h"

/* Taken jumps of a short run: the staging buffer holds them all. */
#define DS_HW_LOOPS		1000
/* Taken jumps of a long run: several staging buffers' worth. */
#define DS_HW_LONG_LOOPS	20000
/*
 * A trace buffer that holds a long run and what the CPU does around it:
 * boot goes on while KUnit runs, and a CPU that spins on a lock or in
 * csd_lock_wait() stores records fast.
 */
#define DS_HW_BIG_SIZE		DS_MAX_BUFFER_SIZE
/* A trace buffer of a few records, for wrap-around. */
#define DS_HW_TINY_RECORDS	16
/* Notify mode: the trace buffer and its threshold, in records. */
#define DS_HW_NOTIFY_RECORDS	4096
#define DS_HW_NOTIFY_THRESHOLD	64
/* Release and request again this many times. */
#define DS_HW_CYCLES		8
/* Generous: a virtual CPU can be much slower than the hardware. */
#define DS_HW_TIMEOUT		(30 * HZ)

#define DS_HW_SKIP_REASON \
	"needs a CPU with BTS (X86_FEATURE_BTS)"

#ifdef CONFIG_X86_64
#define DS_HW_LOAD_ADDR(label, reg)	"lea " label "(%%rip), %" reg "\n\t"
#else
#define DS_HW_LOAD_ADDR(label, reg)	"mov $" label ", %" reg "\n\t"
#endif

/**
 * struct ds_hw_run - one run of the known loop
 * @loops:   taken jumps to make
 * @suspend: a tracer to suspend right after the run, or NULL
 * @from:    filled in: the address of the loop's jump
 * @to:	     filled in: its target
 */
struct ds_hw_run {
	long			loops;
	struct ds_tracer	*suspend;
	u64			from;
	u64			to;
};

struct ds_hw_test {
	/* The tracers a case holds; test_exit() releases them. */
	struct ds_tracer	*tracer;
	struct ds_tracer	*task_tracer;
	struct task_struct	*thread;
	struct completion	thread_done;
	struct ds_hw_run	thread_run;
	/* What the notify callback saw. */
	struct completion	notified;
	struct ds_tracer	*notified_tracer;
	atomic_t		notifications;
};

/*
 * The known code: exactly @run->loops taken jumps, each from the JNS to
 * the DEC before it. It reports both addresses, so the records can be
 * matched exactly even if the compiler clones the function. Assembly, so
 * that no compiler unrolls or removes the loop.
 */
static noinline void ds_hw_loop(struct ds_hw_run *run)
{
	unsigned long from, to;
	long n = run->loops;

	asm volatile(DS_HW_LOAD_ADDR("1f", "[to]")
		     DS_HW_LOAD_ADDR("2f", "[from]")
		     "1:	dec %[n]\n"
		     "2:	jns 1b\n"
		     : [n] "+r" (n), [from] "=&r" (from), [to] "=&r" (to)
		     : : "cc");
	run->from = from;
	run->to = to;
}

static void ds_hw_loop_ipi(void *arg)
{
	ds_hw_loop(arg);
}

/*
 * Interrupts on, so that the threshold interrupt collects in time. The
 * suspend stops the trace where the loop ends: whatever else the CPU does
 * cannot wrap the loop's records away.
 */
static long ds_hw_loop_work(void *arg)
{
	struct ds_hw_run *run = arg;

	preempt_disable();
	ds_hw_loop(run);
	preempt_enable();
	return run->suspend ? ds_suspend(run->suspend) : 0;
}

/* Run the loop on @cpu from an IPI, interrupts disabled. */
static void ds_hw_run_ipi(struct kunit *test, int cpu, struct ds_hw_run *run,
			  long loops)
{
	run->loops = loops;
	run->suspend = NULL;
	KUNIT_ASSERT_EQ(test, smp_call_function_single(cpu, ds_hw_loop_ipi,
						       run, 1), 0);
}

/* Run the loop on @cpu in process context, interrupts enabled. */
static void ds_hw_run_work(struct kunit *test, int cpu, struct ds_hw_run *run,
			   long loops)
{
	run->loops = loops;
	run->suspend = NULL;
	KUNIT_ASSERT_EQ(test, work_on_cpu(cpu, ds_hw_loop_work, run), 0);
}

/* The same, and suspend @tracer on @cpu right after the loop. */
static void ds_hw_run_work_suspend(struct kunit *test, int cpu,
				   struct ds_hw_run *run, long loops,
				   struct ds_tracer *tracer)
{
	run->loops = loops;
	run->suspend = tracer;
	KUNIT_ASSERT_EQ(test, work_on_cpu(cpu, ds_hw_loop_work, run), 0);
}

/**
 * ds_hw_scan() - collect and look at every record of a tracer
 * @test:   the test
 * @tracer: the tracer
 * @run:    a run of the loop, for its addresses
 * @geom:   filled in
 *
 * Return: the number of records of the loop's jump.
 */
static size_t ds_hw_scan(struct kunit *test, struct ds_tracer *tracer,
			 const struct ds_hw_run *run, struct ds_geometry *geom)
{
	struct ds_bts_record rec;
	size_t i, loops = 0;

	KUNIT_ASSERT_EQ(test, ds_get_geometry(tracer, geom), 0);
	KUNIT_ASSERT_EQ(test, geom->backend, DS_BACKEND_HARDWARE);
	KUNIT_ASSERT_EQ(test, geom->record_size, sizeof(rec));
	KUNIT_ASSERT_LE(test, geom->count, geom->capacity);

	for (i = 0; i < geom->count; i++) {
		KUNIT_ASSERT_EQ(test, ds_read_record(tracer, i, &rec,
						     sizeof(rec)),
				(ssize_t)sizeof(rec));
		if (rec.from == run->from && rec.to == run->to)
			loops++;
	}
	return loops;
}

/* Every record of a user-mode-only tracer has two user end points. */
static void ds_hw_expect_user_only(struct kunit *test,
				   struct ds_tracer *tracer,
				   const struct ds_geometry *geom)
{
	struct ds_bts_record rec;
	size_t i;

	for (i = 0; i < geom->count; i++) {
		KUNIT_ASSERT_EQ(test, ds_read_record(tracer, i, &rec,
						     sizeof(rec)),
				(ssize_t)sizeof(rec));
		KUNIT_EXPECT_TRUE_MSG(test, ds_bts_user_branch(rec.from, rec.to),
				      "record %zu: %llx -> %llx", i, rec.from,
				      rec.to);
	}
}

static struct ds_tracer *ds_hw_request_cpu(struct kunit *test, int cpu,
					   size_t size, unsigned int flags)
{
	struct ds_config cfg = {
		.size		= size,
		.overflow	= DS_OVERFLOW_WRAP,
		.flags		= flags,
		.backend	= DS_BACKEND_HARDWARE,
	};
	struct ds_tracer *tracer = ds_request_bts_cpu(cpu, &cfg);

	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, tracer);
	return tracer;
}

/*
 * A per-CPU tracer records everything its CPU does, this test included:
 * move the test off @cpu so that only the loop and the allocator's own
 * interrupts run there. Return another CPU, where the test now runs.
 */
static int ds_hw_leave_cpu(struct kunit *test, int cpu)
{
	int other = cpumask_any_but(cpu_online_mask, cpu);

	if (other >= nr_cpu_ids)
		kunit_skip(test, "needs two online CPUs");
	KUNIT_ASSERT_EQ(test, set_cpus_allowed_ptr(current, cpumask_of(other)),
			0);
	return other;
}

/* The traced CPU of most cases, with the test moved off it. */
static int ds_hw_traced_cpu(struct kunit *test)
{
	int cpu = cpumask_last(cpu_online_mask);

	ds_hw_leave_cpu(test, cpu);
	return cpu;
}

/*
 * The status bits a case asks about. DS_STATUS_DROPPED is left out, and
 * said: a kernel-mode trace records NMI entry before the handler stops
 * BTS, and a CPU that delivers its PMI late (or an emulator) may fill a
 * staging buffer before the PMI is handled. What a
 * full buffer drops is not the loop's (ds_hw_scan() finds every record of
 * it); the bit itself is the simulator suite's to check.
 */
static unsigned int ds_hw_status(struct kunit *test,
				 const struct ds_geometry *geom)
{
	if (geom->status & DS_STATUS_DROPPED)
		kunit_info(test, "a staging buffer filled before its PMI\n");
	return geom->status & ~DS_STATUS_DROPPED;
}

/*
 * Each CPU's tracer gets exactly the jumps made on that CPU, none of those
 * made on another CPU. Suspended right after the run, so that nothing
 * overwrites them.
 */
static void ds_hw_test_cpu_kernel(struct kunit *test)
{
	struct ds_hw_test *t = test->priv;
	struct ds_geometry geom;
	struct ds_hw_run run;
	int cpu, other;

	for_each_online_cpu(cpu) {
		other = ds_hw_leave_cpu(test, cpu);
		t->tracer = ds_hw_request_cpu(test, cpu, DS_HW_BIG_SIZE,
					      DS_KERNEL);
		ds_hw_run_ipi(test, other, &run, DS_HW_LOOPS);
		/* A different number of jumps on each CPU. */
		ds_hw_run_work_suspend(test, cpu, &run, DS_HW_LOOPS + 1 + cpu,
				       t->tracer);

		KUNIT_EXPECT_EQ_MSG(test, ds_hw_scan(test, t->tracer, &run,
						     &geom),
				    DS_HW_LOOPS + 1 + cpu, "CPU %d", cpu);
		KUNIT_EXPECT_EQ(test, ds_hw_status(test, &geom), DS_STATUS_SUSPENDED);
		KUNIT_EXPECT_EQ(test, geom.threshold, 0);
		KUNIT_EXPECT_PTR_EQ(test, ds_tracer_task(t->tracer), NULL);
		ds_release(t->tracer);
		t->tracer = NULL;
	}
	/* The loop is in this file: kernel text. */
	KUNIT_EXPECT_FALSE(test, ds_bts_user_branch(run.from, run.to));
	KUNIT_EXPECT_LT(test, run.to, run.from);
}

/*
 * BTS_OFF_OS: a user-mode tracer of a CPU gets every jump of the user
 * program that ran there, and nothing else: no jump of kernel code, no
 * branch into or out of the kernel. No other user code runs while KUnit
 * does, so the records are the program's jumps, exactly.
 */
static void ds_hw_test_cpu_user_only(struct kunit *test)
{
	struct ds_hw_test *t = test->priv;
	int cpu = ds_hw_traced_cpu(test);
	struct ds_hw_run run, urun;
	struct ds_geometry geom;

	t->tracer = ds_hw_request_cpu(test, cpu, DS_HW_BIG_SIZE, DS_USER);
	ds_hw_run_ipi(test, cpu, &run, DS_HW_LOOPS);
	ds_hw_run_work(test, cpu, &run, DS_HW_LOOPS);
	urun.loops = DS_HW_LOOPS + 1;
	urun.suspend = NULL;
	ds_hw_run_user(test, cpu, urun.loops, &urun.from, &urun.to);
	KUNIT_ASSERT_EQ(test, ds_suspend(t->tracer), 0);

	KUNIT_EXPECT_EQ(test, ds_hw_scan(test, t->tracer, &run, &geom), 0);
	KUNIT_EXPECT_EQ(test, ds_hw_scan(test, t->tracer, &urun, &geom),
			DS_HW_LOOPS + 1);
	KUNIT_EXPECT_EQ(test, geom.count, DS_HW_LOOPS + 1);
	KUNIT_EXPECT_EQ(test, geom.lost, 0);
	ds_hw_expect_user_only(test, t->tracer, &geom);
}

/*
 * A long run, with interrupts on: the threshold interrupt must collect the
 * staging buffer each time before it fills, or jumps go missing.
 */
static void ds_hw_test_threshold_interrupt(struct kunit *test)
{
	struct ds_hw_test *t = test->priv;
	int cpu = ds_hw_traced_cpu(test);
	struct ds_geometry geom;
	struct ds_hw_run run;

	t->tracer = ds_hw_request_cpu(test, cpu, DS_HW_BIG_SIZE, DS_KERNEL);
	ds_hw_run_work_suspend(test, cpu, &run, DS_HW_LONG_LOOPS, t->tracer);

	/*
	 * Only the loop's records are known: the rest of what the CPU did
	 * around it (boot goes on while KUnit runs) may wrap.
	 */
	KUNIT_EXPECT_EQ(test, ds_hw_scan(test, t->tracer, &run, &geom),
			DS_HW_LONG_LOOPS);
	KUNIT_EXPECT_EQ(test, ds_hw_status(test, &geom), DS_STATUS_SUSPENDED);
}

/* A tiny wrap-around buffer keeps the newest records and counts the rest. */
static void ds_hw_test_wrap(struct kunit *test)
{
	struct ds_hw_test *t = test->priv;
	int cpu = ds_hw_traced_cpu(test);
	struct ds_geometry geom;
	struct ds_hw_run run;

	t->tracer = ds_hw_request_cpu(test, cpu, DS_HW_TINY_RECORDS *
				      sizeof(struct ds_bts_record), DS_KERNEL);
	ds_hw_run_work(test, cpu, &run, DS_HW_LONG_LOOPS);

	/*
	 * What ran after the loop may have overwritten all of its records:
	 * none is required, and at most a buffer's worth can be there.
	 */
	KUNIT_EXPECT_LE(test, ds_hw_scan(test, t->tracer, &run, &geom),
			DS_HW_TINY_RECORDS);
	KUNIT_EXPECT_EQ(test, geom.capacity, DS_HW_TINY_RECORDS);
	KUNIT_EXPECT_EQ(test, geom.count, DS_HW_TINY_RECORDS);
	KUNIT_EXPECT_GE(test, geom.lost,
			DS_HW_LONG_LOOPS - DS_HW_TINY_RECORDS);
	/*
	 * Every record went into the next slot, round and round; lost also
	 * counts one for each time the CPU filled the staging buffer (with a
	 * late PMI) and dropped it does not say how many, which moved no slot.
	 */
	KUNIT_EXPECT_LT(test, geom.index, DS_HW_TINY_RECORDS);

	/* Suspended, a clear empties it for good. */
	KUNIT_ASSERT_EQ(test, ds_suspend(t->tracer), 0);
	KUNIT_ASSERT_EQ(test, ds_clear(t->tracer), 0);
	ds_hw_run_ipi(test, cpu, &run, DS_HW_LOOPS);
	KUNIT_EXPECT_EQ(test, ds_hw_scan(test, t->tracer, &run, &geom), 0);
	KUNIT_EXPECT_EQ(test, geom.count, 0);
	KUNIT_EXPECT_EQ(test, geom.index, 0);
	KUNIT_EXPECT_EQ(test, geom.lost, 0);
	KUNIT_EXPECT_EQ(test, ds_hw_status(test, &geom), DS_STATUS_SUSPENDED);
}

/*
 * Suspended, the tracer records nothing; resumed, it keeps what it had and
 * goes on. Resumed, the CPU records whatever it does, and a CPU spinning
 * on a lock can wrap even the largest buffer:
 * the records of a run are only required while nothing was lost since.
 */
static void ds_hw_test_suspend_resume(struct kunit *test)
{
	struct ds_hw_test *t = test->priv;
	int cpu = ds_hw_traced_cpu(test);
	struct ds_geometry geom;
	struct ds_hw_run run;
	size_t count, lost, loops, all;

	t->tracer = ds_hw_request_cpu(test, cpu, DS_HW_BIG_SIZE, DS_KERNEL);
	ds_hw_run_work_suspend(test, cpu, &run, DS_HW_LOOPS, t->tracer);

	KUNIT_EXPECT_FALSE(test, ds_tracer_recording(t->tracer));
	KUNIT_EXPECT_EQ(test, ds_hw_scan(test, t->tracer, &run, &geom),
			DS_HW_LOOPS);
	KUNIT_EXPECT_EQ(test, ds_hw_status(test, &geom), DS_STATUS_SUSPENDED);
	count = geom.count;
	lost = geom.lost;

	ds_hw_run_ipi(test, cpu, &run, DS_HW_LOOPS);
	ds_hw_run_work(test, cpu, &run, DS_HW_LONG_LOOPS);
	KUNIT_EXPECT_EQ(test, ds_hw_scan(test, t->tracer, &run, &geom),
			DS_HW_LOOPS);
	KUNIT_EXPECT_EQ(test, geom.count, count);
	KUNIT_EXPECT_EQ(test, geom.lost, lost);

	/* Resumed and suspended again, without running the loop. */
	KUNIT_ASSERT_EQ(test, ds_resume(t->tracer), 0);
	KUNIT_EXPECT_TRUE(test, ds_tracer_recording(t->tracer));
	KUNIT_ASSERT_EQ(test, ds_get_geometry(t->tracer, &geom), 0);
	KUNIT_EXPECT_EQ(test, ds_hw_status(test, &geom), 0);
	KUNIT_ASSERT_EQ(test, ds_suspend(t->tracer), 0);
	loops = ds_hw_scan(test, t->tracer, &run, &geom);
	KUNIT_EXPECT_GE(test, geom.count + geom.lost, count + lost);
	if (geom.lost == lost)
		KUNIT_EXPECT_EQ(test, loops, DS_HW_LOOPS);
	else
		KUNIT_EXPECT_LE(test, loops, DS_HW_LOOPS);
	count = geom.count;
	lost = geom.lost;

	KUNIT_ASSERT_EQ(test, ds_resume(t->tracer), 0);
	ds_hw_run_work_suspend(test, cpu, &run, DS_HW_LOOPS, t->tracer);
	all = ds_hw_scan(test, t->tracer, &run, &geom);
	KUNIT_EXPECT_GE(test, geom.count + geom.lost,
			count + lost + DS_HW_LOOPS);
	/* The new run always, the old one too unless it wrapped away. */
	if (geom.lost == lost) {
		KUNIT_EXPECT_EQ(test, all, loops + DS_HW_LOOPS);
	} else {
		KUNIT_EXPECT_GE(test, all, DS_HW_LOOPS);
		KUNIT_EXPECT_LE(test, all, loops + DS_HW_LOOPS);
	}
}

static void ds_hw_notify(struct ds_tracer *tracer, void *cookie)
{
	struct ds_hw_test *t = cookie;

	WRITE_ONCE(t->notified_tracer, tracer);
	atomic_inc(&t->notifications);
	complete(&t->notified);
}

/*
 * The threshold interrupt notifies and pauses on its own, with no help from
 * a reader; recording resumes on ds_resume() and then fills the buffer.
 */
static void ds_hw_test_notify(struct kunit *test)
{
	struct ds_hw_test *t = test->priv;
	struct ds_config cfg = {
		.size		= DS_HW_NOTIFY_RECORDS *
				  sizeof(struct ds_bts_record),
		.threshold	= DS_HW_NOTIFY_THRESHOLD,
		.overflow	= DS_OVERFLOW_NOTIFY,
		.notify		= ds_hw_notify,
		.cookie		= t,
		.flags		= DS_KERNEL,
		.backend	= DS_BACKEND_HARDWARE,
	};
	int cpu = ds_hw_traced_cpu(test);
	struct ds_geometry geom;
	struct ds_hw_run run;
	size_t count, loops;

	t->tracer = ds_request_bts_cpu(cpu, &cfg);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, t->tracer);
	ds_hw_run_work(test, cpu, &run, DS_HW_LOOPS);

	/* Nothing has read the tracer: only the interrupt can notify. */
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&t->notified,
							  DS_HW_TIMEOUT), 0UL);
	KUNIT_EXPECT_PTR_EQ(test, READ_ONCE(t->notified_tracer), t->tracer);
	KUNIT_EXPECT_FALSE(test, ds_tracer_recording(t->tracer));

	/* It paused within the run. */
	loops = ds_hw_scan(test, t->tracer, &run, &geom);
	KUNIT_EXPECT_LT(test, loops, DS_HW_LOOPS);
	KUNIT_EXPECT_EQ(test, ds_hw_status(test, &geom), DS_STATUS_PAUSED);
	KUNIT_EXPECT_EQ(test, geom.threshold, DS_HW_NOTIFY_THRESHOLD);
	KUNIT_EXPECT_GE(test, geom.count, DS_HW_NOTIFY_THRESHOLD);
	count = geom.count;

	/* Paused, it records nothing. */
	ds_hw_run_ipi(test, cpu, &run, DS_HW_LOOPS);
	KUNIT_EXPECT_EQ(test, ds_hw_scan(test, t->tracer, &run, &geom), loops);
	KUNIT_EXPECT_EQ(test, geom.count, count);

	/*
	 * Resumed, it fills the buffer and counts what did not fit, keeping
	 * what it held. Whatever the CPU runs before the loop (a console
	 * write, say) may fill the rest, so no new jump is required.
	 */
	KUNIT_ASSERT_EQ(test, ds_resume(t->tracer), 0);
	ds_hw_run_work(test, cpu, &run, DS_HW_LONG_LOOPS);
	KUNIT_EXPECT_GE(test, ds_hw_scan(test, t->tracer, &run, &geom), loops);
	KUNIT_EXPECT_EQ(test, geom.count, geom.capacity);
	KUNIT_EXPECT_GE(test, geom.lost,
			DS_HW_LONG_LOOPS - DS_HW_NOTIFY_RECORDS);
	/* The threshold was crossed once. */
	KUNIT_EXPECT_EQ(test, atomic_read(&t->notifications), 1);
}

/*
 * A traced kthread, its run done, stays until kthread_stop(): the case
 * reads its tracer while the task is still alive.
 */
static int ds_hw_thread_wait_stop(void)
{
	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (!kthread_should_stop())
			schedule();
		__set_current_state(TASK_RUNNING);
	}
	return 0;
}

static int ds_hw_thread(void *arg)
{
	struct ds_hw_test *t = arg;

	ds_hw_loop(&t->thread_run);
	complete(&t->thread_done);
	return ds_hw_thread_wait_stop();
}

/*
 * A task's tracer records user mode only, also for a kernel thread: its
 * kernel loop leaves nothing.
 */
static void ds_hw_test_task_kthread(struct kunit *test)
{
	struct ds_hw_test *t = test->priv;
	struct ds_config cfg = {
		.size		= DS_HW_BIG_SIZE,
		.overflow	= DS_OVERFLOW_WRAP,
		.flags		= DS_KERNEL,
		.backend	= DS_BACKEND_HARDWARE,
	};
	struct task_struct *thread, *task;
	struct ds_geometry geom;
	struct ds_hw_run run;

	t->thread_run.loops = DS_HW_LOOPS;
	thread = kthread_create(ds_hw_thread, t, "ds_hw_test");
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, thread);
	t->thread = thread;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_task(t->thread, &cfg)),
			-EINVAL);
	cfg.flags = DS_USER;
	t->task_tracer = ds_request_bts_task(t->thread, &cfg);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, t->task_tracer);
	task = ds_tracer_task(t->task_tracer);
	KUNIT_EXPECT_PTR_EQ(test, task, t->thread);
	if (task)
		put_task_struct(task);

	/* This task is not traced. */
	ds_hw_run_work(test, cpumask_last(cpu_online_mask), &run,
		       DS_HW_LOOPS);
	KUNIT_EXPECT_EQ(test, ds_hw_scan(test, t->task_tracer, &run, &geom),
			0);
	KUNIT_EXPECT_EQ(test, geom.count, 0);

	wake_up_process(t->thread);
	KUNIT_ASSERT_GT(test, wait_for_completion_timeout(&t->thread_done,
							  DS_HW_TIMEOUT), 0UL);
	KUNIT_EXPECT_EQ(test, ds_hw_scan(test, t->task_tracer, &t->thread_run,
					 &geom), 0);
	KUNIT_EXPECT_EQ(test, geom.count, 0);
	KUNIT_EXPECT_EQ(test, geom.lost, 0);
	KUNIT_EXPECT_EQ(test, ds_hw_status(test, &geom), 0);
}

/* Per-CPU and per-task hardware BTS tracers exclude each other. */
static void ds_hw_test_conflict(struct kunit *test)
{
	struct ds_hw_test *t = test->priv;
	struct ds_config cfg = {
		.size		= SZ_4K,
		.overflow	= DS_OVERFLOW_WRAP,
		.flags		= DS_USER,
		.backend	= DS_BACKEND_HARDWARE,
	};
	int cpu = cpumask_last(cpu_online_mask);

	t->tracer = ds_request_bts_cpu(cpu, &cfg);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, t->tracer);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(cpu, &cfg)), -EBUSY);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_task(current, &cfg)),
			-EBUSY);
	ds_release(t->tracer);
	t->tracer = NULL;

	t->task_tracer = ds_request_bts_task(current, &cfg);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, t->task_tracer);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(cpu, &cfg)), -EBUSY);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_task(current, &cfg)),
			-EBUSY);
	ds_release(t->task_tracer);
	t->task_tracer = NULL;
}

/* How many online CPUs have IA32_DS_AREA loaded, and how many are online. */
static int ds_hw_areas_loaded(int *online)
{
	int cpu, loaded = 0;
	u64 area;

	*online = 0;
	cpus_read_lock();
	for_each_online_cpu(cpu) {
		(*online)++;
		if (!rdmsrl_on_cpu(cpu, MSR_IA32_DS_AREA, &area) && area)
			loaded++;
	}
	cpus_read_unlock();
	return loaded;
}

/* The linger lasts a second: check it well within, or not at all. */
#define DS_HW_LINGER_CHECK	(HZ / 2)

/*
 * The hardware is set up and torn down again and again. The last release
 * leaves it set up for a while; perf's reservation ends that at once, so
 * each cycle sets up afresh on a real teardown, perf's, with TLB flushes.
 */
static void ds_hw_test_release_cycles(struct kunit *test)
{
	struct ds_hw_test *t = test->priv;
	struct ds_geometry geom;
	struct ds_hw_run run;
	int i, cpu = -1, loaded, online;
	unsigned long released;
	int err;

	for (i = 0; i < DS_HW_CYCLES; i++) {
		cpu = cpumask_next(cpu, cpu_online_mask);
		if (cpu >= nr_cpu_ids)
			cpu = cpumask_first(cpu_online_mask);
		ds_hw_leave_cpu(test, cpu);
		t->tracer = ds_hw_request_cpu(test, cpu, DS_HW_BIG_SIZE,
					      DS_KERNEL);
		ds_hw_run_work_suspend(test, cpu, &run, DS_HW_LOOPS + i,
				       t->tracer);
		KUNIT_EXPECT_EQ_MSG(test, ds_hw_scan(test, t->tracer, &run,
						     &geom),
				    DS_HW_LOOPS + i, "cycle %d, CPU %d", i, cpu);
		ds_release(t->tracer);
		t->tracer = NULL;
		released = jiffies;
		loaded = ds_hw_areas_loaded(&online);
		if (time_before(jiffies, released + DS_HW_LINGER_CHECK))
			KUNIT_EXPECT_EQ_MSG(test, loaded, online,
					    "cycle %d: lingering", i);
		err = ds_perf_reserve(DS_BTS);
		KUNIT_EXPECT_EQ_MSG(test, err, 0, "cycle %d", i);
		/* The reservation tore the lingering setup down. */
		KUNIT_EXPECT_EQ_MSG(test, ds_hw_areas_loaded(&online), 0,
				    "cycle %d", i);
		if (!err)
			ds_perf_release(DS_BTS);
	}
}

static struct kunit_case ds_hw_test_cases[] = {
	KUNIT_CASE(ds_hw_test_cpu_kernel),
	KUNIT_CASE(ds_hw_test_cpu_user_only),
	KUNIT_CASE(ds_hw_test_threshold_interrupt),
	KUNIT_CASE(ds_hw_test_wrap),
	KUNIT_CASE(ds_hw_test_suspend_resume),
	KUNIT_CASE(ds_hw_test_notify),
	KUNIT_CASE(ds_hw_test_task_kthread),
	KUNIT_CASE(ds_hw_test_conflict),
	KUNIT_CASE(ds_hw_test_release_cycles),
	{}
};

static int ds_hw_test_init(struct kunit *test)
{
	struct ds_hw_test *t;

	if (!boot_cpu_has(X86_FEATURE_BTS))
		kunit_skip(test, DS_HW_SKIP_REASON);
	if (ds_perf_holds(DS_BTS))
		kunit_skip(test, "perf holds the half of the Debug Store");

	t = kunit_kzalloc(test, sizeof(*t), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, t);
	init_completion(&t->thread_done);
	init_completion(&t->notified);
	atomic_set(&t->notifications, 0);
	test->priv = t;
	return 0;
}

static void ds_hw_test_exit(struct kunit *test)
{
	struct ds_hw_test *t = test->priv;
	struct ds_tracer *tracer;
	struct ds_config cfg = {
		.size		= SZ_4K,
		.overflow	= DS_OVERFLOW_WRAP,
		.flags		= DS_KERNEL,
		.backend	= DS_BACKEND_HARDWARE,
	};
	int cpu;

	if (!t)
		return;
	ds_release(t->tracer);
	ds_release(t->task_tracer);
	if (t->thread)
		kthread_stop(t->thread);
	/* A case that failed half-way may have left its program behind. */
	ds_hw_user_unlink();

	/* Nothing left behind: every CPU and this task can be traced again. */
	for_each_online_cpu(cpu) {
		tracer = ds_request_bts_cpu(cpu, &cfg);
		KUNIT_EXPECT_FALSE_MSG(test, IS_ERR(tracer), "CPU %d: %ld", cpu,
				       PTR_ERR(tracer));
		ds_release(tracer);
	}
	cfg.flags = DS_USER;
	tracer = ds_request_bts_task(current, &cfg);
	KUNIT_EXPECT_FALSE_MSG(test, IS_ERR(tracer), "task: %ld",
			       PTR_ERR(tracer));
	ds_release(tracer);
}

static struct kunit_suite ds_hw_test_suite = {
	.name		= "x86_ds_hw",
	.init		= ds_hw_test_init,
	.exit		= ds_hw_test_exit,
	.test_cases	= ds_hw_test_cases,
};

kunit_test_suite(ds_hw_test_suite);

MODULE_DESCRIPTION("KUnit tests for the Debug Store allocator on BTS hardware");
MODULE_LICENSE("GPL");
