// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace, PTRACE_BTS_O_GAPS: BTS_GAP records where
 * execution goes on elsewhere than a branch says (a signal handler, its
 * return, an exec) or where records are missing (a pause at a full
 * buffer), each at its place among the branches the tracee is known to
 * take; and none without the flag.
 *
 * The helpers and the fixture are in ptrace_bts_harness.h.
 */
#define _GNU_SOURCE
#include "ptrace_bts_harness.h"

/* argv[1] that makes this program exit at once: the image it execs. */
#define BTS_EXIT_ARG		"--bts-exit"

/* One expected record: a branch, or a gap when @reason is not 0. */
struct rec_exp {
	const char *from;
	const char *to;
	unsigned int reason;
	unsigned int info;
};

static void check_exp(struct __test_metadata *_metadata,
		      const struct bts_struct *rec, long n,
		      const struct rec_exp *exp, long n_exp)
{
	long i;

	ASSERT_EQ(n_exp, n);
	for (i = 0; i < n; i++) {
		if (!exp[i].reason) {
			check_records(_metadata, rec + i, 1,
				      &(struct branch){ exp[i].from,
							exp[i].to }, 1);
			continue;
		}
		EXPECT_EQ(BTS_GAP, rec[i].qualifier) {
			TH_LOG("record %ld: qualifier %llu", i,
			       (unsigned long long)rec[i].qualifier);
		}
		EXPECT_EQ(exp[i].reason, rec[i].variant.gap.reason);
		EXPECT_EQ(exp[i].info, rec[i].variant.gap.info);
		EXPECT_EQ((unsigned long)exp[i].to, rec[i].variant.gap.ip) {
			TH_LOG("record %ld: gap at %#llx, expected %p", i,
			       (unsigned long long)rec[i].variant.gap.ip,
			       exp[i].to);
		}
	}
}

static void sig_routine(unsigned long unused)
{
	install_asm_handler(SIGUSR1, (void *)bts_sig_handler);
	bts_sig();
}

/* Start bts_sig's tracee at sig_s, traced with @flags. */
static pid_t start_sig(struct __test_metadata *_metadata, unsigned int flags)
{
	pid_t pid = spawn(_metadata, sig_routine, 0, 0);

	cont_to(_metadata, pid, 0, sig_s);
	ASSERT_EQ(0, bts_config(_metadata, pid, 64 * BTS_REC,
				BTS_TRACE_ALLOC | flags, 0));
	cont_to_signal(_metadata, pid, 0, SIGUSR1);
	cont_to(_metadata, pid, SIGUSR1, sig_e);
	return pid;
}

/*
 * The handler is entered and left by the kernel, not by a branch: a gap
 * at each, saying where execution went on.
 */
TEST_F(bts, gap_signal)
{
	const struct rec_exp exp[] = {
		{ sig_f0, sig_t0 },
		{ NULL, bts_sig_handler, PTRACE_BTS_GAP_SIGNAL, SIGUSR1 },
		{ sigh_f0, sigh_t0 },
		{ sigh_f1, bts_sig_restorer },
		{ NULL, sig_f1, PTRACE_BTS_GAP_SIGRETURN, 0 },
		{ sig_f1, sig_t1 },
	};
	struct bts_struct rec[16];
	long n;

	self->pid = start_sig(_metadata, PTRACE_BTS_O_GAPS);
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	check_exp(_metadata, rec, n, exp, ARRAY_SIZE(exp));
}

/* Without the flag, as for a tracer of the ABI before it: branches only. */
TEST_F(bts, gaps_off)
{
	static const struct branch exp[] = {
		{ sig_f0, sig_t0 }, { sigh_f0, sigh_t0 },
		{ sigh_f1, bts_sig_restorer }, { sig_f1, sig_t1 },
	};

	self->pid = start_sig(_metadata, 0);
	check_trace(_metadata, self->pid, exp, ARRAY_SIZE(exp));
}

/* The flag goes on and off with the flags, the buffer kept. */
TEST_F(bts, gaps_flag_update)
{
	struct ptrace_bts_config cfg;

	self->pid = start_traced(_metadata, bts_jmp, jmp_s, 8);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 0,
				PTRACE_BTS_O_TRACE | PTRACE_BTS_O_GAPS, 0));
	memset(&cfg, 0, sizeof(cfg));
	ASSERT_EQ(BTS_CONFIG_SIZE_VER2, sys_ptrace(PTRACE_BTS_STATUS,
						   self->pid, &cfg,
						   sizeof(cfg)));
	EXPECT_EQ(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_GAPS, cfg.flags);
	cont_to(_metadata, self->pid, 0, jmp_e);
	check_trace(_metadata, self->pid, jmp_trace, ARRAY_SIZE(jmp_trace));
}

/*
 * A full buffer paused recording until the tracer, told by a signal,
 * drained it: the first record after the DRAIN says so. (A tracee stopped
 * by PTRACE_BTS_O_STOP did not run meanwhile: no mark there, see
 * ptrace_bts_stop.)
 */
TEST_F(bts, gap_paused)
{
	struct bts_struct rec[4];
	long n;

	self->pid = start_many(_metadata, 400, 4,
			       PTRACE_BTS_O_SIGNAL | PTRACE_BTS_O_GAPS);
	cont_to_signal(_metadata, self->pid, 0, BTS_OVERFLOW_SIG);
	ASSERT_EQ(4, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec,
				sizeof(rec)));
	/* The mark is there at once. */
	ASSERT_EQ(1, bts_size(self->pid));
	cont_to_signal(_metadata, self->pid, 0, BTS_OVERFLOW_SIG);
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	ASSERT_EQ(4, n);
	EXPECT_EQ(BTS_GAP, rec[0].qualifier);
	EXPECT_EQ(PTRACE_BTS_GAP_PAUSED, rec[0].variant.gap.reason);
	EXPECT_EQ(0, rec[0].variant.gap.ip);
	check_many(_metadata, rec + 1, 3, 0, 3, 400);
}

/*
 * A pause that ends without a DRAIN (a switch to wrap-around) cannot skip
 * a number with records held: the mark alone says it, at once.
 */
TEST_F(bts, gap_paused_to_wrap)
{
	struct bts_struct rec[4];

	self->pid = start_many(_metadata, 400, 4,
			       PTRACE_BTS_O_SIGNAL | PTRACE_BTS_O_GAPS);
	cont_to_signal(_metadata, self->pid, 0, BTS_OVERFLOW_SIG);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, 0,
				PTRACE_BTS_O_TRACE | PTRACE_BTS_O_GAPS, 0));
	ASSERT_EQ(4, sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec,
				sizeof(rec)));
	EXPECT_EQ(BTS_GAP, rec[3].qualifier);
	EXPECT_EQ(PTRACE_BTS_GAP_PAUSED, rec[3].variant.gap.reason);
	check_many(_metadata, rec, 3, 1, 3, 400);
}

static void exec_routine(unsigned long unused)
{
	execl("/proc/self/exe", "ptrace_bts_gaps", BTS_EXIT_ARG, NULL);
	_exit(9);
}

/* An exec is a gap: the records after it are another image's. */
TEST_F(bts, gap_exec)
{
	struct bts_struct *rec = poisoned_records(BTS_DRAIN_BATCH);
	struct ptrace_bts_read rd;
	int status;
	long n;

	ASSERT_FALSE(!rec);
	self->pid = spawn(_metadata, exec_routine, 0, PTRACE_O_TRACEEXEC);
	ASSERT_EQ(0, bts_config(_metadata, self->pid, BTS_DRAIN_BATCH * BTS_REC,
				BTS_TRACE_ALLOC | PTRACE_BTS_O_GAPS, 0));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_EQ(SIGTRAP | (PTRACE_EVENT_EXEC << 8), status >> 8);

	memset(&rd, 0, sizeof(rd));
	rd.buf = (unsigned long)rec;
	rd.size = BTS_DRAIN_BATCH * BTS_REC;
	n = sys_ptrace(PTRACE_BTS_READ, self->pid, &rd, sizeof(rd));
	/* The way to execve() in the old image, then the mark, last. */
	ASSERT_LE(2, n);
	EXPECT_EQ(BTS_BRANCH, rec[0].qualifier);
	EXPECT_EQ(BTS_GAP, rec[n - 1].qualifier);
	EXPECT_EQ(PTRACE_BTS_GAP_EXEC, rec[n - 1].variant.gap.reason);
	EXPECT_EQ(0, rd.state);
	free(rec);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], BTS_EXIT_ARG))
		_exit(0);
	return test_harness_run(argc, argv);
}
