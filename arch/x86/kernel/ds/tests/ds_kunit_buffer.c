// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite x86_ds_buffer of the Debug Store allocator: the trace buffer:
 * geometry, wrap-around and reading, notification, suspend and resume, and
 * locked memory. It runs on the simulated CPU of ds_kunit_sim.c.
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

static int ds_test_read_geometry(void *arg)
{
	struct ds_test_reader *r = arg;

	r->err = ds_get_geometry(r->tracer, &r->geom);
	complete(&r->done);
	return 0;
}

/*
 * The geometry of a task that is not running needs no global lock: read
 * while this case holds ds_alloc_mutex, it still comes. A tracer reading a
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

	mutex_lock(&ds_alloc_mutex);
	reader = kthread_run(ds_test_read_geometry, &r, "ds_test_reader");
	done = IS_ERR(reader) ? 0 : wait_for_completion_timeout(&r.done, HZ);
	mutex_unlock(&ds_alloc_mutex);
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

/*
 * Sequence numbers: the records held are numbered up to the count of
 * records written, across wrap-around and clear; a read from a number that
 * is gone starts at the oldest held and says so.
 */
static void ds_test_read_seq(struct kunit *test)
{
	struct ds_config cfg = ds_test_cfg(8 * DS_BTS_RECORD_SIZE);
	struct ds_tracer *tracer = ds_test_task(test, &cfg);
	struct ds_bts_record recs[10];
	struct ds_geometry geom;
	u64 seq;

	KUNIT_ASSERT_FALSE(test, IS_ERR(tracer));
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.seq, 0);
	seq = 0;
	KUNIT_EXPECT_EQ(test, ds_read_seq(tracer, &seq, recs, sizeof(recs)), 0);
	KUNIT_EXPECT_EQ(test, seq, 0);

	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 0, 13), 13);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.seq, 13);
	KUNIT_EXPECT_EQ(test, geom.unwritten, 0);
	/* 0..4 were overwritten: the read starts at 5. */
	seq = 2;
	KUNIT_EXPECT_EQ(test, ds_read_seq(tracer, &seq, recs, sizeof(recs)), 8);
	KUNIT_EXPECT_EQ(test, seq, 5);
	KUNIT_EXPECT_EQ(test, recs[0].from, DS_TEST_FROM + 5);
	KUNIT_EXPECT_EQ(test, recs[7].from, DS_TEST_FROM + 12);
	seq = 11;
	KUNIT_EXPECT_EQ(test, ds_read_seq(tracer, &seq, recs, sizeof(recs)), 2);
	KUNIT_EXPECT_EQ(test, seq, 11);
	KUNIT_EXPECT_EQ(test, recs[0].from, DS_TEST_FROM + 11);
	seq = 13;
	KUNIT_EXPECT_EQ(test, ds_read_seq(tracer, &seq, recs, sizeof(recs)), 0);
	seq = 14;
	KUNIT_EXPECT_EQ(test, ds_read_seq(tracer, &seq, recs, sizeof(recs)),
			-EINVAL);
	seq = 5;
	KUNIT_EXPECT_EQ(test, ds_read_seq(tracer, &seq, recs,
					  sizeof(recs[0]) - 1), -EINVAL);
	KUNIT_EXPECT_EQ(test, ds_read_seq(tracer, NULL, recs, sizeof(recs)),
			-EINVAL);

	/* A clear drops the records, not their numbers. */
	KUNIT_EXPECT_EQ(test, ds_clear(tracer), 0);
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 20, 2), 2);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.count, 2);
	KUNIT_EXPECT_EQ(test, geom.seq, 15);
	seq = 5;
	KUNIT_EXPECT_EQ(test, ds_read_seq(tracer, &seq, recs, sizeof(recs)), 2);
	KUNIT_EXPECT_EQ(test, seq, 13);
	KUNIT_EXPECT_EQ(test, recs[0].from, DS_TEST_FROM + 20);
}

/* A user mm of its own, as a requester that is not the kthread. */
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
	/* Dropped, not overwritten: no number, but counted as unwritten. */
	KUNIT_EXPECT_EQ(test, geom.seq, 4);
	KUNIT_EXPECT_EQ(test, geom.unwritten, 2);
	KUNIT_EXPECT_EQ(test, dt->notified, 1);
	ds_test_expect_branch(test, tracer, 3, 3);

	KUNIT_EXPECT_EQ(test, ds_clear(tracer), 0);
	KUNIT_EXPECT_TRUE(test, ds_tracer_recording(tracer));
	KUNIT_EXPECT_EQ(test, ds_sim_run(tracer, 20, 1), 1);
	geom = ds_test_geom(test, tracer);
	KUNIT_EXPECT_EQ(test, geom.count, 1);
	KUNIT_EXPECT_EQ(test, geom.lost, 0);
	/* The clear skipped number 4: the reader sees the drop. */
	KUNIT_EXPECT_EQ(test, geom.seq, 6);
	KUNIT_EXPECT_EQ(test, geom.unwritten, 2);
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
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EDQUOT);
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
	KUNIT_EXPECT_EQ(test, PTR_ERR(ds_test_task(test, &cfg)), -EDQUOT);
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

static struct kunit_case ds_test_buffer_cases[] = {
	KUNIT_CASE(ds_test_hw_geometry),
	KUNIT_CASE(ds_test_geometry_unlocked),
	KUNIT_CASE(ds_test_wrap_order),
	KUNIT_CASE(ds_test_read_records),
	KUNIT_CASE(ds_test_read_seq),
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
	KUNIT_CASE(ds_test_buffer_memcg),
	KUNIT_CASE(ds_test_memlock_mm_gone),
	{}
};

static struct kunit_suite ds_test_buffer_suite = {
	.name		= "x86_ds_buffer",
	.init		= ds_test_init,
	.exit		= ds_test_exit,
	.test_cases	= ds_test_buffer_cases,
};

/*
 * At boot only: run again from debugfs, the suite would stand in for the
 * hardware under perf events that user space may open at any moment.
 */
kunit_test_init_section_suites(&ds_test_buffer_suite);
