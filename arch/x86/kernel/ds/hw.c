// SPDX-License-Identifier: GPL-2.0
/*
 * Debug Store allocator: the per-CPU hardware state of the hardware
 * backend, with interrupts disabled: the save area, the staging buffers,
 * DEBUGCTL, the context switch, the threshold PMI.
 *
 * Buffers and page table isolation. The CPU stores records through linear
 * addresses, also while the user page tables are loaded. With PTI only the
 * cpu_entry_area (CEA) is mapped in both, so a client's buffer cannot be
 * handed to the hardware. Instead every CPU has a fixed BTS "staging"
 * buffer, mapped into the CEA slot the kernel reserves for it
 * (cpu_debug_buffers), and the DS save area is the CEA alias of the per-CPU
 * cpu_debug_store. The client's trace buffer is ordinary kernel memory. The
 * allocator collects the staging buffer into the trace buffer of the tracer
 * loaded on that CPU: when the task is scheduled out, at the threshold
 * interrupt, and before a client reads. The kernel itself only touches the
 * staging pages and the save area through their own (vmalloc, direct-map)
 * aliases.
 *
 * Threshold interrupts are PMIs through APIC_LVTPC. perf programs LVTPC as
 * NMI when its driver is loaded; otherwise nobody does, so the allocator
 * programs it while it has hardware tracers and restores it afterwards. BTS
 * has no overflow status bit: the NMI handler claims an NMI only when a
 * staging index has reached its threshold and leaves the rest to perf. It
 * stops BTS and queues irq_work; the collection runs with interrupts
 * disabled and starts BTS again.
 *
 * DEBUGCTL. The allocator writes it with interrupts disabled, as a
 * read-modify-write that keeps every bit but its own five, and it keeps a
 * per-CPU shadow of those five. Its NMI handler only clears the five, and
 * marks the shadow stale (ds_nmi_stop_bts()). The other writers are step.c and
 * __switch_to_xtra() (BTF, interrupts disabled, so they cannot interleave
 * with ours on a CPU) and perf (LBR and freeze bits). perf's PMI handler
 * disables LBR and freezing when it starts and enables them again from the
 * same per-CPU state when it ends, and the CPU itself may clear LBR when it
 * delivers the PMI; so an NMI that lands between our read and our write
 * leaves the non-BTS bits as it found them, and our write does not undo it.
 */

#define pr_fmt(fmt) "ds: " fmt

#include <linux/irq_work.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/smp.h>
#include <linux/spinlock.h>
#include <linux/static_call.h>
#include <linux/vmalloc.h>

#include <kunit/static_stub.h>

#include <asm/apic.h>
#include <asm/cpu_entry_area.h>
#include <asm/ds.h>
#include <asm/intel_ds.h>
#include <asm/local.h>
#include <asm/msr.h>
#include <asm/nmi.h>

#include "internal.h"

DEFINE_PER_CPU(struct ds_cpu, ds_cpus);

struct ds_hw_caps ds_caps;
/* --- hardware capabilities --- */

void ds_probe_caps(void)
{
	static_call(ds_hw_probe)(&ds_caps);
}

bool ds_hw_present(enum ds_kind kind)
{
	if (kind == DS_BTS)
		return ds_caps.bts;
	return kind == DS_PEBS && ds_caps.pebs;
}
EXPORT_SYMBOL_GPL(ds_hw_present);
/* --- the DS save area and the staging buffers --- */

/* The staging threshold in records: early enough to collect in time. */
static size_t ds_stage_threshold(struct ds_cpu *dc, enum ds_kind kind,
				 struct ds_tracer *tracer)
{
	size_t cap = dc->stage_cap[kind];
	size_t th = cap - (cap >> DS_STAGE_MARGIN_SHIFT);
	size_t room = 0;

	if (tracer->overflow != DS_OVERFLOW_NOTIFY)
		return th;
	/* Interrupt right where the trace buffer reaches its threshold. */
	raw_spin_lock(&tracer->lock);
	if (tracer->count < tracer->threshold)
		room = tracer->threshold - tracer->count;
	raw_spin_unlock(&tracer->lock);
	return room ? min(th, room) : th;
}

static void ds_stage_program(struct ds_cpu *dc, enum ds_kind kind,
			     struct ds_tracer *tracer)
{
	struct ds_area_part *part = ds_part(dc->area, kind);
	size_t rec = DS_BTS_RECORD_SIZE;
	u64 base = dc->stage_hw[kind];

	lockdep_assert_irqs_disabled();

	part->base = base;
	part->index = base;
	/* A suspended or paused tracer stops through DEBUGCTL: ds_bts_bits(). */
	if (!tracer) {
		/* Nothing fits, and the threshold is out of reach. */
		part->absmax = base;
		part->threshold = base + rec;
		return;
	}
	part->absmax = base + dc->stage_cap[kind] * rec;
	part->threshold = base + ds_stage_threshold(dc, kind, tracer) * rec;
}

static void ds_stage_collect(struct ds_cpu *dc, enum ds_kind kind)
{
	struct ds_area_part *part = ds_part(dc->area, kind);
	struct ds_tracer *tracer = dc->loaded[kind];
	size_t rec = DS_BTS_RECORD_SIZE;
	u64 index = READ_ONCE(part->index);
	bool reached = index >= part->threshold;
	size_t n;

	lockdep_assert_irqs_disabled();

	/*
	 * Owe the threshold's PMI before the index goes back, so that an NMI
	 * at any point from here finds either the index at the threshold or
	 * the debt; settle it below if the PMI was claimed already.
	 */
	if (reached)
		local_inc(&dc->pmi_owed);
	/* Never trust the index beyond the buffer the hardware was given. */
	n = min_t(u64, index - part->base, part->absmax - part->base);
	n /= rec;
	if (n) {
		raw_spin_lock(&tracer->lock);
		if (!(tracer->flags & DS_KERNEL))
			ds_buf_append_user(tracer, dc->stage[kind], n);
		else
			ds_buf_append(tracer, dc->stage[kind], n);
		/*
		 * A full staging buffer dropped what came next, if anything,
		 * and the CPU does not say how much: count one lost record,
		 * and say that the count is approximate.
		 */
		if (index >= part->absmax) {
			tracer->lost++;
			tracer->unwritten++;
			WRITE_ONCE(tracer->dropped, true);
			ds_buf_append_gap(tracer, DS_GAP_LOST, 0, 0);
		}
		raw_spin_unlock(&tracer->lock);
	}
	/*
	 * The staging pages are mapped into every process: where Meltdown
	 * reads them, leave nothing of one task's trace for the next.
	 */
	if (ds_caps.meltdown)
		memset(dc->stage[kind], 0, n * rec);
	WRITE_ONCE(part->index, part->base);
	if (reached && READ_ONCE(dc->pmi_seen))
		local_dec(&dc->pmi_owed);
}

/* --- per-CPU hardware state, interrupts disabled --- */

static void ds_debugctl_set(struct ds_cpu *dc, u64 bits)
{
	u64 val;

	lockdep_assert_irqs_disabled();

	if (dc->debugctl == bits && !READ_ONCE(dc->nmi_stopped))
		return;
	/*
	 * Cleared first: an NMI after this that stops BTS again sets it
	 * again, and queues the collection that writes our bits back.
	 */
	WRITE_ONCE(dc->nmi_stopped, false);
	val = static_call(ds_hw_read_debugctl)();
	static_call(ds_hw_write_debugctl)((val & ~DS_DEBUGCTL_MASK) | bits);
	dc->debugctl = bits;
}

VISIBLE_IF_KUNIT u64 ds_bts_bits(const struct ds_tracer *tracer)
{
	u64 bits = DS_DEBUGCTL_BTS_ON;

	if (!tracer || !ds_recording(tracer))
		return 0;
	if (!(tracer->flags & DS_KERNEL))
		bits |= DEBUGCTLMSR_BTS_OFF_OS;
	if (!(tracer->flags & DS_USER))
		bits |= DEBUGCTLMSR_BTS_OFF_USR;
	return bits;
}

/* The tracer that should own this CPU's staging buffer while @task runs. */
static struct ds_tracer *ds_wanted(struct ds_cpu *dc, enum ds_kind kind,
				   struct task_struct *task)
{
	struct ds_tracer *tracer = rcu_dereference_sched(dc->cpu_tracer[kind]);
	struct ds_context *ctx;

	if (tracer)
		return tracer;
	ctx = ds_task_ctx(task);
	tracer = ctx ? rcu_dereference_sched(ctx->tracer[kind]) : NULL;
	return tracer && tracer->backend == &ds_hw_backend ? tracer : NULL;
}

static bool ds_cpu_uses(const struct ds_cpu *dc, enum ds_kind kind)
{
	return READ_ONCE(dc->kinds) & BIT(kind);
}

/* BTS off, then every staging buffer into its tracer. */
void ds_cpu_stop(struct ds_cpu *dc)
{
	enum ds_kind kind;

	lockdep_assert_irqs_disabled();

	/* The BTS bits are perf's while it holds the BTS half. */
	if (ds_cpu_uses(dc, DS_BTS))
		ds_debugctl_set(dc, 0);
	for (kind = 0; kind < DS_NR_KINDS; kind++)
		if (dc->loaded[kind])
			ds_stage_collect(dc, kind);
}

/* Load the tracers @task wants and switch BTS on as they say. */
void ds_cpu_start(struct ds_cpu *dc, struct task_struct *task)
{
	struct ds_tracer *tracer;
	enum ds_kind kind;

	lockdep_assert_irqs_disabled();

	if (!dc->kinds)
		return;
	/* New thresholds: their PMI is yet to come. */
	WRITE_ONCE(dc->pmi_seen, false);
	for (kind = 0; kind < DS_NR_KINDS; kind++)
		if (ds_cpu_uses(dc, kind))
			WRITE_ONCE(dc->loaded[kind], ds_wanted(dc, kind, task));
	/*
	 * Pairs with the barrier in ds_sync_loaded(): either it sees the
	 * tracers loaded here and interrupts this CPU, or the state read
	 * below is the one its caller published. A tracer being detached is
	 * not loaded at all.
	 */
	smp_mb();
	for (kind = 0; kind < DS_NR_KINDS; kind++) {
		if (!ds_cpu_uses(dc, kind))
			continue;
		tracer = dc->loaded[kind];
		if (tracer && !READ_ONCE(tracer->attached)) {
			tracer = NULL;
			WRITE_ONCE(dc->loaded[kind], NULL);
		}
		ds_stage_program(dc, kind, tracer);
	}
	if (ds_cpu_uses(dc, DS_BTS))
		ds_debugctl_set(dc, ds_bts_bits(dc->loaded[DS_BTS]));
}

void ds_area_get(struct ds_cpu *dc, unsigned int user)
{
	lockdep_assert_irqs_disabled();

	if (!dc->area_users)
		static_call(ds_hw_write_ds_area)(dc->area_hw);
	WRITE_ONCE(dc->area_users, dc->area_users | user);
}

void ds_area_put(struct ds_cpu *dc, unsigned int user)
{
	lockdep_assert_irqs_disabled();

	if (!(dc->area_users & user))
		return;
	WRITE_ONCE(dc->area_users, dc->area_users & ~user);
	if (!dc->area_users)
		static_call(ds_hw_write_ds_area)(0);
}

/* This CPU's tracers start to use the @kind half of the save area. */
void ds_cpu_activate(struct ds_cpu *dc, enum ds_kind kind)
{
	lockdep_assert_irqs_disabled();

	if ((dc->kinds & BIT(kind)) || READ_ONCE(ds_halted))
		return;
	ds_cpu_stop(dc);
	if (!dc->kinds) {
		ds_area_get(dc, DS_AREA_TRACERS);
		dc->lvtpc = static_call(ds_hw_arm_pmi)();
	}
	/* The NMI handler may look at the half from now on. */
	WRITE_ONCE(dc->kinds, dc->kinds | BIT(kind));
	ds_cpu_start(dc, current);
}

/* Collect the @kind half and leave it, and the save area if it was the last. */
static void ds_cpu_deactivate(struct ds_cpu *dc, enum ds_kind kind)
{
	lockdep_assert_irqs_disabled();

	if (!(dc->kinds & BIT(kind)))
		return;
	ds_cpu_stop(dc);
	dc->loaded[kind] = NULL;
	ds_stage_program(dc, kind, NULL);
	WRITE_ONCE(dc->kinds, dc->kinds & ~BIT(kind));
	if (!dc->kinds) {
		ds_area_put(dc, DS_AREA_TRACERS);
		static_call(ds_hw_restore_pmi)(dc->lvtpc);
		/*
		 * The handler stays registered: a debt it can no longer tell
		 * from another NMI source is dropped, as it was when the
		 * handler went with the last half.
		 */
		local_set(&dc->pmi_owed, 0);
	}
	ds_cpu_start(dc, current);
}

/* Leave every half: the CPU goes offline or into suspend. */
void ds_cpu_disarm(struct ds_cpu *dc)
{
	enum ds_kind kind;

	for (kind = 0; kind < DS_NR_KINDS; kind++)
		ds_cpu_deactivate(dc, kind);
}

/* Make this CPU's hardware match the published state; IPI callback. */
void ds_cpu_sync(void *unused)
{
	struct ds_cpu *dc = this_cpu_ptr(&ds_cpus);

	ds_cpu_stop(dc);
	ds_cpu_start(dc, current);
}

/* Redirected by the KUnit suite, which counts the CPUs interrupted. */
void ds_sync_cpu(int cpu)
{
	KUNIT_STATIC_STUB_REDIRECT(ds_sync_cpu, cpu);
	smp_call_function_single(cpu, ds_cpu_sync, NULL, 1);
}

/*
 * Collect @tracer's records and apply its published state on the CPUs
 * that have it loaded, and only there: none for a task that is not
 * running, such as a tracee in a ptrace stop, whose records were
 * collected when it was switched out.
 */
void ds_sync_loaded(struct ds_tracer *tracer)
{
	int cpu;

	lockdep_assert_held(&ds_alloc_mutex);

	/* The caller's changes, then the look; see ds_cpu_start(). */
	smp_mb();
	for_each_online_cpu(cpu)
		if (READ_ONCE(per_cpu(ds_cpus, cpu).loaded[tracer->kind]) ==
		    tracer)
			ds_sync_cpu(cpu);
}

/* Under @task's rq lock: the CPU it runs on, or -1. */
static int ds_task_running_cpu(struct task_struct *task, void *unused)
{
	return task_curr(task) ? task_cpu(task) : -1;
}

/*
 * A task that runs now loads a new tracer at its next switch; make it load
 * now. The look takes the task's rq lock, after the publication: a switch
 * after it takes that lock too and loads the tracer itself, and one before
 * it left the task running where we interrupt.
 */
void ds_sync_task(struct task_struct *task)
{
	int cpu;

	lockdep_assert_held(&ds_alloc_mutex);

	cpu = task_call_func(task, ds_task_running_cpu, NULL);
	if (cpu >= 0)
		ds_sync_cpu(cpu);
}

void ds_cpu_activate_ipi(void *info)
{
	struct ds_facility *fac = info;

	ds_cpu_activate(this_cpu_ptr(&ds_cpus), fac->kind);
}

void ds_cpu_deactivate_ipi(void *info)
{
	struct ds_facility *fac = info;

	ds_cpu_deactivate(this_cpu_ptr(&ds_cpus), fac->kind);
}

void ds_collect_work(struct irq_work *work)
{
	ds_cpu_sync(NULL);
}

static bool ds_cpu_at_threshold(struct ds_cpu *dc)
{
	struct ds_area_part *part;
	enum ds_kind kind;

	for (kind = 0; kind < DS_NR_KINDS; kind++) {
		if (!ds_cpu_uses(dc, kind))
			continue;
		part = ds_part(dc->area, kind);
		if (READ_ONCE(part->index) >= READ_ONCE(part->threshold))
			return true;
	}
	return false;
}

/*
 * BTS has no overflow status bit: the index tells whether the PMI is ours,
 * or, for a PMI the CPU delivered after we collected, the debt
 * ds_stage_collect() left. The CPU masks LVTPC when it delivers a PMI:
 * unmask it for the next one, or, once disarmed, put back what we found.
 */
/*
 * Stop BTS until the collection: the margin above the threshold then only
 * has to hold the PMI's skid, not every branch taken until interrupts are
 * enabled again. A read-modify-write that this NMI interrupts writes its
 * value after ours, BTS included; the collection stops BTS then.
 */
static void ds_nmi_stop_bts(struct ds_cpu *dc)
{
	struct ds_area_part *part;
	u64 ctl;

	if (!ds_cpu_uses(dc, DS_BTS))
		return;
	part = ds_part(dc->area, DS_BTS);
	if (READ_ONCE(part->index) < READ_ONCE(part->threshold))
		return;
	ctl = static_call(ds_hw_read_debugctl)();
	static_call(ds_hw_write_debugctl)(ctl & ~DS_DEBUGCTL_MASK);
	WRITE_ONCE(dc->nmi_stopped, true);
}

int ds_nmi_handler(unsigned int cmd, struct pt_regs *regs)
{
	struct ds_cpu *dc = this_cpu_ptr(&ds_cpus);

	if (ds_cpu_at_threshold(dc)) {
		WRITE_ONCE(dc->pmi_seen, true);
		ds_nmi_stop_bts(dc);
		static_call(ds_hw_ack_pmi)();
		irq_work_queue(&dc->collect_work);
		return NMI_HANDLED;
	}
	if (local_read(&dc->pmi_owed) <= 0)
		return NMI_DONE;
	local_dec(&dc->pmi_owed);
	if (READ_ONCE(dc->kinds))
		static_call(ds_hw_ack_pmi)();
	else
		static_call(ds_hw_restore_pmi)(dc->lvtpc);
	return NMI_HANDLED;
}

