/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the Debug Store allocator's KUnit suites share: the simulated CPU
 * (ds_kunit_sim.c), the fixture and the helpers.
 */
#ifndef _X86_KERNEL_DS_TESTS_DS_KUNIT_H
#define _X86_KERNEL_DS_TESTS_DS_KUNIT_H

#include <kunit/static_stub.h>
#include <kunit/test.h>
#include <kunit/test-bug.h>

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

#define DS_SIM_LVTPC_BEFORE	(APIC_LVT_MASKED | 0xfe)

#define DS_SIM_LVTPC_NMI	APIC_DM_NMI

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

/* How long the reservation may take to start waiting, on a slow host. */
#define DS_SIM_RESERVE_START	(10 * HZ)

/* How long the request gets to queue up on ds_alloc_mutex. */
#define DS_SIM_REQUEST_QUEUE_MS	20

/* Long enough for anything but a hung reservation. */
#define DS_TEST_RESERVE_DONE_MS		30000

/* --- geometry --- */

struct ds_test_reader {
	struct ds_tracer	*tracer;
	struct ds_geometry	geom;
	int			err;
	struct completion	done;
};

/* --- task lifecycle --- */

struct ds_test_child {
	struct completion	ready;
	struct completion	go;
	struct completion	done;
	struct task_struct	*task;
	bool			inherited;
};

/* --- the two halves, handed out separately --- */

#define DS_TEST_PERF_MARK	0x5eed0000ULL

#define DS_TEST_SPLIT_ROUNDS	200

DECLARE_PER_CPU(u64, ds_sim_debugctl);
DECLARE_PER_CPU(unsigned long, ds_sim_ds_area);
DECLARE_PER_CPU(u32, ds_sim_lvtpc);
extern atomic_t ds_sim_pmis;
extern bool ds_sim_skid;
extern atomic_long_t ds_sim_mapped;
extern atomic_t ds_sim_maps;
DECLARE_PER_CPU(enum ds_sim_slot_state[DS_NR_KINDS], ds_sim_slots);
extern atomic_t ds_sim_slot_misuses;
extern atomic_t ds_sim_flushes;
extern long ds_sim_flush_mapped;
extern int ds_sim_flush_staged;
extern unsigned long ds_sim_flush_start;
extern unsigned long ds_sim_flush_end;
extern bool ds_sim_reserve_at_unmap;
extern int ds_sim_reserve_result;
extern bool ds_sim_reserve_early;
extern long ds_sim_reserve_mapped;
extern struct completion ds_sim_reserve_done;
extern struct task_struct *ds_sim_request_task;
extern struct ds_tracer *ds_sim_request_result;
extern const struct ds_hw_caps ds_test_full_caps;
extern int ds_fake_started;
extern int ds_fake_stopped;
extern const struct ds_backend ds_fake_backend;
extern struct work_struct ds_sim_reserve_work;
extern struct work_struct ds_sim_request_work;

unsigned int ds_sim_perf_waiters(void);
void ds_sim_pmi(void);
bool ds_sim_branch(u64 from, u64 to, bool user);
void ds_sim_settle(struct ds_tracer *tracer);
int ds_sim_run(struct ds_tracer *tracer, int first, int n);
struct ds_config ds_test_cfg(size_t size);
struct ds_tracer *ds_test_keep(struct kunit *test,
			       struct ds_tracer *tracer);
void ds_test_release(struct kunit *test, struct ds_tracer *tracer);
struct ds_tracer *ds_test_task(struct kunit *test,
			       const struct ds_config *cfg);
void ds_test_expect_task(struct kunit *test, struct ds_tracer *tracer,
			 struct task_struct *want);
struct ds_geometry ds_test_geom(struct kunit *test,
				struct ds_tracer *tracer);
struct ds_tracer *ds_test_task_falls_back(struct kunit *test);
void ds_test_expect_branch(struct kunit *test, struct ds_tracer *tracer,
			   size_t i, int nr);
void ds_test_notify(struct ds_tracer *tracer, void *cookie);
void ds_test_end_linger(void);
void ds_test_install(struct ds_hw_caps caps);
void ds_test_unhalt_cpu(void *unused);
int ds_test_never_runs(void *unused);
struct ds_tracer *ds_test_notifier(struct kunit *test, size_t records,
				   size_t threshold);
int ds_test_init(struct kunit *test);
void ds_test_exit(struct kunit *test);

#endif /* _X86_KERNEL_DS_TESTS_DS_KUNIT_H */
