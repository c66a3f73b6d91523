// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace: PTRACE_BTS_READ, which copies records by
 * their sequence number without dropping them, and the sequence number,
 * state and lost count of PTRACE_BTS_STATUS.
 *
 * A read is checked against the branches the tracee is known to take, and
 * against the DRAIN of the same records: both must give the same bytes.
 *
 * The helpers and the fixture are in ptrace_bts_harness.h.
 */
#define _GNU_SOURCE
#include "ptrace_bts_harness.h"

#define BTS_READ_SIZE		sizeof(struct ptrace_bts_read)

static void bts_status(struct __test_metadata *_metadata, pid_t pid,
		       struct ptrace_bts_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	ASSERT_EQ(BTS_CONFIG_SIZE_VER2,
		  sys_ptrace(PTRACE_BTS_STATUS, pid, cfg, sizeof(*cfg)));
}

TEST(struct_layouts)
{
	EXPECT_EQ(BTS_CONFIG_SIZE_VER2, sizeof(struct ptrace_bts_config));
	EXPECT_EQ(24, offsetof(struct ptrace_bts_config, next));
	EXPECT_EQ(32, offsetof(struct ptrace_bts_config, lost));
	EXPECT_EQ(56, sizeof(struct ptrace_bts_read));
	EXPECT_EQ(24, offsetof(struct ptrace_bts_read, first));
	EXPECT_EQ(40, offsetof(struct ptrace_bts_read, lost));
}

/* Everything held, oldest first, numbered from 0; the same as a DRAIN. */
TEST_F(bts, read_all_like_drain)
{
	const long n = 50;
	struct ptrace_bts_read rd;
	struct ptrace_bts_config cfg;
	struct bts_struct *rec, *drained;

	self->pid = start_many(_metadata, n, 64, 0);
	cont_to(_metadata, self->pid, 0, many_e);
	rec = poisoned_records(n + 1);
	drained = poisoned_records(n + 1);
	ASSERT_FALSE(!rec || !drained);

	bts_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(n, cfg.next);
	EXPECT_EQ(0, cfg.lost);
	EXPECT_EQ(0, cfg.state);
	EXPECT_EQ(n, bts_read(self->pid, 0, rec, n + 1, &rd));
	EXPECT_EQ(0, rd.first);
	EXPECT_EQ(n, rd.next);
	check_many_all(_metadata, rec, n);
	EXPECT_EQ(0xa5a5a5a5a5a5a5a5ULL, rec[n].qualifier);
	/* Nothing dropped: the same again, then the same as a DRAIN. */
	EXPECT_EQ(n, bts_size(self->pid));
	EXPECT_EQ(n, bts_read(self->pid, 0, rec, n, &rd));
	EXPECT_EQ(n, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, drained,
				n * BTS_REC));
	EXPECT_EQ(0, memcmp(rec, drained, n * BTS_REC));

	/* Drained: nothing held, the numbers go on. */
	EXPECT_EQ(0, bts_read(self->pid, 0, rec, n, &rd));
	EXPECT_EQ(n, rd.first);
	EXPECT_EQ(n, rd.next);
	bts_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(n, cfg.next);
	free(rec);
	free(drained);
}

/* A reader that asks from its last next gets what came since, exactly. */
TEST_F(bts, read_deltas)
{
	const long n = 40;
	struct bts_struct rec[64];
	struct ptrace_bts_read rd;
	long got, steps;
	__u64 next;

	self->pid = start_many(_metadata, n, 64, 0);
	/* Some way into the loop: a debugger's steps. */
	for (steps = 0; steps < 30; steps++) {
		int status;

		ASSERT_EQ(0, sys_ptrace(PTRACE_SINGLESTEP, self->pid, NULL, 0));
		ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
		ASSERT_TRUE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP);
	}
	got = bts_read(self->pid, 0, rec, 64, &rd);
	ASSERT_LT(0, got);
	ASSERT_GT(n, got);
	EXPECT_EQ(0, rd.first);
	EXPECT_EQ(got, rd.next);
	next = rd.next;

	cont_to(_metadata, self->pid, 0, many_e);
	EXPECT_EQ(n - got, bts_read(self->pid, next, rec + got, 64 - got, &rd));
	EXPECT_EQ(next, rd.first);
	EXPECT_EQ(n, rd.next);
	check_many_all(_metadata, rec, n);
}

/* A read into a small buffer, continued: every record once, in order. */
TEST_F(bts, read_in_pieces)
{
	const long n = 25;
	struct bts_struct rec[32];
	struct ptrace_bts_read rd;
	__u64 seq = 0;
	long got;

	self->pid = start_many(_metadata, n, 32, 0);
	cont_to(_metadata, self->pid, 0, many_e);
	while (seq < n) {
		got = bts_read(self->pid, seq, rec + seq, 3, &rd);
		ASSERT_EQ(seq + 3 <= n ? 3 : n - seq, got);
		ASSERT_EQ(seq, rd.first);
		ASSERT_EQ(seq + got, rd.next);
		seq = rd.next;
	}
	check_many_all(_metadata, rec, n);
}

/* Records overwritten by wrap-around are a gap in the numbers, not lost. */
TEST_F(bts, read_gap_after_wrap)
{
	const long n = 20;
	struct bts_struct rec[8];
	struct ptrace_bts_config cfg;
	struct ptrace_bts_read rd;

	self->pid = start_many(_metadata, n, 8, 0);
	cont_to(_metadata, self->pid, 0, many_e);
	EXPECT_EQ(8, bts_read(self->pid, 0, rec, 8, &rd));
	EXPECT_EQ(n - 8, rd.first);
	EXPECT_EQ(n, rd.next);
	check_many(_metadata, rec, 8, n - 8, 8, n);
	/* From inside the gap: the same. */
	EXPECT_EQ(8, bts_read(self->pid, 5, rec, 8, &rd));
	EXPECT_EQ(n - 8, rd.first);
	bts_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(n, cfg.next);
	EXPECT_EQ(0, cfg.lost);
}

/* A DRAIN of several of the kernel's batches, read the same way. */
TEST_F(bts, read_many_batches)
{
	const long n = 5 * BTS_DRAIN_BATCH + 17;
	struct ptrace_bts_read rd;
	struct bts_struct *rec;

	self->pid = start_many(_metadata, n, n, 0);
	cont_to(_metadata, self->pid, 0, many_e);
	rec = poisoned_records(n + 1);
	ASSERT_FALSE(!rec);
	EXPECT_EQ(n, bts_read(self->pid, 0, rec, n + 1, &rd));
	EXPECT_EQ(n, rd.next);
	check_many_all(_metadata, rec, n);
	EXPECT_EQ(0xa5a5a5a5a5a5a5a5ULL, rec[n].qualifier);
	free(rec);
}

/* CLEAR drops the records; the next record gets the next number. */
TEST_F(bts, read_after_clear)
{
	struct bts_struct rec[8];
	struct ptrace_bts_read rd;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 8);
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(4, bts_size(self->pid));
	ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
	EXPECT_EQ(0, bts_read(self->pid, 0, rec, 8, &rd));
	EXPECT_EQ(4, rd.first);
	EXPECT_EQ(4, rd.next);
	EXPECT_EQ(0, bts_read(self->pid, 4, rec, 8, &rd));
	EXPECT_EQ(-1, bts_read(self->pid, 5, rec, 8, &rd));
	EXPECT_EQ(ERANGE, errno);
}

/*
 * A new allocation goes on numbering after the old trace, one number
 * skipped: a reader of the old trace sees a gap, not old numbers that mean
 * new records.
 */
TEST_F(bts, read_after_realloc)
{
	struct bts_struct rec[8];
	struct ptrace_bts_config cfg;
	struct ptrace_bts_read rd;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 8);
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(4, bts_size(self->pid));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 8 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	bts_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(5, cfg.next);
	EXPECT_EQ(0, bts_read(self->pid, 4, rec, 8, &rd));
	EXPECT_EQ(5, rd.first);
	EXPECT_EQ(5, rd.next);
	ASSERT_EQ(0, sys_ptrace(PTRACE_POKEUSR, self->pid, (void *)REGS_IP_OFF,
				(unsigned long)jmp_s));
	cont_to(_metadata, self->pid, 0, jmp_e);
	EXPECT_EQ(4, bts_read(self->pid, 4, rec, 8, &rd));
	EXPECT_EQ(5, rd.first);
	EXPECT_EQ(9, rd.next);
	check_records(_metadata, rec, 4, jmp_trace, 4);
}

TEST_F(bts, read_errors)
{
	struct bts_struct rec[8];
	struct ptrace_bts_read rd;
	char big[BTS_READ_SIZE + 8];

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 8);
	/* Configured, nothing recorded yet: from 0 is nothing. */
	EXPECT_EQ(0, bts_read(self->pid, 0, rec, 8, &rd));
	EXPECT_EQ(0, rd.first);
	EXPECT_EQ(0, rd.next);
	cont_to(_metadata, self->pid, 0, jmp_e);

	bts_read(self->pid, 0, rec, 8, &rd);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_READ, self->pid, &rd,
				 BTS_READ_SIZE - 1));
	EXPECT_EQ(EINVAL, errno);
	memset(big, 0, sizeof(big));
	memcpy(big, &rd, sizeof(rd));
	EXPECT_EQ(4, sys_ptrace(PTRACE_BTS_READ, self->pid, big, sizeof(big)));
	big[BTS_READ_SIZE + 3] = 1;
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_READ, self->pid, big, sizeof(big)));
	EXPECT_EQ(E2BIG, errno);
	EXPECT_EQ(-1, bts_read(self->pid, 0, rec, 0, &rd));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, bts_read(self->pid, 5, rec, 8, &rd));
	EXPECT_EQ(ERANGE, errno);
	rd.__reserved = 1;
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_READ, self->pid, &rd, sizeof(rd)));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, bts_read(self->pid, 0, (void *)8, 8, &rd));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_READ, self->pid, (void *)8,
				 BTS_READ_SIZE));
	EXPECT_EQ(EFAULT, errno);
	/* None of it dropped a record. */
	EXPECT_EQ(4, bts_size(self->pid));
}

/* A thread never configured: nothing to read, next is 0. */
TEST_F(bts, read_unconfigured)
{
	struct bts_struct rec[2];
	struct ptrace_bts_config cfg;
	struct ptrace_bts_read rd;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	EXPECT_EQ(0, bts_read(self->pid, 0, rec, 2, &rd));
	EXPECT_EQ(0, rd.first);
	EXPECT_EQ(0, rd.next);
	EXPECT_EQ(-1, bts_read(self->pid, 1, rec, 2, &rd));
	EXPECT_EQ(ERANGE, errno);
	bts_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(0, cfg.next);
	EXPECT_EQ(0, cfg.lost);
	EXPECT_EQ(0, cfg.state);
}

/* An older tracer's STATUS gets its own bytes and no more. */
TEST_F(bts, status_old_sizes)
{
	struct ptrace_bts_config cfg;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 8);
	cont_to(_metadata, self->pid, 0, jmp_e);
	memset(&cfg, 0xa5, sizeof(cfg));
	EXPECT_EQ(BTS_CONFIG_SIZE_VER2,
		  sys_ptrace(PTRACE_BTS_STATUS, self->pid, &cfg,
			     BTS_CONFIG_SIZE_VER1));
	EXPECT_EQ(8 * BTS_REC, cfg.size);
	EXPECT_EQ(0xa5a5a5a5, cfg.state);
	EXPECT_EQ(0xa5a5a5a5a5a5a5a5ULL, cfg.next);
	/* What STATUS read can be written back as a CONFIG. */
	bts_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(4, cfg.next);
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, &cfg,
				sizeof(cfg)));
	EXPECT_EQ(4, bts_size(self->pid));
}

/*
 * With PTRACE_BTS_O_SIGNAL a full buffer pauses tracing, which STATUS and
 * READ say until a DRAIN. The branches not recorded meanwhile are a gap in
 * the numbers: the DRAIN skips one.
 */
TEST_F(bts, status_paused)
{
	struct bts_struct rec[4];
	struct ptrace_bts_config cfg;
	struct ptrace_bts_read rd;
	unsigned long ip;

	self->pid = start_many(_metadata, 400, 4, PTRACE_BTS_O_SIGNAL);
	ip = cont_to_signal(_metadata, self->pid, 0, BTS_OVERFLOW_SIG);
	EXPECT_NE(0, ip);
	bts_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(PTRACE_BTS_S_PAUSED, cfg.state);
	EXPECT_EQ(4, cfg.next);
	EXPECT_EQ(4, bts_read(self->pid, 0, rec, 4, &rd));
	EXPECT_EQ(0, rd.first);
	EXPECT_EQ(4, rd.next);
	EXPECT_EQ(PTRACE_BTS_S_PAUSED, rd.state);
	EXPECT_EQ(cfg.lost, rd.lost);
	/* A READ does not resume; a DRAIN does. */
	bts_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(PTRACE_BTS_S_PAUSED, cfg.state);
	EXPECT_EQ(4, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec)));
	bts_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(0, cfg.state);
	EXPECT_EQ(5, cfg.next);
	EXPECT_EQ(0, bts_read(self->pid, 4, rec, 4, &rd));
	EXPECT_EQ(5, rd.first);
	EXPECT_EQ(0, rd.state);
}

TEST_HARNESS_MAIN
