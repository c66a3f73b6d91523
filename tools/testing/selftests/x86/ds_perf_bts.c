// SPDX-License-Identifier: GPL-2.0
/*
 * perf's BTS event and ptrace branch tracing share the Debug Store through
 * arch/x86/kernel/ds.c: they take turns on the hardware, and an emulated
 * ptrace trace runs alongside perf. Only perf's events that use the Debug
 * Store (BTS, precise) take a turn: its counting events, the NMI
 * watchdog's among them, leave the hardware to ptrace.
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

/*
 * A hardware event of @config on this task: counting with @period 0,
 * sampling otherwise, and precise (PEBS) with @precise_ip, as perf's ":pp"
 * opens it.
 */
static int open_perf_hw(__u64 config, __u64 period, int precise_ip)
{
	struct perf_event_attr attr = {
		.type		= PERF_TYPE_HARDWARE,
		.size		= sizeof(attr),
		.config		= config,
		.sample_period	= period,
		.sample_type	= PERF_SAMPLE_IP,
		.precise_ip	= precise_ip,
		.exclude_kernel	= 1,
		.exclude_hv	= 1,
	};

	return syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
}

/*
 * Open perf's BTS event after a hardware trace: the tracer's release may
 * trail the tracee's reaping a little, and until then it is EBUSY.
 */
static int open_perf_bts_after_release(void)
{
	int fd, i;

	for (i = 0; i < 100; i++) {
		fd = open_perf_bts(0, true);
		if (fd >= 0 || errno != EBUSY)
			break;
		usleep(10000);
	}
	return fd;
}

/* Samples in the ring of a sampling event: PMIs that reached perf. */
static __u64 ring_bytes(const void *ring)
{
	const struct perf_event_mmap_page *meta = ring;

	return __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
}

/* Some user-mode work for a sampling event to sample. */
static void spin(unsigned long loops)
{
	while (loops--)
		asm volatile("" : : : "memory");
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
	int counting;
};

FIXTURE_SETUP(ds_perf)
{
	self->pid = 0;
	self->counting = -1;
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
	if (self->counting >= 0)
		close(self->counting);
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
 * A hardware ptrace trace first: perf's BTS event and its precise events
 * are refused with EBUSY while it exists, and work again once it is gone.
 */
TEST_F(ds_perf, ptrace_first)
{
	int precise;

	self->pid = start_tracee(_metadata, PTRACE_BTS_BACKEND_HARDWARE);
	EXPECT_EQ(-1, open_perf_bts(0, true));
	EXPECT_EQ(EBUSY, errno);
	EXPECT_EQ(-1, open_perf_hw(PERF_COUNT_HW_INSTRUCTIONS, 100003, 2));
	EXPECT_EQ(EBUSY, errno);
	check_tracee(_metadata, self->pid);

	kill(self->pid, SIGKILL);
	waitpid(self->pid, NULL, 0);
	self->pid = 0;
	self->fd = open_perf_bts_after_release();
	ASSERT_LE(0, self->fd);
	EXPECT_EQ((int)ARRAY_SIZE(jmp_trace), perf_trace_jmp(_metadata, self->fd));
	precise = open_perf_hw(PERF_COUNT_HW_INSTRUCTIONS, 100003, 2);
	EXPECT_LE(0, precise);
	if (precise >= 0)
		close(precise);
}

/*
 * perf's counting and plain sampling events take nothing from the Debug
 * Store: with both on this task (as the NMI watchdog's event samples on
 * every CPU), the ptrace trace is on the hardware and exact, and the
 * sampling event's PMIs go on reaching perf while ds.c drives the PMI
 * vector for its threshold interrupts.
 */
TEST_F(ds_perf, counting_leaves_hardware)
{
	size_t len = (RING_PAGES + 1) * getpagesize();
	__u64 before, after, sampled;
	int sampling;
	void *ring;

	self->counting = open_perf_hw(PERF_COUNT_HW_INSTRUCTIONS, 0, 0);
	ASSERT_LE(0, self->counting);
	sampling = open_perf_hw(PERF_COUNT_HW_INSTRUCTIONS, 10007, 0);
	ASSERT_LE(0, sampling);
	ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, sampling, 0);
	ASSERT_NE(MAP_FAILED, ring);
	ASSERT_EQ(sizeof(before), read(self->counting, &before, sizeof(before)));

	self->pid = start_tracee(_metadata, PTRACE_BTS_BACKEND_HARDWARE);
	sampled = ring_bytes(ring);
	spin(1000000);
	EXPECT_LT(sampled, ring_bytes(ring));
	check_tracee(_metadata, self->pid);
	sampled = ring_bytes(ring);
	spin(1000000);
	EXPECT_LT(sampled, ring_bytes(ring));

	ASSERT_EQ(sizeof(after), read(self->counting, &after, sizeof(after)));
	/* The two spins alone retire more than a million instructions each. */
	EXPECT_LT(before + 2000000, after);
	munmap(ring, len);
	close(sampling);
}

/*
 * An event that fails after perf's first try (ENOENT makes perf try the
 * event again on another PMU) must leave the Debug Store as it found it:
 * held by the precise event that holds it, so the trace is emulated.
 */
TEST_F(ds_perf, failed_precise_keeps_holder)
{
	struct perf_event_attr attr = {
		.type		= PERF_TYPE_HARDWARE,
		.size		= sizeof(attr),
		/* No Intel event stands for it on Skylake. */
		.config		= PERF_COUNT_HW_STALLED_CYCLES_FRONTEND,
		.sample_period	= 100003,
		.precise_ip	= 1,
		.exclude_kernel	= 1,
		.exclude_hv	= 1,
	};
	int i;

	self->counting = open_perf_hw(PERF_COUNT_HW_INSTRUCTIONS, 100003, 2);
	ASSERT_LE(0, self->counting);
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(-1, syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
		EXPECT_EQ(ENOENT, errno);
	}
	self->pid = start_tracee(_metadata, PTRACE_BTS_BACKEND_EMULATED);
	check_tracee(_metadata, self->pid);
}

/*
 * Nothing sticks: a counting event opened while a hardware trace exists
 * does not keep perf from the Debug Store once the trace is gone.
 */
TEST_F(ds_perf, counting_not_sticky)
{
	self->pid = start_tracee(_metadata, PTRACE_BTS_BACKEND_HARDWARE);
	self->counting = open_perf_hw(PERF_COUNT_HW_CPU_CYCLES, 0, 0);
	ASSERT_LE(0, self->counting);
	check_tracee(_metadata, self->pid);

	kill(self->pid, SIGKILL);
	waitpid(self->pid, NULL, 0);
	self->pid = 0;
	self->fd = open_perf_bts_after_release();
	ASSERT_LE(0, self->fd) {
		TH_LOG("perf's BTS event after the hardware trace: %m");
	}
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
