// SPDX-License-Identifier: GPL-2.0
/*
 * perf's BTS event and ptrace branch tracing share the Debug Store through
 * arch/x86/kernel/ds.c: they take turns on the hardware, and an emulated
 * ptrace trace runs alongside perf.
 *
 * Needs BTS hardware and a PMU perf's Intel driver loads on: make test runs
 * it on the BTS machine model with arch-pmu=on. Without BTS perf's BTS event
 * does not exist and the test says so and skips; with BTS (the "bts" flag
 * in /proc/cpuinfo) a missing BTS event is a failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <linux/perf_event.h>
#include <linux/ptrace.h>

#include "../kselftest_harness.h"
#include "ptrace_bts.h"
#include "ptrace_bts_util.h"

#define BTS_REC		sizeof(struct bts_struct)
/* perf's ring buffer: one header page and 2^n data pages. */
#define RING_PAGES	64

void *bts_fault_addr;
void *bts_low_stack;

static const struct {
	const char *from, *to;
} jmp_trace[] = {
	{ jmp_f0, jmp_t0 }, { jmp_f1, jmp_t1 },
	{ jmp_f3, jmp_f2 }, { jmp_f2, jmp_t2 },
};

/*
 * Find bts_jmp's branches among the samples of the mapped ring buffer
 * @ring: each of jmp_trace must be sampled exactly once, in order.
 * Returns how many of them were; other branches (libc's) are ignored.
 */
static int perf_samples(const char *ring)
{
	const struct perf_event_mmap_page *meta = (const void *)ring;
	int seen[ARRAY_SIZE(jmp_trace)] = { 0 };
	size_t page = getpagesize();
	const struct perf_event_header *ev;
	int next = 0, found = 0, i;
	const __u64 *val;
	__u64 head, off;

	head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	for (off = 0; off < head; off += ev->size) {
		ev = (const void *)(ring + page + off % (RING_PAGES * page));
		if (ev->type != PERF_RECORD_SAMPLE)
			continue;
		val = (const void *)(ev + 1);
		for (i = 0; i < (int)ARRAY_SIZE(jmp_trace); i++) {
			if (val[0] != (unsigned long)jmp_trace[i].from ||
			    val[1] != (unsigned long)jmp_trace[i].to)
				continue;
			seen[i]++;
			/* Out of order, or twice: not the trace of one run. */
			if (i == next)
				next++;
		}
	}
	for (i = 0; i < (int)ARRAY_SIZE(jmp_trace); i++)
		found += seen[i] == 1;
	return next == (int)ARRAY_SIZE(jmp_trace) ? found : -1;
}

/* bts_jmp's breakpoints, run in-process: step over them. */
static void ignore_trap(int sig)
{
}

/* Record bts_jmp with perf; see perf_samples() for what it returns. */
static int perf_trace_jmp(struct __test_metadata *_metadata, int fd)
{
	size_t len = (RING_PAGES + 1) * getpagesize();
	char *ring;
	int hits;

	signal(SIGTRAP, ignore_trap);
	/* The ring lives as long as it is mapped. */
	ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, ring);
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_ENABLE, 0));
	bts_jmp();
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_DISABLE, 0));
	hits = perf_samples(ring);
	munmap(ring, len);
	return hits;
}

/*
 * A tracee stopped at jmp_s, traced by us with BTS on @backend (as the
 * allocator chose it: PTRACE_BTS_BACKEND_ANY); SIGKILLed on exit.
 */
static pid_t start_tracee(struct __test_metadata *_metadata, __u32 backend)
{
	struct ptrace_bts_config cfg = {
		.size = 64 * BTS_REC,
		.flags = PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC,
	};
	struct ptrace_bts_config now;
	struct user_regs_struct regs;
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
			_exit(90);
		bts_jmp();
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP);
	ASSERT_EQ(0, sys_ptrace(PTRACE_SETOPTIONS, pid, NULL,
				PTRACE_O_EXITKILL));
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, pid, NULL,
				(unsigned long)&regs));
	ASSERT_EQ((unsigned long)jmp_s, regs.rip);
	ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg))) {
		TH_LOG("PTRACE_BTS_CONFIG: %m");
	}
	ASSERT_EQ(sizeof(now), sys_ptrace(PTRACE_BTS_STATUS, pid, &now, sizeof(now)));
	ASSERT_EQ(backend, now.backend) {
		TH_LOG("traced by backend %u, want %u", now.backend, backend);
	}
	return pid;
}

/* Run the tracee to jmp_e and check its trace record by record. */
static void check_tracee(struct __test_metadata *_metadata, pid_t pid)
{
	struct bts_struct rec[8];
	int status, i;
	long n;

	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, 0));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP);
	n = sys_ptrace(PTRACE_BTS_DRAIN, pid, rec, sizeof(rec));
	ASSERT_EQ(ARRAY_SIZE(jmp_trace), n);
	for (i = 0; i < n; i++) {
		EXPECT_EQ((unsigned long)jmp_trace[i].from,
			  rec[i].variant.lbr.from);
		EXPECT_EQ((unsigned long)jmp_trace[i].to,
			  rec[i].variant.lbr.to);
	}
}

FIXTURE(ds_perf) {
	pid_t pid;
	int fd;
};

FIXTURE_SETUP(ds_perf)
{
	self->pid = 0;
	self->fd = open_perf_bts(0, true);
	/* A CPU with BTS has a PMU driver with the BTS event. */
	if (self->fd < 0 && errno == ENOENT && !cpu_has_flag("bts"))
		SKIP(return, "no BTS: the CPU lacks the \"bts\" flag");
	ASSERT_LE(0, self->fd) {
		TH_LOG("perf's BTS event, on a CPU with BTS: %m");
	}
	close(self->fd);
	self->fd = -1;
}

FIXTURE_TEARDOWN(ds_perf)
{
	if (self->fd >= 0)
		close(self->fd);
	if (self->pid > 0) {
		kill(self->pid, SIGKILL);
		waitpid(self->pid, NULL, 0);
	}
}

/* perf's BTS event records through the save area ds.c installed. */
TEST_F(ds_perf, perf_records)
{
	self->fd = open_perf_bts(0, true);
	ASSERT_LE(0, self->fd);
	EXPECT_EQ((int)ARRAY_SIZE(jmp_trace), perf_trace_jmp(_metadata, self->fd));
}

/*
 * A hardware ptrace trace first: perf's BTS event is refused while it
 * exists, and works again once it is gone.
 */
TEST_F(ds_perf, ptrace_first)
{
	int i;

	self->pid = start_tracee(_metadata, PTRACE_BTS_BACKEND_HARDWARE);
	EXPECT_EQ(-1, open_perf_bts(0, true));
	EXPECT_EQ(EOPNOTSUPP, errno);
	check_tracee(_metadata, self->pid);

	kill(self->pid, SIGKILL);
	waitpid(self->pid, NULL, 0);
	self->pid = 0;
	/* The tracer's release may trail the reaping a little. */
	for (i = 0; i < 100; i++) {
		self->fd = open_perf_bts(0, true);
		if (self->fd >= 0)
			break;
		usleep(10000);
	}
	ASSERT_LE(0, self->fd);
	EXPECT_EQ((int)ARRAY_SIZE(jmp_trace), perf_trace_jmp(_metadata, self->fd));
}

/*
 * perf first: it holds the Debug Store, so the ptrace trace is emulated,
 * exact all the same, and perf's event goes on recording.
 */
TEST_F(ds_perf, perf_first)
{
	self->fd = open_perf_bts(0, true);
	ASSERT_LE(0, self->fd);
	self->pid = start_tracee(_metadata, PTRACE_BTS_BACKEND_EMULATED);
	check_tracee(_metadata, self->pid);
	EXPECT_EQ((int)ARRAY_SIZE(jmp_trace), perf_trace_jmp(_metadata, self->fd));
}

TEST_HARNESS_MAIN
