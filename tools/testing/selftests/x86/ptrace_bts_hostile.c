// SPDX-License-Identifier: GPL-2.0
/*
 * Hostile use of ptrace branch tracing: a bounded, seeded fuzzer.
 *
 * Several tracer processes, all of one unprivileged uid with a small
 * RLIMIT_MEMLOCK, each trace several tracees that loop, fork, spawn
 * threads, exec, signal themselves and die; their children and threads
 * are traced too (PTRACE_O_TRACEFORK, CLONE, EXEC) and get requests like
 * the others. The tracers stop them at
 * random and issue random PTRACE_BTS_* requests: random sizes, flags,
 * signals, backends, indexes, lengths and pointers (NULL, unmapped,
 * read-only, kernel, misaligned, straddling the end of a page). Tracers
 * detach, and are killed in the middle of it; CPU 1 goes offline and
 * online underneath. failslab and fail_page_alloc fail the allocations
 * made in the series' code (the text of ds.c, ptrace_bts.c and
 * ds_emulate.c, from /proc/kallsyms) for these processes.
 *
 * Every error must be one Documentation/arch/x86/ptrace-bts.rst allows for
 * the request. Before and after, one tracer of the uid can have exactly
 * RLIMIT_MEMLOCK of trace buffer and not a page more, and a second tracer
 * of the uid none meanwhile: the budget is the user's and all of it comes
 * back. Then, as root and without a locked-memory limit, tracers in a
 * memory cgroup with memory.max set: the cgroup, not the user, must pay
 * for their buffers, and refuse the one that does not fit with ENOMEM, no
 * OOM kill. Last, kmemleak must not suspect anything the series allocated.
 *
 * A long run or a rerun: ptrace_bts_hostile --seed S --ops N
 *
 * This file has the test cases and main(); the requests and the tracees
 * are in ptrace_bts_hostile_ops.c, the tracers, the run and the kmemleak
 * scan in _run.c, the budget and the memory cgroup in _memcg.c.
 */
#define _GNU_SOURCE
#include "../kselftest_harness.h"
#include "ptrace_bts_hostile.h"

static void ho_budget_check(struct __test_metadata *_metadata)
{
	int status;
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(ho_budget());
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status)) {
		TH_LOG("budget check failed at step %d", WEXITSTATUS(status));
	}
}

/*
 * Each of the first HO_MEMCG_GRANTED tracers is charged one buffer; the
 * others, the cgroup full, get ENOMEM and are charged nothing. The
 * cgroup's limit refused them, its OOM killer was never considered, and
 * the tracees' cgroup paid for nothing.
 */
static void ho_memcg_fill(struct __test_metadata *_metadata,
			  struct ho_memcg *mc)
{
	long peer = ho_memcg_current(mc->tracees);
	long charged, vm, max, oom, kills;
	int i, err;

	for (i = 0; i < HO_MEMCG_TRACERS; i++) {
		err = ho_memcg_charge(mc, i, &charged, &vm);
		if (i < HO_MEMCG_GRANTED) {
			EXPECT_EQ(0, err);
			EXPECT_GE(mc->tol, labs(charged - HO_MEMCG_BUF)) {
				TH_LOG("tracer %d's cgroup was charged %ld bytes for %ld",
				       i, charged, HO_MEMCG_BUF);
			}
			EXPECT_GE(mc->tol, labs(vm - HO_MEMCG_BUF));
		} else {
			EXPECT_EQ(ENOMEM, err);
			EXPECT_GE(mc->tol, labs(charged)) {
				TH_LOG("a refused tracer's cgroup kept %ld bytes",
				       charged);
			}
			EXPECT_GE(mc->tol, labs(vm));
		}
	}
	peer = ho_memcg_current(mc->tracees) - peer;
	max = cgroup_read(mc->tracers, "memory.events", "max");
	oom = cgroup_read(mc->tracers, "memory.events", "oom");
	kills = cgroup_read(mc->tracers, "memory.events", "oom_kill");
	ksft_print_msg("memcg: the tracees' cgroup %+ld KiB; max %ld, oom %ld, oom_kill %ld\n",
		       peer >> 10, max, oom, kills);
	EXPECT_GE(mc->tol, labs(peer)) {
		TH_LOG("the tracees' cgroup was charged for the buffers");
	}
	EXPECT_LT(0, max);
	EXPECT_EQ(0, oom);
	EXPECT_EQ(0, kills);
}

/* A buffer given back is uncharged, and the room goes to a refused one. */
static void ho_memcg_refund(struct __test_metadata *_metadata,
			    struct ho_memcg *mc, long base)
{
	long held = base + (HO_MEMCG_GRANTED - 1) * HO_MEMCG_BUF;
	long cur, charged, vm;

	EXPECT_EQ(0, ho_memcg_ask(mc, 0, HO_MEMCG_FREE));
	/* vfree()d after an RCU grace period, from a workqueue. */
	cur = ho_memcg_settle(mc->tracers, held + mc->tol);
	ksft_print_msg("memcg: tracer 0 freed its buffer: %+ld KiB over the baseline\n",
		       (cur - base) >> 10);
	EXPECT_GE(mc->tol, labs(cur - held));
	EXPECT_EQ(0, ho_memcg_charge(mc, HO_MEMCG_GRANTED, &charged, &vm));
	EXPECT_GE(mc->tol, labs(charged - HO_MEMCG_BUF));
}

/*
 * Every tracer and tracee lived to the end; once they exit, holding
 * buffers or not, the cgroup is back below its baseline.
 */
static void ho_memcg_end(struct __test_metadata *_metadata,
			 struct ho_memcg *mc, long base)
{
	int i, status;
	long cur;

	for (i = 0; i < HO_MEMCG_TRACERS; i++) {
		EXPECT_EQ(0, ho_memcg_ask(mc, i, HO_MEMCG_CHECK)) {
			TH_LOG("tracer %d's tracee is gone", i);
		}
	}
	for (i = 0; i < HO_MEMCG_TRACERS; i++) {
		close(mc->cmd[i]);
		mc->cmd[i] = -1;
		EXPECT_EQ(mc->pid[i], waitpid(mc->pid[i], &status, 0));
		EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status)) {
			TH_LOG("tracer %d: status %#x", i, status);
		}
	}
	ho_memcg_stop(mc);
	cur = ho_memcg_settle(mc->tracers, base + mc->tol);
	ksft_print_msg("memcg: all exited: memory.current %ld KiB, baseline %ld KiB\n",
		       cur >> 10, base >> 10);
	EXPECT_GE(base + mc->tol, cur);
	EXPECT_EQ(0, cgroup_read(mc->tracers, "memory.events", "oom_kill"));
	EXPECT_EQ(0, cgroup_read(mc->tracees, "memory.events", "oom_kill"));
}

FIXTURE(hostile) {
};

FIXTURE_SETUP(hostile)
{
	if (geteuid())
		SKIP(return, "needs root: it sets up fault injection and drops to uid %d",
		     HO_UID);
	/* A kernel without the requests, or with neither backend. */
	errno = 0;
	sys_ptrace(PTRACE_BTS_SIZE, getpid(), NULL, 0);
	if (errno == EIO)
		SKIP(return, "no PTRACE_BTS_* requests (EIO)");
}

FIXTURE_TEARDOWN(hostile)
{
}

/* A tracer of the uid has all of its budget, a second one none meanwhile. */
TEST_F(hostile, budget_before)
{
	ho_budget_check(_metadata);
}

/*
 * The fuzzer: every answer documented. Its operations take about a minute
 * on a KASAN kernel under software emulation, and more than linearly
 * longer on a slower machine: the tracee lifetimes, the kills and the CPU
 * toggles are timed, so a slower machine sees more of them per operation.
 * The timeout only bounds a hang.
 */
TEST_F_TIMEOUT(hostile, fuzz, 420)
{
	EXPECT_EQ(0, ho_run(HO_SEED, HO_OPS));
	/* The paths of a traced fork, clone and exec were taken. */
	EXPECT_LT(0, atomic_load(&ho->forks) + atomic_load(&ho->vforks));
	EXPECT_LT(0, atomic_load(&ho->clones));
	EXPECT_LT(0, atomic_load(&ho->execs));
}

/* ... and after it, with tracers killed and tracees gone, all of it again. */
TEST_F(hostile, budget_after)
{
	ho_budget_check(_metadata);
}

/*
 * Issue 14, finding 7: forked tracers in a memory cgroup with memory.max
 * set. The cgroup pays for their buffers, a full one refuses a buffer
 * with ENOMEM instead of OOM-killing, and neither leaks a charge.
 */
TEST_F_TIMEOUT(hostile, memcg, 120)
{
	char max[32] = "";
	struct ho_memcg mc;
	int i, err;
	long base;

	ho_memcg_init(&mc);
	if (2 * mc.tol >= HO_MEMCG_BUF)
		SKIP(return, "too many CPUs: their charge stocks hide a buffer");
	err = ho_memcg_setup(&mc);
	if (err > 0) {
		ho_memcg_cleanup(&mc);
		SKIP(return, "%s: buffers cannot be charged to a cgroup here",
		     err == HO_MEMCG_NO_CGROUP2 ? "no cgroup2 (CONFIG_CGROUPS)" :
						  "no memory controller (CONFIG_MEMCG)");
	}
	ASSERT_EQ(0, err) {
		TH_LOG("setting up the cgroups: %m");
		ho_memcg_cleanup(&mc);
	}
	/* The tracees of tracers that exit are reaped here. */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < HO_MEMCG_TRACERS && !err; i++)
		err = ho_memcg_start(&mc, i);
	base = ho_memcg_current(mc.tracers);
	if (!err) {
		snprintf(max, sizeof(max), "%ld", base + HO_MEMCG_BUF / 2 +
			 HO_MEMCG_GRANTED * HO_MEMCG_BUF);
		err = cgroup_write(mc.tracers, "memory.max", max);
	}
	EXPECT_EQ(0, err) {
		TH_LOG("tracer %d: step %d, memory.max %s: %m", i - 1, err, max);
	}
	if (!err) {
		ksft_print_msg("memcg: baseline %ld KiB, memory.max %ld KiB, tolerance %ld KiB\n",
			       base >> 10, atol(max) >> 10, mc.tol >> 10);
		ho_memcg_fill(_metadata, &mc);
		ho_memcg_refund(_metadata, &mc, base);
		ho_memcg_end(_metadata, &mc, base);
	}
	ho_memcg_stop(&mc);
	ho_memcg_cleanup(&mc);
}

/* Nothing the series allocated is leaked. */
TEST_F_TIMEOUT(hostile, kmemleak, 60)
{
	int ours, others;

	if (access(HO_DEBUGFS "/kmemleak", F_OK))
		SKIP(return, "no kmemleak");
	ours = ho_kmemleak(&others);
	ASSERT_LE(0, ours);
	ksft_print_msg("kmemleak: %d suspects of the series, %d others\n",
		       ours, others);
	EXPECT_EQ(0, ours);
}

int main(int argc, char **argv)
{
	unsigned long long seed = HO_SEED;
	long ops = 0;
	int i;

	ho_self = "/proc/self/exe";
	if (argc == 4 && !strcmp(argv[1], "--tracee"))
		ho_tracee(strtoull(argv[2], NULL, 0), strtol(argv[3], NULL, 0));
	for (i = 1; i + 1 < argc && !strncmp(argv[i], "--", 2); i += 2) {
		if (!strcmp(argv[i], "--seed"))
			seed = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--ops"))
			ops = strtol(argv[i + 1], NULL, 0);
		else
			break;
	}
	if (!ops)
		return test_harness_run(argc, argv);
	i = ho_run(seed, ops);
	printf("%d bad answers\n", i);
	return i ? 1 : 0;
}
