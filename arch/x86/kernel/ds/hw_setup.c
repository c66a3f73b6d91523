// SPDX-License-Identifier: GPL-2.0
/*
 * Debug Store allocator: the resources the hardware tracers share (the
 * staging buffers and each CPU's activation, set up for the first user and
 * torn down after the last), perf's reservation of the BTS half, CPU
 * hotplug, suspend, reboot and kexec, and initialisation.
 *
 * perf. perf's Intel driver is the per-CPU client that lays out the save
 * area and drains it itself, in its PMI; it maps its buffers, loads
 * IA32_DS_AREA and sets the BTS bits through the ds_perf_*() calls of
 * perf.c, which are built whenever that driver is (CONFIG_X86_DS_CORE),
 * allocator or not. The save area has two halves,
 * BTS and PEBS, handed out separately (struct ds_facility). The PEBS half
 * is perf's whenever it asks. For the BTS half the allocator's hardware
 * tracers and perf take turns, hardware requests failing with -EBUSY while
 * perf holds it and perf's reservation refused while such tracers exist.
 * So perf's precise events and a debugger's hardware BTS run together,
 * each in its half of the same area; IA32_DS_AREA, which both need, is
 * counted per CPU. perf holds a half only while it has events that use it
 * (BTS and intel_bts, precise), so its counting events and the NMI
 * watchdog take nothing. Emulated tracers need no hardware and run
 * alongside perf.
 */

#define pr_fmt(fmt) "ds: " fmt

#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/gfp.h>
#include <linux/irq_work.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/reboot.h>
#include <linux/sched.h>
#include <linux/smp.h>
#include <linux/spinlock.h>
#include <linux/static_call.h>
#include <linux/syscore_ops.h>
#include <linux/vmalloc.h>

#include <kunit/static_stub.h>

#include <asm/apic.h>
#include <asm/cpu_entry_area.h>
#include <asm/debugreg.h>
#include <asm/ds.h>
#include <asm/intel_ds.h>
#include <asm/local.h>
#include <asm/msr.h>
#include <asm/nmi.h>
#include <asm/perf_event.h>

#include "internal.h"

VISIBLE_IF_KUNIT DEFINE_SPINLOCK(ds_perf_lock);
static void ds_hw_linger_fn(struct work_struct *work);

VISIBLE_IF_KUNIT struct ds_facility ds_facilities[DS_NR_KINDS] = {
	[DS_BTS] = {
		.kind		= DS_BTS,
		.linger_work	= __DELAYED_WORK_INITIALIZER(ds_facilities[DS_BTS].linger_work,
							     ds_hw_linger_fn, 0),
	},
	[DS_PEBS] = {
		.kind		= DS_PEBS,
		.linger_work	= __DELAYED_WORK_INITIALIZER(ds_facilities[DS_PEBS].linger_work,
							     ds_hw_linger_fn, 0),
	},
};

/* The teardown, for lockdep: perf's reservation may wait for it. */
#ifdef CONFIG_LOCKDEP
static struct lockdep_map ds_hw_teardown_map =
	STATIC_LOCKDEP_MAP_INIT("ds_hw_teardown", &ds_hw_teardown_map);
#endif

/* DS_HW_LINGER; KUnit makes it longer than any test. */
VISIBLE_IF_KUNIT unsigned long ds_hw_linger = DS_HW_LINGER;
/* Attached hardware tracers per kind, task and CPU; under ds_alloc_mutex. */
VISIBLE_IF_KUNIT unsigned int ds_nr_task_hw[DS_NR_KINDS];
VISIBLE_IF_KUNIT unsigned int ds_nr_cpu[DS_NR_KINDS];
/*
 * Set for good once the machine reboots, kexecs or powers off: no CPU arms
 * the hardware again, and hardware requests fail; see ds_reboot_notify().
 */
bool ds_halted;

const struct ds_backend ds_hw_backend = {
	.name	= "hardware",
	.kinds	= BIT(DS_BTS),
	.start	= ds_hw_backend_start,
	.stop	= ds_hw_backend_stop,
};

/* --- hardware resources, shared by all hardware tracers --- */

/* The slot was unmapped and flushed: see ds_stage_free_all(). */
static void ds_stage_free(int cpu, enum ds_kind kind)
{
	struct ds_cpu *dc = per_cpu_ptr(&ds_cpus, cpu);

	vfree(dc->stage[kind]);
	dc->stage[kind] = NULL;
}

VISIBLE_IF_KUNIT int ds_stage_alloc(int cpu, enum ds_kind kind)
{
	struct ds_cpu *dc = per_cpu_ptr(&ds_cpus, cpu);

	KUNIT_STATIC_STUB_REDIRECT(ds_stage_alloc, cpu, kind);
	/*
	 * Page by page, as the slot is mapped: no high-order allocation to
	 * fail under fragmentation. Not charged to a memory cgroup: every
	 * tracer of the machine shares them. Failing rather than calling
	 * the OOM killer: a request for any backend then gets the emulation.
	 */
	dc->stage[kind] = __vmalloc_node(DS_STAGE_SIZE, PAGE_SIZE,
					 GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN |
					 __GFP_RETRY_MAYFAIL, cpu_to_node(cpu),
					 __builtin_return_address(0));
	return dc->stage[kind] ? 0 : -ENOMEM;
}

/* The staging buffer's pages go into @cpu's cpu_entry_area slot. */
static void ds_stage_map(int cpu, enum ds_kind kind)
{
	struct ds_cpu *dc = per_cpu_ptr(&ds_cpus, cpu);
	struct debug_store_buffers *cea;

	cea = &get_cpu_entry_area(cpu)->cpu_debug_buffers;
	dc->stage_hw[kind] = (unsigned long)(kind == DS_BTS ? cea->bts_buffer :
							    cea->pebs_buffer);
	dc->stage_cap[kind] = DS_STAGE_SIZE / DS_BTS_RECORD_SIZE;
	static_call(ds_hw_map)((void *)dc->stage_hw[kind], dc->stage[kind],
			       DS_STAGE_SIZE);
}

/*
 * Unmap every CPU's slot, flush once, and only then free the pages: until
 * the flush, a CPU may still reach them through a stale TLB entry. One
 * broadcast flush, where a flush per slot made one for every possible CPU.
 */
static void ds_stage_free_all(enum ds_kind kind)
{
	unsigned long start = ULONG_MAX, end = 0;
	size_t size = DS_STAGE_SIZE;
	int cpu;

	for_each_possible_cpu(cpu) {
		struct ds_cpu *dc = per_cpu_ptr(&ds_cpus, cpu);

		if (!dc->stage[kind])
			continue;
		static_call(ds_hw_unmap)((void *)dc->stage_hw[kind], size);
		start = min(start, dc->stage_hw[kind]);
		end = max(end, dc->stage_hw[kind] + size);
	}
	if (start < end)
		static_call(ds_hw_flush)(start, end);

	for_each_possible_cpu(cpu)
		ds_stage_free(cpu, kind);
}

bool ds_hw_is_free(enum ds_kind kind)
{
	bool held;

	spin_lock(&ds_perf_lock);
	held = ds_facilities[kind].perf_held;
	spin_unlock(&ds_perf_lock);
	return !held;
}

/* This request's ds_stage_prepare() found no memory; under ds_alloc_mutex. */
static bool ds_stage_nomem;

/* Unmapped pages of a setup that did not happen: nothing to flush. */
void ds_stage_discard(enum ds_kind kind)
{
	int cpu;

	lockdep_assert_held(&ds_alloc_mutex);

	/* Only ds_hw_get(), under ds_alloc_mutex, sets a facility that is down up. */
	if (READ_ONCE(ds_facilities[kind].state) != DS_HW_DOWN)
		return;
	for_each_possible_cpu(cpu)
		ds_stage_free(cpu, kind);
}

/*
 * Every possible CPU's staging pages, or none. Called only while the
 * facility is not up, so none of them is mapped yet.
 */
static int ds_stage_alloc_all(enum ds_kind kind)
{
	int cpu, err;

	for_each_possible_cpu(cpu) {
		if (per_cpu(ds_cpus, cpu).stage[kind])
			continue;
		err = ds_stage_alloc(cpu, kind);
		if (err)
			goto free_stages;
	}
	return 0;

free_stages:
	for_each_possible_cpu(cpu)
		ds_stage_free(cpu, kind);
	return err;
}

/*
 * perf's PT/LBR/BTS exclusivity: our BTS takes part as perf's own BTS
 * event does, so that it never runs beside intel_pt or intel_bts on a CPU
 * that cannot have both. Held while hardware BTS tracers are attached, not
 * while the half lingers without them: intel_pt cannot end a linger.
 */
VISIBLE_IF_KUNIT int ds_hw_exclusive_get(enum ds_kind kind)
{
	KUNIT_STATIC_STUB_REDIRECT(ds_hw_exclusive_get, kind);
	return kind == DS_BTS ? x86_perf_get_bts_exclusive() : 0;
}

VISIBLE_IF_KUNIT void ds_hw_exclusive_put(enum ds_kind kind)
{
	KUNIT_STATIC_STUB_REDIRECT(ds_hw_exclusive_put, kind);
	if (kind == DS_BTS)
		x86_perf_put_bts_exclusive();
}

/*
 * Allocate the staging pages of a facility that is down, for a request
 * that may set it up, before the CPU hotplug lock is taken: reclaim can
 * take a while, and hotplug need not wait for it. They are mapped only
 * once the setup owns the slots (ds_stage_map_all()), as perf may map its
 * own buffers there until then; ds_attach() discards what it did not use.
 */
void ds_stage_prepare(enum ds_kind kind)
{
	lockdep_assert_held(&ds_alloc_mutex);

	ds_stage_nomem = false;
	if (READ_ONCE(ds_facilities[kind].state) != DS_HW_DOWN ||
	    !ds_hw_is_free(kind) || READ_ONCE(ds_halted))
		return;
	/*
	 * Not while an intel_pt or intel_bts event excludes BTS: the attach
	 * would fail after all, and a request repeated meanwhile would
	 * allocate and free the pages of every CPU each time. Only a hint,
	 * ds_hw_backend_start() takes the exclusivity for real.
	 */
	if (ds_hw_exclusive_get(kind))
		return;
	ds_hw_exclusive_put(kind);
	ds_stage_nomem = ds_stage_alloc_all(kind) == -ENOMEM;
}

static int ds_stage_map_all(enum ds_kind kind)
{
	int cpu, err;

	/*
	 * Nothing prepared: the half was up, or perf's, at the request, and
	 * perf has taken it down, or given it back, since. Rare enough to
	 * allocate under the hotplug lock; but not once more after a
	 * preparation that found no memory.
	 */
	if (ds_stage_nomem)
		return -ENOMEM;
	err = ds_stage_alloc_all(kind);
	if (err)
		return err;
	for_each_possible_cpu(cpu) {
		struct ds_cpu *dc = per_cpu_ptr(&ds_cpus, cpu);

		/* perf may have used the half before; the other may be perf's. */
		memset(ds_part(dc->area, kind), 0, sizeof(struct ds_area_part));
		dc->debugctl = 0;
		ds_stage_map(cpu, kind);
	}
	return 0;
}

/* A facility's first hardware tracer sets up its staging buffers. */
static int ds_hw_setup(struct ds_facility *fac)
{
	int err;

	lockdep_assert_held(&ds_alloc_mutex);
	lockdep_assert_cpus_held();

	err = ds_stage_map_all(fac->kind);
	if (err)
		return err;
	/* Onlining CPUs activate the half themselves from now on. */
	WRITE_ONCE(fac->active, true);
	on_each_cpu(ds_cpu_activate_ipi, fac, 1);
	return 0;
}

/*
 * Needs neither ds_alloc_mutex nor the CPU hotplug lock: perf tears a lingering
 * setup down from its reservation, which may run under cpus_write_lock(),
 * and the linger's end takes only ds_alloc_mutex. The facility's state excludes
 * every other setup and teardown of it, and no tracer of its kind is
 * attached. A CPU coming online activates the half only if it sees
 * @fac->active, and it is in cpu_online_mask before it looks: with a full
 * barrier on both sides, either it sees the flag cleared or on_each_cpu()
 * sees it online and deactivates it. The NMI handler reads only the save
 * area, never a staging buffer, so the buffers may go as soon as every
 * CPU has left them.
 */
static void ds_hw_teardown(struct ds_facility *fac)
{
	int cpu;

	lock_map_acquire(&ds_hw_teardown_map);
	WRITE_ONCE(fac->active, false);
	smp_mb();	/* pairs with ds_cpu_online() */
	on_each_cpu(ds_cpu_deactivate_ipi, fac, 1);
	for_each_possible_cpu(cpu)
		irq_work_sync(&per_cpu_ptr(&ds_cpus, cpu)->collect_work);
	ds_stage_free_all(fac->kind);
	lock_map_release(&ds_hw_teardown_map);
}

static int ds_hw_get(struct ds_facility *fac)
{
	enum ds_hw_state state;
	int err = 0;

	lockdep_assert_held(&ds_alloc_mutex);

	spin_lock(&ds_perf_lock);
	state = fac->state;
	/*
	 * perf holds the half, or is about to once a teardown ends; or the
	 * machine is going down.
	 */
	if (fac->perf_held || state == DS_HW_TEARING_DOWN ||
	    fac->perf_waiters || READ_ONCE(ds_halted)) {
		err = -EBUSY;
	} else {
		fac->users++;
		if (state == DS_HW_DOWN)
			WRITE_ONCE(fac->state, DS_HW_SETTING_UP);
	}
	spin_unlock(&ds_perf_lock);
	/* Up already, with users or lingering without: nothing to do. */
	if (err || state != DS_HW_DOWN)
		return err;

	err = ds_hw_setup(fac);
	/* Only ds_attach() sees it: the hardware's own want of memory. */
	if (err == -ENOMEM)
		err = -EAGAIN;
	spin_lock(&ds_perf_lock);
	if (err) {
		fac->users--;
		WRITE_ONCE(fac->state, DS_HW_DOWN);
	} else {
		WRITE_ONCE(fac->state, DS_HW_UP);
	}
	spin_unlock(&ds_perf_lock);
	return err;
}

/* The last user leaves the resources set up for ds_hw_linger. */
static void ds_hw_put(struct ds_facility *fac)
{
	lockdep_assert_held(&ds_alloc_mutex);

	spin_lock(&ds_perf_lock);
	if (!--fac->users)
		/* From the last release: a loop keeps it up for good. */
		mod_delayed_work(system_power_efficient_wq, &fac->linger_work,
				 READ_ONCE(ds_hw_linger));
	spin_unlock(&ds_perf_lock);
}

/*
 * Claim the teardown of a lingering setup. Counted as DS_HW_TEARING_DOWN
 * until it is over: perf would otherwise map its buffers into the CEA
 * slots we are unmapping.
 */
static bool ds_hw_claim_teardown(struct ds_facility *fac)
{
	lockdep_assert_held(&ds_perf_lock);

	if (fac->users || fac->state != DS_HW_UP)
		return false;
	WRITE_ONCE(fac->state, DS_HW_TEARING_DOWN);
	return true;
}

/* The teardown is over; @perf_takes: perf's reservation claimed it. */
static void ds_hw_teardown_done(struct ds_facility *fac, bool perf_takes)
{
	spin_lock(&ds_perf_lock);
	WRITE_ONCE(fac->state, DS_HW_DOWN);
	fac->perf_held |= perf_takes;
	spin_unlock(&ds_perf_lock);
	/*
	 * A reservation waits for the state to change. The unlock orders only
	 * what comes before it: the full barrier orders the store before the
	 * look at the wait queue, and pairs with the one in wait_var_event().
	 */
	smp_mb();
	wake_up_var(&fac->state);
}

/*
 * End a lingering setup, if there still is one. Under ds_alloc_mutex, so that a
 * request that comes meanwhile waits for the teardown rather than fails.
 */
VISIBLE_IF_KUNIT void ds_hw_end_linger(struct ds_facility *fac)
{
	bool claimed;

	/*
	 * No hotplug lock: ds_hw_teardown() copes with CPUs coming and
	 * going, and the syscore ops with a suspend in the middle of it.
	 */
	mutex_lock(&ds_alloc_mutex);
	spin_lock(&ds_perf_lock);
	claimed = ds_hw_claim_teardown(fac);
	spin_unlock(&ds_perf_lock);
	if (claimed) {
		ds_hw_teardown(fac);
		ds_hw_teardown_done(fac, false);
	}
	mutex_unlock(&ds_alloc_mutex);
}

static void ds_hw_linger_fn(struct work_struct *work)
{
	ds_hw_end_linger(container_of(to_delayed_work(work),
				      struct ds_facility, linger_work));
}

/* --- CPU hotplug --- */

/*
 * What another kernel left live on a CPU coming online, the first time
 * (a kexec, a crash kexec: INIT keeps the MSRs) or after one (a CPU kept
 * offline until then), if it did not stop the Debug Store as this one does
 * (ds_emergency_stop()): IA32_DS_AREA pointing into that kernel's
 * cpu_entry_area, BTS or PEBS storing through it. Nobody here has loaded
 * the MSRs or set the bits when neither half is in use on this CPU: perf's
 * starting callback loads IA32_DS_AREA through ds_perf_install() before
 * this runs, and enables BTS and PEBS only for events scheduled later.
 */
static void ds_cpu_clear_inherited(struct ds_cpu *dc, unsigned int cpu)
{
	u64 area, ctl, pebs = 0;

	lockdep_assert_irqs_disabled();

	if (!(ds_caps.bts || ds_caps.pebs) || dc->area_users || dc->kinds ||
	    rdmsrl_safe(MSR_IA32_DS_AREA, &area))
		return;
	/* The real MSRs, also under KUnit: what another kernel left. */
	ctl = get_debugctlmsr();
	if (ds_caps.pebs)
		rdmsrl_safe(MSR_IA32_PEBS_ENABLE, &pebs);
	if (!area && !pebs && !(ctl & DS_DEBUGCTL_MASK))
		return;
	/* PEBS first: no assist may find the area gone. */
	if (pebs)
		wrmsrl(MSR_IA32_PEBS_ENABLE, 0);
	update_debugctlmsr(ctl & ~DS_DEBUGCTL_MASK);
	wrmsrl(MSR_IA32_DS_AREA, 0);
	pr_warn("CPU%u: IA32_DS_AREA %#llx, DEBUGCTL %#llx, PEBS_ENABLE %#llx left by another kernel: cleared\n",
		cpu, area, ctl, pebs);
}

VISIBLE_IF_KUNIT int ds_cpu_online(unsigned int cpu)
{
	enum ds_kind kind;

	local_irq_disable();
	/*
	 * perf's starting callback may have loaded IA32_DS_AREA while perf
	 * gave its last half back, after its release went past this CPU;
	 * see ds_perf_release().
	 */
	if (!ds_perf_granted_any())
		ds_area_put(this_cpu_ptr(&ds_cpus), DS_AREA_PERF);
	ds_cpu_clear_inherited(this_cpu_ptr(&ds_cpus), cpu);
	/* INIT dropped a PMI owed from before the CPU went offline. */
	local_set(&this_cpu_ptr(&ds_cpus)->pmi_owed, 0);
	/* Online, then look; pairs with ds_hw_teardown() and ds_halt(). */
	smp_mb();
	for (kind = 0; kind < DS_NR_KINDS; kind++)
		if (READ_ONCE(ds_facilities[kind].active))
			ds_cpu_activate(this_cpu_ptr(&ds_cpus), kind);
	local_irq_enable();
	return 0;
}

/* Collect, stop BTS and clear IA32_DS_AREA; per-CPU tracers stay. */
static int ds_cpu_offline(unsigned int cpu)
{
	local_irq_disable();
	ds_cpu_disarm(this_cpu_ptr(&ds_cpus));
	local_irq_enable();
	return 0;
}

/* --- suspend and resume of the boot CPU --- */

/*
 * The other CPUs go offline and online again through ds_cpu_offline() and
 * ds_cpu_online(); the boot CPU stays up and loses IA32_DS_AREA and
 * DEBUGCTL to the power cycle. Syscore ops run on it alone, interrupts
 * disabled, and without the CPU hotplug lock: a setup or teardown may be
 * between a facility's @active and its IPIs. So suspend leaves every half,
 * LVTPC included, before lapic_suspend() saves it (syscore ops suspend in
 * the reverse order of registration), and resume takes up again the halves
 * the CPU used that are still set up. Whatever the pending IPI then does,
 * activating or deactivating, finds the CPU in the state it expects.
 */
VISIBLE_IF_KUNIT int ds_syscore_suspend(void *unused)
{
	struct ds_cpu *dc = this_cpu_ptr(&ds_cpus);

	dc->resume_kinds = dc->kinds;
	ds_cpu_disarm(dc);
	return 0;
}

static void ds_syscore_rearm(void)
{
	struct ds_cpu *dc = this_cpu_ptr(&ds_cpus);
	unsigned int kinds = dc->resume_kinds;
	enum ds_kind kind;

	/* A threshold PMI owed before the power cycle never comes. */
	local_set(&dc->pmi_owed, 0);
	dc->resume_kinds = 0;
	/* The firmware's DEBUGCTL, not what we wrote before the suspend. */
	dc->debugctl = static_call(ds_hw_read_debugctl)();
	dc->debugctl &= DS_DEBUGCTL_MASK;
	for (kind = 0; kind < DS_NR_KINDS; kind++)
		if ((kinds & BIT(kind)) &&
		    READ_ONCE(ds_facilities[kind].active))
			ds_cpu_activate(dc, kind);
}

VISIBLE_IF_KUNIT void ds_syscore_resume(void *unused)
{
	ds_syscore_rearm();
	/*
	 * A collection or notification queued with interrupts off in the
	 * suspend path raised a self-IPI that the power cycle lost; irq_work
	 * raises none while its list is not empty, so raise it again.
	 */
	arch_irq_work_raise();
}

/* --- reboot, kexec and power off --- */

/*
 * A kexec'd kernel inherits the MSRs. With BTS on, a CPU would go on
 * storing records through the old kernel's cpu_entry_area into whatever the
 * new kernel keeps there, and IA32_DS_AREA would point there too. So when
 * the machine goes down, every CPU leaves our halves while all are online
 * (the reboot notifier, before the other CPUs are stopped), and the CPU
 * that goes on leaves them once more from the syscore shutdown. From then
 * on no CPU arms them again: ds_cpu_activate(), hardware requests and
 * ds_perf_bts_enable() see ds_halted. perf's BTS bits go too. perf's
 * task events outlive perf_reboot() and may still schedule PEBS in, which
 * needs IA32_DS_AREA: so PEBS and the area go last, with interrupts off,
 * through ds_emergency_stop(): from machine_kexec() on the CPU that jumps,
 * from stop_this_cpu() on the others, and from the crash path, which runs
 * neither hook. A kexec jump goes through the suspend path instead. A
 * kernel still clears what it inherits as each CPU comes online, see
 * ds_cpu_clear_inherited().
 */
static void ds_cpu_halt(void *unused)
{
	unsigned long flags;
	u64 ctl;

	local_irq_save(flags);
	ds_cpu_disarm(this_cpu_ptr(&ds_cpus));
	/* perf's BTS too: a task's branches event outlives perf_reboot(). */
	ctl = static_call(ds_hw_read_debugctl)();
	if (ctl & DS_DEBUGCTL_MASK)
		static_call(ds_hw_write_debugctl)(ctl & ~DS_DEBUGCTL_MASK);
	local_irq_restore(flags);
}

static void ds_halt(void)
{
	/*
	 * Under ds_alloc_mutex: a setup holds it until its arming IPIs are done,
	 * and the next one sees the flag in ds_hw_get().
	 */
	mutex_lock(&ds_alloc_mutex);
	WRITE_ONCE(ds_halted, true);
	mutex_unlock(&ds_alloc_mutex);
	/*
	 * The flag, then the IPIs: a CPU that comes online meanwhile either
	 * sees it or is in the mask on_each_cpu() reads. Pairs with the
	 * barrier in ds_cpu_online().
	 */
	smp_mb();
	on_each_cpu(ds_cpu_halt, NULL, 1);
}

VISIBLE_IF_KUNIT int ds_reboot_notify(struct notifier_block *nb, unsigned long action,
				      void *data)
{
	ds_halt();
	return NOTIFY_DONE;
}

static struct notifier_block ds_reboot_nb = {
	.notifier_call	= ds_reboot_notify,
};

/* On the CPU that goes on; machine_shutdown() stops the others next. */
VISIBLE_IF_KUNIT void ds_syscore_shutdown(void *unused)
{
	WRITE_ONCE(ds_halted, true);
	ds_cpu_halt(NULL);
}

static const struct syscore_ops ds_syscore_ops = {
	.suspend	= ds_syscore_suspend,
	.resume		= ds_syscore_resume,
	.shutdown	= ds_syscore_shutdown,
};

static struct syscore ds_syscore = {
	.ops	= &ds_syscore_ops,
};

/* --- backends --- */

int ds_hw_backend_start(struct ds_tracer *tracer)
{
	bool per_cpu = tracer->cpu >= 0;
	enum ds_kind kind = tracer->kind;
	int err;

	/* Task and CPU tracers of a kind would fight over the staging buffer. */
	if (per_cpu ? ds_nr_task_hw[kind] : ds_nr_cpu[kind])
		return -EBUSY;
	/* The first one; see ds_hw_exclusive_get(). */
	if (!ds_nr_task_hw[kind] && !ds_nr_cpu[kind]) {
		err = ds_hw_exclusive_get(kind);
		if (err)
			return err;
	}
	err = ds_hw_get(&ds_facilities[kind]);
	if (err)
		goto put_exclusive;
	if (per_cpu)
		ds_nr_cpu[kind]++;
	else
		ds_nr_task_hw[kind]++;
	return 0;

put_exclusive:
	if (!ds_nr_task_hw[kind] && !ds_nr_cpu[kind])
		ds_hw_exclusive_put(kind);
	return err;
}

void ds_hw_backend_stop(struct ds_tracer *tracer)
{
	enum ds_kind kind = tracer->kind;

	if (tracer->cpu >= 0)
		ds_nr_cpu[kind]--;
	else
		ds_nr_task_hw[kind]--;
	ds_hw_put(&ds_facilities[kind]);
	if (!ds_nr_task_hw[kind] && !ds_nr_cpu[kind])
		ds_hw_exclusive_put(kind);
}

/* --- perf --- */

/* A teardown in flight ends soon: wait for it rather than fail. */
static void ds_perf_wait_teardown(struct ds_facility *fac)
	__must_hold(&ds_perf_lock)
{
	lockdep_assert_held(&ds_perf_lock);

	if (fac->state != DS_HW_TEARING_DOWN)
		return;
	fac->perf_waiters++;
	do {
		spin_unlock(&ds_perf_lock);
		wait_var_event(&fac->state,
			       READ_ONCE(fac->state) != DS_HW_TEARING_DOWN);
		spin_lock(&ds_perf_lock);
	} while (fac->state == DS_HW_TEARING_DOWN);
	fac->perf_waiters--;
}

static struct ds_facility *ds_perf_facility(enum ds_kind kind)
{
	if (WARN_ON_ONCE(kind != DS_BTS && kind != DS_PEBS))
		return NULL;
	return &ds_facilities[kind];
}

int ds_perf_reserve(enum ds_kind kind)
{
	struct ds_facility *fac = ds_perf_facility(kind);
	bool claimed = false;
	int err = 0;

	if (!fac)
		return -EINVAL;
	might_sleep();
	/* As flush_work(): whatever the teardown waits for, we may wait for. */
	lock_map_acquire(&ds_hw_teardown_map);
	lock_map_release(&ds_hw_teardown_map);

	spin_lock(&ds_perf_lock);
	ds_perf_wait_teardown(fac);
	if (fac->perf_held)
		err = -EBUSY;
	else if (fac->state == DS_HW_DOWN)
		fac->perf_held = true;
	else if (!ds_hw_claim_teardown(fac))
		err = -EBUSY;
	else
		claimed = true;
	spin_unlock(&ds_perf_lock);
	if (!claimed)
		return err;

	/* Set up, but only lingering: perf's need ends the linger. */
	ds_hw_teardown(fac);
	ds_hw_teardown_done(fac, true);
	/* Would find nothing to tear down; cancelled only to save the run. */
	cancel_delayed_work(&fac->linger_work);
	return 0;
}

bool ds_perf_holds(enum ds_kind kind)
{
	struct ds_facility *fac = ds_perf_facility(kind);
	bool held;

	if (!fac)
		return false;
	spin_lock(&ds_perf_lock);
	held = fac->perf_held;
	spin_unlock(&ds_perf_lock);
	return held;
}

void ds_perf_release(enum ds_kind kind)
{
	struct ds_facility *fac = ds_perf_facility(kind);
	int cpu;

	if (!fac)
		return;
	spin_lock(&ds_perf_lock);
	WARN_ON_ONCE(!fac->perf_held);
	fac->perf_held = false;
	spin_unlock(&ds_perf_lock);

	/*
	 * perf gives IA32_DS_AREA up CPU by CPU, without the hotplug lock
	 * (release_ds_buffers()). A CPU that came up behind it has loaded
	 * the MSR again: unload it there, or ds_cpu_online() does once the
	 * CPU gets that far.
	 */
	if (ds_perf_granted_any())
		return;
	for_each_online_cpu(cpu)
		if (READ_ONCE(per_cpu(ds_cpus, cpu).area_users) & DS_AREA_PERF)
			smp_call_function_single(cpu, ds_perf_unload_area,
						 NULL, 1);
}

/* --- initialisation --- */

static int __init ds_init(void)
{
	int cpu, ret;

	for_each_possible_cpu(cpu) {
		struct ds_cpu *dc = per_cpu_ptr(&ds_cpus, cpu);

		dc->area = per_cpu_ptr(&cpu_debug_store, cpu);
		dc->area_hw = (unsigned long)&get_cpu_entry_area(cpu)->cpu_debug_store;
		/* Hard: the collection needs interrupts off, also on PREEMPT_RT. */
		dc->collect_work = IRQ_WORK_INIT_HARD(ds_collect_work);
	}
	ds_probe_caps();

	/*
	 * For good, not per setup: a threshold PMI may come after its half
	 * was left (ds_stage_collect() owes it), and the facilities come and
	 * go without a lock that would order registrations.
	 */
	if (ds_caps.bts || ds_caps.pebs) {
		/*
		 * First: until it stops BTS, a kernel-mode trace records the
		 * handlers before it into the staging buffer's margin.
		 * nmi_handle() calls every handler all the same.
		 */
		ret = register_nmi_handler(NMI_LOCAL, ds_nmi_handler,
					   NMI_FLAG_FIRST, "ds");
		if (ret)
			goto no_hardware;
	}
	ret = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "x86/ds:online",
				ds_cpu_online, ds_cpu_offline);
	if (ret < 0)
		goto unregister_nmi;
	register_syscore(&ds_syscore);
	register_reboot_notifier(&ds_reboot_nb);
	pr_info("BTS %s, PEBS %s\n", ds_caps.bts ? "available" : "absent",
		ds_caps.pebs ? "available" : "absent");
	return 0;

unregister_nmi:
	if (ds_caps.bts || ds_caps.pebs)
		unregister_nmi_handler(NMI_LOCAL, "ds");
no_hardware:
	/* Without its threshold PMI or CPU callbacks, BTS would lose records. */
	memset(&ds_caps, 0, sizeof(ds_caps));
	pr_warn("no hardware tracing: %d\n", ret);
	return ret;
}
arch_initcall(ds_init);

/* The machine is going down: BTS stays off, see ds_halt(). */
bool ds_perf_halted(void)
{
	return READ_ONCE(ds_halted);
}

/* perf drives a half only while it holds it, see ds_perf_reserve(). */
bool ds_perf_granted(enum ds_kind kind)
{
	return READ_ONCE(ds_facilities[kind].perf_held);
}

bool ds_perf_granted_any(void)
{
	return ds_perf_granted(DS_BTS) || ds_perf_granted(DS_PEBS);
}

/* IPI callbacks: IA32_DS_AREA is shared with our tracers, see ds_area_get(). */
void ds_perf_load_area(void *unused)
{
	ds_area_get(this_cpu_ptr(&ds_cpus), DS_AREA_PERF);
}

void ds_perf_unload_area(void *unused)
{
	ds_area_put(this_cpu_ptr(&ds_cpus), DS_AREA_PERF);
}

void ds_perf_reload_area(struct debug_store *area)
{
	struct ds_cpu *dc = this_cpu_ptr(&ds_cpus);

	/* Otherwise the MSR is our tracers', and syscore resume reloads it. */
	if (area && (dc->area_users & DS_AREA_PERF))
		static_call(ds_hw_write_ds_area)(dc->area_hw);
}

