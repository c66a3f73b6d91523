// SPDX-License-Identifier: GPL-2.0
/*
 * A client of the Debug Store allocator (asm/ds.h): records the user-mode
 * branches of a task, of a CPU, or of both, in notify mode, and reports
 * what it collected.
 *
 * usage: insmod ds_sample.ko [pid=<pid>] [cpu=<cpu>] [records=<n>]
 *			      [threshold=<n>] [lo=<addr> hi=<addr>]
 *
 * Each tracer has a buffer of @records branch records and is notified when
 * it holds @threshold of them. The notification pauses recording; a worker
 * reads the records, counts them and those with both ends in [@lo, @hi),
 * and empties the buffer with ds_clear(), which resumes recording. A task's
 * trace is reported when the allocator detaches it (the task exited), the
 * rest when the module is unloaded. A CPU's trace needs the BTS hardware;
 * a task's falls back to the emulated backend where the hardware is absent
 * or taken, by a CPU's trace for one: so the CPU's is requested first, and
 * the module can have both.
 *
 * What runs in user mode while recording is paused is not recorded, nor
 * counted as lost: the drain must come before traced code runs again. The
 * notification arrives on the CPU that collected the records, and the
 * worker runs at SCHED_FIFO on the traced CPU, or on the CPU the traced
 * task is on when the module loads: it preempts the user code of that CPU
 * at once. A task that moves to another CPU may run unrecorded until the
 * drain.
 *
 * Loading the module is the permission check: ds_request_bts_task() leaves
 * to its caller who may see a task's control flow.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/gfp.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/overflow.h>
#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/task.h>

#include <asm/ds.h>

static int ds_sample_pid;
module_param_named(pid, ds_sample_pid, int, 0444);
MODULE_PARM_DESC(pid, "Trace the user-mode branches of this task");

static int ds_sample_cpu = -1;
module_param_named(cpu, ds_sample_cpu, int, 0444);
MODULE_PARM_DESC(cpu, "Trace the user-mode branches taken on this CPU");

static unsigned int ds_sample_records = 4096;
module_param_named(records, ds_sample_records, uint, 0444);
MODULE_PARM_DESC(records, "Size of each trace buffer, in branch records");

static unsigned int ds_sample_threshold = 2048;
module_param_named(threshold, ds_sample_threshold, uint, 0444);
MODULE_PARM_DESC(threshold, "Notify when a buffer holds this many records");

static unsigned long ds_sample_lo;
module_param_named(lo, ds_sample_lo, ulong, 0444);
MODULE_PARM_DESC(lo, "Start of the address range whose branches are counted");

static unsigned long ds_sample_hi;
module_param_named(hi, ds_sample_hi, ulong, 0444);
MODULE_PARM_DESC(hi, "End of that range, excluded; 0 for no range");

/**
 * struct ds_sample_trace - one tracer and what was read from it
 * @what:	   "task" or "cpu", for messages
 * @id:		   the pid or the CPU
 * @tracer:	   the handle, NULL once released; used on @worker only
 * @worker:	   SCHED_FIFO kthread worker near the traced code, NULL
 *		   until the trace starts
 * @drain_work:	   reads and empties the buffer after a notification
 * @stop_work:	   reads the rest, releases the tracer and reports
 * @page:	   a page for ds_read_records() to copy into
 * @notifications: notifications received
 * @backend:	   the backend that recorded
 * @records:	   records read
 * @in_range:	   of them, those from and to [@lo, @hi)
 * @lost:	   records lost, summed over the ds_clear()s
 * @approximate:   @lost is a lower bound (%DS_STATUS_DROPPED)
 */
struct ds_sample_trace {
	const char		*what;
	int			id;
	struct ds_tracer	*tracer;
	struct kthread_worker	*worker;
	struct kthread_work	drain_work;
	struct kthread_work	stop_work;
	void			*page;
	atomic_t		notifications;
	enum ds_backend_id	backend;
	u64			records;
	u64			in_range;
	u64			lost;
	bool			approximate;
};

static struct ds_sample_trace ds_sample_task_trace = { .what = "task" };
static struct ds_sample_trace ds_sample_cpu_trace = { .what = "cpu" };

static bool ds_sample_in_range(u64 addr)
{
	return addr >= ds_sample_lo && addr < ds_sample_hi;
}

/*
 * Read the whole buffer into the counts, then empty it. The tracer stores
 * nothing meanwhile (paused, suspended or detached): no record is read
 * twice, and ds_clear() drops none that was not read.
 */
static void ds_sample_take(struct ds_sample_trace *t, struct ds_tracer *tracer,
			   const struct ds_geometry *geom)
{
	struct ds_bts_record *rec = t->page;
	size_t first = 0;
	ssize_t i, n;

	while (first < geom->count) {
		n = ds_read_records(tracer, first, rec, PAGE_SIZE);
		if (n <= 0)
			break;
		for (i = 0; i < n; i++)
			if (ds_sample_in_range(rec[i].from) &&
			    ds_sample_in_range(rec[i].to))
				t->in_range++;
		first += n;
	}
	t->records += first;
	t->lost += geom->lost;
	if (geom->status & DS_STATUS_DROPPED)
		t->approximate = true;
	t->backend = geom->backend;
	ds_clear(tracer);
}

static void ds_sample_print(const struct ds_sample_trace *t,
			    unsigned int status)
{
	pr_info("%s %d%s: %s backend, %llu records, %llu%s lost, %d notifications\n",
		t->what, t->id, status & DS_STATUS_DETACHED ? " detached" : "",
		t->backend == DS_BACKEND_HARDWARE ? "hardware" : "emulated",
		t->records, t->lost, t->approximate ? "+" : "",
		atomic_read(&t->notifications));
	if (ds_sample_hi)
		pr_info("%s %d: %llu branches in [%#lx, %#lx)\n", t->what,
			t->id, t->in_range, ds_sample_lo, ds_sample_hi);
}

static void ds_sample_stop(struct kthread_work *work)
{
	struct ds_sample_trace *t = container_of(work, struct ds_sample_trace,
						 stop_work);
	struct ds_tracer *tracer = READ_ONCE(t->tracer);
	struct ds_geometry geom;
	int err;

	if (!tracer)
		return;
	/* The task or the CPU may run on: freeze the trace for the last read. */
	ds_suspend(tracer);
	err = ds_get_geometry(tracer, &geom);
	if (!err)
		ds_sample_take(t, tracer, &geom);
	/* Waits for a notification in flight: the count is final after it. */
	ds_release(tracer);
	WRITE_ONCE(t->tracer, NULL);
	if (!err)
		ds_sample_print(t, geom.status);
}

static void ds_sample_drain(struct kthread_work *work)
{
	struct ds_sample_trace *t = container_of(work, struct ds_sample_trace,
						 drain_work);
	struct ds_tracer *tracer = READ_ONCE(t->tracer);
	struct ds_geometry geom;

	/* Released, or not stored yet: ds_sample_start() looks again. */
	if (!tracer || ds_get_geometry(tracer, &geom))
		return;
	/* A task that exited before the handle was stored is reported now. */
	if (geom.status & DS_STATUS_DETACHED) {
		ds_sample_stop(&t->stop_work);
		return;
	}
	/* Only a pause holds the buffer still until ds_clear() ends it. */
	if (geom.status & DS_STATUS_PAUSED)
		ds_sample_take(t, tracer, &geom);
}

/*
 * irq_work context, on the CPU that collected the records: it must not
 * sleep, nor call the allocator. Recording is paused from here until
 * ds_clear(), and the worker, above every user task on its CPU, gets that
 * CPU before user code runs there again.
 */
static void ds_sample_notify(struct ds_tracer *tracer, void *cookie)
{
	struct ds_sample_trace *t = cookie;

	atomic_inc(&t->notifications);
	kthread_queue_work(t->worker, &t->drain_work);
}

/*
 * The task exited, or exec'd an image its user may not read. Called under
 * the allocator's mutex, where the ds_*() calls would deadlock.
 */
static void ds_sample_detached(struct ds_tracer *tracer, void *cookie)
{
	struct ds_sample_trace *t = cookie;

	kthread_queue_work(t->worker, &t->stop_work);
}

/* Trace @task, or with a NULL @task the CPU @cpu; the worker runs on @cpu. */
static int ds_sample_start(struct ds_sample_trace *t, struct task_struct *task,
			   int cpu)
{
	struct ds_config cfg = {
		.size		= array_size(ds_sample_records,
					     sizeof(struct ds_bts_record)),
		.threshold	= ds_sample_threshold,
		.overflow	= DS_OVERFLOW_NOTIFY,
		.notify		= ds_sample_notify,
		.cookie		= t,
		.flags		= DS_USER,
	};
	struct kthread_worker *worker;
	struct ds_tracer *tracer;
	int err;

	t->page = (void *)__get_free_page(GFP_KERNEL);
	if (!t->page)
		return -ENOMEM;
	worker = kthread_create_worker_on_cpu(cpu, 0, "ds_sample/%.1s%d",
					      t->what, t->id);
	if (IS_ERR(worker)) {
		err = PTR_ERR(worker);
		goto free_page;
	}
	sched_set_fifo_low(worker->task);
	kthread_init_work(&t->drain_work, ds_sample_drain);
	kthread_init_work(&t->stop_work, ds_sample_stop);
	/* Before the request: the first notification may come at once. */
	t->worker = worker;

	if (task) {
		cfg.backend = DS_BACKEND_AUTO;
		cfg.detached = ds_sample_detached;
		tracer = ds_request_bts_task(task, &cfg);
	} else {
		cfg.backend = DS_BACKEND_HARDWARE;
		tracer = ds_request_bts_cpu(cpu, &cfg);
	}
	if (IS_ERR(tracer)) {
		err = PTR_ERR(tracer);
		goto destroy_worker;
	}
	WRITE_ONCE(t->tracer, tracer);
	/* A notification or a detach before the store found no handle. */
	kthread_queue_work(worker, &t->drain_work);
	return 0;

destroy_worker:
	t->worker = NULL;
	kthread_destroy_worker(worker);
free_page:
	free_page((unsigned long)t->page);
	return err;
}

/* Report and release, on the worker, then take the worker down. */
static void ds_sample_stop_trace(struct ds_sample_trace *t)
{
	if (!t->worker)
		return;
	kthread_queue_work(t->worker, &t->stop_work);
	kthread_flush_work(&t->stop_work);
	/* A drain queued before the release finds no handle. */
	kthread_destroy_worker(t->worker);
	free_page((unsigned long)t->page);
}

static int ds_sample_start_cpu(void)
{
	int cpu = ds_sample_cpu;
	int err;

	/* The worker is bound to the CPU before the allocator checks it. */
	if (cpu >= nr_cpu_ids || !cpu_possible(cpu)) {
		pr_err("no cpu %d\n", cpu);
		return -EINVAL;
	}
	if (!cpu_online(cpu)) {
		pr_err("cpu %d is offline\n", cpu);
		return -ENODEV;
	}
	ds_sample_cpu_trace.id = cpu;
	err = ds_sample_start(&ds_sample_cpu_trace, NULL, cpu);
	if (err)
		pr_err("cannot trace cpu %d: %pe\n", cpu, ERR_PTR(err));
	return err;
}

static int ds_sample_start_task(void)
{
	struct task_struct *task;
	int err;

	rcu_read_lock();
	task = get_pid_task(find_vpid(ds_sample_pid), PIDTYPE_PID);
	rcu_read_unlock();
	if (!task) {
		pr_err("no task %d\n", ds_sample_pid);
		return -ESRCH;
	}
	if (task->flags & PF_KTHREAD) {
		pr_err("task %d is a kernel thread, it has no user mode\n",
		       ds_sample_pid);
		err = -EINVAL;
		goto put_task;
	}
	ds_sample_task_trace.id = ds_sample_pid;
	err = ds_sample_start(&ds_sample_task_trace, task, task_cpu(task));
	if (err)
		pr_err("cannot trace task %d: %pe\n", ds_sample_pid,
		       ERR_PTR(err));
put_task:
	put_task_struct(task);
	return err;
}

static int __init ds_sample_init(void)
{
	int err;

	if (!ds_sample_pid && ds_sample_cpu < 0) {
		pr_err("nothing to trace: give pid= or cpu=\n");
		return -EINVAL;
	}
	if (ds_sample_hi && ds_sample_lo >= ds_sample_hi) {
		pr_err("empty range [%#lx, %#lx)\n", ds_sample_lo, ds_sample_hi);
		return -EINVAL;
	}
	/* First: the hardware can trace a CPU, or tasks, not both. */
	if (ds_sample_cpu >= 0) {
		err = ds_sample_start_cpu();
		if (err)
			return err;
	}
	if (ds_sample_pid) {
		err = ds_sample_start_task();
		if (err)
			goto stop_cpu;
	}
	return 0;

stop_cpu:
	ds_sample_stop_trace(&ds_sample_cpu_trace);
	return err;
}

static void __exit ds_sample_exit(void)
{
	ds_sample_stop_trace(&ds_sample_task_trace);
	ds_sample_stop_trace(&ds_sample_cpu_trace);
}

module_init(ds_sample_init);
module_exit(ds_sample_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Debug Store sample: branch tracing of a task or a CPU in notify mode");
