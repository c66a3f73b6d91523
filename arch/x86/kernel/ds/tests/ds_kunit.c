// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite for the Debug Store allocator.
 *
 * It replaces the hardware operations and looks at the allocator's state
 * through ../internal.h. No VM has BTS, so every test runs against a
 * simulated CPU: it stores records
 * into the staging buffer through the DS save area and advances the index
 * as the hardware does, and it raises the threshold PMI by calling the NMI
 * handler. It stands in for the hardware system-wide while a case runs:
 * the context switch, the NMI handler and the IPIs run on every CPU, where
 * no per-test seam reaches. So ds_test_init() refuses to start while
 * another client drives the Debug Store.
 */

#include <kunit/static_stub.h>
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

/* DEBUGCTL bits of other owners, which must survive. */
#define DS_SIM_OTHER_BITS	(DEBUGCTLMSR_LBR | DEBUGCTLMSR_BTF |	\
				 DEBUGCTLMSR_FREEZE_LBRS_ON_PMI |	\
				 DEBUGCTLMSR_FREEZE_IN_SMM)
#define DS_TEST_SIZE		(64 * DS_BTS_RECORD_SIZE)
#define DS_TEST_FROM		0x400000ULL
#define DS_TEST_TO_OFFSET	0x100ULL
#define DS_TEST_MAX_TRACERS	8
#define DS_TEST_EXIT_WAIT_MS	10
#define DS_TEST_EXIT_TRIES	500
/* Requests and releases of the linger test. */
#define DS_TEST_LINGER_CYCLES	16
/* Longer than any case: the cases end a linger when they mean to. */
#define DS_TEST_LINGER		(3600 * HZ)

/*
 * The BTS staging buffer, worked out by hand from the documentation
 * (Documentation/arch/x86/debug-store.rst): the 64 KiB cpu_entry_area slot
 * holds 2730 records of 24 bytes (65520 bytes). It interrupts a sixteenth
 * before it is full, 170 records (2730 / 16, rounded down) before the end,
 * and the SDM's CPU interrupts when the index reaches the threshold: as it
 * stores the 2560th record.
 */
#define DS_TEST_STAGE_RECORDS	2730
#define DS_TEST_STAGE_BYTES	65520
#define DS_TEST_STAGE_IRQ_AT	2560

#define DS_TEST_PERF_BUSY	\
	"perf holds the Debug Store (it has hardware events): the simulated CPU would take over perf's DS_AREA and DEBUGCTL writes"

struct ds_test {
	struct ds_tracer	*tracers[DS_TEST_MAX_TRACERS];
	/* The case holds perf's reservation of the BTS, the PEBS half. */
	bool			perf_held;
	bool			perf_pebs_held;
	/* CPUs where the case installed perf's IA32_DS_AREA. */
	cpumask_t		perf_installed;
	/* A registered emulated backend without users, set aside. */
	const struct ds_backend	*saved_emulated;
	int			notified;
	void			*cookie;
	/* Calls of ds_test_detached(). */
	int			detached;
	/* The locked memory of the test's user before the test. */
	long			user_locked;
};

/* The BTS half, which most cases use. */
#define ds_bts_fac	(&ds_facilities[DS_BTS])

static struct ds_hw_caps ds_sim_caps;
static DEFINE_PER_CPU(u64, ds_sim_debugctl);
static DEFINE_PER_CPU(unsigned long, ds_sim_ds_area);
/* LVTPC: the value before the allocator's first arming, and NMI mode. */
static DEFINE_PER_CPU(u32, ds_sim_lvtpc);
#define DS_SIM_LVTPC_BEFORE	(APIC_LVT_MASKED | 0xfe)
#define DS_SIM_LVTPC_NMI	APIC_DM_NMI
static atomic_t ds_sim_pmis;
/* The simulated CPU holds its threshold PMI back (skid), for good. */
static bool ds_sim_skid;
static atomic_long_t ds_sim_mapped;
/* Staging buffers mapped since the test began. */
static atomic_t ds_sim_maps;
/*
 * TLB flushes since the test began, and what the last one found: the pages
 * still mapped, the staging buffers not yet freed, and its range. The
 * slots' own states check what mapping without a flush relies on: no slot
 * is mapped while mapped, or before the flush that follows its unmap.
 */
enum ds_sim_slot_state {
	DS_SIM_SLOT_CLEAN,
	DS_SIM_SLOT_MAPPED,
	DS_SIM_SLOT_STALE,
};

static DEFINE_PER_CPU(enum ds_sim_slot_state[DS_NR_KINDS], ds_sim_slots);
static atomic_t ds_sim_slot_misuses;
static atomic_t ds_sim_flushes;
static long ds_sim_flush_mapped;
static int ds_sim_flush_staged;
static unsigned long ds_sim_flush_start, ds_sim_flush_end;
/*
 * perf reserves from another thread when the allocator unmaps a slot;
 * ds_sim_reserve_early says whether it returned before the teardown ended,
 * and ds_sim_reserve_mapped what it found mapped when it returned.
 */
static bool ds_sim_reserve_at_unmap;
static int ds_sim_reserve_result;
static bool ds_sim_reserve_early;
static long ds_sim_reserve_mapped;
static DECLARE_COMPLETION(ds_sim_reserve_done);
/* And a request for this task comes right behind it. */
static struct task_struct *ds_sim_request_task;
static struct ds_tracer *ds_sim_request_result;

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

static DECLARE_WORK(ds_sim_reserve_work, ds_sim_reserve_fn);

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

static DECLARE_WORK(ds_sim_request_work, ds_sim_request_fn);

/* How long the reservation may take to start waiting, on a slow host. */
#define DS_SIM_RESERVE_START	(10 * HZ)
/* How long the request gets to queue up on ds_mutex. */
#define DS_SIM_REQUEST_QUEUE_MS	20

static unsigned int ds_sim_perf_waiters(void)
{
	unsigned int waiters;

	spin_lock(&ds_perf_lock);
	waiters = ds_bts_fac->perf_waiters;
	spin_unlock(&ds_perf_lock);
	return waiters;
}

/*
 * In the middle of the teardown: a reservation must wait for its end, and
 * a request that queues up behind it on ds_mutex must not take the Debug
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

static void ds_sim_pmi(void)
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
static bool ds_sim_branch(u64 from, u64 to, bool user)
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

static void ds_sim_settle(struct ds_tracer *tracer)
{
	int cpu;

	for_each_possible_cpu(cpu)
		irq_work_sync(&per_cpu_ptr(&ds_cpus, cpu)->collect_work);
	if (tracer)
		irq_work_sync(&tracer->notify_work);
}

/* Run @n user branches numbered from @first; returns how many stored. */
static int ds_sim_run(struct ds_tracer *tracer, int first, int n)
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

static struct ds_config ds_test_cfg(size_t size)
{
	struct ds_config cfg = {
		.size		= size,
		.overflow	= DS_OVERFLOW_WRAP,
		.flags		= DS_USER,
		.backend	= DS_BACKEND_HARDWARE,
	};

	return cfg;
}

static struct ds_tracer *ds_test_keep(struct kunit *test,
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

static void ds_test_release(struct kunit *test, struct ds_tracer *tracer)
{
	struct ds_test *dt = test->priv;
	int i;

	for (i = 0; i < DS_TEST_MAX_TRACERS; i++)
		if (dt->tracers[i] == tracer)
			dt->tracers[i] = NULL;
	ds_release(tracer);
}

static struct ds_tracer *ds_test_task(struct kunit *test,
				      const struct ds_config *cfg)
{
	return ds_test_keep(test, ds_request_bts_task(current, cfg));
}

/* The tracer's task, and the reference ds_tracer_task() took dropped. */
static void ds_test_expect_task(struct kunit *test, struct ds_tracer *tracer,
				struct task_struct *want)
{
	struct task_struct *task = ds_tracer_task(tracer);

	KUNIT_EXPECT_PTR_EQ(test, task, want);
	if (task)
		put_task_struct(task);
}

static struct ds_geometry ds_test_geom(struct kunit *test,
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
static struct ds_tracer *ds_test_task_falls_back(struct kunit *test)
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

static void ds_test_expect_branch(struct kunit *test, struct ds_tracer *tracer,
				  size_t i, int nr)
{
	struct ds_bts_record rec = { };

	KUNIT_EXPECT_EQ(test, ds_read_record(tracer, i, &rec, sizeof(rec)),
			(ssize_t)sizeof(rec));
	KUNIT_EXPECT_EQ(test, rec.from, DS_TEST_FROM + nr);
	KUNIT_EXPECT_EQ(test, rec.to, DS_TEST_FROM + nr + DS_TEST_TO_OFFSET);
}

static void ds_test_notify(struct ds_tracer *tracer, void *cookie)
{
	struct ds_test *dt = cookie;

	dt->notified++;
	dt->cookie = cookie;
}

/* Tear the hardware down now if it lingers, as DS_HW_LINGER later would. */
static void ds_test_end_linger(void)
{
	enum ds_kind kind;

	for (kind = 0; kind < DS_NR_KINDS; kind++) {
		cancel_delayed_work_sync(&ds_facilities[kind].linger_work);
		ds_hw_end_linger(&ds_facilities[kind]);
	}
}

static void ds_test_install(struct ds_hw_caps caps)
{
	int cpu;

	/* The staging buffers' sizes follow the capabilities. */
	ds_test_end_linger();
	mutex_lock(&ds_mutex);
	atomic_set(&ds_sim_pmis, 0);
	ds_sim_caps = caps;
	ds_hw_install(&ds_sim_ops);
	ds_probe();
	for_each_possible_cpu(cpu) {
		per_cpu(ds_sim_debugctl, cpu) = DS_SIM_OTHER_BITS;
		per_cpu(ds_sim_lvtpc, cpu) = DS_SIM_LVTPC_BEFORE;
	}
	mutex_unlock(&ds_mutex);
}

static const struct ds_hw_caps ds_test_full_caps = {
	.bts		= true,
	.pebs		= true,
};

static int ds_test_init(struct kunit *test)
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
	mutex_lock(&ds_mutex);
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
	mutex_unlock(&ds_mutex);
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
static void ds_test_unhalt_cpu(void *unused)
{
	enum ds_kind kind;

	for (kind = 0; kind < DS_NR_KINDS; kind++)
		if (READ_ONCE(ds_facilities[kind].active))
			ds_cpu_activate(this_cpu_ptr(&ds_cpus), kind);
}

static void ds_test_exit(struct kunit *test)
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

	mutex_lock(&ds_mutex);
	ds_hw_install(&ds_msr_ops);
	ds_probe();
	WRITE_ONCE(ds_emulated, dt->saved_emulated);
	mutex_unlock(&ds_mutex);
}

static void ds_test_use_mm(struct kunit *test, struct mm_struct **mmp);
static void ds_test_unuse_mm(struct mm_struct *mm);
static u64 ds_test_debugctl(void);

/* --- a fake emulated backend --- */

static int ds_fake_started;
static int ds_fake_stopped;

static int ds_fake_start(struct ds_tracer *tracer)
{
	ds_fake_started++;
	return 0;
}

static void ds_fake_stop(struct ds_tracer *tracer)
{
	ds_fake_stopped++;
}

static const struct ds_backend ds_fake_backend = {
	.name	= "kunit",
	.kinds	= BIT(DS_BTS),
	.start	= ds_fake_start,
	.stop	= ds_fake_stop,
};

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

static void ds_test_perf_holds(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_test *dt = test->priv;
	struct ds_tracer *tracer;

	KUNIT_ASSERT_EQ(test, ds_perf_reserve(DS_BTS), 0);
	dt->perf_held = true;
	KUNIT_EXPECT_TRUE(test, ds_perf_holds(DS_BTS));
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EBUSY);
	cfg.backend = DS_BACKEND_AUTO;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EBUSY);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(0, &cfg)), -EBUSY);
	KUNIT_EXPECT_FALSE(test, ds_bts_fac->active);

	ds_perf_release(DS_BTS);
	dt->perf_held = false;
	KUNIT_EXPECT_FALSE(test, ds_perf_holds(DS_BTS));
	tracer = ds_test_task(test, &cfg);
	KUNIT_EXPECT_FALSE(test, IS_ERR(tracer));
}

static void ds_test_perf_refused(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_test *dt = test->priv;
	struct ds_tracer *tracer;

	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_perf_reserve(DS_BTS), -EBUSY);
	KUNIT_EXPECT_FALSE(test, ds_perf_holds(DS_BTS));
	ds_test_release(test, tracer);

	/* The hardware lingers; perf's reservation tears it down at once. */
	KUNIT_EXPECT_TRUE(test, ds_bts_fac->active);
	KUNIT_EXPECT_EQ(test, ds_perf_reserve(DS_BTS), 0);
	dt->perf_held = true;
	KUNIT_EXPECT_FALSE(test, ds_bts_fac->active);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ds_sim_mapped), 0);
	KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_ds_area, 0), 0);
	KUNIT_EXPECT_EQ(test, ds_bts_fac->state, DS_HW_DOWN);
}

/*
 * A loop of requests and releases, which any user may run, sets the
 * hardware up once: every CPU armed, every staging buffer mapped (a TLB
 * flush on every CPU). It is torn down ds_hw_linger after the last release.
 */
static void ds_test_release_lingers(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer;
	int i, maps = 0;

	for (i = 0; i < DS_TEST_LINGER_CYCLES; i++) {
		tracer = ds_test_task(test, &cfg);
		KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
		if (!i)
			maps = atomic_read(&ds_sim_maps);
		ds_test_release(test, tracer);
		KUNIT_EXPECT_TRUE(test, ds_bts_fac->active);
	}
	KUNIT_EXPECT_GT(test, maps, 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_maps), maps);

	/* The linger's end, run now instead of DS_HW_LINGER later. */
	flush_delayed_work(&ds_bts_fac->linger_work);
	KUNIT_EXPECT_FALSE(test, ds_bts_fac->active);
	KUNIT_EXPECT_EQ(test, ds_bts_fac->state, DS_HW_DOWN);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ds_sim_mapped), 0);
	KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_ds_area, 0), 0);

	/* And a request after it sets up again. */
	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_maps), 2 * maps);
	KUNIT_EXPECT_TRUE(test, ds_bts_fac->active);
}

/* Long enough for anything but a hung reservation. */
#define DS_TEST_RESERVE_DONE_MS		30000

/*
 * perf reserves while the last hardware tracer's teardown runs: it must
 * wait until the slots are unmapped and IA32_DS_AREA is cleared, and then
 * get the Debug Store rather than be refused for its whole session, even
 * when a request queued on ds_mutex comes first after the teardown.
 */
static void ds_test_perf_during_teardown(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer, *request;
	struct ds_test *dt = test->priv;
	unsigned long left;

	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	ds_test_release(test, tracer);
	reinit_completion(&ds_sim_reserve_done);
	ds_sim_reserve_result = 1;
	ds_sim_reserve_early = false;
	ds_sim_request_task = current;
	ds_sim_request_result = NULL;
	ds_sim_reserve_at_unmap = true;
	ds_test_end_linger();
	KUNIT_ASSERT_FALSE(test, ds_sim_reserve_at_unmap);
	left = wait_for_completion_timeout(&ds_sim_reserve_done,
					   msecs_to_jiffies(DS_TEST_RESERVE_DONE_MS));
	KUNIT_ASSERT_NE(test, left, 0);
	flush_work(&ds_sim_reserve_work);
	flush_work(&ds_sim_request_work);

	KUNIT_EXPECT_FALSE(test, ds_sim_reserve_early);
	KUNIT_EXPECT_EQ(test, ds_sim_reserve_result, 0);
	KUNIT_EXPECT_EQ(test, ds_sim_reserve_mapped, 0);
	dt->perf_held = !ds_sim_reserve_result;
	request = ds_test_keep(test, xchg(&ds_sim_request_result, NULL));
	KUNIT_EXPECT_EQ(test, PTR_ERR(request), -EBUSY);
	KUNIT_EXPECT_EQ(test, ds_sim_perf_waiters(), 0);
	KUNIT_EXPECT_EQ(test, ds_bts_fac->state, DS_HW_DOWN);
	KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_ds_area, 0), 0);
}

/*
 * While a reservation waits for a teardown, hardware requests are refused,
 * per task and per CPU, so that the teardown's end goes to perf.
 */
static void ds_test_refused_while_perf_waits(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	long task_err, cpu_err;

	spin_lock(&ds_perf_lock);
	ds_bts_fac->perf_waiters++;
	spin_unlock(&ds_perf_lock);
	task_err = PTR_ERR(ds_test_task(test, &cfg));
	cpu_err = PTR_ERR(ds_test_keep(test, ds_request_bts_cpu(0, &cfg)));
	spin_lock(&ds_perf_lock);
	ds_bts_fac->perf_waiters--;
	spin_unlock(&ds_perf_lock);

	KUNIT_EXPECT_EQ(test, task_err, -EBUSY);
	KUNIT_EXPECT_EQ(test, cpu_err, -EBUSY);
	/* And granted once none waits. */
	KUNIT_EXPECT_FALSE(test, IS_ERR(ds_test_task(test, &cfg)));
}

/* A second reservation is refused: one release would drop both. */
static void ds_test_perf_reserve_twice(struct kunit *test)
{
	struct ds_test *dt = test->priv;

	KUNIT_ASSERT_EQ(test, ds_perf_reserve(DS_BTS), 0);
	dt->perf_held = true;
	KUNIT_EXPECT_EQ(test, ds_perf_reserve(DS_BTS), -EBUSY);
	KUNIT_EXPECT_TRUE(test, ds_perf_holds(DS_BTS));
}

/*
 * Setting up maps every staging buffer without a TLB flush: the slots were
 * not present. Tearing down unmaps them all, flushes once over all of
 * them, and frees the pages only after the flush.
 */
static void ds_test_teardown_flushes_once(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	unsigned long start = ULONG_MAX, end = 0;
	struct ds_tracer *tracer;
	int cpu, staged = 0;
	enum ds_kind kind;

	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_flushes), 0);
	for_each_possible_cpu(cpu) {
		struct ds_cpu *dc = per_cpu_ptr(&ds_cpus, cpu);

		for (kind = 0; kind < DS_NR_KINDS; kind++) {
			if (!dc->stage[kind])
				continue;
			staged++;
			start = min(start, dc->stage_hw[kind]);
			end = max(end, dc->stage_hw[kind] +
				       DS_STAGE_SIZE);
		}
	}
	/* A BTS tracer sets up the BTS half alone. */
	KUNIT_EXPECT_EQ(test, staged, num_possible_cpus());
	ds_test_release(test, tracer);
	ds_test_end_linger();

	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_flushes), 1);
	KUNIT_EXPECT_EQ(test, ds_sim_flush_mapped, 0);
	KUNIT_EXPECT_EQ(test, ds_sim_flush_staged, staged);
	KUNIT_EXPECT_EQ(test, ds_sim_flush_start, start);
	KUNIT_EXPECT_EQ(test, ds_sim_flush_end, end);
}

/* A per-CPU tracer of the allocator first: perf's reservation waits. */
static void ds_test_perf_after_cpu_tracer(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_test *dt = test->priv;
	struct ds_tracer *tracer;

	tracer = ds_test_keep(test, ds_request_bts_cpu(0, &cfg));
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_perf_reserve(DS_BTS), -EBUSY);
	ds_test_release(test, tracer);

	KUNIT_ASSERT_EQ(test, ds_perf_reserve(DS_BTS), 0);
	dt->perf_held = true;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(0, &cfg)), -EBUSY);
}

/* perf's IA32_DS_AREA goes through the allocator's hardware writer. */
static void ds_test_perf_install(struct kunit *test)
{
	struct ds_test *dt = test->priv;
	int cpu = cpumask_first(cpu_online_mask);

	KUNIT_ASSERT_EQ(test, ds_perf_reserve(DS_BTS), 0);
	dt->perf_held = true;
	ds_perf_install(cpu);
	KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_ds_area, cpu),
			(unsigned long)&get_cpu_entry_area(cpu)->cpu_debug_store);
	ds_perf_uninstall(cpu);
	KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_ds_area, cpu), 0);
}

/* perf's BTS bits: added on enable, all five cleared on disable. */
static void ds_test_perf_bts_bits(struct kunit *test)
{
	struct ds_test *dt = test->priv;
	u64 ctl;

	KUNIT_ASSERT_EQ(test, ds_perf_reserve(DS_BTS), 0);
	dt->perf_held = true;
	preempt_disable();
	this_cpu_write(ds_sim_debugctl, DS_SIM_OTHER_BITS);
	ds_perf_bts_enable(true, false, true);
	ctl = this_cpu_read(ds_sim_debugctl);
	ds_perf_bts_disable();
	preempt_enable();
	KUNIT_EXPECT_EQ(test, ctl, DS_SIM_OTHER_BITS | DEBUGCTLMSR_TR |
			DEBUGCTLMSR_BTS | DEBUGCTLMSR_BTINT |
			DEBUGCTLMSR_BTS_OFF_OS);

	preempt_disable();
	ds_perf_bts_enable(false, true, false);
	ctl = this_cpu_read(ds_sim_debugctl);
	ds_perf_bts_disable();
	KUNIT_EXPECT_EQ(test, this_cpu_read(ds_sim_debugctl),
			DS_SIM_OTHER_BITS);
	preempt_enable();
	KUNIT_EXPECT_EQ(test, ctl, DS_SIM_OTHER_BITS | DEBUGCTLMSR_TR |
			DEBUGCTLMSR_BTS | DEBUGCTLMSR_BTS_OFF_USR);
}

/* perf's buffers go into the CEA slots through the allocator's mapper. */
static void ds_test_perf_map(struct kunit *test)
{
	struct ds_test *dt = test->priv;
	struct debug_store_buffers *slots;
	long mapped = atomic_long_read(&ds_sim_mapped);
	void *buf, *cea;

	KUNIT_ASSERT_EQ(test, ds_perf_reserve(DS_BTS), 0);
	dt->perf_held = true;
	KUNIT_ASSERT_EQ(test, ds_perf_reserve(DS_PEBS), 0);
	dt->perf_pebs_held = true;
	buf = (void *)__get_free_page(GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, buf);
	slots = &get_cpu_entry_area(0)->cpu_debug_buffers;

	cea = ds_perf_map_buffer(0, DS_PEBS, buf, PAGE_SIZE);
	KUNIT_EXPECT_PTR_EQ(test, cea, (void *)slots->pebs_buffer);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ds_sim_mapped), mapped + 1);
	ds_perf_unmap_buffer(0, DS_PEBS, PAGE_SIZE);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ds_sim_mapped), mapped);
	/* perf frees the buffer next: flushed, exactly the slot. */
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_flushes), 1);
	KUNIT_EXPECT_EQ(test, ds_sim_flush_start,
			(unsigned long)slots->pebs_buffer);
	KUNIT_EXPECT_EQ(test, ds_sim_flush_end,
			(unsigned long)slots->pebs_buffer + PAGE_SIZE);

	cea = ds_perf_map_buffer(0, DS_BTS, buf, PAGE_SIZE);
	KUNIT_EXPECT_PTR_EQ(test, cea, (void *)slots->bts_buffer);
	ds_perf_unmap_buffer(0, DS_BTS, PAGE_SIZE);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ds_sim_mapped), mapped);
	free_page((unsigned long)buf);
}

/*
 * A buffer that does not fit its slot is refused, with nothing mapped; one
 * that fills the 64 KiB slot exactly is taken.
 */
static void ds_test_perf_map_refused(struct kunit *test)
{
	long mapped = atomic_long_read(&ds_sim_mapped);
	unsigned int order = get_order(SZ_64K);
	struct ds_test *dt = test->priv;
	enum ds_kind kind;
	void *buf;

	KUNIT_ASSERT_EQ(test, ds_perf_reserve(DS_BTS), 0);
	dt->perf_held = true;
	KUNIT_ASSERT_EQ(test, ds_perf_reserve(DS_PEBS), 0);
	dt->perf_pebs_held = true;
	buf = (void *)__get_free_pages(GFP_KERNEL, order + 1);
	KUNIT_ASSERT_NOT_NULL(test, buf);

	for (kind = 0; kind < DS_NR_KINDS; kind++) {
		KUNIT_EXPECT_NULL(test, ds_perf_map_buffer(0, kind, buf,
							   SZ_64K + PAGE_SIZE));
		KUNIT_EXPECT_NULL(test, ds_perf_map_buffer(0, kind, buf + 1,
							   PAGE_SIZE));
		KUNIT_EXPECT_EQ(test, atomic_long_read(&ds_sim_mapped), mapped);

		KUNIT_EXPECT_NOT_NULL(test, ds_perf_map_buffer(0, kind, buf,
							       SZ_64K));
		KUNIT_EXPECT_EQ(test, atomic_long_read(&ds_sim_mapped),
				mapped + SZ_64K / PAGE_SIZE);
		ds_perf_unmap_buffer(0, kind, SZ_64K);
		KUNIT_EXPECT_EQ(test, atomic_long_read(&ds_sim_mapped), mapped);
	}
	free_pages((unsigned long)buf, order + 1);
}

/*
 * With PTI on, the user page tables map @addr as the kernel's do. Those map
 * it on Intel CPUs, the only ones percpu_setup_debug_store() sets up.
 */
static void ds_test_expect_user_mapped(struct kunit *test, int cpu,
				       unsigned long addr)
{
#ifdef CONFIG_MITIGATION_PAGE_TABLE_ISOLATION
	pgd_t *kpgd = pgd_offset_k(addr);
	pte_t *kpte, *upte;
	unsigned int level;

	if (!boot_cpu_has(X86_FEATURE_PTI))
		return;
	kpte = lookup_address_in_pgd(kpgd, addr, &level);
	upte = lookup_address_in_pgd(kernel_to_user_pgdp(kpgd), addr, &level);
	KUNIT_ASSERT_NOT_NULL(test, kpte);
	KUNIT_ASSERT_NOT_NULL_MSG(test, upte, "CPU %d", cpu);
	if (boot_cpu_data.x86_vendor == X86_VENDOR_INTEL)
		KUNIT_EXPECT_TRUE_MSG(test, pte_present(*kpte), "CPU %d", cpu);
	KUNIT_EXPECT_EQ_MSG(test, pte_present(*upte), pte_present(*kpte),
			    "CPU %d", cpu);
	if (pte_present(*kpte))
		KUNIT_EXPECT_EQ_MSG(test, pte_pfn(*upte), pte_pfn(*kpte),
				    "CPU %d", cpu);
#endif
}

/*
 * perf's save area is each CPU's cpu_entry_area alias of cpu_debug_store
 * (Documentation/arch/x86/debug-store.rst), the address the CPU can store
 * through while the user page tables are loaded.
 */
static void ds_test_perf_area(struct kunit *test)
{
	struct debug_store *area;
	int cpu;

	for_each_possible_cpu(cpu) {
		area = ds_perf_area(cpu);
		KUNIT_EXPECT_PTR_EQ(test, area,
				    &get_cpu_entry_area(cpu)->cpu_debug_store);
		ds_test_expect_user_mapped(test, cpu, (unsigned long)area);
	}
}

static void ds_test_restore_ipi(void *area)
{
	ds_perf_restore(area);
}

/*
 * After resume perf loads its save area into IA32_DS_AREA again only while
 * it has it installed; it never clears the MSR there, which may be the
 * allocator's, with the same area.
 */
static void ds_test_perf_restore(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	int cpu = cpumask_last(cpu_online_mask);
	struct debug_store *area = ds_perf_area(cpu);
	struct ds_test *dt = test->priv;
	struct ds_tracer *tracer;

	/* Nobody's: it stays clear. */
	smp_call_function_single(cpu, ds_test_restore_ipi, area, 1);
	KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_ds_area, cpu), 0);

	/* The allocator's: perf may not clear it. */
	tracer = ds_test_keep(test, ds_request_bts_cpu(cpu, &cfg));
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_ASSERT_EQ(test, per_cpu(ds_sim_ds_area, cpu),
			(unsigned long)area);
	smp_call_function_single(cpu, ds_test_restore_ipi, NULL, 1);
	KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_ds_area, cpu),
			(unsigned long)area);
	ds_test_release(test, tracer);
	ds_test_end_linger();
	KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_ds_area, cpu), 0);

	/* perf's: the power cycle lost it, perf loads it again. */
	KUNIT_ASSERT_EQ(test, ds_perf_reserve(DS_BTS), 0);
	dt->perf_held = true;
	ds_perf_install(cpu);
	per_cpu(ds_sim_ds_area, cpu) = 0;
	smp_call_function_single(cpu, ds_test_restore_ipi, area, 1);
	KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_ds_area, cpu),
			(unsigned long)area);
	ds_perf_uninstall(cpu);
	KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_ds_area, cpu), 0);
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

/*
 * The boot CPU through a suspend: the syscore ops run on it with interrupts
 * disabled, and the power cycle in between clears IA32_DS_AREA and our
 * DEBUGCTL bits. Tracing must go on where it stopped, from the published
 * state, not from the shadow of what was written before.
 */
static void ds_test_syscore_suspend(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	unsigned long area_suspended, area_resumed;
	u64 ctl_suspended, ctl_resumed, want;
	u32 lvtpc_suspended, lvtpc_resumed;
	struct ds_tracer *tracer;
	struct ds_cpu *dc;
	int cpu, stored;

	migrate_disable();
	cpu = smp_processor_id();
	dc = per_cpu_ptr(&ds_cpus, cpu);
	tracer = ds_test_keep(test, ds_request_bts_cpu(cpu, &cfg));
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	want = ds_bts_bits(tracer);
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 0, 1), 1);

	local_irq_disable();
	KUNIT_EXPECT_EQ(test, ds_syscore_suspend(NULL), 0);
	area_suspended = this_cpu_read(ds_sim_ds_area);
	ctl_suspended = this_cpu_read(ds_sim_debugctl);
	lvtpc_suspended = this_cpu_read(ds_sim_lvtpc);
	/* The power cycle; the kernel puts back the bits it owns. */
	this_cpu_write(ds_sim_ds_area, 0);
	this_cpu_write(ds_sim_debugctl, DS_SIM_OTHER_BITS);
	ds_syscore_resume(NULL);
	area_resumed = this_cpu_read(ds_sim_ds_area);
	ctl_resumed = this_cpu_read(ds_sim_debugctl);
	lvtpc_resumed = this_cpu_read(ds_sim_lvtpc);
	local_irq_enable();

	/* Suspend gave LVTPC back for lapic_suspend() to save. */
	KUNIT_EXPECT_EQ(test, lvtpc_suspended, DS_SIM_LVTPC_BEFORE);
	KUNIT_EXPECT_EQ(test, lvtpc_resumed, DS_SIM_LVTPC_NMI);

	KUNIT_EXPECT_EQ(test, area_suspended, 0);
	KUNIT_EXPECT_EQ(test, ctl_suspended, DS_SIM_OTHER_BITS);
	KUNIT_EXPECT_EQ(test, area_resumed, dc->area_hw);
	KUNIT_EXPECT_EQ(test, ctl_resumed, DS_SIM_OTHER_BITS | want);
	stored = ds_sim_run(tracer, 1, 1);
	migrate_enable();
	KUNIT_EXPECT_EQ(test, stored, 1);
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).count, 2);
	ds_test_expect_branch(test, tracer, 0, 0);
	ds_test_expect_branch(test, tracer, 1, 1);
}

/* The power cycle: IA32_DS_AREA and our DEBUGCTL bits are gone. */
static void ds_test_power_cycle(void)
{
	this_cpu_write(ds_sim_ds_area, 0);
	this_cpu_write(ds_sim_debugctl, DS_SIM_OTHER_BITS);
}

/*
 * Stay on this CPU (migration off until the case enables it) with a
 * per-CPU tracer of it, as the syscore ops find the boot CPU; NULL if the
 * request failed.
 */
static struct ds_cpu *ds_test_pin_cpu_tracer(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer;

	migrate_disable();
	tracer = ds_test_keep(test, ds_request_bts_cpu(smp_processor_id(),
						       &cfg));
	if (IS_ERR(tracer)) {
		migrate_enable();
		KUNIT_FAIL(test, "request: %ld", PTR_ERR(tracer));
		return NULL;
	}
	return this_cpu_ptr(&ds_cpus);
}

/*
 * The syscore ops run without the CPU hotplug lock: a teardown may have
 * cleared the BTS half's @active and not yet sent its IPI when the boot CPU
 * suspends. Suspend, resume and the late IPI must leave the CPU disarmed
 * with LVTPC as it was before the allocator's arming.
 */
static void ds_test_syscore_during_teardown(struct kunit *test)
{
	unsigned long area;
	struct ds_cpu *dc;
	bool armed;
	u32 lvtpc;

	dc = ds_test_pin_cpu_tracer(test);
	if (!dc)
		return;
	local_irq_disable();
	WRITE_ONCE(ds_bts_fac->active, false);
	ds_syscore_suspend(NULL);
	ds_test_power_cycle();
	ds_syscore_resume(NULL);
	ds_cpu_deactivate_ipi(ds_bts_fac);
	armed = !!dc->kinds;
	lvtpc = this_cpu_read(ds_sim_lvtpc);
	area = this_cpu_read(ds_sim_ds_area);
	/* No teardown came after all: the tracer is still there. */
	WRITE_ONCE(ds_bts_fac->active, true);
	ds_cpu_activate_ipi(ds_bts_fac);
	local_irq_enable();
	migrate_enable();

	KUNIT_EXPECT_FALSE(test, armed);
	KUNIT_EXPECT_EQ(test, lvtpc, DS_SIM_LVTPC_BEFORE);
	KUNIT_EXPECT_EQ(test, area, 0);
}

/*
 * The mirror: a setup set the half's @active, and the boot CPU suspends before
 * its arm IPI comes. Resume must leave the arming to the IPI, which then
 * saves the real LVTPC for the disarm to restore.
 */
static void ds_test_syscore_during_setup(struct kunit *test)
{
	bool armed_at_resume, armed;
	u32 lvtpc_at_resume, lvtpc;
	struct ds_cpu *dc;

	dc = ds_test_pin_cpu_tracer(test);
	if (!dc)
		return;
	local_irq_disable();
	/* The arm IPI has not come yet. */
	ds_cpu_deactivate_ipi(ds_bts_fac);
	ds_syscore_suspend(NULL);
	ds_test_power_cycle();
	ds_syscore_resume(NULL);
	armed_at_resume = !!dc->kinds;
	lvtpc_at_resume = this_cpu_read(ds_sim_lvtpc);
	ds_cpu_activate_ipi(ds_bts_fac);
	armed = !!dc->kinds;
	lvtpc = this_cpu_read(ds_sim_lvtpc);
	local_irq_enable();
	migrate_enable();

	KUNIT_EXPECT_FALSE(test, armed_at_resume);
	KUNIT_EXPECT_EQ(test, lvtpc_at_resume, DS_SIM_LVTPC_BEFORE);
	KUNIT_EXPECT_TRUE(test, armed);
	KUNIT_EXPECT_EQ(test, lvtpc, DS_SIM_LVTPC_NMI);
	/* ds_test_exit() releases it and expects LVTPC as before. */
}

/* Each CPU as a reboot finds it: the hardware halves it uses left. */
static void ds_test_expect_disarmed(struct kunit *test)
{
	int cpu;

	for_each_online_cpu(cpu) {
		KUNIT_EXPECT_EQ(test, per_cpu(ds_cpus, cpu).kinds, 0);
		KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_ds_area, cpu), 0);
		KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_debugctl, cpu),
				DS_SIM_OTHER_BITS);
		KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_lvtpc, cpu),
				DS_SIM_LVTPC_BEFORE);
	}
}

/*
 * A reboot or kexec with a tracer recording: the notifier leaves every
 * CPU's halves, IA32_DS_AREA cleared, the BTS bits off and LVTPC as before,
 * while the tracer still exists. Then nothing arms a CPU again: a CPU
 * coming online, a setup's IPI, a new hardware request (refused), the
 * syscore shutdown on the CPU that goes on.
 */
static void ds_test_reboot_halts(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer;
	unsigned int other;
	struct ds_cpu *dc;
	int cpu;

	dc = ds_test_pin_cpu_tracer(test);
	if (!dc)
		return;
	cpu = smp_processor_id();
	KUNIT_EXPECT_EQ(test, this_cpu_read(ds_sim_ds_area), dc->area_hw);
	KUNIT_EXPECT_NE(test, this_cpu_read(ds_sim_debugctl),
			DS_SIM_OTHER_BITS);

	KUNIT_EXPECT_EQ(test, ds_reboot_notify(NULL, SYS_RESTART, NULL),
			NOTIFY_DONE);
	ds_test_expect_disarmed(test);

	ds_cpu_online(cpu);
	smp_call_function_single(cpumask_last(cpu_online_mask),
				 ds_cpu_activate_ipi, ds_bts_fac, 1);
	/* Free otherwise: a CPU tracer of another CPU, or a task's. */
	other = cpumask_any_but(cpu_online_mask, cpu);
	if (other < nr_cpu_ids)
		tracer = ds_request_bts_cpu(other, &cfg);
	else
		tracer = ds_request_bts_task(current, &cfg);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(tracer), -EBUSY);
	if (!IS_ERR(tracer))
		ds_release(tracer);
	ds_test_expect_disarmed(test);

	WRITE_ONCE(ds_halted, false);
	on_each_cpu(ds_test_unhalt_cpu, NULL, 1);
	migrate_enable();
	/* ds_test_exit() releases the tracer and expects every CPU idle. */
}

/*
 * The syscore shutdown on the CPU that goes on, alone: it leaves this
 * CPU's halves and marks the allocator halted; the other CPUs are the
 * reboot notifier's (and are stopped next).
 */
static void ds_test_syscore_shutdown(struct kunit *test)
{
	unsigned long area, other_area = 0;
	struct ds_cpu *dc;
	u64 ctl, want;
	int cpu, other;
	bool halted;
	u32 lvtpc;

	dc = ds_test_pin_cpu_tracer(test);
	if (!dc)
		return;
	cpu = smp_processor_id();
	want = ds_bts_bits(rcu_dereference_raw(dc->cpu_tracer[DS_BTS]));
	KUNIT_EXPECT_EQ(test, this_cpu_read(ds_sim_debugctl),
			DS_SIM_OTHER_BITS | want);
	ds_syscore_shutdown(NULL);
	area = this_cpu_read(ds_sim_ds_area);
	ctl = this_cpu_read(ds_sim_debugctl);
	lvtpc = this_cpu_read(ds_sim_lvtpc);
	halted = READ_ONCE(ds_halted);
	other = cpumask_any_but(cpu_online_mask, cpu);
	if (other < nr_cpu_ids)
		other_area = per_cpu(ds_sim_ds_area, other);

	WRITE_ONCE(ds_halted, false);
	on_each_cpu(ds_test_unhalt_cpu, NULL, 1);
	migrate_enable();

	KUNIT_EXPECT_TRUE(test, halted);
	KUNIT_EXPECT_EQ(test, area, 0);
	KUNIT_EXPECT_EQ(test, ctl, DS_SIM_OTHER_BITS);
	KUNIT_EXPECT_EQ(test, lvtpc, DS_SIM_LVTPC_BEFORE);
	if (other < nr_cpu_ids)
		KUNIT_EXPECT_EQ(test, other_area,
				per_cpu(ds_cpus, other).area_hw);
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

static int ds_test_never_runs(void *unused)
{
	return 0;
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

/* --- geometry --- */

struct ds_test_reader {
	struct ds_tracer	*tracer;
	struct ds_geometry	geom;
	int			err;
	struct completion	done;
};

static int ds_test_read_geometry(void *arg)
{
	struct ds_test_reader *r = arg;

	r->err = ds_get_geometry(r->tracer, &r->geom);
	complete(&r->done);
	return 0;
}

/*
 * The geometry of a task that is not running needs no global lock: read
 * while this case holds ds_mutex, it still comes. A tracer reading a
 * stopped tracee record by record asks for it at every record.
 */
static void ds_test_geometry_unlocked(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_test_reader r = { };
	struct task_struct *sleeper, *reader;
	unsigned long done;

	sleeper = kthread_create(ds_test_never_runs, NULL, "ds_test_sleeper");
	KUNIT_ASSERT_FALSE(test, IS_ERR(sleeper));
	get_task_struct(sleeper);
	KUNIT_EXPECT_NE(test, wait_task_inactive(sleeper, TASK_UNINTERRUPTIBLE),
			0);
	r.tracer = ds_test_keep(test, ds_request_bts_task(sleeper, &cfg));
	init_completion(&r.done);
	if (IS_ERR(r.tracer)) {
		KUNIT_FAIL(test, "request: %ld", PTR_ERR(r.tracer));
		goto stop;
	}

	mutex_lock(&ds_mutex);
	reader = kthread_run(ds_test_read_geometry, &r, "ds_test_reader");
	done = IS_ERR(reader) ? 0 : wait_for_completion_timeout(&r.done, HZ);
	mutex_unlock(&ds_mutex);
	if (!IS_ERR(reader) && !done)
		wait_for_completion(&r.done);

	KUNIT_EXPECT_FALSE(test, IS_ERR(reader));
	KUNIT_EXPECT_NE(test, done, 0);
	KUNIT_EXPECT_EQ(test, r.err, 0);
	KUNIT_EXPECT_EQ(test, r.geom.backend, DS_BACKEND_HARDWARE);
	KUNIT_EXPECT_EQ(test, r.geom.status, 0);
	ds_test_release(test, r.tracer);
stop:
	kthread_stop(sleeper);
	put_task_struct(sleeper);
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

/*
 * The real mapping of a staging buffer, which the simulated CPU replaces:
 * its pages come from vmalloc() one by one, and each must appear at its
 * offset in the cpu_entry_area slot, where the CPU stores through. Any
 * online CPU's slot will do while nothing uses the Debug Store.
 */
static void ds_test_msr_map_vmalloc(struct kunit *test)
{
	int cpu = cpumask_first(cpu_online_mask);
	struct debug_store_buffers *slots;
	size_t off, bad = 0;
	u8 *buf, *cea;

	buf = vmalloc(DS_STAGE_SIZE);
	KUNIT_ASSERT_NOT_NULL(test, buf);
	for (off = 0; off < DS_STAGE_SIZE; off++)
		buf[off] = off / PAGE_SIZE + 1;
	slots = &get_cpu_entry_area(cpu)->cpu_debug_buffers;
	cea = (u8 *)slots->bts_buffer;
	ds_msr_map(cea, buf, DS_STAGE_SIZE);
	for (off = 0; off < DS_STAGE_SIZE; off += PAGE_SIZE) {
		if (slow_virt_to_phys(cea + off) !=
		    page_to_phys(vmalloc_to_page(buf + off)) ||
		    memcmp(cea + off, buf + off, PAGE_SIZE))
			bad++;
	}
	ds_msr_unmap(cea, DS_STAGE_SIZE);
	ds_msr_flush((unsigned long)cea, (unsigned long)cea + DS_STAGE_SIZE);
	vfree(buf);
	KUNIT_EXPECT_EQ(test, bad, 0);
}

static void ds_test_hw_geometry(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	struct ds_area_part *bts;
	struct cpu_entry_area *cea;
	struct ds_cpu *dc;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	migrate_disable();
	dc = this_cpu_ptr(&ds_cpus);
	cea = get_cpu_entry_area(smp_processor_id());
	bts = ds_part(dc->area, DS_BTS);
	KUNIT_EXPECT_EQ(test, dc->stage_cap[DS_BTS], DS_TEST_STAGE_RECORDS);
	/* The CPU stores into the cpu_entry_area slot, also under PTI. */
	KUNIT_EXPECT_EQ(test, bts->base,
			(u64)(unsigned long)cea->cpu_debug_buffers.bts_buffer);
	KUNIT_EXPECT_EQ(test, bts->index, bts->base);
	KUNIT_EXPECT_EQ(test, bts->absmax, bts->base + DS_TEST_STAGE_BYTES);
	KUNIT_EXPECT_EQ(test, bts->threshold,
			bts->base + DS_TEST_STAGE_IRQ_AT * DS_BTS_RECORD_SIZE);
	KUNIT_EXPECT_EQ(test, this_cpu_read(ds_sim_ds_area),
			(unsigned long)&cea->cpu_debug_store);
	migrate_enable();
	KUNIT_EXPECT_GT(test, atomic_long_read(&ds_sim_mapped), 0);
}

/* --- wrap-around and reading --- */

static void ds_test_wrap_order(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(8 * DS_BTS_RECORD_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	struct ds_geometry geom;
	int i;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 0, 20), 20);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.count, 8);
	KUNIT_EXPECT_EQ(test, geom.lost, 12);
	KUNIT_EXPECT_EQ(test, geom.index, 20 % 8);
	for (i = 0; i < 8; i++)
		ds_test_expect_branch(test, tracer, i, 12 + i);
	KUNIT_EXPECT_EQ(test, ds_read_record(tracer, 8, &geom, sizeof(geom)),
			-EINVAL);
}

/* Batches of records across the wrap, clamped to the count and the size. */
static void ds_test_read_records(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(8 * DS_BTS_RECORD_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	struct ds_bts_record recs[10];
	int i;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 0, 13), 13);
	/* Collected by the geometry, as every reader does first. */
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).count, 8);
	memset(recs, 0, sizeof(recs));
	/* Records 5..12 sit at slots 5..7, then 0..4. */
	KUNIT_EXPECT_EQ(test, ds_read_records(tracer, 0, recs, sizeof(recs)),
			8);
	for (i = 0; i < 8; i++)
		KUNIT_EXPECT_EQ(test, recs[i].from, DS_TEST_FROM + 5 + i);
	KUNIT_EXPECT_EQ(test, recs[8].from, 0);
	KUNIT_EXPECT_EQ(test, ds_read_records(tracer, 2, recs,
					      2 * sizeof(recs[0]) + 1), 2);
	KUNIT_EXPECT_EQ(test, recs[0].from, DS_TEST_FROM + 7);
	KUNIT_EXPECT_EQ(test, recs[1].from, DS_TEST_FROM + 8);
	KUNIT_EXPECT_EQ(test, ds_read_records(tracer, 7, recs, sizeof(recs)),
			1);
	KUNIT_EXPECT_EQ(test, recs[0].from, DS_TEST_FROM + 12);
	KUNIT_EXPECT_EQ(test, ds_read_records(tracer, 8, recs, sizeof(recs)),
			0);
	KUNIT_EXPECT_EQ(test, ds_read_records(tracer, 0, recs,
					      sizeof(recs[0]) - 1), -EINVAL);
}

static void ds_test_caller_buffer(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(4 * DS_BTS_RECORD_SIZE);
	struct ds_bts_record *buf;
	struct ds_tracer *tracer;
	struct mm_struct *mm;

	buf = kunit_kzalloc(test, cfg.size, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, buf);
	cfg.buffer = buf;
	ds_test_use_mm(test, &mm);
	tracer = ds_test_task(test, &cfg);
	KUNIT_EXPECT_EQ(test, atomic64_read(&mm->pinned_vm), 0);
	ds_test_unuse_mm(mm);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 0, 2), 2);
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).count, 2);
	KUNIT_EXPECT_EQ(test, buf[1].from, DS_TEST_FROM + 1);
}

static void ds_test_clear(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	struct ds_geometry geom;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	ds_sim_run(tracer, 0, 5);
	KUNIT_EXPECT_EQ(test, ds_clear(tracer), 0);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.count, 0);
	KUNIT_EXPECT_EQ(test, geom.lost, 0);
	ds_sim_run(tracer, 100, 2);
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).count, 2);
	ds_test_expect_branch(test, tracer, 0, 100);
}

/* --- notification --- */

static struct ds_tracer *ds_test_notifier(struct kunit *test, size_t records,
					  size_t threshold)
{
	struct ds_config cfg = ds_test_cfg(records * DS_BTS_RECORD_SIZE);

	cfg.overflow = DS_OVERFLOW_NOTIFY;
	cfg.threshold = threshold;
	cfg.notify = ds_test_notify;
	cfg.cookie = test->priv;
	return ds_test_task(test, &cfg);
}

static void ds_test_notify_pause_resume(struct kunit *test)
{
	struct ds_tracer *tracer = ds_test_notifier(test, 8, 4);
	struct ds_test *dt = test->priv;
	struct ds_geometry geom;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 0, 3), 3);
	KUNIT_EXPECT_EQ(test, dt->notified, 0);
	/* The fourth record reaches the threshold: PMI, collect, notify. */
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 3, 1), 1);
	KUNIT_EXPECT_EQ(test, dt->notified, 1);
	KUNIT_EXPECT_PTR_EQ(test, dt->cookie, (void *)dt);
	KUNIT_EXPECT_FALSE(test, ds_tracer_recording(tracer));
	/* Paused: the hardware stores nothing. */
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 4, 3), 0);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.count, 4);
	KUNIT_EXPECT_EQ(test, geom.threshold, 4);
	KUNIT_EXPECT_EQ(test, geom.status, DS_STATUS_PAUSED);

	KUNIT_EXPECT_EQ(test, ds_resume(tracer), 0);
	KUNIT_EXPECT_TRUE(test, ds_tracer_recording(tracer));
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 10, 2), 2);
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).count, 6);
	ds_test_expect_branch(test, tracer, 5, 11);
}

static void ds_test_notify_clear(struct kunit *test)
{
	struct ds_tracer *tracer = ds_test_notifier(test, 4, 0);
	struct ds_test *dt = test->priv;
	struct ds_geometry geom;
	unsigned long flags;
	int i;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	/* Records beyond the PMI land before it is handled: skid. */
	local_irq_save(flags);
	ds_sim_skid = true;
	for (i = 0; i < 6; i++)
		ds_sim_branch(DS_TEST_FROM + i,
			      DS_TEST_FROM + i + DS_TEST_TO_OFFSET, true);
	ds_sim_skid = false;
	ds_sim_pmi();
	local_irq_restore(flags);
	ds_sim_settle(tracer);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.count, 4);
	KUNIT_EXPECT_EQ(test, geom.lost, 2);
	KUNIT_EXPECT_EQ(test, dt->notified, 1);
	ds_test_expect_branch(test, tracer, 3, 3);

	KUNIT_EXPECT_EQ(test, ds_clear(tracer), 0);
	KUNIT_EXPECT_TRUE(test, ds_tracer_recording(tracer));
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 20, 1), 1);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.count, 1);
	KUNIT_EXPECT_EQ(test, geom.lost, 0);
}

/* --- suspend and resume --- */

static void ds_test_suspend_resume(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	struct ds_geometry geom;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 0, 3), 3);
	KUNIT_EXPECT_EQ(test, ds_suspend(tracer), 0);
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 3, 5), 0);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.index, 3);
	KUNIT_EXPECT_EQ(test, geom.status, DS_STATUS_SUSPENDED);
	KUNIT_EXPECT_EQ(test, ds_resume(tracer), 0);
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 8, 2), 2);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.index, 5);
	KUNIT_EXPECT_EQ(test, geom.status, 0);
	ds_test_expect_branch(test, tracer, 3, 8);
}

/*
 * ds_suspend_atomic() from interrupts-off context: the hardware of this
 * CPU and the emulation stop at once, with no IPI and no sleep.
 */
static void ds_test_suspend_atomic(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *hw, *emu;
	u64 ctl_suspended, ctl_resumed;
	bool emu_recording;

	migrate_disable();
	hw = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(hw));
	local_irq_disable();
	ds_suspend_atomic(hw);
	ctl_suspended = this_cpu_read(ds_sim_debugctl);
	ds_resume_atomic(hw);
	ctl_resumed = this_cpu_read(ds_sim_debugctl);
	local_irq_enable();
	migrate_enable();
	KUNIT_EXPECT_EQ(test, ctl_suspended, DS_SIM_OTHER_BITS);
	KUNIT_EXPECT_EQ(test, ctl_resumed, DS_SIM_OTHER_BITS | ds_bts_bits(hw));
	KUNIT_EXPECT_NE(test, ds_bts_bits(hw), 0);
	ds_test_release(test, hw);

	KUNIT_ASSERT_EQ(test, ds_register_backend(&ds_fake_backend), 0);
	cfg.backend = DS_BACKEND_EMULATED;
	emu = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(emu));
	KUNIT_EXPECT_TRUE(test, ds_emulated_recording(current));
	local_irq_disable();
	ds_suspend_atomic(emu);
	emu_recording = ds_emulated_recording(current);
	local_irq_enable();
	KUNIT_EXPECT_FALSE(test, emu_recording);
	KUNIT_EXPECT_EQ(test, ds_emulated_write_bts(current, 1, 2), -ENOSPC);
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, emu).status,
			DS_STATUS_SUSPENDED);
	ds_resume_atomic(emu);
	KUNIT_EXPECT_EQ(test, ds_emulated_write_bts(current, 1, 2), 0);
}

/* --- locked memory --- */

static void ds_test_use_mm(struct kunit *test, struct mm_struct **mmp)
{
	struct mm_struct *mm = mm_alloc();

	KUNIT_ASSERT_NOT_NULL(test, mm);
	kthread_use_mm(mm);
	*mmp = mm;
}

static void ds_test_unuse_mm(struct mm_struct *mm)
{
	kthread_unuse_mm(mm);
	mmput(mm);
}

static void ds_test_memlock_charge(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(16 * PAGE_SIZE);
	unsigned long pages = PFN_UP(cfg.size / DS_BTS_RECORD_SIZE *
				     DS_BTS_RECORD_SIZE);
	struct ds_test *dt = test->priv;
	struct ds_tracer *tracer;
	struct mm_struct *mm;

	ds_test_use_mm(test, &mm);
	tracer = ds_test_task(test, &cfg);
	KUNIT_EXPECT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, atomic64_read(&mm->pinned_vm), pages);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&current_user()->locked_vm),
			dt->user_locked + pages);
	ds_test_release(test, tracer);
	KUNIT_EXPECT_EQ(test, atomic64_read(&mm->pinned_vm), 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&current_user()->locked_vm),
			dt->user_locked);
	ds_test_unuse_mm(mm);
}

/*
 * The budget is the user's: a new address space (an exec, a forked
 * tracer) brings no new one.
 */
static void ds_test_memlock_per_user(struct kunit *test)
{
	struct rlimit *rlim = &current->signal->rlim[RLIMIT_MEMLOCK];
	struct ds_config cfg = ds_test_cfg(16 * PAGE_SIZE);
	struct ds_test *dt = test->priv;
	struct rlimit saved = *rlim;
	struct mm_struct *mm, *other;
	struct ds_tracer *tracer;
	const struct cred *old;
	struct cred *cred;

	cred = prepare_creds();
	KUNIT_ASSERT_NOT_NULL(test, cred);
	cap_lower(cred->cap_effective, CAP_IPC_LOCK);
	rlim->rlim_cur = dt->user_locked * PAGE_SIZE + 24 * PAGE_SIZE;
	old = override_creds(cred);

	ds_test_use_mm(test, &mm);
	tracer = ds_test_task(test, &cfg);
	KUNIT_EXPECT_FALSE(test, IS_ERR(tracer));
	ds_test_unuse_mm(mm);
	ds_test_use_mm(test, &other);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -ENOMEM);
	KUNIT_EXPECT_EQ(test, atomic64_read(&other->pinned_vm), 0);
	ds_test_release(test, tracer);
	tracer = ds_test_task(test, &cfg);
	KUNIT_EXPECT_FALSE(test, IS_ERR(tracer));
	ds_test_release(test, tracer);
	ds_test_unuse_mm(other);

	revert_creds(old);
	put_cred(cred);
	*rlim = saved;
}

static void ds_test_memlock_limit(struct kunit *test)
{
	struct rlimit *rlim = &current->signal->rlim[RLIMIT_MEMLOCK];
	struct ds_config cfg = ds_test_cfg(16 * PAGE_SIZE);
	const struct cred *old;
	struct rlimit saved = *rlim;
	struct ds_tracer *tracer;
	struct mm_struct *mm;
	struct cred *cred;

	cred = prepare_creds();
	KUNIT_ASSERT_NOT_NULL(test, cred);
	cap_lower(cred->cap_effective, CAP_IPC_LOCK);
	ds_test_use_mm(test, &mm);
	rlim->rlim_cur = PAGE_SIZE;

	old = override_creds(cred);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -ENOMEM);
	KUNIT_EXPECT_EQ(test, atomic64_read(&mm->pinned_vm), 0);
	revert_creds(old);
	/* CAP_IPC_LOCK lifts the limit. */
	tracer = ds_test_task(test, &cfg);
	KUNIT_EXPECT_FALSE(test, IS_ERR(tracer));
	ds_test_release(test, tracer);

	*rlim = saved;
	put_cred(cred);
	ds_test_unuse_mm(mm);
}

static void *ds_test_alloc_fails(size_t size, gfp_t gfp)
{
	return NULL;
}

static gfp_t ds_test_alloc_gfp;

static void *ds_test_alloc_notes_gfp(size_t size, gfp_t gfp)
{
	ds_test_alloc_gfp = gfp;
	return vzalloc(size);
}

/*
 * A task's buffer is charged to its requester's memory cgroup; a CPU's
 * serves a kernel client, and no process's cgroup pays for it.
 */
static void ds_test_buffer_memcg(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *task, *cpu;
	gfp_t task_gfp, cpu_gfp;

	kunit_activate_static_stub(test, ds_buffer_alloc,
				   ds_test_alloc_notes_gfp);
	task = ds_test_task(test, &cfg);
	task_gfp = ds_test_alloc_gfp;
	ds_test_release(test, task);
	cpu = ds_test_keep(test, ds_request_bts_cpu(0, &cfg));
	cpu_gfp = ds_test_alloc_gfp;
	kunit_deactivate_static_stub(test, ds_buffer_alloc);
	KUNIT_ASSERT_FALSE(test, IS_ERR(task));
	KUNIT_ASSERT_FALSE(test, IS_ERR(cpu));
	KUNIT_EXPECT_TRUE(test, task_gfp & __GFP_ACCOUNT);
	KUNIT_EXPECT_FALSE(test, cpu_gfp & __GFP_ACCOUNT);
}

static void ds_test_memlock_failed_alloc(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(16 * PAGE_SIZE);
	struct mm_struct *mm;

	ds_test_use_mm(test, &mm);
	kunit_activate_static_stub(test, ds_buffer_alloc, ds_test_alloc_fails);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -ENOMEM);
	kunit_deactivate_static_stub(test, ds_buffer_alloc);
	KUNIT_EXPECT_EQ(test, atomic64_read(&mm->pinned_vm), 0);
	ds_test_unuse_mm(mm);
}

/* Staging allocations that ran with the CPU hotplug lock held. */
static int ds_test_stage_locked_allocs;

/* The last possible CPU's staging buffer cannot be had; the others can. */
static int ds_test_stage_alloc_fails(int cpu, enum ds_kind kind)
{
	if (IS_ENABLED(CONFIG_LOCKDEP) && lockdep_is_cpus_held())
		ds_test_stage_locked_allocs++;
	if (cpu == cpumask_last(cpu_possible_mask))
		return -ENOMEM;
	kunit_deactivate_static_stub(kunit_get_current_test(), ds_stage_alloc);
	cpu = ds_stage_alloc(cpu, kind);
	kunit_activate_static_stub(kunit_get_current_test(), ds_stage_alloc,
				   ds_test_stage_alloc_fails);
	return cpu;
}

/*
 * No memory for a staging buffer: a request for the hardware fails with
 * -ENOMEM, having mapped nothing and freed what it had; one for any
 * backend gets the emulation; nothing of the hardware is left set up. The
 * pages are allocated before the CPU hotplug lock is taken: reclaim does
 * not hold up CPU hotplug.
 */
static void ds_test_stage_nomem_falls_back(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer;
	int cpu;

	KUNIT_ASSERT_EQ(test, ds_register_backend(&ds_fake_backend), 0);
	ds_test_stage_locked_allocs = 0;
	kunit_activate_static_stub(test, ds_stage_alloc,
				   ds_test_stage_alloc_fails);
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -ENOMEM);
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_maps), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_flushes), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_slot_misuses), 0);
	for_each_possible_cpu(cpu)
		KUNIT_EXPECT_NULL(test, per_cpu(ds_cpus, cpu).stage[DS_BTS]);
	cfg.backend = DS_BACKEND_AUTO;
	tracer = ds_test_task(test, &cfg);
	kunit_deactivate_static_stub(test, ds_stage_alloc);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).backend,
			DS_BACKEND_EMULATED);
	KUNIT_EXPECT_EQ(test, READ_ONCE(ds_bts_fac->state), DS_HW_DOWN);
	KUNIT_EXPECT_FALSE(test, ds_bts_fac->active);
	KUNIT_EXPECT_EQ(test, ds_test_stage_locked_allocs, 0);
}

/* perf takes the BTS half and gives it back while a request is on. */
static int ds_test_exclusive_perf_cycle(enum ds_kind kind)
{
	if (kind == DS_BTS && !ds_perf_reserve(DS_BTS))
		ds_perf_release(DS_BTS);
	return 0;
}

static void ds_test_exclusive_none(enum ds_kind kind)
{
}

/*
 * A request that finds the hardware lingering prepares no staging pages.
 * If perf tears the linger down and gives the half back before the setup,
 * the setup allocates them itself rather than fail with -ENOMEM.
 */
static void ds_test_stage_after_perf_cycle(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer;

	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	ds_test_release(test, tracer);
	KUNIT_ASSERT_EQ(test, READ_ONCE(ds_bts_fac->state), DS_HW_UP);
	kunit_activate_static_stub(test, ds_hw_exclusive_get,
				   ds_test_exclusive_perf_cycle);
	kunit_activate_static_stub(test, ds_hw_exclusive_put,
				   ds_test_exclusive_none);
	tracer = ds_test_keep(test, ds_request_bts_cpu(0, &cfg));
	kunit_deactivate_static_stub(test, ds_hw_exclusive_get);
	KUNIT_EXPECT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_TRUE(test, ds_bts_fac->active);
	ds_test_release(test, tracer);
	kunit_deactivate_static_stub(test, ds_hw_exclusive_put);
}

static void ds_test_memlock_mm_gone(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(4 * PAGE_SIZE);
	struct ds_tracer *tracer;
	struct mm_struct *mm;

	ds_test_use_mm(test, &mm);
	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	/* The requester's address space goes away before the release. */
	mmgrab(mm);
	ds_test_unuse_mm(mm);
	KUNIT_EXPECT_EQ(test, atomic_read(&mm->mm_users), 0);
	KUNIT_EXPECT_GT(test, atomic64_read(&mm->pinned_vm), 0);
	ds_test_release(test, tracer);
	KUNIT_EXPECT_EQ(test, atomic64_read(&mm->pinned_vm), 0);
	mmdrop(mm);
}

/* --- task lifecycle --- */

struct ds_test_child {
	struct completion	ready;
	struct completion	go;
	struct completion	done;
	struct task_struct	*task;
	bool			inherited;
};

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

/* --- the hardware path --- */

/*
 * No notification threshold: the staging buffer interrupts a sixteenth
 * before it is full, at DS_TEST_STAGE_IRQ_AT records, and not one earlier.
 */
static void ds_test_threshold_interrupt(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_MAX_BUFFER_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	unsigned long flags;
	size_t i;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	local_irq_save(flags);
	for (i = 0; i + 1 < DS_TEST_STAGE_IRQ_AT; i++)
		ds_sim_branch(DS_TEST_FROM + i, DS_TEST_FROM + i, true);
	/* Below the threshold the NMI is someone else's. */
	KUNIT_EXPECT_EQ(test, ds_nmi_handler(NMI_LOCAL, NULL), NMI_DONE);
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_pmis), 0);
	ds_sim_branch(DS_TEST_FROM + i, DS_TEST_FROM + i, true);
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_pmis), 1);
	local_irq_restore(flags);
	ds_sim_settle(tracer);
	/* The irq_work collected everything before any read. */
	KUNIT_EXPECT_EQ(test, tracer->count, DS_TEST_STAGE_IRQ_AT);
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).count,
			DS_TEST_STAGE_IRQ_AT);
}

/*
 * The threshold PMI stops BTS at once, in the NMI: what the CPU does until
 * interrupts are enabled again (the rest of an irqs-off section) does not
 * eat into the staging buffer's margin. The collection starts it again.
 */
static void ds_test_pmi_stops_bts(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_MAX_BUFFER_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	unsigned long flags;
	int stored = 0;
	u64 ctl;
	size_t i;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	local_irq_save(flags);
	for (i = 0; i < DS_TEST_STAGE_RECORDS; i++)
		stored += ds_sim_branch(DS_TEST_FROM + i, DS_TEST_FROM + i,
					true);
	ctl = this_cpu_read(ds_sim_debugctl);
	local_irq_restore(flags);
	ds_sim_settle(tracer);
	KUNIT_EXPECT_EQ(test, stored, DS_TEST_STAGE_IRQ_AT);
	KUNIT_EXPECT_EQ(test, ctl, DS_SIM_OTHER_BITS);
	KUNIT_EXPECT_EQ(test, ds_test_debugctl(),
			DS_SIM_OTHER_BITS | ds_bts_bits(tracer));
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 0, 1), 1);
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).count,
			DS_TEST_STAGE_IRQ_AT + 1);
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).lost, 0);
}

/*
 * A PMI too late to stop the CPU before the staging buffer is full: the
 * records it dropped are not known: one is counted lost, and the status
 * says the count is approximate, until a clear.
 */
static void ds_test_stage_full_lost(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_MAX_BUFFER_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	struct ds_geometry geom;
	unsigned long flags;
	int stored = 0;
	size_t i;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	local_irq_save(flags);
	ds_sim_skid = true;
	for (i = 0; i < DS_TEST_STAGE_RECORDS + 5; i++)
		stored += ds_sim_branch(DS_TEST_FROM + i, DS_TEST_FROM + i,
					true);
	ds_sim_skid = false;
	ds_sim_pmi();
	local_irq_restore(flags);
	ds_sim_settle(tracer);
	KUNIT_EXPECT_EQ(test, stored, DS_TEST_STAGE_RECORDS);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.count, DS_TEST_STAGE_RECORDS);
	KUNIT_EXPECT_EQ(test, geom.lost, 1);
	KUNIT_EXPECT_EQ(test, geom.status, DS_STATUS_DROPPED);
	KUNIT_EXPECT_EQ(test, ds_clear(tracer), 0);
	KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).status, 0);
}

/*
 * A threshold PMI the CPU delivers after the staging buffer was collected
 * (skid past a context switch, say) is still ours: claimed once, with
 * LVTPC unmasked for it. One that came in time leaves nothing owed.
 */
static void ds_test_late_pmi(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_MAX_BUFFER_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	unsigned long flags;
	size_t i;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	local_irq_save(flags);
	for (i = 0; i < DS_TEST_STAGE_IRQ_AT; i++)
		ds_sim_branch(DS_TEST_FROM + i, DS_TEST_FROM + i, true);
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_pmis), 1);
	ds_cpu_sync(NULL);
	KUNIT_EXPECT_EQ(test, ds_nmi_handler(NMI_LOCAL, NULL), NMI_DONE);

	ds_sim_skid = true;
	for (i = 0; i < DS_TEST_STAGE_IRQ_AT; i++)
		ds_sim_branch(DS_TEST_FROM + i, DS_TEST_FROM + i, true);
	ds_sim_skid = false;
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_pmis), 1);
	ds_cpu_sync(NULL);
	KUNIT_EXPECT_EQ(test, ds_nmi_handler(NMI_LOCAL, NULL), NMI_HANDLED);
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_pmis), 2);
	KUNIT_EXPECT_EQ(test, ds_nmi_handler(NMI_LOCAL, NULL), NMI_DONE);
	local_irq_restore(flags);
	ds_sim_settle(tracer);
	KUNIT_EXPECT_EQ(test, tracer->count, 2 * DS_TEST_STAGE_IRQ_AT);
}

static void ds_test_expect_event(struct kunit *test, struct ds_tracer *tracer,
				 size_t i, enum ds_bts_qualifier qual)
{
	struct ds_bts_record rec = { };

	ds_read_record(tracer, i, &rec, sizeof(rec));
	KUNIT_EXPECT_EQ(test, ds_bts_record_event(&rec), qual);
	KUNIT_EXPECT_EQ(test, rec.flags, task_pid_nr(current));
}

static void ds_test_switch_collects(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer;
	unsigned long flags;
	size_t base;
	int i;

	cfg.flags = DS_USER | DS_TIMESTAMPS;
	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));

	/* Real switches add events too: look only inside this window. */
	local_irq_save(flags);
	base = tracer->count;
	for (i = 0; i < 5; i++)
		ds_sim_branch(DS_TEST_FROM + i,
			      DS_TEST_FROM + i + DS_TEST_TO_OFFSET, true);
	KUNIT_EXPECT_EQ(test, tracer->count, base);
	/* Scheduled out: collected, then a departs event; BTS is off. */
	ds_switch_to(current, &init_task);
	KUNIT_EXPECT_EQ(test, tracer->count, base + 6);
	KUNIT_EXPECT_EQ(test, this_cpu_read(ds_sim_debugctl), DS_SIM_OTHER_BITS);
	KUNIT_EXPECT_FALSE(test, ds_sim_branch(1, 2, true));
	/* Scheduled in again: an arrives event, BTS on. */
	ds_switch_to(&init_task, current);
	KUNIT_EXPECT_EQ(test, tracer->count, base + 7);
	KUNIT_EXPECT_TRUE(test, ds_sim_branch(DS_TEST_FROM + 5,
					      DS_TEST_FROM + 5 +
					      DS_TEST_TO_OFFSET, true));
	ds_switch_to(current, &init_task);
	ds_switch_to(&init_task, current);
	KUNIT_EXPECT_EQ(test, tracer->count, base + 10);
	ds_test_expect_branch(test, tracer, base + 4, 4);
	ds_test_expect_event(test, tracer, base + 5, DS_BTS_TASK_DEPARTS);
	ds_test_expect_event(test, tracer, base + 6, DS_BTS_TASK_ARRIVES);
	ds_test_expect_branch(test, tracer, base + 7, 5);
	local_irq_restore(flags);
}

static u64 ds_test_debugctl(void)
{
	u64 val;

	preempt_disable();
	val = this_cpu_read(ds_sim_debugctl);
	preempt_enable();
	return val;
}

static void ds_test_debugctl_bits(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer;

	cfg.flags = DS_USER;
	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_test_debugctl(),
			DS_SIM_OTHER_BITS | DS_DEBUGCTL_BTS_ON |
			DEBUGCTLMSR_BTS_OFF_OS);
	KUNIT_EXPECT_EQ(test, ds_suspend(tracer), 0);
	KUNIT_EXPECT_EQ(test, ds_test_debugctl(), DS_SIM_OTHER_BITS);
	ds_test_release(test, tracer);

	/* Kernel mode only: a CPU's tracer. */
	cfg.flags = DS_KERNEL;
	migrate_disable();
	tracer = ds_test_keep(test,
			      ds_request_bts_cpu(smp_processor_id(), &cfg));
	KUNIT_EXPECT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_test_debugctl(),
			DS_SIM_OTHER_BITS | DS_DEBUGCTL_BTS_ON |
			DEBUGCTLMSR_BTS_OFF_USR);
	ds_test_release(test, tracer);
	KUNIT_EXPECT_EQ(test, ds_test_debugctl(), DS_SIM_OTHER_BITS);
	migrate_enable();
}

/*
 * Kernel mode is for CPU tracers only, and where Meltdown would let any
 * user read the staging buffers, only if the administrator said so.
 */
static void ds_test_kernel_policy(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_hw_caps caps = ds_test_full_caps;
	bool saved = ds_meltdown_kernel;
	struct ds_tracer *tracer;

	cfg.flags = DS_USER | DS_KERNEL;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EINVAL);
	cfg.backend = DS_BACKEND_AUTO;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EINVAL);
	cfg.backend = DS_BACKEND_HARDWARE;

	caps.meltdown = true;
	ds_test_install(caps);
	ds_meltdown_kernel = false;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(0, &cfg)), -EPERM);
	cfg.flags = DS_USER;
	tracer = ds_test_keep(test, ds_request_bts_cpu(0, &cfg));
	KUNIT_EXPECT_FALSE(test, IS_ERR(tracer));
	ds_test_release(test, tracer);

	cfg.flags = DS_KERNEL;
	ds_meltdown_kernel = true;
	tracer = ds_test_keep(test, ds_request_bts_cpu(0, &cfg));
	ds_meltdown_kernel = saved;
	KUNIT_EXPECT_FALSE(test, IS_ERR(tracer));
}

static void ds_test_debugctl_preserved(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	unsigned long flags;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	/* Another owner flips its bits (block-step off) while we trace. */
	local_irq_save(flags);
	this_cpu_and(ds_sim_debugctl, ~DEBUGCTLMSR_BTF);
	local_irq_restore(flags);
	KUNIT_EXPECT_EQ(test, ds_suspend(tracer), 0);
	KUNIT_EXPECT_EQ(test, ds_test_debugctl() & ~DEBUGCTLMSR_BTF,
			DS_SIM_OTHER_BITS & ~DEBUGCTLMSR_BTF);
	KUNIT_EXPECT_EQ(test, ds_resume(tracer), 0);
	KUNIT_EXPECT_EQ(test, ds_test_debugctl() & ~DEBUGCTLMSR_BTF,
			(DS_SIM_OTHER_BITS & ~DEBUGCTLMSR_BTF) |
			DS_DEBUGCTL_BTS_ON | DEBUGCTLMSR_BTS_OFF_OS);
	ds_test_release(test, tracer);
	/* Put the bit back on every CPU, as the leak check expects it. */
	ds_test_install(ds_test_full_caps);
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

/* --- the two halves, handed out separately --- */

#define DS_TEST_PERF_MARK	0x5eed0000ULL

/* perf fills its half of @cpu's save area, as after its reservation. */
static void ds_test_perf_fill(int cpu, enum ds_kind kind)
{
	struct ds_area_part *part = ds_part(per_cpu(ds_cpus, cpu).area, kind);

	part->base = DS_TEST_PERF_MARK;
	part->index = DS_TEST_PERF_MARK + 1;
	part->absmax = DS_TEST_PERF_MARK + 2;
	part->threshold = DS_TEST_PERF_MARK + 3;
	if (kind == DS_PEBS)
		per_cpu(ds_cpus, cpu).area->pebs_event_reset[0] =
			DS_TEST_PERF_MARK + 4;
}

/* The allocator wrote nothing into perf's half of any CPU's save area. */
static void ds_test_expect_perf_half(struct kunit *test, enum ds_kind kind)
{
	int cpu;

	for_each_possible_cpu(cpu) {
		struct ds_cpu *dc = per_cpu_ptr(&ds_cpus, cpu);
		struct ds_area_part *part = ds_part(dc->area, kind);

		KUNIT_EXPECT_EQ(test, part->base, DS_TEST_PERF_MARK);
		KUNIT_EXPECT_EQ(test, part->index, DS_TEST_PERF_MARK + 1);
		KUNIT_EXPECT_EQ(test, part->absmax, DS_TEST_PERF_MARK + 2);
		KUNIT_EXPECT_EQ(test, part->threshold, DS_TEST_PERF_MARK + 3);
		if (kind == DS_PEBS)
			KUNIT_EXPECT_EQ(test, dc->area->pebs_event_reset[0],
					DS_TEST_PERF_MARK + 4);
		KUNIT_EXPECT_NULL(test, dc->stage[kind]);
		KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_slots, cpu)[kind],
				DS_SIM_SLOT_CLEAN);
	}
}

/* perf reserves @kind, fills its half everywhere, installs the area. */
static void ds_test_perf_takes(struct kunit *test, enum ds_kind kind)
{
	struct ds_test *dt = test->priv;
	int cpu;

	KUNIT_ASSERT_EQ(test, ds_perf_reserve(kind), 0);
	if (kind == DS_BTS)
		dt->perf_held = true;
	else
		dt->perf_pebs_held = true;
	for_each_possible_cpu(cpu)
		ds_test_perf_fill(cpu, kind);
	for_each_online_cpu(cpu) {
		ds_perf_install(cpu);
		cpumask_set_cpu(cpu, &dt->perf_installed);
	}
}

static void ds_test_perf_gives_back(struct kunit *test, enum ds_kind kind)
{
	struct ds_test *dt = test->priv;
	int cpu;

	for_each_cpu(cpu, &dt->perf_installed)
		ds_perf_uninstall(cpu);
	cpumask_clear(&dt->perf_installed);
	ds_perf_release(kind);
	if (kind == DS_BTS)
		dt->perf_held = false;
	else
		dt->perf_pebs_held = false;
}

static void ds_test_expect_area_loaded(struct kunit *test, bool loaded)
{
	int cpu;

	for_each_online_cpu(cpu)
		KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_ds_area, cpu),
				loaded ? per_cpu(ds_cpus, cpu).area_hw : 0);
}

/*
 * perf's precise events hold the PEBS half: a debugger still gets the
 * hardware for BTS, in the same save area, and neither touches the
 * other's half. Teardown in both orders leaves IA32_DS_AREA to whoever
 * is still there.
 */
static void ds_test_split_perf_pebs_first(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer;
	int order;

	for (order = 0; order < 2; order++) {
		ds_test_perf_takes(test, DS_PEBS);
		tracer = ds_test_task(test, &cfg);
		KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
		KUNIT_EXPECT_EQ(test, ds_test_geom(test, tracer).backend,
				DS_BACKEND_HARDWARE);
		KUNIT_EXPECT_TRUE(test, ds_bts_fac->active);
		KUNIT_EXPECT_EQ(test, ds_perf_reserve(DS_PEBS), -EBUSY);
		KUNIT_EXPECT_EQ(test, ds_perf_reserve(DS_BTS), -EBUSY);
		ds_test_expect_perf_half(test, DS_PEBS);
		ds_test_expect_area_loaded(test, true);

		if (order) {
			/* perf goes first: the tracer keeps the area. */
			ds_test_perf_gives_back(test, DS_PEBS);
			ds_test_expect_area_loaded(test, true);
			ds_test_release(test, tracer);
			ds_test_end_linger();
		} else {
			ds_test_release(test, tracer);
			ds_test_end_linger();
			ds_test_expect_perf_half(test, DS_PEBS);
			ds_test_expect_area_loaded(test, true);
			ds_test_perf_gives_back(test, DS_PEBS);
		}
		ds_test_expect_area_loaded(test, false);
	}
}

/* The mirror: the tracer first, perf's PEBS reservation still succeeds. */
static void ds_test_split_tracer_first(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer;

	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, ds_perf_reserve(DS_BTS), -EBUSY);
	ds_test_perf_takes(test, DS_PEBS);
	KUNIT_EXPECT_FALSE(test, ds_facilities[DS_PEBS].active);
	ds_test_expect_perf_half(test, DS_PEBS);
	/* perf's install came second: nothing to write, nothing lost. */
	ds_test_expect_area_loaded(test, true);
	ds_test_perf_gives_back(test, DS_PEBS);
	ds_test_expect_area_loaded(test, true);
	ds_test_release(test, tracer);
	ds_test_end_linger();
	ds_test_expect_area_loaded(test, false);
}

/*
 * perf's BTS event holds the BTS half: a debugger's trace is emulated, and
 * the allocator leaves perf's BTS bits and half alone.
 */
static void ds_test_split_perf_bts(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer;
	u64 perf_bits = DEBUGCTLMSR_TR | DEBUGCTLMSR_BTS;
	int cpu = cpumask_first(cpu_online_mask);

	KUNIT_ASSERT_EQ(test, ds_register_backend(&ds_fake_backend), 0);
	ds_test_perf_takes(test, DS_BTS);
	per_cpu(ds_sim_debugctl, cpu) |= perf_bits;

	tracer = ds_test_task_falls_back(test);
	cfg.backend = DS_BACKEND_HARDWARE;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(cpu, &cfg)), -EBUSY);
	KUNIT_EXPECT_FALSE(test, ds_bts_fac->active);

	ds_test_expect_perf_half(test, DS_BTS);
	KUNIT_EXPECT_EQ(test, per_cpu(ds_sim_debugctl, cpu),
			DS_SIM_OTHER_BITS | perf_bits);
	per_cpu(ds_sim_debugctl, cpu) = DS_SIM_OTHER_BITS;
	ds_test_expect_area_loaded(test, true);
	ds_test_release(test, tracer);
	ds_test_perf_gives_back(test, DS_BTS);
}

static int ds_test_exclusive_result;
static atomic_t ds_test_exclusive_held;

static int ds_test_exclusive_get(enum ds_kind kind)
{
	if (kind == DS_BTS && !ds_test_exclusive_result)
		atomic_inc(&ds_test_exclusive_held);
	return kind == DS_BTS ? ds_test_exclusive_result : 0;
}

static void ds_test_exclusive_put(enum ds_kind kind)
{
	if (kind == DS_BTS)
		atomic_dec(&ds_test_exclusive_held);
}

/*
 * Hardware BTS joins perf's PT/LBR/BTS exclusivity while BTS tracers are
 * attached: a conflicting intel_pt event refuses it, and ptrace falls back
 * to the emulation; perf's PEBS half has no part in it.
 */
static void ds_test_exclusive(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer;

	kunit_activate_static_stub(test, ds_hw_exclusive_get,
				   ds_test_exclusive_get);
	kunit_activate_static_stub(test, ds_hw_exclusive_put,
				   ds_test_exclusive_put);
	atomic_set(&ds_test_exclusive_held, 0);
	ds_test_exclusive_result = 0;
	tracer = ds_test_task(test, &cfg);
	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_test_exclusive_held), 1);
	/* Not held by the linger: intel_pt cannot end it. */
	ds_test_release(test, tracer);
	KUNIT_EXPECT_TRUE(test, ds_bts_fac->active);
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_test_exclusive_held), 0);
	ds_test_end_linger();

	ds_test_exclusive_result = -EBUSY;
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_request_bts_cpu(0, &cfg)), -EBUSY);
	KUNIT_EXPECT_FALSE(test, ds_bts_fac->active);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ds_sim_mapped), 0);
	/* perf's precise events take no part in it. */
	KUNIT_ASSERT_EQ(test, ds_perf_reserve(DS_PEBS), 0);
	ds_perf_release(DS_PEBS);
	KUNIT_ASSERT_EQ(test, ds_register_backend(&ds_fake_backend), 0);
	tracer = ds_test_task_falls_back(test);
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_test_exclusive_held), 0);
}

#define DS_TEST_SPLIT_ROUNDS	200

static int ds_test_split_errors;
static void ds_test_split_perf_fn(struct work_struct *work)
{
	int i;

	for (i = 0; i < DS_TEST_SPLIT_ROUNDS; i++) {
		if (ds_perf_reserve(DS_PEBS)) {
			ds_test_split_errors++;
			continue;
		}
		ds_perf_release(DS_PEBS);
	}
}

static DECLARE_WORK(ds_test_split_perf_work, ds_test_split_perf_fn);

/*
 * perf's PEBS reservations and a debugger's BTS requests, concurrently:
 * neither ever waits for or refuses the other.
 */
static void ds_test_split_concurrent(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(DS_TEST_SIZE);
	struct ds_tracer *tracer;
	int i, refused = 0;

	ds_test_split_errors = 0;
	queue_work(system_unbound_wq, &ds_test_split_perf_work);
	for (i = 0; i < DS_TEST_SPLIT_ROUNDS; i++) {
		tracer = ds_request_bts_task(current, &cfg);
		if (IS_ERR(tracer)) {
			refused++;
			continue;
		}
		ds_release(tracer);
		/* Every other round from a setup of its own. */
		if (i & 1)
			ds_test_end_linger();
	}
	flush_work(&ds_test_split_perf_work);
	KUNIT_EXPECT_EQ(test, refused, 0);
	KUNIT_EXPECT_EQ(test, ds_test_split_errors, 0);
	KUNIT_EXPECT_FALSE(test, ds_facilities[DS_PEBS].active);
}

static struct kunit_case ds_test_cases[] = {
	KUNIT_CASE(ds_test_request_release),
	KUNIT_CASE(ds_test_same_owner_twice),
	KUNIT_CASE(ds_test_task_vs_cpu),
	KUNIT_CASE(ds_test_perf_holds),
	KUNIT_CASE(ds_test_perf_refused),
	KUNIT_CASE(ds_test_perf_during_teardown),
	KUNIT_CASE(ds_test_perf_reserve_twice),
	KUNIT_CASE(ds_test_refused_while_perf_waits),
	KUNIT_CASE(ds_test_release_lingers),
	KUNIT_CASE(ds_test_teardown_flushes_once),
	KUNIT_CASE(ds_test_msr_map_vmalloc),
	KUNIT_CASE(ds_test_perf_after_cpu_tracer),
	KUNIT_CASE(ds_test_perf_install),
	KUNIT_CASE(ds_test_perf_bts_bits),
	KUNIT_CASE(ds_test_perf_map),
	KUNIT_CASE(ds_test_perf_map_refused),
	KUNIT_CASE(ds_test_perf_area),
	KUNIT_CASE(ds_test_perf_restore),
	KUNIT_CASE(ds_test_split_perf_pebs_first),
	KUNIT_CASE(ds_test_split_tracer_first),
	KUNIT_CASE(ds_test_split_perf_bts),
	KUNIT_CASE(ds_test_exclusive),
	KUNIT_CASE(ds_test_split_concurrent),
	KUNIT_CASE(ds_test_auto_falls_back),
	KUNIT_CASE(ds_test_auto_beside_cpu_tracer),
	KUNIT_CASE(ds_test_no_hardware),
	KUNIT_CASE(ds_test_bad_config),
	KUNIT_CASE(ds_test_bad_handle),
	KUNIT_CASE(ds_test_cpu_invalid),
	KUNIT_CASE(ds_test_cpu_offline),
	KUNIT_CASE(ds_test_syscore_suspend),
	KUNIT_CASE(ds_test_syscore_during_teardown),
	KUNIT_CASE(ds_test_syscore_during_setup),
	KUNIT_CASE(ds_test_reboot_halts),
	KUNIT_CASE(ds_test_syscore_shutdown),
	KUNIT_CASE(ds_test_ipi_targets),
	KUNIT_CASE(ds_test_odd_size),
	KUNIT_CASE(ds_test_one_record),
	KUNIT_CASE(ds_test_bad_sizes),
	KUNIT_CASE(ds_test_hw_geometry),
	KUNIT_CASE(ds_test_geometry_unlocked),
	KUNIT_CASE(ds_test_wrap_order),
	KUNIT_CASE(ds_test_read_records),
	KUNIT_CASE(ds_test_caller_buffer),
	KUNIT_CASE(ds_test_clear),
	KUNIT_CASE(ds_test_notify_pause_resume),
	KUNIT_CASE(ds_test_notify_clear),
	KUNIT_CASE(ds_test_suspend_resume),
	KUNIT_CASE(ds_test_suspend_atomic),
	KUNIT_CASE(ds_test_memlock_charge),
	KUNIT_CASE(ds_test_memlock_per_user),
	KUNIT_CASE(ds_test_memlock_limit),
	KUNIT_CASE(ds_test_memlock_failed_alloc),
	KUNIT_CASE(ds_test_stage_nomem_falls_back),
	KUNIT_CASE(ds_test_stage_after_perf_cycle),
	KUNIT_CASE(ds_test_buffer_memcg),
	KUNIT_CASE(ds_test_memlock_mm_gone),
	KUNIT_CASE(ds_test_fork_not_inherited),
	KUNIT_CASE(ds_test_release_on_exit),
	KUNIT_CASE(ds_test_threshold_interrupt),
	KUNIT_CASE(ds_test_pmi_stops_bts),
	KUNIT_CASE(ds_test_stage_full_lost),
	KUNIT_CASE(ds_test_late_pmi),
	KUNIT_CASE(ds_test_switch_collects),
	KUNIT_CASE(ds_test_debugctl_bits),
	KUNIT_CASE(ds_test_kernel_policy),
	KUNIT_CASE(ds_test_debugctl_preserved),
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
