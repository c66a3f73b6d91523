// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace, the requests themselves: configuration,
 * status, size, get, clear and drain, their errors, the memory charge of
 * the buffers, and the backends.
 *
 * The helpers and the fixture are in ptrace_bts_harness.h.
 */
#define _GNU_SOURCE
#include "ptrace_bts_harness.h"

/* ---- The requests ---- */

/*
 * An unconfigured tracee answers every request: STATUS and SIZE report
 * nothing, GET has no record, CLEAR and DRAIN have nothing to do.
 */
TEST_F(bts, unconfigured_requests)
{
	struct ptrace_bts_config cfg;
	struct bts_struct rec;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(0, cfg.size);
	EXPECT_EQ(0, cfg.flags);
	EXPECT_EQ(0, cfg.signal);
	EXPECT_EQ(BTS_REC, cfg.bts_size);
	EXPECT_EQ(PTRACE_BTS_BACKEND_ANY, cfg.backend);
	EXPECT_EQ(0, bts_size(self->pid));
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_GET, self->pid, &rec, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, &rec,
				sizeof(rec)));
	EXPECT_EQ(0, vmpin_kb(0));
}

/* CONFIG allocates, STATUS reports back what was configured. */
TEST_F(bts, config_status)
{
	struct ptrace_bts_config cfg;

	self->pid = spawn_jmp(_metadata);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 10 * BTS_REC,
				BTS_TRACE_ALLOC | PTRACE_BTS_O_SIGNAL,
				BTS_OVERFLOW_SIG));
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(10 * BTS_REC, cfg.size);
	/* O_ALLOC is an action, not a state: STATUS need not report it. */
	EXPECT_EQ(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_SIGNAL,
		  cfg.flags & ~PTRACE_BTS_O_ALLOC);
	EXPECT_EQ(BTS_OVERFLOW_SIG, cfg.signal);
	EXPECT_EQ(BTS_REC, cfg.bts_size);
	EXPECT_NE(PTRACE_BTS_BACKEND_ANY, cfg.backend);
	EXPECT_EQ(0, bts_size(self->pid));
	EXPECT_LT(0, vmpin_kb(0));
	rerun_jmp(_metadata, self->pid, 10);
}

/* Without O_SIGNAL the signal is ignored: STATUS shows none, none comes. */
TEST_F(bts, config_signal_needs_o_signal)
{
	struct ptrace_bts_config cfg;

	self->pid = spawn_jmp(_metadata);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 2 * BTS_REC,
				BTS_TRACE_ALLOC, BTS_OVERFLOW_SIG));
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(PTRACE_BTS_O_TRACE, cfg.flags);
	EXPECT_EQ(0, cfg.signal);
	/* four branches into two records: wraps, no signal stop */
	rerun_jmp(_metadata, self->pid, 2);
}

/*
 * Sizes are rounded down to whole records, with at least one; each buffer
 * then keeps exactly that many of bts_jmp's branches.
 */
TEST_F(bts, config_rounds_to_records)
{
	static const unsigned int asked[] = { 4096, 30, 1, 3 * BTS_REC + 23 };
	static const unsigned int got[] = { 170, 1, 1, 3 };
	struct ptrace_bts_config cfg;
	int i;

	self->pid = spawn_jmp(_metadata);
	for (i = 0; i < ARRAY_SIZE(asked); i++) {
		ASSERT_EQ(0, bts_config(_metadata, self->pid, asked[i],
					BTS_TRACE_ALLOC, 0));
		get_status(_metadata, self->pid, &cfg);
		EXPECT_EQ(got[i] * BTS_REC, cfg.size) {
			TH_LOG("asked for %u bytes", asked[i]);
		}
		rerun_jmp(_metadata, self->pid, got[i]);
	}
}

/* O_ALLOC again resizes the buffer and drops the records. */
TEST_F(bts, config_resize)
{
	struct ptrace_bts_config cfg;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(4, bts_size(self->pid));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 2 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(0, bts_size(self->pid));
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(2 * BTS_REC, cfg.size);
	EXPECT_EQ(PTRACE_BTS_O_TRACE, cfg.flags & ~PTRACE_BTS_O_ALLOC);
	rerun_jmp(_metadata, self->pid, 2);
}

/* Without O_ALLOC only the flags change: buffer and records stay. */
TEST_F(bts, config_flags_only)
{
	struct ptrace_bts_config cfg;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 0,
				PTRACE_BTS_O_TRACE | PTRACE_BTS_O_SIGNAL,
				BTS_OVERFLOW_SIG));
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(16 * BTS_REC, cfg.size);
	EXPECT_EQ(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_SIGNAL, cfg.flags);
	EXPECT_EQ(BTS_OVERFLOW_SIG, cfg.signal);
	check_trace(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
	/* and the buffer goes on recording with the new flags */
	rerun_jmp(_metadata, self->pid, 16);
}

/* Changing the flags needs a buffer to keep; allocating one works. */
TEST_F(bts, config_flags_need_buffer)
{
	self->pid = spawn_jmp(_metadata);
	EXPECT_EQ(-1, bts_config(_metadata, self->pid, 0, PTRACE_BTS_O_TRACE,
				 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, vmpin_kb(0));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 16 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	rerun_jmp(_metadata, self->pid, 16);
}

/* Flags without O_TRACE stop tracing and free the buffer. */
TEST_F(bts, config_disable)
{
	struct ptrace_bts_config cfg;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	rerun_jmp(_metadata, self->pid, 16);
	ASSERT_LT(0, vmpin_kb(0));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 0, 0, 0));
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(0, cfg.size);
	EXPECT_EQ(0, cfg.flags);
	EXPECT_EQ(PTRACE_BTS_BACKEND_ANY, cfg.backend);
	EXPECT_EQ(0, vmpin_settled_kb());
	/* and nothing is recorded any more */
	ASSERT_EQ(0, sys_ptrace(PTRACE_POKEUSR, self->pid, (void *)REGS_IP_OFF,
				(unsigned long)jmp_s));
	cont_to(_metadata, self->pid, 0, jmp_e);
	EXPECT_EQ(0, bts_size(self->pid));
}

/* SIZE counts, GET reads one record, index 0 being the newest. */
TEST_F(bts, size_and_get)
{
	struct bts_struct rec;
	int i, n = ARRAY_SIZE(jmp_trace);

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	cont_to(_metadata, self->pid, 0, jmp_e);
	ASSERT_EQ(n, bts_size(self->pid));
	for (i = 0; i < n; i++) {
		memset(&rec, 0, sizeof(rec));
		ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_GET, self->pid, &rec, i)) {
			TH_LOG("PTRACE_BTS_GET %d: %m", i);
		}
		EXPECT_EQ(BTS_BRANCH, rec.qualifier);
		EXPECT_EQ((unsigned long)jmp_trace[n - 1 - i].from,
			  rec.variant.lbr.from);
		EXPECT_EQ((unsigned long)jmp_trace[n - 1 - i].to,
			  rec.variant.lbr.to);
	}
	/* GET does not consume */
	EXPECT_EQ(n, bts_size(self->pid));
}

/* GET beyond SIZE is EINVAL, also on an empty buffer. */
TEST_F(bts, get_bad_index)
{
	struct bts_struct rec;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_GET, self->pid, &rec, 0));
	EXPECT_EQ(EINVAL, errno);
	cont_to(_metadata, self->pid, 0, jmp_e);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_GET, self->pid, &rec, 4));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_GET, self->pid, &rec, -1UL));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_GET, self->pid, &rec, 3));
	EXPECT_EQ((unsigned long)jmp_f0, rec.variant.lbr.from);
}

/* CLEAR empties the buffer and tracing goes on. */
TEST_F(bts, clear)
{
	static const struct branch tail[] = { { many_f1, many_t1 } };

	self->pid = spawn(_metadata, (void (*)(unsigned long))bts_many, 1, 0);
	cont_to(_metadata, self->pid, 0, many_s);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 8 * BTS_REC, BTS_TRACE_ALLOC, 0));
	/* nothing yet: CLEAR of an empty buffer */
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
	cont_to(_metadata, self->pid, 0, many_e);
	ASSERT_EQ(1, bts_size(self->pid));
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, self->pid, NULL, 0));
	EXPECT_EQ(0, bts_size(self->pid));
	/* the tracer moves the tracee back: only the new branch is recorded */
	ASSERT_EQ(0, sys_ptrace(PTRACE_POKEUSR, self->pid, (void *)REGS_IP_OFF,
				(unsigned long)many_f1));
	cont_to(_metadata, self->pid, 0, many_e);
	check_trace(_metadata, self->pid, tail, ARRAY_SIZE(tail));
}

/* DRAIN copies oldest first, returns the count and empties. */
TEST_F(bts, drain)
{
	TRACE_ROUTINE(bts_jmp, jmp_s, jmp_e, jmp_trace, ARRAY_SIZE(jmp_trace));
	/* draining an empty buffer copies nothing */
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, NULL, 0));
}

/* DRAIN into a buffer too small is EINVAL, and drops nothing. */
TEST_F(bts, drain_too_small)
{
	struct bts_struct rec[4];

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	cont_to(_metadata, self->pid, 0, jmp_e);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec,
				 sizeof(rec) - 1));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, 0));
	EXPECT_EQ(EINVAL, errno);
	check_trace(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
}

/* STATUS fills min(len, its size) bytes and always returns its size. */
TEST_F(bts, status_len)
{
	static const unsigned long lens[] = {
		0, sizeof(__u32), BTS_CONFIG_SIZE_VER0, BTS_CONFIG_SIZE_VER1,
		BTS_CONFIG_SIZE_VER2, 2 * BTS_CONFIG_SIZE_VER2,
	};
	unsigned char buf[2 * BTS_CONFIG_SIZE_VER2];
	struct ptrace_bts_config *cfg = (void *)buf;
	int i, j;

	self->pid = spawn_jmp(_metadata);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 8 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(BTS_CONFIG_SIZE_VER2,
		  sys_ptrace(PTRACE_BTS_STATUS, self->pid, NULL, 0));
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		memset(buf, 0xa5, sizeof(buf));
		ASSERT_EQ(BTS_CONFIG_SIZE_VER2,
			  sys_ptrace(PTRACE_BTS_STATUS, self->pid, buf,
				     lens[i]));
		if (lens[i] >= sizeof(__u32))
			EXPECT_EQ(8 * BTS_REC, cfg->size);
		if (lens[i] >= BTS_CONFIG_SIZE_VER0)
			EXPECT_EQ(BTS_REC, cfg->bts_size);
		if (lens[i] >= BTS_CONFIG_SIZE_VER1)
			EXPECT_NE(PTRACE_BTS_BACKEND_ANY, cfg->backend);
		if (lens[i] >= BTS_CONFIG_SIZE_VER2)
			EXPECT_EQ(0, cfg->next);
		for (j = lens[i] < BTS_CONFIG_SIZE_VER2 ? lens[i] :
			 BTS_CONFIG_SIZE_VER2; j < sizeof(buf); j++) {
			EXPECT_EQ(0xa5, buf[j]) {
				TH_LOG("len %lu: byte %d written", lens[i], j);
			}
		}
	}
}

/* A tracer built against the 16-byte struct works as it always did. */
TEST_F(bts, config_status_ver0)
{
	unsigned char buf[BTS_CONFIG_SIZE_VER2];
	struct ptrace_bts_config *cfg = (void *)buf;
	int i;

	self->pid = spawn_jmp(_metadata);
	/* bytes past the old struct are not read: no E2BIG, no backend */
	memset(buf, 0xff, sizeof(buf));
	cfg->size = 8 * BTS_REC;
	cfg->flags = BTS_TRACE_ALLOC;
	cfg->signal = 0;
	ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, buf,
				BTS_CONFIG_SIZE_VER0)) {
		TH_LOG("PTRACE_BTS_CONFIG: %m");
	}
	check_backend(_metadata, self->pid);
	memset(buf, 0xa5, sizeof(buf));
	EXPECT_EQ(BTS_CONFIG_SIZE_VER2,
		  sys_ptrace(PTRACE_BTS_STATUS, self->pid, buf,
			     BTS_CONFIG_SIZE_VER0));
	EXPECT_EQ(8 * BTS_REC, cfg->size);
	EXPECT_EQ(PTRACE_BTS_O_TRACE, cfg->flags);
	EXPECT_EQ(BTS_REC, cfg->bts_size);
	for (i = BTS_CONFIG_SIZE_VER0; i < sizeof(buf); i++)
		EXPECT_EQ(0xa5, buf[i]);
	rerun_jmp(_metadata, self->pid, 8);
}

/* ---- Errors ---- */

/* The request numbers are ABI; the numbers next to them are no requests. */
TEST_F(bts, bad_request)
{
	EXPECT_EQ(40, PTRACE_BTS_CONFIG);
	EXPECT_EQ(41, PTRACE_BTS_STATUS);
	EXPECT_EQ(42, PTRACE_BTS_SIZE);
	EXPECT_EQ(43, PTRACE_BTS_GET);
	EXPECT_EQ(44, PTRACE_BTS_CLEAR);
	EXPECT_EQ(45, PTRACE_BTS_DRAIN);
	EXPECT_EQ(46, PTRACE_BTS_READ);
	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	EXPECT_EQ(-1, sys_ptrace(39, self->pid, NULL, 0));
	EXPECT_EQ(EIO, errno);
	EXPECT_EQ(-1, sys_ptrace(47, self->pid, NULL, 0));
	EXPECT_EQ(EIO, errno);
}

/* CONFIG with less than the original struct is EINVAL. */
TEST_F(bts, config_bad_len)
{
	struct ptrace_bts_config cfg = {
		.size = 8 * BTS_REC, .flags = BTS_TRACE_ALLOC,
	};

	self->pid = spawn_jmp(_metadata);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, &cfg, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, &cfg,
				 BTS_CONFIG_SIZE_VER0 - 1));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, bts_size(self->pid));
	EXPECT_EQ(0, vmpin_kb(0));
	/* the same struct with its length is fine */
	ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, &cfg,
				sizeof(cfg)));
	check_backend(_metadata, self->pid);
	rerun_jmp(_metadata, self->pid, 8);
}

/*
 * A larger struct is fine with a zero tail, up to a page; E2BIG with a
 * non-zero tail or beyond a page.
 */
TEST_F(bts, config_extensible)
{
	const size_t page = sysconf(_SC_PAGESIZE);
	struct ptrace_bts_config cfg, *big;

	big = calloc(1, page + sizeof(__u32));
	ASSERT_FALSE(!big);
	big->size = 8 * BTS_REC;
	big->flags = BTS_TRACE_ALLOC;
	self->pid = spawn_jmp(_metadata);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, big,
				 page + sizeof(__u32)));
	EXPECT_EQ(E2BIG, errno);
	EXPECT_EQ(0, vmpin_kb(0));
	ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, big, page));
	check_backend(_metadata, self->pid);
	((unsigned char *)big)[page - 1] = 1;
	big->size = 2 * BTS_REC;
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, big, page));
	EXPECT_EQ(E2BIG, errno);
	free(big);
	/* the failed calls changed nothing */
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(8 * BTS_REC, cfg.size);
	rerun_jmp(_metadata, self->pid, 8);
}

/* Unknown flags and bad signal numbers are EINVAL. */
TEST_F(bts, config_bad_flags)
{
	static const unsigned int bad_flags[] = {
		0x40, 0x80000000, BTS_TRACE_ALLOC | 0x100,
	};
	static const unsigned int bad_sigs[] = { 0, 1000 };
	const unsigned int with_sig = BTS_TRACE_ALLOC | PTRACE_BTS_O_SIGNAL;
	int i;

	self->pid = spawn_jmp(_metadata);
	for (i = 0; i < ARRAY_SIZE(bad_flags); i++) {
		EXPECT_EQ(-1, bts_config(_metadata, self->pid, 8 * BTS_REC,
					 bad_flags[i], 0));
		EXPECT_EQ(EINVAL, errno) {
			TH_LOG("flags %#x", bad_flags[i]);
		}
	}
	for (i = 0; i < ARRAY_SIZE(bad_sigs); i++) {
		EXPECT_EQ(-1, bts_config(_metadata, self->pid, 8 * BTS_REC,
					 with_sig, bad_sigs[i]));
		EXPECT_EQ(EINVAL, errno) {
			TH_LOG("signal %u", bad_sigs[i]);
		}
	}
	EXPECT_EQ(0, vmpin_kb(0));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 8 * BTS_REC, with_sig,
				BTS_OVERFLOW_SIG));
	rerun_jmp(_metadata, self->pid, 8);
}

/* Bad user pointers are EFAULT; a failed DRAIN drops nothing. */
TEST_F(bts, bad_pointer)
{
	void *bad = (void *)8;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	cont_to(_metadata, self->pid, 0, jmp_e);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, bad,
				 sizeof(struct ptrace_bts_config)));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_STATUS, self->pid, bad,
				 sizeof(struct ptrace_bts_config)));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_GET, self->pid, bad, 0));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, bad,
				 16 * BTS_REC));
	EXPECT_EQ(EFAULT, errno);
	check_trace(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
}

/*
 * Exit status of a child that issues every request on @pid: 0 if each
 * failed with ESRCH, else 10 + the index of the first one that did not.
 */
static int requests_errno(pid_t pid, bool tracer_of_running)
{
	struct ptrace_bts_config cfg = { .size = 8 * BTS_REC,
					 .flags = BTS_TRACE_ALLOC };
	struct bts_struct rec[8];
	struct ptrace_bts_read rd = {
		.buf = (unsigned long)rec, .size = sizeof(rec),
	};
	const struct {
		long request;
		void *addr;
		unsigned long data;
		bool reads;
	} req[] = {
		{ PTRACE_BTS_CONFIG, &cfg, sizeof(cfg) },
		{ PTRACE_BTS_STATUS, &cfg, sizeof(cfg), true },
		{ PTRACE_BTS_SIZE, NULL, 0, true },
		{ PTRACE_BTS_GET, rec, 0 },
		{ PTRACE_BTS_CLEAR, NULL, 0 },
		{ PTRACE_BTS_DRAIN, rec, sizeof(rec) },
		{ PTRACE_BTS_READ, &rd, sizeof(rd), true },
	};
	long ret;
	int i;

	for (i = 0; i < ARRAY_SIZE(req); i++) {
		errno = 0;
		ret = sys_ptrace(req[i].request, pid, req[i].addr,
				 req[i].data);
		/* The tracer reads a running tracee's trace; nothing else. */
		if (tracer_of_running && req[i].reads ? ret < 0 :
		    ret != -1 || errno != ESRCH)
			return 10 + i;
	}
	return 0;
}

static int all_requests_errno(pid_t pid)
{
	return requests_errno(pid, false);
}

static void spin(unsigned long unused)
{
	for (;;)
		asm volatile ("" ::: "memory");
}

/* Only the tracer may ask: ESRCH for a non-tracer, traced or not. */
TEST_F(bts, not_tracer)
{
	pid_t other, untraced;
	int status;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 16);
	other = fork();
	ASSERT_GE(other, 0);
	if (other == 0)
		_exit(all_requests_errno(self->pid));
	ASSERT_EQ(other, waitpid(other, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));

	untraced = fork();
	ASSERT_GE(untraced, 0);
	if (untraced == 0) {
		pause();
		_exit(0);
	}
	EXPECT_EQ(0, all_requests_errno(untraced));
	kill(untraced, SIGKILL);
	waitpid(untraced, NULL, 0);
	/* the failed attempts left the tracee's buffer alone */
	cont_to(_metadata, self->pid, 0, jmp_e);
	check_trace(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
}

/*
 * A running tracee: what changes the trace, and GET, is ESRCH, like
 * PTRACE_PEEKUSR; STATUS, SIZE and READ answer (ptrace_bts_nonstop).
 */
TEST_F(bts, running_tracee)
{
	self->pid = spawn(_metadata, spin, 0, 0);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 8 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	EXPECT_EQ(0, requests_errno(self->pid, true));
	/* stopped again, it answers; the spin loop fills the buffer */
	EXPECT_EQ(8, stop_when_recorded(self->pid, 8));
}

/* Buffers above DS_MAX_BUFFER_SIZE are EINVAL; the cap itself is fine. */
TEST_F(bts, too_large)
{
	struct ptrace_bts_config cfg;

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	EXPECT_EQ(-1, bts_config(_metadata, self->pid, BTS_MAX_BUFFER + BTS_REC,
				 BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, bts_config(_metadata, self->pid, 0xffffffff, BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, vmpin_kb(0));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, BTS_MAX_BUFFER, BTS_TRACE_ALLOC, 0));
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(BTS_MAX_BUFFER / BTS_REC * BTS_REC, cfg.size);
}

static void drop_ipc_lock(struct __test_metadata *_metadata)
{
	drop_cap(_metadata, CAP_IPC_LOCK);
}

/* Without CAP_IPC_LOCK, RLIMIT_MEMLOCK bounds the buffer: EDQUOT. */
TEST_F(bts, memlock_limit)
{
	struct rlimit lim = { 64 << 10, 64 << 10 };

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	drop_ipc_lock(_metadata);
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &lim));
	EXPECT_EQ(-1, bts_config(_metadata, self->pid, 1 << 20, BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(EDQUOT, errno);
	EXPECT_EQ(0, vmpin_kb(0));
	/* within the limit it works, and is charged */
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 32 << 10, BTS_TRACE_ALLOC, 0));
	EXPECT_LE(28, vmpin_kb(0));
	EXPECT_GE(64, vmpin_kb(0));
	EXPECT_EQ(0, bts_config(_metadata, self->pid, 0, 0, 0));
	EXPECT_EQ(0, vmpin_settled_kb());
}

/*
 * A new buffer that cannot be had leaves the trace as it was: its size,
 * flags, records and numbers. Only the growth is asked of the limit: with
 * 40 KiB held, 60 KiB fit under 64 KiB.
 */
TEST_F(bts, memlock_resize_keeps_trace)
{
	struct rlimit lim = { 64 << 10, 64 << 10 };
	struct ptrace_bts_config before, after;

	drop_ipc_lock(_metadata);
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &lim));
	self->pid = start_traced(_metadata, bts_jmp, jmp_s,
				 (40 << 10) / BTS_REC);
	cont_to(_metadata, self->pid, 0, jmp_e);
	get_status(_metadata, self->pid, &before);
	EXPECT_EQ(-1, bts_config(_metadata, self->pid, 1 << 20,
				 BTS_TRACE_ALLOC | PTRACE_BTS_O_SCHED, 0));
	EXPECT_EQ(EDQUOT, errno);
	get_status(_metadata, self->pid, &after);
	EXPECT_EQ(0, memcmp(&before, &after, sizeof(before)));
	check_trace(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));

	ASSERT_EQ(0, bts_config(_metadata, self->pid, 60 << 10,
				BTS_TRACE_ALLOC, 0));
	get_status(_metadata, self->pid, &after);
	EXPECT_EQ((60 << 10) / BTS_REC * BTS_REC, after.size);
	EXPECT_EQ(before.backend, after.backend);
	/* The old records' numbers stay taken, and one more. */
	EXPECT_EQ(before.next + 1, after.next);
	EXPECT_EQ(0, bts_size(self->pid));
	EXPECT_LE(56, vmpin_kb(0));
	EXPECT_GE(64, vmpin_kb(0));
}

/* The charge follows the buffer size through allocation and resizing. */
TEST_F(bts, memory_charge)
{
	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 256 << 10, BTS_TRACE_ALLOC, 0));
	EXPECT_LE(252, vmpin_kb(0));
	EXPECT_GE(256 + 16, vmpin_kb(0));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 16 << 10, BTS_TRACE_ALLOC, 0));
	EXPECT_LE(12, vmpin_kb(0));
	EXPECT_GE(16 + 16, vmpin_kb(0));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 0, 0, 0));
	EXPECT_EQ(0, vmpin_settled_kb());
}

/*
 * The memory cgroup the tracer runs in is charged for what its requests
 * allocate: the buffer (vmalloc) and the small objects beside it (slab).
 * Enough tracees that the slab charge stands out of the per-CPU batching
 * of the cgroup's statistics (under a page per CPU). The statistics are
 * flushed every two seconds at the latest: each reading waits for that.
 */
#define MEMCG_TRACEES			64
#define MEMCG_MIN_SLAB_PER_TRACEE	256
#define MEMCG_FLUSH_WAIT_US		(2500 * 1000)

struct memcg {
	char	mnt[32];	/* a private cgroup2 mount */
	char	dir[64];	/* the test's cgroup, under it */
	char	home[256];	/* where the process was, under it */
	bool	mounted;
	bool	enabled;	/* the test enabled +memory on the root */
};

static void memcg_leave(struct memcg *mc)
{
	char dir[sizeof(mc->mnt) + sizeof(mc->home)];

	snprintf(dir, sizeof(dir), "%s%s", mc->mnt, mc->home);
	cgroup_write(dir, "cgroup.procs", "0");
	rmdir(mc->dir);
	if (mc->enabled)
		cgroup_write(mc->mnt, "cgroup.subtree_control", "-memory");
	if (mc->mounted) {
		umount(mc->mnt);
		rmdir(mc->mnt);
	}
}

/*
 * Into a child cgroup of the root with the memory controller, through a
 * private cgroup2 mount. Returns NULL, or why not (nothing left behind):
 * no cgroup2, or cgroup v1 holding the memory controller.
 */
static const char *memcg_enter(struct memcg *mc)
{
	const char *why = NULL;
	char line[300];
	int err;
	FILE *f;

	memset(mc, 0, sizeof(*mc));
	snprintf(mc->mnt, sizeof(mc->mnt), "/tmp/ptrace_bts_cg.XXXXXX");
	if (!mkdtemp(mc->mnt))
		return "mkdtemp";
	if (mount("none", mc->mnt, "cgroup2", 0, NULL)) {
		rmdir(mc->mnt);
		return "no cgroup2 (CONFIG_CGROUPS)";
	}
	mc->mounted = true;
	/* Listed only once cgroup2 has been mounted somewhere. */
	f = fopen("/proc/self/cgroup", "r");
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "0::", 3))
				sscanf(line + 3, "%255s", mc->home);
		fclose(f);
	}
	if (!mc->home[0]) {
		why = "not in the cgroup2 hierarchy";
		goto leave;
	}
	snprintf(mc->dir, sizeof(mc->dir), "%s/ptrace_bts", mc->mnt);
	if (!cgroup_lists(mc->mnt, "cgroup.subtree_control", "memory")) {
		if (cgroup_write(mc->mnt, "cgroup.subtree_control", "+memory")) {
			why = "no memory controller for cgroup2 (CONFIG_MEMCG)";
			goto leave;
		}
		mc->enabled = true;
	}
	if (mkdir(mc->dir, 0755) && errno != EEXIST) {
		why = "mkdir";
		goto leave;
	}
	if (cgroup_write(mc->dir, "cgroup.procs", "0")) {
		why = "cgroup.procs";
		goto leave;
	}
	return NULL;

leave:
	err = errno;
	memcg_leave(mc);
	errno = err;
	return why;
}

TEST_F(bts, memcg_charge)
{
	long long slab0, vmalloc0, slab1, vmalloc1;
	pid_t pids[MEMCG_TRACEES];
	struct memcg mc;
	const char *why;
	int i, err = 0;

	why = memcg_enter(&mc);
	if (why)
		SKIP(return, "%s: %s", why, strerror(errno));
	for (i = 0; i < MEMCG_TRACEES; i++)
		pids[i] = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	usleep(MEMCG_FLUSH_WAIT_US);
	slab0 = cgroup_read(mc.dir, "memory.stat", "slab_unreclaimable");
	vmalloc0 = cgroup_read(mc.dir, "memory.stat", "vmalloc");
	for (i = 0; i < MEMCG_TRACEES && !err; i++)
		err = bts_config(_metadata, pids[i], 4096, BTS_TRACE_ALLOC, 0);
	usleep(MEMCG_FLUSH_WAIT_US);
	slab1 = cgroup_read(mc.dir, "memory.stat", "slab_unreclaimable");
	vmalloc1 = cgroup_read(mc.dir, "memory.stat", "vmalloc");
	for (i = 0; i < MEMCG_TRACEES; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, __WALL);
	}
	memcg_leave(&mc);
	ASSERT_EQ(0, err);
	ASSERT_LE(0, slab0);
	ASSERT_LE(0, vmalloc0);
	EXPECT_LE(MEMCG_TRACEES * 4096LL, vmalloc1 - vmalloc0);
	EXPECT_LE(MEMCG_TRACEES * MEMCG_MIN_SLAB_PER_TRACEE,
		  slab1 - slab0) {
		TH_LOG("slab charge %lld bytes for %d tracers", slab1 - slab0,
		       MEMCG_TRACEES);
	}
}

/* ---- Backends ---- */

/* The emulated backend is built in, and on (ds.emulation). */
static bool have_emulation(void)
{
	return bts_emulation_present();
}

/*
 * PTRACE_BTS_BACKEND_ANY gives the CPU's BTS, unless ds.force_emulation
 * (or perf's policy, for a user other than root), else the emulation.
 */
TEST_F(bts, backend_reported)
{
	/* For whoever boots the kernel, to hold against the machine. */
	ksft_print_msg("expected backend: %s\n",
		       backend_name(expected_backend()));
	self->pid = spawn_jmp(_metadata);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 8 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	EXPECT_EQ(expected_backend(), bts_backend(self->pid));
	rerun_jmp(_metadata, self->pid, 8);
}

/*
 * Allocate with @backend explicitly: it must trace with exactly that one
 * when @present, else fail with EOPNOTSUPP and allocate nothing.
 */
static void config_explicit(struct __test_metadata *_metadata, pid_t pid,
			    unsigned int backend, bool present)
{
	long ret = bts_config_backend(pid, 8 * BTS_REC, BTS_TRACE_ALLOC, 0,
				      backend);

	if (!present) {
		EXPECT_EQ(-1, ret);
		EXPECT_EQ(EOPNOTSUPP, errno);
		EXPECT_EQ(0, vmpin_kb(0));
		return;
	}
	ASSERT_EQ(0, ret) {
		TH_LOG("backend %u: %m", backend);
	}
	EXPECT_EQ(backend, bts_backend(pid));
	rerun_jmp(_metadata, pid, 8);
}

/*
 * PTRACE_BTS_BACKEND_HARDWARE: the CPU's BTS; where the administrator
 * forces emulation, refused with EACCES (no BTS at all is EOPNOTSUPP).
 */
TEST_F(bts, backend_hardware)
{
	self->pid = spawn_jmp(_metadata);
	if (cpu_has_bts() && bts_emulation_forced()) {
		EXPECT_EQ(-1, bts_config_backend(self->pid, 8 * BTS_REC,
						 BTS_TRACE_ALLOC, 0,
						 PTRACE_BTS_BACKEND_HARDWARE));
		EXPECT_EQ(EACCES, errno);
		EXPECT_EQ(0, vmpin_kb(0));
		return;
	}
	config_explicit(_metadata, self->pid, PTRACE_BTS_BACKEND_HARDWARE,
			cpu_has_bts());
}

/* PTRACE_BTS_BACKEND_EMULATED: the emulation, with or without BTS. */
TEST_F(bts, backend_emulated)
{
	self->pid = spawn_jmp(_metadata);
	config_explicit(_metadata, self->pid, PTRACE_BTS_BACKEND_EMULATED,
			have_emulation());
}

/* Backend numbers beyond the known ones are EINVAL, with or without O_ALLOC. */
TEST_F(bts, backend_invalid)
{
	static const unsigned int bad[] = { 3, 0x80000000, 0xffffffff };
	int i;

	self->pid = spawn_jmp(_metadata);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		EXPECT_EQ(-1, bts_config_backend(self->pid, 8 * BTS_REC,
						 BTS_TRACE_ALLOC, 0, bad[i]));
		EXPECT_EQ(EINVAL, errno);
		EXPECT_EQ(-1, bts_config_backend(self->pid, 0,
						 PTRACE_BTS_O_TRACE, 0, bad[i]));
		EXPECT_EQ(EINVAL, errno);
	}
	EXPECT_EQ(0, vmpin_kb(0));
	EXPECT_EQ(PTRACE_BTS_BACKEND_ANY, bts_backend(self->pid));
}

/*
 * Without O_ALLOC the backend stays: naming the other one is EINVAL,
 * naming the one in use or none is fine, so STATUS can be written back.
 */
TEST_F(bts, backend_flags_only)
{
	struct ptrace_bts_config cfg;
	unsigned int other;

	self->pid = spawn_jmp(_metadata);
	/* nothing in use yet: only ANY goes */
	EXPECT_EQ(-1, bts_config_backend(self->pid, 0, PTRACE_BTS_O_TRACE, 0,
					 PTRACE_BTS_BACKEND_HARDWARE));
	EXPECT_EQ(EINVAL, errno);
	/* but stopping works whatever it names */
	EXPECT_EQ(0, bts_config_backend(self->pid, 0, 0, 0,
					PTRACE_BTS_BACKEND_HARDWARE));
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 8 * BTS_REC,
				BTS_TRACE_ALLOC, 0));
	get_status(_metadata, self->pid, &cfg);
	other = cfg.backend == PTRACE_BTS_BACKEND_HARDWARE ?
		PTRACE_BTS_BACKEND_EMULATED : PTRACE_BTS_BACKEND_HARDWARE;
	EXPECT_EQ(-1, bts_config_backend(self->pid, 0, PTRACE_BTS_O_TRACE, 0,
					 other));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, bts_config_backend(self->pid, 0, PTRACE_BTS_O_TRACE, 0,
					PTRACE_BTS_BACKEND_ANY));
	/* read, modify, write: STATUS's struct goes back as it is */
	cfg.flags |= PTRACE_BTS_O_SIGNAL;
	cfg.signal = BTS_OVERFLOW_SIG;
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, &cfg,
				sizeof(cfg))) {
		TH_LOG("PTRACE_BTS_CONFIG: %m");
	}
	get_status(_metadata, self->pid, &cfg);
	EXPECT_EQ(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_SIGNAL, cfg.flags);
	EXPECT_NE(other, cfg.backend);
	rerun_jmp(_metadata, self->pid, 8);
}

TEST_HARNESS_MAIN
