// SPDX-License-Identifier: GPL-2.0
/*
 * Debug Store (BTS/PEBS) resource allocator.
 *
 * This file is the only writer of IA32_DS_AREA and of the TR, BTS, BTINT,
 * BTS_OFF_OS and BTS_OFF_USR bits of IA32_DEBUGCTL. Clients request a BTS
 * tracer for a task or for a CPU and get an opaque handle. PEBS has one
 * client, perf: its records come from counters, which perf owns, so a PEBS
 * buffer is of use only to whoever programs them; the allocator places
 * perf's PEBS buffer in the save area beside the BTS half.
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
 * The trace buffer does the overflow policy: wrap-around (oldest records are
 * overwritten and counted lost) or notification (at a threshold the client's
 * callback runs from irq_work and recording pauses until it clears or
 * resumes). The staging buffer never wraps: BTINT is always set and its
 * threshold leaves a margin, so a PMI collects it before it fills.
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
 *
 * Ownership and lifetime. Requests, releases and state changes run under
 * ds_mutex. The context switch, the IPIs and the emulated backend read the
 * published tracers with interrupts disabled. A state change publishes
 * first and then runs ds_cpu_sync() on every online CPU and waits for it;
 * since each CPU re-derives its hardware state from the published state with
 * interrupts off, afterwards no CPU uses the old state and no reader still
 * holds an unpublished tracer. The context switch hook is gated by
 * TIF_DS_TRACE, so an untraced task pays nothing; the flag is cleared only
 * after that synchronisation, so a tracer is never left loaded across the
 * switch to another task.
 *
 * perf. perf's Intel driver is the per-CPU client that lays out the save
 * area and drains it itself, in its PMI; it maps its buffers, loads
 * IA32_DS_AREA and sets the BTS bits through the ds_perf_*() calls at the
 * end of this file, which are built whenever that driver is
 * (CONFIG_X86_DS_CORE), allocator or not. The save area has two halves,
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

#include <linux/bitfield.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/gfp.h>
#include <linux/irq_work.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/reboot.h>
#include <linux/sched.h>
#include <linux/sched/coredump.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/spinlock.h>
#include <linux/static_call.h>
#include <linux/syscore_ops.h>
#include <linux/timekeeping.h>
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
#include <asm/tlbflush.h>

/* The DEBUGCTL bits this file owns. */
#define DS_DEBUGCTL_MASK	(DEBUGCTLMSR_TR | DEBUGCTLMSR_BTS |	\
				 DEBUGCTLMSR_BTINT |			\
				 DEBUGCTLMSR_BTS_OFF_OS |		\
				 DEBUGCTLMSR_BTS_OFF_USR)
/* Store branch records in the DS buffer and interrupt at the threshold. */
#define DS_DEBUGCTL_BTS_ON	(DEBUGCTLMSR_TR | DEBUGCTLMSR_BTS |	\
				 DEBUGCTLMSR_BTINT)

/* One 64-bit BTS record: from, to, flags. */
#define DS_BTS_RECORD_SIZE	sizeof(struct ds_bts_record)

/* Staging buffers: the CEA slots the kernel reserves for them. */
#define DS_STAGE_SIZE		BTS_BUFFER_SIZE
/* Interrupt when 1/2^n of the staging buffer is left, as margin for skid. */
#define DS_STAGE_MARGIN_SHIFT	4

/* Netburst places the BTS controls at other DEBUGCTL bits: unsupported. */
#define DS_NETBURST_FAMILY	0xf

/**
 * struct ds_hw_caps - what the Debug Store hardware offers
 * @bts:	 BTS with the 64-bit format
 * @pebs:	 PEBS, whose half of the save area perf may reserve
 * @meltdown:	 user mode can read kernel mappings speculatively, the
 *		 cpu_entry_area staging buffers included
 */
struct ds_hw_caps {
	bool		bts;
	bool		pebs;
	bool		meltdown;
};

/*
 * Every access to the hardware goes through these, as static calls, so
 * that the KUnit suite can run the allocator against a simulated CPU.
 */
struct ds_hw_ops {
	void	(*probe)(struct ds_hw_caps *caps);
	u64	(*read_debugctl)(void);
	void	(*write_debugctl)(u64 val);
	void	(*write_ds_area)(unsigned long addr);
	u32	(*arm_pmi)(void);
	void	(*ack_pmi)(void);
	void	(*restore_pmi)(u32 lvtpc);
	void	(*map)(void *cea, void *buf, size_t size);
	void	(*unmap)(void *cea, size_t size);
	void	(*flush)(unsigned long start, unsigned long end);
};

#ifdef CONFIG_X86_DS

/* The task side: the tracers of one thread, thread_struct::ds_ctx. */
struct ds_context {
	struct ds_tracer __rcu	*tracer[DS_NR_KINDS];
	struct rcu_head		rcu;
};

struct ds_tracer {
	enum ds_kind		kind;
	const struct ds_backend	*backend;
	/* Traced task (referenced) while attached, or NULL. */
	struct task_struct	*task;
	/* Traced CPU, or -1 for a task tracer. */
	int			cpu;
	unsigned int		flags;
	enum ds_overflow	overflow;
	ds_notify_fn		notify;
	void			*cookie;
	ds_notify_fn		detached;
	/* Written under ds_mutex, read anywhere. */
	bool			attached;
	bool			suspended;
	/* Notification pause; set under @lock, cleared under both. */
	bool			paused;

	/* The trace buffer; everything below is under @lock. */
	raw_spinlock_t		lock;
	void			*buf;
	bool			own_buf;
	size_t			rec_size;	/* bytes */
	size_t			capacity;	/* records */
	size_t			head;		/* next slot, records */
	size_t			count;		/* valid records */
	size_t			threshold;	/* notify at, records; 0: wrap */
	u64			lost;		/* since the last clear */
	bool			dropped;	/* a staging buffer filled: @lost approximate */

	/*
	 * Locked-memory charge: the requester's user (referenced) bears it
	 * against RLIMIT_MEMLOCK, its mm (grabbed) shows it as VmPin.
	 */
	struct user_struct	*user;
	struct mm_struct	*mm;
	unsigned long		charged;

	struct irq_work		notify_work;
	struct rcu_head		rcu;
};

/* One half (BTS or PEBS) of the DS save area, in the SDM's field order. */
struct ds_area_part {
	u64	base;
	u64	index;
	u64	absmax;
	u64	threshold;
};

/* Per-CPU hardware state; interrupts disabled unless noted. */
struct ds_cpu {
	/* DS save area: direct-map alias, and the CEA address the CPU uses. */
	struct debug_store	*area;
	unsigned long		area_hw;
	/* Staging buffers: vmalloc alias, CEA address, records. */
	void			*stage[DS_NR_KINDS];
	unsigned long		stage_hw[DS_NR_KINDS];
	size_t			stage_cap[DS_NR_KINDS];
	/* The per-CPU tracers of this CPU, published under ds_mutex. */
	struct ds_tracer __rcu	*cpu_tracer[DS_NR_KINDS];
	/* The tracers the staging records belong to. */
	struct ds_tracer	*loaded[DS_NR_KINDS];
	/* Our DEBUGCTL bits as last written. */
	u64			debugctl;
	/*
	 * The NMI handler switched BTS off behind the shadow's back; the
	 * next ds_debugctl_set() writes whatever it is asked to.
	 */
	bool			nmi_stopped;
	/* APIC_LVTPC before we programmed it. */
	u32			lvtpc;
	/*
	 * The facilities (BIT(kind)) this CPU's tracers use: their half of
	 * the save area is ours to program, their staging buffer ours to
	 * collect. Written with interrupts disabled, read by the NMI handler.
	 */
	unsigned int		kinds;
	/* Who needs IA32_DS_AREA pointing at @area_hw: see ds_area_get(). */
	unsigned int		area_users;
	/* @kinds when the boot CPU went into suspend. */
	unsigned int		resume_kinds;
	/* The NMI handler claimed a PMI at the thresholds now programmed. */
	bool			pmi_seen;
	/*
	 * Thresholds collected before their PMI arrived: the CPU may deliver
	 * it late (skid, NMIs blocked), after the index is reset, and it is
	 * still ours to claim and to unmask LVTPC for. Changed by this CPU
	 * with interrupts disabled and by its NMI handler, hence local_t.
	 */
	local_t			pmi_owed;
	/* Collection after a threshold PMI. */
	struct irq_work		collect_work;
};

static DEFINE_PER_CPU(struct ds_cpu, ds_cpus);

/* Serialises requests, releases, state changes and backend registration. */
static DEFINE_MUTEX(ds_mutex);
/* The published tracer pointers as their writers, under ds_mutex, see them. */
#define ds_dereference(p) \
	rcu_dereference_protected(p, lockdep_is_held(&ds_mutex))
/* The setup of one facility's staging buffers and per-CPU activation. */
enum ds_hw_state {
	DS_HW_DOWN,		/* nothing set up; perf may reserve */
	DS_HW_SETTING_UP,	/* for the first user, under ds_mutex */
	DS_HW_UP,		/* set up: users, or lingering without */
	DS_HW_TEARING_DOWN,	/* by the linger's end or by perf */
};

/**
 * struct ds_facility - one half of the Debug Store: BTS or PEBS
 * @kind:	  which half
 * @users:	  attached hardware tracers of @kind
 * @state:	  the setup of @kind's staging buffers
 * @perf_held:	  perf holds this half (ds_perf_reserve())
 * @perf_waiters: reservations waiting for the linger's teardown; a request
 *		  that comes meanwhile is refused, so that the teardown's
 *		  end hands the half to perf rather than to whoever takes
 *		  ds_mutex first
 * @active:	  the staging buffers exist and online CPUs use them; set
 *		  under ds_mutex, cleared by whoever tears down, see
 *		  ds_hw_teardown()
 * @linger_work:  ends a setup that has had no users for ds_hw_linger
 *
 * The two halves are handed out separately: perf may hold one while the
 * allocator's tracers use the other, in the same save area, which
 * IA32_DS_AREA points at as long as either side uses a half (see
 * ds_area_get()). @users, @state, @perf_held and @perf_waiters are under
 * ds_perf_lock, @users under ds_mutex too.
 */
struct ds_facility {
	enum ds_kind		kind;
	unsigned int		users;
	enum ds_hw_state	state;
	bool			perf_held;
	unsigned int		perf_waiters;
	bool			active;
	struct delayed_work	linger_work;
};

static DEFINE_SPINLOCK(ds_perf_lock);
static void ds_hw_linger_fn(struct work_struct *work);

static struct ds_facility ds_facilities[DS_NR_KINDS] = {
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

/*
 * Setting up arms every CPU and mapping the staging buffers flushes every
 * TLB; so does tearing down. The resources outlive the last user by this
 * much, so that a loop of requests and releases, which any user may run,
 * interrupts the machine once per period and not twice per request.
 */
#define DS_HW_LINGER		HZ
/* DS_HW_LINGER; KUnit makes it longer than any test. */
static unsigned long ds_hw_linger = DS_HW_LINGER;
/* Attached hardware tracers per kind, task and CPU; under ds_mutex. */
static unsigned int ds_nr_task_hw[DS_NR_KINDS];
static unsigned int ds_nr_cpu[DS_NR_KINDS];
/* The emulated backend and its attached tracers; under ds_mutex. */
static const struct ds_backend *ds_emulated;
static unsigned int ds_nr_emulated;

static struct ds_hw_caps ds_caps;
/*
 * Set for good once the machine reboots, kexecs or powers off: no CPU arms
 * the hardware again, and hardware requests fail; see ds_reboot_notify().
 */
static bool ds_halted;

/*
 * Kernel-mode records of per-CPU tracers sit in the staging buffers, which
 * page table isolation maps into every process: on a CPU affected by
 * Meltdown any user can read them. Only the administrator may accept that.
 */
static bool ds_meltdown_kernel;
#undef MODULE_PARAM_PREFIX
#define MODULE_PARAM_PREFIX "ds."
module_param_named(meltdown_kernel, ds_meltdown_kernel, bool, 0644);

static void ds_cpu_sync(void *unused);

static int ds_hw_backend_start(struct ds_tracer *tracer);
static void ds_hw_backend_stop(struct ds_tracer *tracer);

static const struct ds_backend ds_hw_backend = {
	.name	= "hardware",
	.kinds	= BIT(DS_BTS),
	.start	= ds_hw_backend_start,
	.stop	= ds_hw_backend_stop,
};

#endif /* CONFIG_X86_DS */

/* --- the real hardware --- */

static void ds_msr_probe(struct ds_hw_caps *caps)
{
	memset(caps, 0, sizeof(*caps));
	/* percpu_setup_debug_store() maps the CEA slots on Intel only. */
	if (boot_cpu_data.x86_vendor != X86_VENDOR_INTEL ||
	    boot_cpu_data.x86 == DS_NETBURST_FAMILY ||
	    !boot_cpu_has(X86_FEATURE_DTES64))
		return;

	caps->bts = boot_cpu_has(X86_FEATURE_BTS);
	caps->pebs = boot_cpu_has(X86_FEATURE_PEBS);
	caps->meltdown = boot_cpu_has_bug(X86_BUG_CPU_MELTDOWN);
}

static u64 ds_msr_read_debugctl(void)
{
	return get_debugctlmsr();
}

static void ds_msr_write_debugctl(u64 val)
{
	update_debugctlmsr(val);
}

static void ds_msr_write_ds_area(unsigned long addr)
{
	wrmsrl(MSR_IA32_DS_AREA, addr);
}

static u32 ds_msr_arm_pmi(void)
{
	u32 old = apic_read(APIC_LVTPC);

	apic_write(APIC_LVTPC, APIC_DM_NMI);
	return old;
}

/*
 * Many CPUs mask LVTPC when they deliver a PMI. A BTS threshold sets no
 * status bit (unlike PEBS, GLOBAL_STATUS.OvfBuffer, which is perf's), so
 * unmasking is all there is to acknowledge.
 */
static void ds_msr_ack_pmi(void)
{
	apic_write(APIC_LVTPC, APIC_DM_NMI);
}

static void ds_msr_restore_pmi(u32 lvtpc)
{
	apic_write(APIC_LVTPC, lvtpc);
}

/* Our staging pages are vmalloc()ed; perf's buffers are contiguous. */
static phys_addr_t ds_buf_phys(void *p)
{
	if (is_vmalloc_addr(p))
		return page_to_phys(vmalloc_to_page(p));
	return virt_to_phys(p);
}

/*
 * No flush of other CPUs, where perf's ds_update_cea() flushed every CPU
 * for each buffer it mapped: the slot is not present before, since every
 * unmap (ds_stage_free_all(), ds_perf_unmap_buffer()) is flushed on all
 * CPUs before its pages go, and x86 never caches a translation that is not
 * present (SDM vol. 3, 4.10.2.3). cea_set_pte() flushes this CPU's entry.
 */
static void ds_msr_map(void *cea, void *buf, size_t size)
{
	size_t off;

	preempt_disable();
	for (off = 0; off < size; off += PAGE_SIZE)
		cea_set_pte(cea + off, ds_buf_phys(buf + off), PAGE_KERNEL);
	preempt_enable();
}

/* The caller flushes, once for all the slots it unmaps: see ds_msr_flush(). */
static void ds_msr_unmap(void *cea, size_t size)
{
	size_t off;

	preempt_disable();
	for (off = 0; off < size; off += PAGE_SIZE)
		cea_set_pte(cea + off, 0, PAGE_NONE);
	preempt_enable();
}

/*
 * The slots are shared by all CPUs' page tables: flush them all. A range
 * over every CPU's slots becomes one broadcast flush of the whole TLB.
 */
static void ds_msr_flush(unsigned long start, unsigned long end)
{
	flush_tlb_kernel_range(start, end);
}

static const struct ds_hw_ops ds_msr_ops __maybe_unused = {
	.probe		= ds_msr_probe,
	.read_debugctl	= ds_msr_read_debugctl,
	.write_debugctl	= ds_msr_write_debugctl,
	.write_ds_area	= ds_msr_write_ds_area,
	.arm_pmi	= ds_msr_arm_pmi,
	.ack_pmi	= ds_msr_ack_pmi,
	.restore_pmi	= ds_msr_restore_pmi,
	.map		= ds_msr_map,
	.unmap		= ds_msr_unmap,
	.flush		= ds_msr_flush,
};

/*
 * Direct calls on the context switch and NMI paths; the KUnit suite points
 * them at its simulated CPU with ds_hw_install() and back.
 */
DEFINE_STATIC_CALL(ds_hw_probe, ds_msr_probe);
DEFINE_STATIC_CALL(ds_hw_read_debugctl, ds_msr_read_debugctl);
DEFINE_STATIC_CALL(ds_hw_write_debugctl, ds_msr_write_debugctl);
DEFINE_STATIC_CALL(ds_hw_write_ds_area, ds_msr_write_ds_area);
DEFINE_STATIC_CALL(ds_hw_arm_pmi, ds_msr_arm_pmi);
DEFINE_STATIC_CALL(ds_hw_ack_pmi, ds_msr_ack_pmi);
DEFINE_STATIC_CALL(ds_hw_restore_pmi, ds_msr_restore_pmi);
DEFINE_STATIC_CALL(ds_hw_map, ds_msr_map);
DEFINE_STATIC_CALL(ds_hw_unmap, ds_msr_unmap);
DEFINE_STATIC_CALL(ds_hw_flush, ds_msr_flush);

static void __maybe_unused ds_hw_install(const struct ds_hw_ops *ops)
{
	static_call_update(ds_hw_probe, ops->probe);
	static_call_update(ds_hw_read_debugctl, ops->read_debugctl);
	static_call_update(ds_hw_write_debugctl, ops->write_debugctl);
	static_call_update(ds_hw_write_ds_area, ops->write_ds_area);
	static_call_update(ds_hw_arm_pmi, ops->arm_pmi);
	static_call_update(ds_hw_ack_pmi, ops->ack_pmi);
	static_call_update(ds_hw_restore_pmi, ops->restore_pmi);
	static_call_update(ds_hw_map, ops->map);
	static_call_update(ds_hw_unmap, ops->unmap);
	static_call_update(ds_hw_flush, ops->flush);
}

#ifdef CONFIG_X86_DS

/* --- hardware capabilities --- */

static void ds_probe(void)
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

/* --- the trace buffer --- */

static bool ds_recording(const struct ds_tracer *tracer)
{
	return READ_ONCE(tracer->attached) && !READ_ONCE(tracer->suspended) &&
	       !READ_ONCE(tracer->paused);
}

/*
 * Notify when the count crosses the threshold, not while it stays above:
 * a client that resumes without draining fills the rest of the buffer.
 */
static void ds_buf_check_threshold(struct ds_tracer *tracer, size_t before)
{
	lockdep_assert_held(&tracer->lock);

	if (tracer->overflow != DS_OVERFLOW_NOTIFY || tracer->paused ||
	    before >= tracer->threshold || tracer->count < tracer->threshold)
		return;
	WRITE_ONCE(tracer->paused, true);
	irq_work_queue(&tracer->notify_work);
}

static void ds_buf_append(struct ds_tracer *tracer, const void *src, size_t n)
{
	size_t before = tracer->count;

	lockdep_assert_held(&tracer->lock);

	for (; n; n--, src += tracer->rec_size) {
		if (tracer->count == tracer->capacity &&
		    tracer->overflow == DS_OVERFLOW_NOTIFY) {
			/* Keep what the client has not seen: drop the rest. */
			tracer->lost += n;
			break;
		}
		if (tracer->count < tracer->capacity)
			tracer->count++;
		else
			tracer->lost++;
		memcpy(tracer->buf + tracer->head * tracer->rec_size, src,
		       tracer->rec_size);
		if (++tracer->head == tracer->capacity)
			tracer->head = 0;
	}
	ds_buf_check_threshold(tracer, before);
}

/*
 * BTS_OFF_OS drops the branches the CPU takes in kernel mode, but a branch
 * into the kernel (a system call, an interrupt) is taken in user mode: drop
 * the records with a kernel end point, as perf does.
 */
static void ds_buf_append_user(struct ds_tracer *tracer,
			       const struct ds_bts_record *rec, size_t n)
{
	lockdep_assert_held(&tracer->lock);

	for (; n; n--, rec++)
		if (ds_bts_user_branch(rec->from, rec->to))
			ds_buf_append(tracer, rec, 1);
}

static void ds_buf_reset(struct ds_tracer *tracer)
{
	lockdep_assert_held(&tracer->lock);

	tracer->head = 0;
	tracer->count = 0;
	tracer->lost = 0;
	WRITE_ONCE(tracer->dropped, false);
	WRITE_ONCE(tracer->paused, false);
}

/*
 * Queued when the count crossed the threshold; ds_update() may have changed
 * the mode since. Take the function and its cookie as one pair, and only
 * while the pause they announce still holds.
 */
static void ds_notify_work(struct irq_work *work)
{
	struct ds_tracer *tracer = container_of(work, struct ds_tracer,
						notify_work);
	ds_notify_fn notify = NULL;
	unsigned long flags;
	void *cookie = NULL;

	raw_spin_lock_irqsave(&tracer->lock, flags);
	if (tracer->overflow == DS_OVERFLOW_NOTIFY && tracer->paused) {
		notify = tracer->notify;
		cookie = tracer->cookie;
	}
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	if (notify)
		notify(tracer, cookie);
}

/*
 * Redirected by the KUnit suite to fail allocations on purpose. The memory
 * cgroup of the requester pays for the pages of a task's tracer (@gfp, see
 * ds_gfp()). The size is the requester's
 * choice: a failure is its -ENOMEM, not a warning on the console, and a
 * full memory cgroup refuses it rather than call its OOM killer.
 */
static void *ds_buffer_alloc(size_t size, gfp_t gfp)
{
	KUNIT_STATIC_STUB_REDIRECT(ds_buffer_alloc, size, gfp);
	return __vmalloc(size, gfp | __GFP_ZERO | __GFP_NOWARN |
			 __GFP_RETRY_MAYFAIL);
}

/*
 * Charge the user, as perf, io_uring and BPF do: a budget per mm would be
 * new with every fork and exec of the requester. CAP_IPC_LOCK lifts the
 * limit, not the count.
 */
static int ds_user_charge(struct user_struct *user, unsigned long pages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	unsigned long cur = atomic_long_read(&user->locked_vm);
	bool unlimited = false;

	do {
		/* Asked only when it matters: the LSM logs a denial. */
		if ((pages > limit || cur > limit - pages) && !unlimited) {
			if (!capable(CAP_IPC_LOCK))
				return -ENOMEM;
			unlimited = true;
		}
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur,
					  cur + pages));
	return 0;
}

static int ds_account_mem(struct ds_tracer *tracer, size_t bytes)
{
	struct mm_struct *mm = current->mm;
	unsigned long pages = PFN_UP(bytes);
	struct user_struct *user;
	int err;

	/* Kernel threads have no locked-memory limit to charge. */
	if (!mm)
		return 0;
	user = current_user();
	err = ds_user_charge(user, pages);
	if (err)
		return err;
	tracer->user = get_uid(user);
	/* The refund must find this mm even after the requester exits. */
	mmgrab(mm);
	tracer->mm = mm;
	tracer->charged = pages;
	/* Shown as VmPin, as io_uring does: mlock() counts VmLck alone. */
	atomic64_add(pages, &mm->pinned_vm);
	return 0;
}

static void ds_unaccount_mem(struct ds_tracer *tracer)
{
	if (!tracer->user)
		return;
	atomic64_sub(tracer->charged, &tracer->mm->pinned_vm);
	mmdrop(tracer->mm);
	tracer->mm = NULL;
	atomic_long_sub(tracer->charged, &tracer->user->locked_vm);
	free_uid(tracer->user);
	tracer->user = NULL;
}

/*
 * A task's tracer is charged to its requester: locked memory and memory
 * cgroup. A CPU's serves a kernel client, whose memory is the kernel's and
 * not that of whichever process happened to load it.
 */
static gfp_t ds_gfp(bool charge)
{
	return charge ? GFP_KERNEL_ACCOUNT : GFP_KERNEL;
}

static int ds_buf_alloc(struct ds_tracer *tracer, const struct ds_config *cfg,
			bool charge)
{
	size_t bytes = tracer->capacity * tracer->rec_size;
	int err;

	if (cfg->buffer) {
		tracer->buf = cfg->buffer;
		return 0;
	}
	if (charge) {
		err = ds_account_mem(tracer, bytes);
		if (err)
			return err;
	}
	tracer->buf = ds_buffer_alloc(bytes, ds_gfp(charge));
	if (!tracer->buf) {
		ds_unaccount_mem(tracer);
		return -ENOMEM;
	}
	tracer->own_buf = true;
	return 0;
}

static void ds_tracer_free_rcu(struct rcu_head *head)
{
	struct ds_tracer *tracer = container_of(head, struct ds_tracer, rcu);

	if (tracer->own_buf)
		vfree(tracer->buf);
	kfree(tracer);
}

/*
 * A context switch or the emulated backend that found the tracer published
 * before its detach may still look at it, with interrupts disabled: free
 * it after they are done.
 */
static void ds_tracer_free(struct ds_tracer *tracer)
{
	ds_unaccount_mem(tracer);
	call_rcu(&tracer->rcu, ds_tracer_free_rcu);
}

/* --- request validation --- */

static int ds_config_check(enum ds_kind kind, bool per_cpu,
			   const struct ds_config *cfg)
{
	if (!cfg || cfg->flags & ~DS_FLAGS_MASK ||
	    !(cfg->flags & (DS_KERNEL | DS_USER)))
		return -EINVAL;
	/*
	 * A task's tracer serves whoever may read the task's memory, which
	 * gives no right to the kernel's control flow (perf refuses kernel
	 * BTS outright).
	 */
	if (cfg->flags & DS_KERNEL && !per_cpu)
		return -EINVAL;
	/* Scheduling events only make sense for a task. */
	if (cfg->flags & DS_TIMESTAMPS && per_cpu)
		return -EINVAL;
	if (cfg->backend > DS_BACKEND_EMULATED)
		return -EINVAL;
	if (!cfg->size || cfg->size > DS_MAX_BUFFER_SIZE)
		return -EINVAL;

	switch (cfg->overflow) {
	case DS_OVERFLOW_WRAP:
		return cfg->threshold || cfg->notify ? -EINVAL : 0;
	case DS_OVERFLOW_NOTIFY:
		return cfg->notify ? 0 : -EINVAL;
	default:
		return -EINVAL;
	}
}

static struct ds_tracer *ds_tracer_alloc(enum ds_kind kind, bool per_cpu,
					 const struct ds_config *cfg)
{
	struct ds_tracer *tracer;
	int size, err;

	err = ds_config_check(kind, per_cpu, cfg);
	if (err)
		return ERR_PTR(err);
	if (kind != DS_BTS)
		return ERR_PTR(-EINVAL);
	size = DS_BTS_RECORD_SIZE;
	if (cfg->flags & DS_KERNEL && ds_caps.meltdown &&
	    !READ_ONCE(ds_meltdown_kernel))
		return ERR_PTR(-EPERM);
	if (cfg->size < size || cfg->threshold > cfg->size / size)
		return ERR_PTR(-EINVAL);

	tracer = kzalloc(sizeof(*tracer), ds_gfp(!per_cpu));
	if (!tracer)
		return ERR_PTR(-ENOMEM);
	tracer->kind = kind;
	tracer->cpu = -1;
	tracer->flags = cfg->flags;
	tracer->overflow = cfg->overflow;
	tracer->notify = cfg->notify;
	tracer->cookie = cfg->cookie;
	tracer->detached = cfg->detached;
	tracer->rec_size = size;
	tracer->capacity = cfg->size / size;
	if (cfg->overflow == DS_OVERFLOW_NOTIFY)
		tracer->threshold = cfg->threshold ?: tracer->capacity;
	raw_spin_lock_init(&tracer->lock);
	init_irq_work(&tracer->notify_work, ds_notify_work);

	err = ds_buf_alloc(tracer, cfg, !per_cpu);
	if (err) {
		kfree(tracer);
		return ERR_PTR(err);
	}
	return tracer;
}

/* --- the DS save area and the staging buffers --- */

static struct ds_area_part *ds_part(struct debug_store *area,
				    enum ds_kind kind)
{
	BUILD_BUG_ON(offsetof(struct debug_store, bts_interrupt_threshold) !=
		     offsetof(struct debug_store, bts_buffer_base) +
		     offsetof(struct ds_area_part, threshold));
	BUILD_BUG_ON(offsetof(struct debug_store, pebs_interrupt_threshold) !=
		     offsetof(struct debug_store, pebs_buffer_base) +
		     offsetof(struct ds_area_part, threshold));

	if (kind == DS_BTS)
		return (struct ds_area_part *)&area->bts_buffer_base;
	return (struct ds_area_part *)&area->pebs_buffer_base;
}

static void *ds_stage_ptr(struct ds_cpu *dc, enum ds_kind kind, u64 hwaddr)
{
	return dc->stage[kind] + (hwaddr - dc->stage_hw[kind]);
}

static bool ds_kind_present(enum ds_kind kind)
{
	return kind == DS_BTS && ds_caps.bts;
}

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
			WRITE_ONCE(tracer->dropped, true);
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

static u64 ds_bts_bits(const struct ds_tracer *tracer)
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

/*
 * The lock-free readers of the published tracers (the switch, the IPIs,
 * the emulated backend) run with interrupts disabled. Since the RCU
 * flavours were consolidated, that is an RCU-sched read-side critical
 * section: rcu_dereference_sched() accepts it, and the kfree_rcu() and
 * call_rcu() in ds_detach() and ds_tracer_free() wait for it to end.
 */
static struct ds_context *ds_task_ctx(struct task_struct *task)
{
	if (!task || !test_tsk_thread_flag(task, TIF_DS_TRACE))
		return NULL;
	return rcu_dereference_sched(task->thread.ds_ctx);
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
static void ds_cpu_stop(struct ds_cpu *dc)
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
static void ds_cpu_start(struct ds_cpu *dc, struct task_struct *task)
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

/*
 * IA32_DS_AREA points at this CPU's save area while anybody uses a half
 * of it: the allocator's tracers (DS_AREA_TRACERS) or perf
 * (DS_AREA_PERF). Both load the same address, so the MSR is written only
 * when the first user comes and the last one goes. On the CPU itself,
 * interrupts disabled.
 */
#define DS_AREA_TRACERS		BIT(0)
#define DS_AREA_PERF		BIT(1)

static void ds_area_get(struct ds_cpu *dc, unsigned int user)
{
	lockdep_assert_irqs_disabled();

	if (!dc->area_users)
		static_call(ds_hw_write_ds_area)(dc->area_hw);
	dc->area_users |= user;
}

static void ds_area_put(struct ds_cpu *dc, unsigned int user)
{
	lockdep_assert_irqs_disabled();

	if (!(dc->area_users & user))
		return;
	dc->area_users &= ~user;
	if (!dc->area_users)
		static_call(ds_hw_write_ds_area)(0);
}

/* This CPU's tracers start to use the @kind half of the save area. */
static void ds_cpu_activate(struct ds_cpu *dc, enum ds_kind kind)
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
static void ds_cpu_disarm(struct ds_cpu *dc)
{
	enum ds_kind kind;

	for (kind = 0; kind < DS_NR_KINDS; kind++)
		ds_cpu_deactivate(dc, kind);
}

/* Make this CPU's hardware match the published state; IPI callback. */
static void ds_cpu_sync(void *unused)
{
	struct ds_cpu *dc = this_cpu_ptr(&ds_cpus);

	ds_cpu_stop(dc);
	ds_cpu_start(dc, current);
}

/* Redirected by the KUnit suite, which counts the CPUs interrupted. */
static void ds_sync_cpu(int cpu)
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
static void ds_sync_loaded(struct ds_tracer *tracer)
{
	int cpu;

	lockdep_assert_held(&ds_mutex);

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
static void ds_sync_task(struct task_struct *task)
{
	int cpu;

	lockdep_assert_held(&ds_mutex);

	cpu = task_call_func(task, ds_task_running_cpu, NULL);
	if (cpu >= 0)
		ds_sync_cpu(cpu);
}

static void ds_cpu_activate_ipi(void *info)
{
	struct ds_facility *fac = info;

	ds_cpu_activate(this_cpu_ptr(&ds_cpus), fac->kind);
}

static void ds_cpu_deactivate_ipi(void *info)
{
	struct ds_facility *fac = info;

	ds_cpu_deactivate(this_cpu_ptr(&ds_cpus), fac->kind);
}

static void ds_collect_work(struct irq_work *work)
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

static int ds_nmi_handler(unsigned int cmd, struct pt_regs *regs)
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

/* --- hardware resources, shared by all hardware tracers --- */

/* The slot was unmapped and flushed: see ds_stage_free_all(). */
static void ds_stage_free(int cpu, enum ds_kind kind)
{
	struct ds_cpu *dc = per_cpu_ptr(&ds_cpus, cpu);

	vfree(dc->stage[kind]);
	dc->stage[kind] = NULL;
}

static int ds_stage_alloc(int cpu, enum ds_kind kind)
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

static bool ds_hw_is_free(enum ds_kind kind)
{
	bool held;

	spin_lock(&ds_perf_lock);
	held = ds_facilities[kind].perf_held;
	spin_unlock(&ds_perf_lock);
	return !held;
}

/* This request's ds_stage_prepare() found no memory; under ds_mutex. */
static bool ds_stage_nomem;

/* Unmapped pages of a setup that did not happen: nothing to flush. */
static void ds_stage_discard(enum ds_kind kind)
{
	int cpu;

	lockdep_assert_held(&ds_mutex);

	/* Only ds_hw_get(), under ds_mutex, sets a facility that is down up. */
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
 * Allocate the staging pages of a facility that is down, for a request
 * that may set it up, before the CPU hotplug lock is taken: reclaim can
 * take a while, and hotplug need not wait for it. They are mapped only
 * once the setup owns the slots (ds_stage_map_all()), as perf may map its
 * own buffers there until then; ds_attach() discards what it did not use.
 */
static void ds_stage_prepare(enum ds_kind kind)
{
	lockdep_assert_held(&ds_mutex);

	ds_stage_nomem = false;
	if (READ_ONCE(ds_facilities[kind].state) != DS_HW_DOWN ||
	    !ds_hw_is_free(kind) || READ_ONCE(ds_halted))
		return;
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

/*
 * perf's PT/LBR/BTS exclusivity: our BTS takes part as perf's own BTS
 * event does, so that it never runs beside intel_pt or intel_bts on a CPU
 * that cannot have both. Held while hardware BTS tracers are attached, not
 * while the half lingers without them: intel_pt cannot end a linger.
 */
static int ds_hw_exclusive_get(enum ds_kind kind)
{
	KUNIT_STATIC_STUB_REDIRECT(ds_hw_exclusive_get, kind);
	return kind == DS_BTS ? x86_perf_get_bts_exclusive() : 0;
}

static void ds_hw_exclusive_put(enum ds_kind kind)
{
	KUNIT_STATIC_STUB_REDIRECT(ds_hw_exclusive_put, kind);
	if (kind == DS_BTS)
		x86_perf_put_bts_exclusive();
}

/* A facility's first hardware tracer sets up its staging buffers. */
static int ds_hw_setup(struct ds_facility *fac)
{
	int err;

	lockdep_assert_held(&ds_mutex);
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
 * Needs neither ds_mutex nor the CPU hotplug lock: perf tears a lingering
 * setup down from its reservation, which may run under cpus_write_lock(),
 * and the linger's end takes only ds_mutex. The facility's state excludes
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

	lockdep_assert_held(&ds_mutex);

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
	lockdep_assert_held(&ds_mutex);

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
 * End a lingering setup, if there still is one. Under ds_mutex, so that a
 * request that comes meanwhile waits for the teardown rather than fails.
 */
static void ds_hw_end_linger(struct ds_facility *fac)
{
	bool claimed;

	/*
	 * No hotplug lock: ds_hw_teardown() copes with CPUs coming and
	 * going, and the syscore ops with a suspend in the middle of it.
	 */
	mutex_lock(&ds_mutex);
	spin_lock(&ds_perf_lock);
	claimed = ds_hw_claim_teardown(fac);
	spin_unlock(&ds_perf_lock);
	if (claimed) {
		ds_hw_teardown(fac);
		ds_hw_teardown_done(fac, false);
	}
	mutex_unlock(&ds_mutex);
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

static int ds_cpu_online(unsigned int cpu)
{
	enum ds_kind kind;

	local_irq_disable();
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
static int ds_syscore_suspend(void *unused)
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

static void ds_syscore_resume(void *unused)
{
	ds_syscore_rearm();
	/*
	 * A collection or notification queued with interrupts off in the
	 * suspend path raised a self-IPI that the power cycle lost; irq_work
	 * raises none while its list is not empty, so raise it again.
	 */
	arch_irq_work_raise();
}

static void ds_syscore_shutdown(void *unused);

static const struct syscore_ops ds_syscore_ops = {
	.suspend	= ds_syscore_suspend,
	.resume		= ds_syscore_resume,
	.shutdown	= ds_syscore_shutdown,
};

static struct syscore ds_syscore = {
	.ops	= &ds_syscore_ops,
};

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
	 * Under ds_mutex: a setup holds it until its arming IPIs are done,
	 * and the next one sees the flag in ds_hw_get().
	 */
	mutex_lock(&ds_mutex);
	WRITE_ONCE(ds_halted, true);
	mutex_unlock(&ds_mutex);
	/*
	 * The flag, then the IPIs: a CPU that comes online meanwhile either
	 * sees it or is in the mask on_each_cpu() reads. Pairs with the
	 * barrier in ds_cpu_online().
	 */
	smp_mb();
	on_each_cpu(ds_cpu_halt, NULL, 1);
}

static int ds_reboot_notify(struct notifier_block *nb, unsigned long action,
			    void *data)
{
	ds_halt();
	return NOTIFY_DONE;
}

static struct notifier_block ds_reboot_nb = {
	.notifier_call	= ds_reboot_notify,
};

/* On the CPU that goes on; machine_shutdown() stops the others next. */
static void ds_syscore_shutdown(void *unused)
{
	WRITE_ONCE(ds_halted, true);
	ds_cpu_halt(NULL);
}

/* --- backends --- */

static int ds_hw_backend_start(struct ds_tracer *tracer)
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

static void ds_hw_backend_stop(struct ds_tracer *tracer)
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

static const struct ds_backend *ds_choose_backend(enum ds_kind kind,
						  bool per_cpu,
						  enum ds_backend_id want)
{
	const struct ds_backend *emu = ds_emulated;
	bool hw = ds_kind_present(kind);

	lockdep_assert_held(&ds_mutex);

	if (per_cpu || (emu && !(emu->kinds & BIT(kind))))
		emu = NULL;
	switch (want) {
	case DS_BACKEND_HARDWARE:
		return hw ? &ds_hw_backend : ERR_PTR(-EOPNOTSUPP);
	case DS_BACKEND_EMULATED:
		return emu ?: ERR_PTR(-EOPNOTSUPP);
	default:
		/* Prefer the hardware, unless perf holds it and we can emulate. */
		if (hw && (ds_hw_is_free(kind) || !emu))
			return &ds_hw_backend;
		return emu ?: ERR_PTR(-EOPNOTSUPP);
	}
}

static int ds_backend_start(struct ds_tracer *tracer)
{
	int err;

	if (tracer->backend == &ds_hw_backend)
		return ds_hw_backend_start(tracer);
	err = tracer->backend->start(tracer);
	if (!err)
		ds_nr_emulated++;
	return err;
}

static void ds_backend_stop(struct ds_tracer *tracer)
{
	if (tracer->backend == &ds_hw_backend) {
		ds_hw_backend_stop(tracer);
		return;
	}
	tracer->backend->stop(tracer);
	ds_nr_emulated--;
}

/* --- attaching and detaching --- */

static void ds_unpublish(struct ds_tracer *tracer, struct ds_context **freep)
{
	struct task_struct *task = tracer->task;
	struct ds_context *ctx;
	struct ds_cpu *dc;
	enum ds_kind kind;

	*freep = NULL;
	if (!task) {
		dc = per_cpu_ptr(&ds_cpus, tracer->cpu);
		RCU_INIT_POINTER(dc->cpu_tracer[tracer->kind], NULL);
		return;
	}
	ctx = ds_dereference(task->thread.ds_ctx);
	RCU_INIT_POINTER(ctx->tracer[tracer->kind], NULL);
	for (kind = 0; kind < DS_NR_KINDS; kind++)
		if (ds_dereference(ctx->tracer[kind]))
			return;
	RCU_INIT_POINTER(task->thread.ds_ctx, NULL);
	*freep = ctx;
}

/* Stop a tracer for good; its buffer stays readable until ds_release(). */
static void ds_detach(struct ds_tracer *tracer)
{
	struct task_struct *task;
	struct ds_context *ctx;
	unsigned long flags;

	lockdep_assert_held(&ds_mutex);
	lockdep_assert_cpus_held();

	if (!tracer->attached)
		return;
	/* The emulated backend stores nothing from now on, under the lock. */
	raw_spin_lock_irqsave(&tracer->lock, flags);
	WRITE_ONCE(tracer->attached, false);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	ds_unpublish(tracer, &ctx);
	/* Collect its records where it is loaded; nowhere loads it again. */
	ds_sync_loaded(tracer);
	if (ctx) {
		/* Only now: a switch must not skip a CPU that still had it. */
		clear_tsk_thread_flag(tracer->task, TIF_DS_TRACE);
		/* Switches and the emulated backend may still be reading it. */
		kfree_rcu(ctx, rcu);
	}
	ds_backend_stop(tracer);
	raw_spin_lock_irqsave(&tracer->lock, flags);
	task = tracer->task;
	tracer->task = NULL;
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	if (task)
		put_task_struct(task);
}

static int ds_attach_cpu(struct ds_tracer *tracer, int cpu)
{
	struct ds_cpu *dc;
	int err;

	lockdep_assert_held(&ds_mutex);
	lockdep_assert_cpus_held();

	if (cpu < 0 || cpu >= nr_cpu_ids || !cpu_possible(cpu))
		return -EINVAL;
	if (!cpu_online(cpu))
		return -ENODEV;
	dc = per_cpu_ptr(&ds_cpus, cpu);
	if (ds_dereference(dc->cpu_tracer[tracer->kind]))
		return -EBUSY;
	tracer->cpu = cpu;
	err = ds_backend_start(tracer);
	if (err)
		return err;
	WRITE_ONCE(tracer->attached, true);
	rcu_assign_pointer(dc->cpu_tracer[tracer->kind], tracer);
	/* The CPU is held online: it loads the tracer now. */
	ds_sync_cpu(cpu);
	return 0;
}

static struct ds_context *ds_task_slot(struct task_struct *task,
				       enum ds_kind kind)
{
	struct ds_context *ctx = ds_dereference(task->thread.ds_ctx);

	if (ctx && ds_dereference(ctx->tracer[kind]))
		return ERR_PTR(-EBUSY);
	return ctx ?: kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT) ?: ERR_PTR(-ENOMEM);
}

static int ds_attach_task(struct ds_tracer *tracer, struct task_struct *task)
{
	struct ds_context *ctx;
	int err;

	lockdep_assert_held(&ds_mutex);
	lockdep_assert_cpus_held();

	if (task->flags & PF_EXITING)
		return -ESRCH;
	ctx = ds_task_slot(task, tracer->kind);
	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	get_task_struct(task);
	tracer->task = task;
	err = ds_backend_start(tracer);
	if (err)
		goto put_task;

	WRITE_ONCE(tracer->attached, true);
	rcu_assign_pointer(ctx->tracer[tracer->kind], tracer);
	rcu_assign_pointer(task->thread.ds_ctx, ctx);
	set_tsk_thread_flag(task, TIF_DS_TRACE);
	/*
	 * Pairs with the barrier in ds_exit_thread(): either the exiting task
	 * sees its context and detaches us, or we see PF_EXITING here.
	 */
	smp_mb();
	if (task->flags & PF_EXITING) {
		ds_detach(tracer);
		return -ESRCH;
	}
	if (tracer->backend == &ds_hw_backend)
		ds_sync_task(task);
	return 0;

put_task:
	tracer->task = NULL;
	put_task_struct(task);
	if (ctx != ds_dereference(task->thread.ds_ctx))
		kfree(ctx);
	return err;
}

/* --- requests --- */

static int ds_attach(struct ds_tracer *tracer, struct task_struct *task,
		     int cpu, enum ds_backend_id want)
{
	const struct ds_backend *backend;
	int err;

	mutex_lock(&ds_mutex);
	backend = ds_choose_backend(tracer->kind, !task, want);
	if (IS_ERR(backend)) {
		err = PTR_ERR(backend);
		goto unlock_mutex;
	}
	if (backend == &ds_hw_backend)
		ds_stage_prepare(tracer->kind);
	cpus_read_lock();
	tracer->backend = backend;
	if (task)
		err = ds_attach_task(tracer, task);
	else
		err = ds_attach_cpu(tracer, cpu);
	/*
	 * The hardware was taken after the choice (perf reserves it without
	 * ds_mutex) or is a CPU tracer's, or its staging buffers could not be
	 * had (-EAGAIN from ds_hw_get(), out of memory): emulate, as the
	 * choice would have.
	 */
	if ((err == -EBUSY || err == -EAGAIN) && want == DS_BACKEND_AUTO &&
	    backend == &ds_hw_backend && task) {
		backend = ds_choose_backend(tracer->kind, false,
					    DS_BACKEND_EMULATED);
		if (!IS_ERR(backend)) {
			tracer->backend = backend;
			err = ds_attach_task(tracer, task);
		}
	}
	if (err == -EAGAIN)
		err = -ENOMEM;
	cpus_read_unlock();
	ds_stage_discard(tracer->kind);
unlock_mutex:
	mutex_unlock(&ds_mutex);
	return err;
}

static struct ds_tracer *ds_request(enum ds_kind kind,
				    struct task_struct *task, int cpu,
				    const struct ds_config *cfg)
{
	struct ds_tracer *tracer;
	int err;

	might_sleep();

	tracer = ds_tracer_alloc(kind, !task, cfg);
	if (IS_ERR(tracer))
		return tracer;
	err = ds_attach(tracer, task, cpu, cfg->backend);
	if (err) {
		ds_tracer_free(tracer);
		return ERR_PTR(err);
	}
	return tracer;
}

struct ds_tracer *ds_request_bts_task(struct task_struct *task,
				      const struct ds_config *cfg)
{
	if (!task)
		return ERR_PTR(-EINVAL);
	return ds_request(DS_BTS, task, -1, cfg);
}
EXPORT_SYMBOL_GPL(ds_request_bts_task);

struct ds_tracer *ds_request_bts_cpu(int cpu, const struct ds_config *cfg)
{
	return ds_request(DS_BTS, NULL, cpu, cfg);
}
EXPORT_SYMBOL_GPL(ds_request_bts_cpu);

void ds_release(struct ds_tracer *tracer)
{
	if (IS_ERR_OR_NULL(tracer))
		return;
	might_sleep();

	mutex_lock(&ds_mutex);
	cpus_read_lock();
	ds_detach(tracer);
	cpus_read_unlock();
	mutex_unlock(&ds_mutex);
	/* A notification queued by the last collection may still run. */
	irq_work_sync(&tracer->notify_work);
	ds_tracer_free(tracer);
}
EXPORT_SYMBOL_GPL(ds_release);

/* --- control and reading --- */

/* Pull pending hardware records and apply the tracer's new state. */
static void ds_tracer_sync(struct ds_tracer *tracer)
{
	lockdep_assert_held(&ds_mutex);

	if (tracer->attached && tracer->backend == &ds_hw_backend)
		ds_sync_loaded(tracer);
}

static int ds_set_suspended(struct ds_tracer *tracer, bool suspended)
{
	unsigned long flags;

	if (IS_ERR_OR_NULL(tracer))
		return -EINVAL;
	might_sleep();

	mutex_lock(&ds_mutex);
	WRITE_ONCE(tracer->suspended, suspended);
	if (!suspended) {
		raw_spin_lock_irqsave(&tracer->lock, flags);
		WRITE_ONCE(tracer->paused, false);
		raw_spin_unlock_irqrestore(&tracer->lock, flags);
	}
	ds_tracer_sync(tracer);
	mutex_unlock(&ds_mutex);
	return 0;
}

int ds_suspend(struct ds_tracer *tracer)
{
	return ds_set_suspended(tracer, true);
}
EXPORT_SYMBOL_GPL(ds_suspend);

int ds_resume(struct ds_tracer *tracer)
{
	return ds_set_suspended(tracer, false);
}
EXPORT_SYMBOL_GPL(ds_resume);

/* Apply the tracer's state to this CPU's hardware if it is loaded here. */
static void ds_tracer_sync_local(struct ds_tracer *tracer)
{
	struct ds_cpu *dc;
	unsigned long flags;

	local_irq_save(flags);
	dc = this_cpu_ptr(&ds_cpus);
	if (dc->loaded[tracer->kind] == tracer)
		ds_cpu_sync(NULL);
	local_irq_restore(flags);
}

void ds_suspend_atomic(struct ds_tracer *tracer)
{
	unsigned long flags;

	/* Under the lock: an emulated store either finished or sees it. */
	raw_spin_lock_irqsave(&tracer->lock, flags);
	WRITE_ONCE(tracer->suspended, true);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	if (tracer->backend == &ds_hw_backend)
		ds_tracer_sync_local(tracer);
}
EXPORT_SYMBOL_GPL(ds_suspend_atomic);

void ds_resume_atomic(struct ds_tracer *tracer)
{
	unsigned long flags;

	raw_spin_lock_irqsave(&tracer->lock, flags);
	WRITE_ONCE(tracer->suspended, false);
	WRITE_ONCE(tracer->paused, false);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	if (tracer->backend == &ds_hw_backend)
		ds_tracer_sync_local(tracer);
}
EXPORT_SYMBOL_GPL(ds_resume_atomic);

int ds_clear(struct ds_tracer *tracer)
{
	unsigned long flags;

	if (IS_ERR_OR_NULL(tracer))
		return -EINVAL;
	might_sleep();

	mutex_lock(&ds_mutex);
	/* Records stored before the clear go away with it. */
	ds_tracer_sync(tracer);
	raw_spin_lock_irqsave(&tracer->lock, flags);
	ds_buf_reset(tracer);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	/* The hardware may resume after a pause, with a fresh threshold. */
	ds_tracer_sync(tracer);
	mutex_unlock(&ds_mutex);
	return 0;
}
EXPORT_SYMBOL_GPL(ds_clear);

/* Enter the new overflow mode; a full buffer in notify mode pauses now. */
static void ds_buf_set_overflow(struct ds_tracer *tracer,
				const struct ds_config *cfg)
{
	lockdep_assert_held(&tracer->lock);

	tracer->overflow = cfg->overflow;
	tracer->notify = cfg->notify;
	tracer->cookie = cfg->cookie;
	if (cfg->overflow != DS_OVERFLOW_NOTIFY) {
		tracer->threshold = 0;
		WRITE_ONCE(tracer->paused, false);
		return;
	}
	tracer->threshold = cfg->threshold ?: tracer->capacity;
	if (tracer->count >= tracer->threshold && !tracer->paused) {
		WRITE_ONCE(tracer->paused, true);
		irq_work_queue(&tracer->notify_work);
	}
}

int ds_update(struct ds_tracer *tracer, const struct ds_config *cfg)
{
	struct ds_config check;
	unsigned long flags;
	int err;

	if (IS_ERR_OR_NULL(tracer) || !cfg)
		return -EINVAL;
	check = *cfg;
	check.buffer = NULL;
	check.size = tracer->capacity * tracer->rec_size;
	err = ds_config_check(tracer->kind, tracer->cpu >= 0, &check);
	if (err || cfg->threshold > tracer->capacity)
		return -EINVAL;
	if ((cfg->flags ^ tracer->flags) & (DS_KERNEL | DS_USER))
		return -EINVAL;
	might_sleep();

	mutex_lock(&ds_mutex);
	/* Collect with the old settings first. */
	ds_tracer_sync(tracer);
	raw_spin_lock_irqsave(&tracer->lock, flags);
	WRITE_ONCE(tracer->flags, cfg->flags);
	ds_buf_set_overflow(tracer, cfg);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	ds_tracer_sync(tracer);
	mutex_unlock(&ds_mutex);
	/*
	 * A notification queued before the change may still be running with
	 * the old function and cookie; the caller may free that cookie now.
	 */
	irq_work_sync(&tracer->notify_work);
	return 0;
}
EXPORT_SYMBOL_GPL(ds_update);

static unsigned int ds_status(const struct ds_tracer *tracer)
{
	unsigned int status = 0;

	if (READ_ONCE(tracer->suspended))
		status |= DS_STATUS_SUSPENDED;
	if (READ_ONCE(tracer->paused))
		status |= DS_STATUS_PAUSED;
	if (!READ_ONCE(tracer->attached))
		status |= DS_STATUS_DETACHED;
	if (READ_ONCE(tracer->dropped))
		status |= DS_STATUS_DROPPED;
	return status;
}

/* A snapshot; under the tracer's lock, its counts agree with each other. */
static void ds_geometry_fill(struct ds_tracer *tracer,
			     struct ds_geometry *geom)
{
	unsigned long flags;

	geom->backend = tracer->backend == &ds_hw_backend ?
			DS_BACKEND_HARDWARE : DS_BACKEND_EMULATED;
	geom->record_size = tracer->rec_size;
	geom->capacity = tracer->capacity;
	raw_spin_lock_irqsave(&tracer->lock, flags);
	geom->threshold = tracer->threshold;
	geom->count = tracer->count;
	geom->index = tracer->head;
	geom->lost = tracer->lost;
	geom->status = ds_status(tracer);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
}

/* Is @task off its CPU, its last switch out, and so its collection, done? */
static bool ds_task_off_cpu(struct task_struct *task)
{
#ifdef CONFIG_SMP
	/* Pairs with the release in finish_task(), after switch_to(). */
	return !smp_load_acquire(&task->on_cpu);
#else
	return task != current;
#endif
}

/* Moves at every switch out of @task, before that switch collects. */
static unsigned long ds_task_switches(struct task_struct *task)
{
	return READ_ONCE(task->nvcsw) + READ_ONCE(task->nivcsw);
}

/*
 * The geometry of a task's tracer whose task is off its CPU, without
 * ds_mutex and without a look at the CPUs: nothing of the task is staged,
 * since its switch out collected before the scheduler let go of it. A
 * tracer reading a stopped tracee record by record pays only this. The
 * snapshot counts if the task was off its CPU before and after it, with no
 * switch in between, and the tracer still attached: ds_detach() marks the
 * tracer detached before it collects.
 */
static bool ds_geometry_unlocked(struct ds_tracer *tracer,
				 struct ds_geometry *geom)
{
	struct task_struct *task;
	unsigned long switches;
	bool ok = false;

	if (tracer->cpu >= 0)
		return false;
	task = ds_tracer_task(tracer);
	if (!task)
		return false;
	switches = ds_task_switches(task);
	/* The count, then the look: a switch after it moves the count. */
	smp_rmb();
	if (ds_task_off_cpu(task)) {
		ds_geometry_fill(tracer, geom);
		/* The snapshot, then the second look. */
		smp_rmb();
		ok = ds_task_off_cpu(task) &&
		     ds_task_switches(task) == switches &&
		     !(geom->status & DS_STATUS_DETACHED);
	}
	put_task_struct(task);
	return ok;
}

int ds_get_geometry(struct ds_tracer *tracer, struct ds_geometry *geom)
{
	if (IS_ERR_OR_NULL(tracer) || !geom)
		return -EINVAL;
	might_sleep();

	if (ds_geometry_unlocked(tracer, geom))
		return 0;
	/*
	 * The snapshot is taken under ds_mutex too: ds_detach() marks the
	 * tracer detached before it collects the hardware's last records,
	 * and a reader must not see it detached with a count still to grow.
	 */
	mutex_lock(&ds_mutex);
	ds_tracer_sync(tracer);
	ds_geometry_fill(tracer, geom);
	mutex_unlock(&ds_mutex);
	return 0;
}
EXPORT_SYMBOL_GPL(ds_get_geometry);

/* Copy up to @n records from index @first on, oldest first; under @lock. */
static size_t ds_buf_copy(struct ds_tracer *tracer, size_t first, void *buf,
			  size_t n)
{
	size_t slot, done, chunk;

	lockdep_assert_held(&tracer->lock);

	if (first >= tracer->count)
		return 0;
	n = min(n, tracer->count - first);
	/* The oldest record sits @count slots behind the head. */
	slot = tracer->head + tracer->capacity - tracer->count + first;
	if (slot >= tracer->capacity)
		slot -= tracer->capacity;
	for (done = 0; done < n; done += chunk) {
		chunk = min(n - done, tracer->capacity - slot);
		memcpy(buf + done * tracer->rec_size,
		       tracer->buf + slot * tracer->rec_size,
		       chunk * tracer->rec_size);
		slot = 0;
	}
	return n;
}

ssize_t ds_read_record(struct ds_tracer *tracer, size_t i, void *buf,
		       size_t size)
{
	unsigned long flags;
	size_t n;

	if (IS_ERR_OR_NULL(tracer) || !buf || size < tracer->rec_size)
		return -EINVAL;

	raw_spin_lock_irqsave(&tracer->lock, flags);
	n = ds_buf_copy(tracer, i, buf, 1);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	return n ? tracer->rec_size : -EINVAL;
}
EXPORT_SYMBOL_GPL(ds_read_record);

ssize_t ds_read_records(struct ds_tracer *tracer, size_t first, void *buf,
			size_t size)
{
	unsigned long flags;
	size_t n;

	if (IS_ERR_OR_NULL(tracer) || !buf || size < tracer->rec_size)
		return -EINVAL;

	n = min_t(size_t, size, PAGE_SIZE) / tracer->rec_size;
	raw_spin_lock_irqsave(&tracer->lock, flags);
	n = ds_buf_copy(tracer, first, buf, n);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	return n;
}
EXPORT_SYMBOL_GPL(ds_read_records);

bool ds_tracer_recording(const struct ds_tracer *tracer)
{
	return !IS_ERR_OR_NULL(tracer) && ds_recording(tracer);
}
EXPORT_SYMBOL_GPL(ds_tracer_recording);

struct task_struct *ds_tracer_task(struct ds_tracer *tracer)
{
	struct task_struct *task;
	unsigned long flags;

	if (IS_ERR_OR_NULL(tracer))
		return NULL;
	/* ds_detach() drops its reference after clearing it, under the lock. */
	raw_spin_lock_irqsave(&tracer->lock, flags);
	task = tracer->task;
	if (task)
		get_task_struct(task);
	raw_spin_unlock_irqrestore(&tracer->lock, flags);
	return task;
}

unsigned int ds_tracer_flags(const struct ds_tracer *tracer)
{
	return IS_ERR_OR_NULL(tracer) ? 0 : tracer->flags;
}

/* --- task lifecycle --- */

static void ds_stamp(struct task_struct *task, enum ds_bts_qualifier qual)
{
	struct ds_context *ctx = ds_task_ctx(task);
	struct ds_tracer *tracer;
	struct ds_bts_record rec;

	lockdep_assert_irqs_disabled();

	tracer = ctx ? rcu_dereference_sched(ctx->tracer[DS_BTS]) : NULL;
	if (!tracer || !(READ_ONCE(tracer->flags) & DS_TIMESTAMPS))
		return;
	rec.from = DS_BTS_EVENT_MARKER | qual;
	rec.to = ktime_get_mono_fast_ns();
	rec.flags = task_pid_nr(task);
	/* Under the lock: ds_detach() stops the appends there. */
	raw_spin_lock(&tracer->lock);
	if (ds_recording(tracer))
		ds_buf_append(tracer, &rec, 1);
	raw_spin_unlock(&tracer->lock);
}

void ds_switch_to(struct task_struct *prev, struct task_struct *next)
{
	struct ds_cpu *dc = this_cpu_ptr(&ds_cpus);

	lockdep_assert_irqs_disabled();

	/* BTS is off while the staging buffer changes hands. */
	ds_cpu_stop(dc);
	ds_stamp(prev, DS_BTS_TASK_DEPARTS);
	ds_stamp(next, DS_BTS_TASK_ARRIVES);
	ds_cpu_start(dc, next);
}

void ds_exec_thread(void)
{
	struct task_struct *task = current;

	if (!rcu_access_pointer(task->thread.ds_ctx) ||
	    get_dumpable(task->mm) == SUID_DUMP_USER)
		return;
	ds_exit_thread(task);
}

void ds_fork_thread(struct task_struct *child)
{
	RCU_INIT_POINTER(child->thread.ds_ctx, NULL);
	clear_tsk_thread_flag(child, TIF_DS_TRACE);
}

void ds_exit_thread(struct task_struct *task)
{
	struct ds_tracer *tracer;
	struct ds_context *ctx;
	enum ds_kind kind;

	/* Pairs with the barrier in ds_attach_task(); see there. */
	smp_mb();
	if (!rcu_access_pointer(task->thread.ds_ctx))
		return;

	mutex_lock(&ds_mutex);
	cpus_read_lock();
	for (kind = 0; kind < DS_NR_KINDS; kind++) {
		/* The last detach frees the context. */
		ctx = ds_dereference(task->thread.ds_ctx);
		tracer = ctx ? ds_dereference(ctx->tracer[kind]) : NULL;
		if (!tracer)
			continue;
		ds_detach(tracer);
		/* Under ds_mutex: the owner's ds_release() waits for it. */
		if (tracer->detached)
			tracer->detached(tracer, READ_ONCE(tracer->cookie));
	}
	cpus_read_unlock();
	mutex_unlock(&ds_mutex);
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

	if (!fac)
		return;
	spin_lock(&ds_perf_lock);
	WARN_ON_ONCE(!fac->perf_held);
	fac->perf_held = false;
	spin_unlock(&ds_perf_lock);
}

/* --- the emulated backend --- */

int ds_register_backend(const struct ds_backend *backend)
{
	int err = 0;

	if (!backend || !backend->start || !backend->stop ||
	    !backend->kinds || backend->kinds & ~ds_hw_backend.kinds)
		return -EINVAL;

	mutex_lock(&ds_mutex);
	if (ds_emulated)
		err = -EBUSY;
	else
		WRITE_ONCE(ds_emulated, backend);
	mutex_unlock(&ds_mutex);
	return err;
}

int ds_unregister_backend(const struct ds_backend *backend)
{
	int err = 0;

	mutex_lock(&ds_mutex);
	if (!backend || backend != ds_emulated)
		err = -EINVAL;
	else if (ds_nr_emulated)
		err = -EBUSY;
	else
		WRITE_ONCE(ds_emulated, NULL);
	mutex_unlock(&ds_mutex);
	return err;
}

static int ds_emulated_store(struct ds_tracer *tracer, u64 from, u64 to)
{
	struct ds_bts_record rec = { .from = from, .to = to };
	int err = -ENOSPC;

	raw_spin_lock(&tracer->lock);
	if (ds_recording(tracer)) {
		ds_buf_append(tracer, &rec, 1);
		err = 0;
	}
	raw_spin_unlock(&tracer->lock);
	return err;
}

int ds_emulated_write_bts(struct task_struct *task, u64 from, u64 to)
{
	struct ds_tracer *tracer = NULL;
	struct ds_context *ctx;
	unsigned long flags;
	int err = -ENOENT;

	if (!task)
		return -ENOENT;
	/* Interrupts off: ds_detach() waits for us before freeing. */
	local_irq_save(flags);
	ctx = ds_task_ctx(task);
	if (ctx)
		tracer = rcu_dereference_sched(ctx->tracer[DS_BTS]);
	if (tracer && tracer->backend != &ds_hw_backend)
		err = ds_emulated_store(tracer, from, to);
	local_irq_restore(flags);
	return err;
}

bool ds_emulated_recording(struct task_struct *task)
{
	struct ds_tracer *tracer = NULL;
	struct ds_context *ctx;
	unsigned long flags;
	bool ret;

	/* Interrupts off: ds_detach() waits for us before freeing. */
	local_irq_save(flags);
	ctx = ds_task_ctx(task);
	if (ctx)
		tracer = rcu_dereference_sched(ctx->tracer[DS_BTS]);
	ret = tracer && tracer->backend != &ds_hw_backend &&
	      ds_recording(tracer);
	local_irq_restore(flags);
	return ret;
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
	ds_probe();

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
			return ret;
	}
	ret = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "x86/ds:online",
				ds_cpu_online, ds_cpu_offline);
	if (ret < 0)
		return ret;
	register_syscore(&ds_syscore);
	register_reboot_notifier(&ds_reboot_nb);
	pr_info("BTS %s, PEBS %s\n", ds_caps.bts ? "available" : "absent",
		ds_caps.pebs ? "available" : "absent");
	return 0;
}
arch_initcall(ds_init);

/* The machine is going down: BTS stays off, see ds_halt(). */
static bool ds_perf_halted(void)
{
	return READ_ONCE(ds_halted);
}

/* perf drives a half only while it holds it, see ds_perf_reserve(). */
static bool ds_perf_granted(enum ds_kind kind)
{
	return READ_ONCE(ds_facilities[kind].perf_held);
}

static bool ds_perf_granted_any(void)
{
	return ds_perf_granted(DS_BTS) || ds_perf_granted(DS_PEBS);
}

/* IPI callbacks: IA32_DS_AREA is shared with our tracers, see ds_area_get(). */
static void ds_perf_load_area(void *unused)
{
	ds_area_get(this_cpu_ptr(&ds_cpus), DS_AREA_PERF);
}

static void ds_perf_unload_area(void *unused)
{
	ds_area_put(this_cpu_ptr(&ds_cpus), DS_AREA_PERF);
}

static void ds_perf_reload_area(struct debug_store *area)
{
	struct ds_cpu *dc = this_cpu_ptr(&ds_cpus);

	/* Otherwise the MSR is our tracers', and syscore resume reloads it. */
	if (area && (dc->area_users & DS_AREA_PERF))
		static_call(ds_hw_write_ds_area)(dc->area_hw);
}

#else /* !CONFIG_X86_DS */

static bool ds_perf_halted(void)
{
	return false;
}

/* Without the allocator nobody else drives the Debug Store. */
static bool ds_perf_granted(enum ds_kind kind)
{
	return true;
}

static bool ds_perf_granted_any(void)
{
	return true;
}

static void ds_perf_load_area(void *unused)
{
	static_call(ds_hw_write_ds_area)((unsigned long)
					 ds_perf_area(smp_processor_id()));
}

static void ds_perf_unload_area(void *unused)
{
	static_call(ds_hw_write_ds_area)(0);
}

static void ds_perf_reload_area(struct debug_store *area)
{
	static_call(ds_hw_write_ds_area)((unsigned long)area);
}

#endif /* CONFIG_X86_DS */

/*
 * --- perf: the per-CPU client that fills the save area itself ---
 *
 * perf's Intel driver lays out the save area and reads it in its PMI
 * directly, as it always has: those are its hot paths. What it may not do
 * is drive the hardware: IA32_DS_AREA, the BTS bits of DEBUGCTL and the
 * cpu_entry_area slots go through these. With the allocator built, perf
 * drives a half (BTS or PEBS) only while it holds it (ds_perf_reserve()),
 * and the allocator's tracers the other: IA32_DS_AREA is the one thing
 * they share, and it is counted.
 */

struct debug_store *ds_perf_area(int cpu)
{
	return &get_cpu_entry_area(cpu)->cpu_debug_store;
}

void *ds_perf_map_buffer(int cpu, enum ds_kind kind, void *buf, size_t size)
{
	struct debug_store_buffers *slots =
		&get_cpu_entry_area(cpu)->cpu_debug_buffers;
	void *cea = kind == DS_BTS ? slots->bts_buffer : slots->pebs_buffer;
	size_t slot = kind == DS_BTS ? sizeof(slots->bts_buffer) :
				       sizeof(slots->pebs_buffer);

	if (kind != DS_BTS && kind != DS_PEBS)
		return NULL;
	if (WARN_ON_ONCE(!ds_perf_granted(kind)))
		return NULL;
	/* ds.h promises NULL here: the caller's error to handle, no WARN. */
	if (size > slot || !PAGE_ALIGNED(buf))
		return NULL;
	static_call(ds_hw_map)(cea, buf, size);
	return cea;
}

void ds_perf_unmap_buffer(int cpu, enum ds_kind kind, size_t size)
{
	struct debug_store_buffers *slots =
		&get_cpu_entry_area(cpu)->cpu_debug_buffers;

	void *cea = kind == DS_BTS ? slots->bts_buffer : slots->pebs_buffer;

	/* perf frees the buffer on return: flush before. */
	static_call(ds_hw_unmap)(cea, size);
	static_call(ds_hw_flush)((unsigned long)cea, (unsigned long)cea + size);
}

void ds_perf_install(int cpu)
{
	if (WARN_ON_ONCE(!ds_perf_granted_any()))
		return;
	smp_call_function_single(cpu, ds_perf_load_area, NULL, 1);
}

void ds_perf_uninstall(int cpu)
{
	smp_call_function_single(cpu, ds_perf_unload_area, NULL, 1);
}

void ds_perf_restore(struct debug_store *area)
{
	ds_perf_reload_area(area);
}

/*
 * From perf's PMU enable and disable paths, so also from NMI: fine, since
 * while perf holds the BTS half the allocator writes none of these bits.
 * As before, enabling adds to the bits already set; disabling clears all.
 */
void ds_perf_bts_enable(bool user, bool kernel, bool interrupt)
{
	u64 bits = DEBUGCTLMSR_TR | DEBUGCTLMSR_BTS;

	if (ds_perf_halted())
		return;
	if (interrupt)
		bits |= DEBUGCTLMSR_BTINT;
	if (!kernel)
		bits |= DEBUGCTLMSR_BTS_OFF_OS;
	if (!user)
		bits |= DEBUGCTLMSR_BTS_OFF_USR;
	static_call(ds_hw_write_debugctl)(static_call(ds_hw_read_debugctl)() | bits);
}

void ds_perf_bts_disable(void)
{
	u64 ctl = static_call(ds_hw_read_debugctl)();

	static_call(ds_hw_write_debugctl)(ctl & ~DS_DEBUGCTL_MASK);
}

/*
 * The real MSRs, whoever set them, on a CPU that never returns to perf or
 * to us: machine_kexec(), stop_this_cpu() and the crash path. IA32_DS_AREA
 * goes last, so that no BTS store or PEBS assist finds it cleared.
 */
void ds_emergency_stop(void)
{
	u64 ctl;

	if (boot_cpu_data.x86_vendor != X86_VENDOR_INTEL ||
	    boot_cpu_data.x86 == DS_NETBURST_FAMILY ||
	    !boot_cpu_has(X86_FEATURE_DS))
		return;
	ctl = get_debugctlmsr();
	if (ctl & DS_DEBUGCTL_MASK)
		update_debugctlmsr(ctl & ~DS_DEBUGCTL_MASK);
	if (boot_cpu_has(X86_FEATURE_PEBS))
		wrmsrl_safe(MSR_IA32_PEBS_ENABLE, 0);
	wrmsrl_safe(MSR_IA32_DS_AREA, 0);
}

#ifdef CONFIG_X86_DS_KUNIT_TEST
#include "tests/ds_kunit.c"
#endif
