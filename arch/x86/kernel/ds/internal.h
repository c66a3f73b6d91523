/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Debug Store internals, shared by the files of
 * arch/x86/kernel/ds/ and by its KUnit suites.
 */
#ifndef _X86_KERNEL_DS_INTERNAL_H
#define _X86_KERNEL_DS_INTERNAL_H

#include <linux/irq_work.h>
#include <linux/lockdep.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/spinlock.h>
#include <linux/static_call.h>
#include <linux/workqueue.h>

#include <kunit/visibility.h>

#include <asm/ds.h>
#include <asm/intel_ds.h>
#include <asm/local.h>

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

/* The task side: the tracers of one thread, thread_struct::ds_ctx. */
struct ds_context {
	struct ds_tracer __rcu	*tracer[DS_NR_KINDS];
	struct rcu_head		rcu;
};

/*
 * A buffer's locked-memory charge: the requester's user (referenced) bears
 * it against RLIMIT_MEMLOCK, its mm (grabbed) shows it as VmPin.
 */
struct ds_charge {
	struct user_struct	*user;
	struct mm_struct	*mm;
	unsigned long		pages;
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
	/* Written under ds_alloc_mutex, read anywhere. */
	bool			attached;
	/* Detached by ds_exec_thread(): the task lives on, untraced. */
	bool			exec_stopped;
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
	u64			seq;		/* records written since the request */
	u64			unwritten;	/* dropped unwritten since the request */
	bool			gap;		/* dropped since the last reset */
	bool			pause_gap;	/* paused, maybe missing branches */
	bool			pause_ran;	/* the task ran while paused */

	struct ds_charge	charge;

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
	/* The per-CPU tracers of this CPU, published under ds_alloc_mutex. */
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
	/*
	 * Who needs IA32_DS_AREA pointing at @area_hw: see ds_area_get().
	 * Written on this CPU with interrupts disabled; ds_perf_release()
	 * reads it from other CPUs.
	 */
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

/* The published tracer pointers as their writers, under ds_alloc_mutex, see them. */
#define ds_dereference(p) \
	rcu_dereference_protected(p, lockdep_is_held(&ds_alloc_mutex))
/* The setup of one facility's staging buffers and per-CPU activation. */
enum ds_hw_state {
	DS_HW_DOWN,		/* nothing set up; perf may reserve */
	DS_HW_SETTING_UP,	/* for the first user, under ds_alloc_mutex */
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
 *		  ds_alloc_mutex first
 * @active:	  the staging buffers exist and online CPUs use them; set
 *		  under ds_alloc_mutex, cleared by whoever tears down, see
 *		  ds_hw_teardown()
 * @linger_work:  ends a setup that has had no users for ds_hw_linger
 *
 * The two halves are handed out separately: perf may hold one while the
 * allocator's tracers use the other, in the same save area, which
 * IA32_DS_AREA points at as long as either side uses a half (see
 * ds_area_get()). @users, @state, @perf_held and @perf_waiters are under
 * ds_perf_lock, @users under ds_alloc_mutex too.
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

/*
 * Setting up arms every CPU and mapping the staging buffers flushes every
 * TLB; so does tearing down. The resources outlive the last user by this
 * much, so that a loop of requests and releases, which any user may run,
 * interrupts the machine once per period and not twice per request.
 */
#define DS_HW_LINGER		HZ

/*
 * IA32_DS_AREA points at this CPU's save area while anybody uses a half
 * of it: the allocator's tracers (DS_AREA_TRACERS) or perf
 * (DS_AREA_PERF). Both load the same address, so the MSR is written only
 * when the first user comes and the last one goes. On the CPU itself,
 * interrupts disabled.
 */
#define DS_AREA_TRACERS		BIT(0)
#define DS_AREA_PERF		BIT(1)

/* The hardware accessors, static calls: see perf.c. */
DECLARE_STATIC_CALL(ds_hw_probe, *((struct ds_hw_ops *)0)->probe);
DECLARE_STATIC_CALL(ds_hw_read_debugctl, *((struct ds_hw_ops *)0)->read_debugctl);
DECLARE_STATIC_CALL(ds_hw_write_debugctl, *((struct ds_hw_ops *)0)->write_debugctl);
DECLARE_STATIC_CALL(ds_hw_write_ds_area, *((struct ds_hw_ops *)0)->write_ds_area);
DECLARE_STATIC_CALL(ds_hw_arm_pmi, *((struct ds_hw_ops *)0)->arm_pmi);
DECLARE_STATIC_CALL(ds_hw_ack_pmi, *((struct ds_hw_ops *)0)->ack_pmi);
DECLARE_STATIC_CALL(ds_hw_restore_pmi, *((struct ds_hw_ops *)0)->restore_pmi);
DECLARE_STATIC_CALL(ds_hw_map, *((struct ds_hw_ops *)0)->map);
DECLARE_STATIC_CALL(ds_hw_unmap, *((struct ds_hw_ops *)0)->unmap);
DECLARE_STATIC_CALL(ds_hw_flush, *((struct ds_hw_ops *)0)->flush);

/**
 * struct ds_backend - a software producer of Debug Store records
 * @name:	 for messages
 * @kinds:	 BIT(%DS_BTS): the kinds of record it writes
 * @start:	 a task tracer was attached; process context, may sleep;
 *		 an error fails the request
 * @stop:	 the tracer is being detached (release or task exit); process
 *		 context, may sleep; no record may be written afterwards
 *
 * Only per-task tracers use an emulated backend. The backend writes its
 * records with ds_emulated_write_bts() while ds_tracer_recording() says so.
 */
struct ds_backend {
	const char	*name;
	unsigned int	kinds;
	int		(*start)(struct ds_tracer *tracer);
	void		(*stop)(struct ds_tracer *tracer);
};

#ifdef CONFIG_X86_DS

/* The emulated backend (emulate.c) and the allocator. */
/**
 * ds_tracer_flags() - the %DS_KERNEL, %DS_USER, %DS_TIMESTAMPS flags
 * @tracer: the handle
 *
 * Return: the flags of the request.
 */
unsigned int ds_tracer_flags(const struct ds_tracer *tracer);

/**
 * ds_register_backend() - register the emulated backend
 * @backend: the backend; must stay valid until unregistered
 *
 * Context: process context, may sleep.
 * Return: 0, -EINVAL (bad @backend), -EBUSY (one is registered already).
 */
int ds_register_backend(const struct ds_backend *backend);

/**
 * ds_unregister_backend() - unregister the emulated backend
 * @backend: the registered backend
 *
 * Context: process context, may sleep.
 * Return: 0, -EINVAL (@backend is not registered), -EBUSY (tracers use it).
 */
int ds_unregister_backend(const struct ds_backend *backend);

/**
 * ds_emulated_write_bts() - store a branch record for the emulated backend
 * @task: the traced task, normally current
 * @from: the address of the branch instruction
 * @to:   the branch target
 *
 * Goes through the same overflow handling as collected hardware records.
 *
 * Context: any context but NMI.
 * Return: 0 if stored, -ENOENT (@task has no emulated BTS tracer),
 * -ENOSPC (not recording: suspended, paused, or buffer full in notify mode).
 */
int ds_emulated_write_bts(struct task_struct *task, u64 from, u64 to);

/**
 * ds_emulated_recording() - should the emulated backend step this task
 * @task: the task, normally current
 *
 * Context: any context but NMI.
 * Return: true if @task has an emulated BTS tracer that records now.
 */
bool ds_emulated_recording(struct task_struct *task);

/* core.c */
extern struct mutex ds_alloc_mutex;

/* hw.c */
DECLARE_PER_CPU(struct ds_cpu, ds_cpus);
extern struct ds_hw_caps ds_caps;

/* hw_setup.c */
extern bool ds_halted;
extern const struct ds_backend ds_hw_backend;

/* buffer.c */
void ds_buf_append(struct ds_tracer *tracer, const void *src, size_t n);
void ds_buf_append_user(struct ds_tracer *tracer,
			const struct ds_bts_record *rec, size_t n);
void ds_buf_reset(struct ds_tracer *tracer);
void ds_buf_append_gap(struct ds_tracer *tracer, enum ds_gap why, u32 datum,
		       u64 ip);
void ds_buf_unpause(struct ds_tracer *tracer);
void ds_notify_work(struct irq_work *work);
int ds_buf_alloc(struct ds_tracer *tracer, const struct ds_config *cfg,
		 bool charge);
void ds_tracer_free(struct ds_tracer *tracer);
void ds_buf_set_overflow(struct ds_tracer *tracer,
			 const struct ds_config *cfg);
void *ds_buf_get(size_t bytes, bool charge, struct ds_charge *c,
		 const struct ds_charge *old);
void ds_unaccount_mem(struct ds_charge *c);
void *ds_buf_replace(struct ds_tracer *tracer, void *buf, size_t capacity,
		     struct ds_charge *c);

/* core.c */
void ds_tracer_sync(struct ds_tracer *tracer);

/* hw.c */
void ds_cpu_stop(struct ds_cpu *dc);
void ds_cpu_start(struct ds_cpu *dc, struct task_struct *task);
void ds_area_get(struct ds_cpu *dc, unsigned int user);
void ds_area_put(struct ds_cpu *dc, unsigned int user);
void ds_cpu_activate(struct ds_cpu *dc, enum ds_kind kind);
void ds_cpu_disarm(struct ds_cpu *dc);
void ds_cpu_sync(void *unused);
void ds_sync_loaded(struct ds_tracer *tracer);
void ds_sync_task(struct task_struct *task);
void ds_cpu_activate_ipi(void *info);
void ds_cpu_deactivate_ipi(void *info);
void ds_collect_work(struct irq_work *work);
int ds_nmi_handler(unsigned int cmd, struct pt_regs *regs);
void ds_probe_caps(void);

/* hw_setup.c */
bool ds_hw_is_free(enum ds_kind kind);
void ds_stage_discard(enum ds_kind kind);
void ds_stage_prepare(enum ds_kind kind);
int ds_hw_backend_start(struct ds_tracer *tracer);
void ds_hw_backend_stop(struct ds_tracer *tracer);
bool ds_perf_halted(void);
bool ds_perf_granted(enum ds_kind kind);
bool ds_perf_granted_any(void);
void ds_perf_load_area(void *unused);
void ds_perf_unload_area(void *unused);
void ds_perf_reload_area(struct debug_store *area);

/* hw.c */
void ds_sync_cpu(int cpu);

static inline bool ds_recording(const struct ds_tracer *tracer)
{
	return READ_ONCE(tracer->attached) && !READ_ONCE(tracer->suspended) &&
	       !READ_ONCE(tracer->paused);
}

/*
 * A task's tracer is charged to its requester: locked memory and memory
 * cgroup. A CPU's serves a kernel client, whose memory is the kernel's and
 * not that of whichever process happened to load it.
 */
static inline gfp_t ds_gfp(bool charge)
{
	return charge ? GFP_KERNEL_ACCOUNT : GFP_KERNEL;
}

static inline struct ds_area_part *ds_part(struct debug_store *area,
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

static inline void *ds_stage_ptr(struct ds_cpu *dc, enum ds_kind kind, u64 hwaddr)
{
	return dc->stage[kind] + (hwaddr - dc->stage_hw[kind]);
}

static inline bool ds_kind_present(enum ds_kind kind)
{
	return kind == DS_BTS && ds_caps.bts;
}

/*
 * The lock-free readers of the published tracers (the switch, the IPIs,
 * the emulated backend) run with interrupts disabled. Since the RCU
 * flavours were consolidated, that is an RCU-sched read-side critical
 * section: rcu_dereference_sched() accepts it, and the kfree_rcu() and
 * call_rcu() in ds_detach() and ds_tracer_free() wait for it to end.
 */
static inline struct ds_context *ds_task_ctx(struct task_struct *task)
{
	if (!task || !test_tsk_thread_flag(task, TIF_DS_TRACE))
		return NULL;
	return rcu_dereference_sched(task->thread.ds_ctx);
}

#else /* !CONFIG_X86_DS */

/* Without the allocator nobody else drives the Debug Store. */
static inline bool ds_perf_halted(void)
{
	return false;
}

static inline bool ds_perf_granted(enum ds_kind kind)
{
	return true;
}

static inline bool ds_perf_granted_any(void)
{
	return true;
}

static inline void ds_perf_load_area(void *unused)
{
	static_call(ds_hw_write_ds_area)((unsigned long)
					 ds_perf_area(smp_processor_id()));
}

static inline void ds_perf_unload_area(void *unused)
{
	static_call(ds_hw_write_ds_area)(0);
}

static inline void ds_perf_reload_area(struct debug_store *area)
{
	static_call(ds_hw_write_ds_area)((unsigned long)area);
}

#endif /* CONFIG_X86_DS */

#if IS_ENABLED(CONFIG_KUNIT)
/* What the KUnit suites reach; static without KUnit. */

/* core.c */
extern const struct ds_backend *ds_emulated;
extern unsigned int ds_nr_emulated;
extern bool ds_meltdown_kernel;

/* hw_setup.c */
extern spinlock_t ds_perf_lock;
extern struct ds_facility ds_facilities[DS_NR_KINDS];
extern unsigned long ds_hw_linger;
extern unsigned int ds_nr_task_hw[DS_NR_KINDS];
extern unsigned int ds_nr_cpu[DS_NR_KINDS];

/* buffer.c */
void *ds_buffer_alloc(size_t size, gfp_t gfp);

/* hw.c */
u64 ds_bts_bits(const struct ds_tracer *tracer);

/* hw_setup.c */
int ds_stage_alloc(int cpu, enum ds_kind kind);
int ds_hw_exclusive_get(enum ds_kind kind);
void ds_hw_exclusive_put(enum ds_kind kind);
void ds_hw_end_linger(struct ds_facility *fac);
int ds_cpu_online(unsigned int cpu);
int ds_syscore_suspend(void *unused);
void ds_syscore_resume(void *unused);
void ds_syscore_shutdown(void *unused);
int ds_reboot_notify(struct notifier_block *nb, unsigned long action,
		     void *data);

/* perf.c */
extern const struct ds_hw_ops ds_msr_ops;
void ds_msr_map(void *cea, void *buf, size_t size);
void ds_msr_unmap(void *cea, size_t size);
void ds_msr_flush(unsigned long start, unsigned long end);
void ds_hw_install(const struct ds_hw_ops *ops);
#endif /* CONFIG_KUNIT */

#endif /* _X86_KERNEL_DS_INTERNAL_H */
