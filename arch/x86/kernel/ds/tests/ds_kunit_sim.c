// SPDX-License-Identifier: GPL-2.0
/*
 * The Debug Store allocator's KUnit suites: the simulated CPU and the
 * helpers they share.
 *
 * The suites replace the hardware operations and look at the allocator's
 * state through ../internal.h. No VM has BTS, so every test runs against a
 * simulated CPU: it stores records into the staging buffer through the DS
 * save area and advances the index as the hardware does, and it raises the
 * threshold PMI by calling the NMI handler. It stands in for the hardware
 * system-wide while a case runs: the context switch, the NMI handler and
 * the IPIs run on every CPU, where no per-test seam reaches. So
 * ds_test_init() refuses to start while another client drives the Debug
 * Store.
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

static struct ds_hw_caps ds_sim_caps;

DEFINE_PER_CPU(u64, ds_sim_debugctl);

DEFINE_PER_CPU(unsigned long, ds_sim_ds_area);

/* LVTPC: the value before the allocator's first arming, and NMI mode. */
DEFINE_PER_CPU(u32, ds_sim_lvtpc);

atomic_t ds_sim_pmis;

/* The simulated CPU holds its threshold PMI back (skid), for good. */
bool ds_sim_skid;

atomic_long_t ds_sim_mapped;

/* Staging buffers mapped since the test began. */
atomic_t ds_sim_maps;

DEFINE_PER_CPU(enum ds_sim_slot_state[DS_NR_KINDS], ds_sim_slots);

atomic_t ds_sim_slot_misuses;

atomic_t ds_sim_flushes;

long ds_sim_flush_mapped;

int ds_sim_flush_staged;

unsigned long ds_sim_flush_start;

unsigned long ds_sim_flush_end;

/*
 * perf reserves from another thread when the allocator unmaps a slot;
 * ds_sim_reserve_early says whether it returned before the teardown ended,
 * and ds_sim_reserve_mapped what it found mapped when it returned.
 */
bool ds_sim_reserve_at_unmap;

int ds_sim_reserve_result;

bool ds_sim_reserve_early;

long ds_sim_reserve_mapped;

DECLARE_COMPLETION(ds_sim_reserve_done);

/* And a request for this task comes right behind it. */
struct task_struct *ds_sim_request_task;

struct ds_tracer *ds_sim_request_result;

/* --- the simulated CPU --- */

static void ds_sim_probe(struct ds_hw_caps *caps)
{
	*caps = ds_sim_caps;
}

static u64 ds_sim_read_debugctl(void)
{
	return this_cpu_read(ds_sim_debugctl);
}

static void ds_sim_write_debugctl(u64 val)
{
	this_cpu_write(ds_sim_debugctl, val);
}

static void ds_sim_write_ds_area(unsigned long addr)
{
	this_cpu_write(ds_sim_ds_area, addr);
}

static u32 ds_sim_arm_pmi(void)
{
	u32 old = this_cpu_read(ds_sim_lvtpc);

	this_cpu_write(ds_sim_lvtpc, DS_SIM_LVTPC_NMI);
	return old;
}

static void ds_sim_ack_pmi(void)
{
	atomic_inc(&ds_sim_pmis);
}

static void ds_sim_restore_pmi(u32 lvtpc)
{
	this_cpu_write(ds_sim_lvtpc, lvtpc);
}

/* The state of the cpu_entry_area slot at @cea. */
static enum ds_sim_slot_state *ds_sim_slot(void *cea)
{
	struct debug_store_buffers *slots;
	int cpu;

	for_each_possible_cpu(cpu) {
		slots = &get_cpu_entry_area(cpu)->cpu_debug_buffers;
		if (cea == slots->bts_buffer)
			return &per_cpu(ds_sim_slots, cpu)[DS_BTS];
		if (cea == slots->pebs_buffer)
			return &per_cpu(ds_sim_slots, cpu)[DS_PEBS];
	}
	return NULL;
}

static void ds_sim_slot_move(void *cea, enum ds_sim_slot_state from,
			     enum ds_sim_slot_state to)
{
	enum ds_sim_slot_state *slot = ds_sim_slot(cea);

	if (!slot || *slot != from)
		atomic_inc(&ds_sim_slot_misuses);
	else
		*slot = to;
}

static void ds_sim_map(void *cea, void *buf, size_t size)
{
	ds_sim_slot_move(cea, DS_SIM_SLOT_CLEAN, DS_SIM_SLOT_MAPPED);
	atomic_long_add(size >> PAGE_SHIFT, &ds_sim_mapped);
	atomic_inc(&ds_sim_maps);
}

static void ds_sim_reserve_fn(struct work_struct *work)
{
	ds_sim_reserve_result = ds_perf_reserve(DS_BTS);
	ds_sim_reserve_mapped = atomic_long_read(&ds_sim_mapped);
	complete(&ds_sim_reserve_done);
}

DECLARE_WORK(ds_sim_reserve_work, ds_sim_reserve_fn);

static void ds_sim_request_fn(struct work_struct *work)
{
	struct ds_config cfg = {
		.size		= PAGE_SIZE,
		.overflow	= DS_OVERFLOW_WRAP,
		.flags		= DS_USER,
		.backend	= DS_BACKEND_HARDWARE,
	};

	ds_sim_request_result = ds_request_bts_task(ds_sim_request_task, &cfg);
}

DECLARE_WORK(ds_sim_request_work, ds_sim_request_fn);

unsigned int ds_sim_perf_waiters(void)
{
	unsigned int waiters;

	spin_lock(&ds_perf_lock);
	waiters = ds_bts_fac->perf_waiters;
	spin_unlock(&ds_perf_lock);
	return waiters;
}

/*
 * In the middle of the teardown: a reservation must wait for its end, and
 * a request that queues up behind it on ds_alloc_mutex must not take the Debug
 * Store from under the waiting reservation.
 */
static void ds_sim_race_teardown(void)
{
	unsigned long deadline = jiffies + DS_SIM_RESERVE_START;

	queue_work(system_unbound_wq, &ds_sim_reserve_work);
	while (time_before(jiffies, deadline)) {
		if (completion_done(&ds_sim_reserve_done)) {
			ds_sim_reserve_early = true;
			return;
		}
		if (ds_sim_perf_waiters())
			break;
		usleep_range(USEC_PER_MSEC, 2 * USEC_PER_MSEC);
	}
	queue_work(system_unbound_wq, &ds_sim_request_work);
	msleep(DS_SIM_REQUEST_QUEUE_MS);
}

static void ds_sim_unmap(void *cea, size_t size)
{
	ds_sim_slot_move(cea, DS_SIM_SLOT_MAPPED, DS_SIM_SLOT_STALE);
	atomic_long_sub(size >> PAGE_SHIFT, &ds_sim_mapped);
	if (!ds_sim_reserve_at_unmap)
		return;
	ds_sim_reserve_at_unmap = false;
	ds_sim_race_teardown();
}

static void ds_sim_flush(unsigned long start, unsigned long end)
{
	int cpu, staged = 0;
	enum ds_kind kind;

	for_each_possible_cpu(cpu) {
		struct debug_store_buffers *slots =
			&get_cpu_entry_area(cpu)->cpu_debug_buffers;

		staged += !!per_cpu(ds_cpus, cpu).stage[DS_BTS] +
			  !!per_cpu(ds_cpus, cpu).stage[DS_PEBS];
		for (kind = 0; kind < DS_NR_KINDS; kind++) {
			unsigned long slot = (unsigned long)(kind == DS_BTS ?
				slots->bts_buffer : slots->pebs_buffer);

			if (slot >= start && slot < end &&
			    per_cpu(ds_sim_slots, cpu)[kind] == DS_SIM_SLOT_STALE)
				per_cpu(ds_sim_slots, cpu)[kind] =
					DS_SIM_SLOT_CLEAN;
		}
	}
	ds_sim_flush_mapped = atomic_long_read(&ds_sim_mapped);
	ds_sim_flush_staged = staged;
	ds_sim_flush_start = start;
	ds_sim_flush_end = end;
	atomic_inc(&ds_sim_flushes);
}

static const struct ds_hw_ops ds_sim_ops = {
	.probe		= ds_sim_probe,
	.read_debugctl	= ds_sim_read_debugctl,
	.write_debugctl	= ds_sim_write_debugctl,
	.write_ds_area	= ds_sim_write_ds_area,
	.arm_pmi	= ds_sim_arm_pmi,
	.ack_pmi	= ds_sim_ack_pmi,
	.restore_pmi	= ds_sim_restore_pmi,
	.map		= ds_sim_map,
	.unmap		= ds_sim_unmap,
	.flush		= ds_sim_flush,
};

void ds_sim_pmi(void)
{
	ds_nmi_handler(NMI_LOCAL, NULL);
}

static bool ds_sim_may_store(struct ds_cpu *dc, u64 ctl, bool user)
{
	if ((ctl & (DEBUGCTLMSR_TR | DEBUGCTLMSR_BTS)) !=
	    (DEBUGCTLMSR_TR | DEBUGCTLMSR_BTS))
		return false;
	if (ctl & (user ? DEBUGCTLMSR_BTS_OFF_USR : DEBUGCTLMSR_BTS_OFF_OS))
		return false;
	return (dc->kinds & BIT(DS_BTS)) &&
	       this_cpu_read(ds_sim_ds_area) == dc->area_hw;
}

/* One taken branch on this CPU, as the CPU stores it. */
bool ds_sim_branch(u64 from, u64 to, bool user)
{
	struct ds_cpu *dc = this_cpu_ptr(&ds_cpus);
	u64 ctl = this_cpu_read(ds_sim_debugctl);
	struct ds_bts_record *rec;
	struct ds_area_part *part;

	lockdep_assert_irqs_disabled();

	if (!ds_sim_may_store(dc, ctl, user))
		return false;
	part = ds_part(dc->area, DS_BTS);
	/* With BTINT set the buffer is not circular: a full one drops. */
	if (part->index >= part->absmax && ctl & DEBUGCTLMSR_BTINT)
		return false;
	rec = ds_stage_ptr(dc, DS_BTS, part->index);
	rec->from = from;
	rec->to = to;
	rec->flags = 0;
	part->index += sizeof(*rec);
	if (!(ctl & DEBUGCTLMSR_BTINT) && part->index >= part->absmax)
		part->index = part->base;
	if (ctl & DEBUGCTLMSR_BTINT && part->index >= part->threshold &&
	    !ds_sim_skid)
		ds_sim_pmi();
	return true;
}

void ds_sim_settle(struct ds_tracer *tracer)
{
	int cpu;

	for_each_possible_cpu(cpu)
		irq_work_sync(&per_cpu_ptr(&ds_cpus, cpu)->collect_work);
	if (tracer)
		irq_work_sync(&tracer->notify_work);
}

/* Run @n user branches numbered from @first; returns how many stored. */
int ds_sim_run(struct ds_tracer *tracer, int first, int n)
{
	unsigned long flags;
	int i, stored = 0;

	local_irq_save(flags);
	for (i = first; i < first + n; i++)
		stored += ds_sim_branch(DS_TEST_FROM + i,
					DS_TEST_FROM + i + DS_TEST_TO_OFFSET,
					true);
	local_irq_restore(flags);
	ds_sim_settle(tracer);
	return stored;
}

/* --- helpers --- */

struct ds_config ds_test_cfg(size_t size)
{
	struct ds_config cfg = {
		.size		= size,
		.overflow	= DS_OVERFLOW_WRAP,
		.flags		= DS_USER,
		.backend	= DS_BACKEND_HARDWARE,
	};

	return cfg;
}

struct ds_tracer *ds_test_keep(struct kunit *test,
			       struct ds_tracer *tracer)
{
	struct ds_test *dt = test->priv;
	int i;

	if (IS_ERR_OR_NULL(tracer))
		return tracer;
	for (i = 0; i < DS_TEST_MAX_TRACERS; i++) {
		if (!dt->tracers[i]) {
			dt->tracers[i] = tracer;
			return tracer;
		}
	}
	KUNIT_FAIL(test, "too many tracers");
	return tracer;
}

void ds_test_release(struct kunit *test, struct ds_tracer *tracer)
{
	struct ds_test *dt = test->priv;
	int i;

	for (i = 0; i < DS_TEST_MAX_TRACERS; i++)
		if (dt->tracers[i] == tracer)
			dt->tracers[i] = NULL;
	ds_release(tracer);
}

struct ds_tracer *ds_test_task(struct kunit *test,
			       const struct ds_config *cfg)
{
	return ds_test_keep(test, ds_request_bts_task(current, cfg));
}

/* The tracer's task, and the reference ds_tracer_task() took dropped. */
void ds_test_expect_task(struct kunit *test, struct ds_tracer *tracer,
			 struct task_struct *want)
{
	struct task_struct *task = ds_tracer_task(tracer);

	KUNIT_EXPECT_PTR_EQ(test, task, want);
	if (task)
		put_task_struct(task);
}

struct ds_geometry ds_test_geom(struct kunit *test,
				struct ds_tracer *tracer)
{
	struct ds_geometry geom = { };

	KUNIT_EXPECT_EQ(test, ds_get_geometry(tracer, &geom), 0);
	return geom;
}

/*
 * The hardware is taken: a request for it fails, and one that lets the
 * allocator choose gets the emulated backend (registered by the case).
 */
struct ds_tracer *ds_test_task_falls_back(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer;

	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EBUSY);
	cfg.backend = DS_BACKEND_AUTO;
	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).backend,
			DS_BACKEND_EMULATED);
	return tracer;
}

void ds_test_expect_branch(struct kunit *test, struct ds_tracer *tracer,
			   size_t i, int nr)
{
	struct ds_bts_record rec = { };

	KUNIT_EXPECT_EQ(test, ds_read_record(tracer, i, &rec, sizeof(rec)),
			(ssize_t)sizeof(rec));
	KUNIT_EXPECT_EQ(test, rec.from, DS_TEST_FROM + nr);
	KUNIT_EXPECT_EQ(test, rec.to, DS_TEST_FROM + nr + DS_TEST_TO_OFFSET);
}

void ds_test_notify(struct ds_tracer *tracer, void *cookie)
{
	struct ds_test *dt = cookie;

	dt->notified++;
	dt->cookie = cookie;
}

/* Tear the hardware down now if it lingers, as DS_HW_LINGER later would. */
void ds_test_end_linger(void)
{
	enum ds_kind kind;

	for (kind = 0; kind < DS_NR_KINDS; kind++) {
		cancel_delayed_work_sync(&ds_facilities[kind].linger_work);
		ds_hw_end_linger(&ds_facilities[kind]);
	}
}

void ds_test_install(struct ds_hw_caps caps)
{
	int cpu;

	/* The staging buffers' sizes follow the capabilities. */
	ds_test_end_linger();
	mutex_lock(&ds_alloc_mutex);
	atomic_set(&ds_sim_pmis, 0);
	ds_sim_caps = caps;
	ds_hw_install(&ds_sim_ops);
	ds_probe_caps();
	for_each_possible_cpu(cpu) {
		per_cpu(ds_sim_debugctl, cpu) = DS_SIM_OTHER_BITS;
		per_cpu(ds_sim_lvtpc, cpu) = DS_SIM_LVTPC_BEFORE;
	}
	mutex_unlock(&ds_alloc_mutex);
}

const struct ds_hw_caps ds_test_full_caps = {
	.bts		= true,
	.pebs		= true,
};

int ds_test_init(struct kunit *test)
{
	const char *busy = NULL;
	struct ds_test *dt;

	dt = kunit_kzalloc(test, sizeof(*dt), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, dt);

	/* A client gone a moment ago left the real hardware lingering. */
	ds_test_end_linger();
	/*
	 * The simulated CPU replaces the hardware for everyone, so it may not
	 * while another client drives the Debug Store. perf holds it from its
	 * first hardware event to its last (a kernel with the hardlockup
	 * detector has one from boot on), and its PMU paths then call
	 * ds_perf_*() at any time, NMI included.
	 */
	mutex_lock(&ds_alloc_mutex);
	if (ds_facilities[DS_BTS].perf_held || ds_facilities[DS_PEBS].perf_held)
		busy = DS_TEST_PERF_BUSY;
	else if (READ_ONCE(ds_facilities[DS_BTS].state) != DS_HW_DOWN ||
		 READ_ONCE(ds_facilities[DS_PEBS].state) != DS_HW_DOWN)
		busy = "another client has hardware tracers";
	else if (ds_nr_emulated)
		busy = "another client has emulated tracers";
	if (!busy) {
		dt->saved_emulated = ds_emulated;
		WRITE_ONCE(ds_emulated, NULL);
	}
	mutex_unlock(&ds_alloc_mutex);
	if (busy)
		kunit_skip(test, "%s", busy);

	test->priv = dt;
	dt->user_locked = atomic_long_read(&current_user()->locked_vm);
	atomic_set(&ds_sim_maps, 0);
	atomic_set(&ds_sim_flushes, 0);
	atomic_set(&ds_sim_slot_misuses, 0);
	WRITE_ONCE(ds_hw_linger, DS_TEST_LINGER);
	ds_test_install(ds_test_full_caps);
	return 0;
}

static void ds_test_expect_idle(struct kunit *test, struct ds_test *dt)
{
	enum ds_kind kind;
	int cpu;

	for (kind = 0; kind < DS_NR_KINDS; kind++) {
		KUNIT_EXPECT_EQ(test, ds_facilities[kind].users, 0);
		KUNIT_EXPECT_FALSE(test, ds_facilities[kind].active);
		KUNIT_EXPECT_EQ(test, ds_facilities[kind].perf_waiters, 0);
	}
	KUNIT_EXPECT_EQ(test, ds_nr_emulated, 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&current_user()->locked_vm),
			dt->user_locked);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ds_sim_mapped), 0);
	for (kind = 0; kind < DS_NR_KINDS; kind++) {
		KUNIT_EXPECT_EQ(test, ds_nr_task_hw[kind], 0);
		KUNIT_EXPECT_EQ(test, ds_nr_cpu[kind], 0);
	}
	for_each_possible_cpu(cpu) {
		struct ds_cpu *dc = per_cpu_ptr(&ds_cpus, cpu);

		KUNIT_EXPECT_EQ(test, dc->kinds, 0);
		KUNIT_EXPECT_EQ(test, dc->area_users, 0);
		KUNIT_EXPECT_NULL(test, dc->stage[DS_BTS]);
		KUNIT_EXPECT_NULL(test, dc->stage[DS_PEBS]);
		KUNIT_EXPECT_NULL(test,
				  rcu_access_pointer(dc->cpu_tracer[DS_BTS]));
		KUNIT_EXPECT_NULL(test,
				  rcu_access_pointer(dc->cpu_tracer[DS_PEBS]));
		KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_debugctl, cpu),
				DS_SIM_OTHER_BITS);
		KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_ds_area, cpu), 0);
		KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_lvtpc, cpu),
				DS_SIM_LVTPC_BEFORE);
		KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_slots, cpu)[DS_BTS],
				DS_SIM_SLOT_CLEAN);
		KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_slots, cpu)[DS_PEBS],
				DS_SIM_SLOT_CLEAN);
	}
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_slot_misuses), 0);
}

/* The machine did not go down after all: arm what is set up again. */
void ds_test_unhalt_cpu(void *unused)
{
	enum ds_kind kind;

	for (kind = 0; kind < DS_NR_KINDS; kind++)
		if (READ_ONCE(ds_facilities[kind].active))
			ds_cpu_activate(this_cpu_ptr(&ds_cpus), kind);
}

void ds_test_exit(struct kunit *test)
{
	struct ds_test *dt = test->priv;
	int i;

	if (!dt)
		return;
	/* A reboot case that stopped half way: the allocator lives on. */
	if (READ_ONCE(ds_halted)) {
		WRITE_ONCE(ds_halted, false);
		on_each_cpu(ds_test_unhalt_cpu, NULL, 1);
	}
	/* A case that stopped half way left its racers behind. */
	ds_sim_reserve_at_unmap = false;
	flush_work(&ds_sim_reserve_work);
	flush_work(&ds_sim_request_work);
	ds_release(xchg(&ds_sim_request_result, NULL));
	for (i = 0; i < DS_TEST_MAX_TRACERS; i++)
		ds_release(dt->tracers[i]);
	for_each_cpu(i, &dt->perf_installed)
		ds_perf_uninstall(i);
	if (dt->perf_held)
		ds_perf_release(DS_BTS);
	if (dt->perf_pebs_held)
		ds_perf_release(DS_PEBS);
	if (READ_ONCE(ds_emulated))
		ds_unregister_backend(ds_emulated);
	ds_test_end_linger();
	WRITE_ONCE(ds_hw_linger, DS_HW_LINGER);

	ds_test_expect_idle(test, dt);

	mutex_lock(&ds_alloc_mutex);
	ds_hw_install(&ds_msr_ops);
	ds_probe_caps();
	WRITE_ONCE(ds_emulated, dt->saved_emulated);
	mutex_unlock(&ds_alloc_mutex);
}

/* --- a fake emulated backend --- */

int ds_fake_started;

int ds_fake_stopped;

static int ds_fake_start(struct ds_tracer *tracer)
{
	ds_fake_started++;
	return 0;
}

static void ds_fake_stop(struct ds_tracer *tracer)
{
	ds_fake_stopped++;
}

const struct ds_backend ds_fake_backend = {
	.name	= "kunit",
	.kinds	= BIT(DS_BTS),
	.start	= ds_fake_start,
	.stop	= ds_fake_stop,
};

int ds_test_never_runs(void *unused)
{
	return 0;
}

/* --- notification --- */

struct ds_tracer *ds_test_notifier(struct kunit *test, size_t records,
				   size_t threshold)
{
	struct ds_config cfg = ds_test_cfg(records * DS_BTS_RECORD_SIZE);

	cfg.overflow = DS_OVERFLOW_NOTIFY;
	cfg.threshold = threshold;
	cfg.notify = ds_test_notify;
	cfg.cookie = test->priv;
	return ds_test_task(test, &cfg);
}
