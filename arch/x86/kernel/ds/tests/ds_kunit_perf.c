// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite x86_ds_perf of the Debug Store allocator: perf's reservation
 * of the BTS half, its calls, and the two halves of the save area handed
 * out separately. It runs on the simulated CPU of ds_kunit_sim.c.
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
 * perf reserves while the last hardware tracer's teardown runs: it must
 * wait until the slots are unmapped and IA32_DS_AREA is cleared, and then
 * get the Debug Store rather than be refused for its whole session, even
 * when a request queued on ds_alloc_mutex comes first after the teardown.
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
	/* Flushed after the mapping, as perf's own mapper did. */
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_flushes), 1);
	KUNIT_EXPECT_EQ(test, ds_sim_flush_mapped, mapped + 1);
	ds_perf_unmap_buffer(0, DS_PEBS, PAGE_SIZE);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ds_sim_mapped), mapped);
	/* perf frees the buffer next: flushed, exactly the slot. */
	KUNIT_EXPECT_EQ(test, atomic_read(&ds_sim_flushes), 2);
	KUNIT_EXPECT_EQ(test, ds_sim_flush_mapped, mapped);
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

/* perf reserves and releases the PEBS half meanwhile. */
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

static struct kunit_case ds_test_perf_cases[] = {
	KUNIT_CASE(ds_test_perf_holds),
	KUNIT_CASE(ds_test_perf_refused),
	KUNIT_CASE(ds_test_perf_during_teardown),
	KUNIT_CASE(ds_test_perf_reserve_twice),
	KUNIT_CASE(ds_test_refused_while_perf_waits),
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
	KUNIT_CASE(ds_test_stage_after_perf_cycle),
	{}
};

static struct kunit_suite ds_test_perf_suite = {
	.name		= "x86_ds_perf",
	.init		= ds_test_init,
	.exit		= ds_test_exit,
	.test_cases	= ds_test_perf_cases,
};

/*
 * At boot only: run again from debugfs, the suite would stand in for the
 * hardware under perf events that user space may open at any moment.
 */
kunit_test_init_section_suites(&ds_test_perf_suite);
