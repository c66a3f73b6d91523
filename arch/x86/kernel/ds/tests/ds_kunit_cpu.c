// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite x86_ds_cpu of the Debug Store allocator: the per-CPU hardware
 * state: threshold interrupts, the context switch, DEBUGCTL, IPIs, suspend,
 * reboot and the lingering setup. It runs on the simulated CPU of
 * ds_kunit_sim.c.
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

/* Our DEBUGCTL bits as the simulated CPU holds them on this CPU. */
static u64 ds_test_debugctl(void)
{
	u64 val;

	preempt_disable();
	val = this_cpu_read(ds_sim_debugctl);
	preempt_enable();
	return val;
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
	KUNIT_EXPECT_EQ(test, geom.unwritten, 1);
	KUNIT_EXPECT_EQ(test, geom.seq, DS_TEST_STAGE_RECORDS);
	KUNIT_EXPECT_EQ(test, geom.status, DS_STATUS_DROPPED);
	KUNIT_EXPECT_EQ(test, ds_clear(tracer), 0);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.status, 0);
	KUNIT_EXPECT_EQ(test, geom.unwritten, 1);
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

static struct kunit_case ds_test_sim_cases[] = {
	KUNIT_CASE(ds_test_release_lingers),
	KUNIT_CASE(ds_test_teardown_flushes_once),
	KUNIT_CASE(ds_test_msr_map_vmalloc),
	KUNIT_CASE(ds_test_syscore_suspend),
	KUNIT_CASE(ds_test_syscore_during_teardown),
	KUNIT_CASE(ds_test_syscore_during_setup),
	KUNIT_CASE(ds_test_reboot_halts),
	KUNIT_CASE(ds_test_syscore_shutdown),
	KUNIT_CASE(ds_test_stage_nomem_falls_back),
	KUNIT_CASE(ds_test_threshold_interrupt),
	KUNIT_CASE(ds_test_pmi_stops_bts),
	KUNIT_CASE(ds_test_stage_full_lost),
	KUNIT_CASE(ds_test_late_pmi),
	KUNIT_CASE(ds_test_switch_collects),
	KUNIT_CASE(ds_test_debugctl_bits),
	KUNIT_CASE(ds_test_kernel_policy),
	KUNIT_CASE(ds_test_debugctl_preserved),
	{}
};

static struct kunit_suite ds_test_sim_suite = {
	.name		= "x86_ds_cpu",
	.init		= ds_test_init,
	.exit		= ds_test_exit,
	.test_cases	= ds_test_sim_cases,
};

/*
 * At boot only: run again from debugfs, the suite would stand in for the
 * hardware under perf events that user space may open at any moment.
 */
kunit_test_init_section_suites(&ds_test_sim_suite);
