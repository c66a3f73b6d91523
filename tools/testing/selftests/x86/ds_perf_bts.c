// SPDX-License-Identifier: GPL-2.0
/*
 * perf's BTS event and ptrace branch tracing share the Debug Store through
 * arch/x86/kernel/ds.c: they take turns on the hardware, and an emulated
 * ptrace trace runs alongside perf. Only perf's events that use the Debug
 * Store (BTS, precise) take a turn: its counting events, the NMI
 * watchdog's among them, leave the hardware to ptrace.
 *
 * Needs BTS hardware and a PMU perf's Intel driver loads on, or an emulator
 * that models both. Without BTS perf's BTS event
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
#include "perf_pmu_exact.h"
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

/* Precise sampling of pmu_loop(): odd, so both DEC and JNZ are sampled. */
#define PRECISE_PERIOD	100003
#define PRECISE_LOOPS	1000000UL
/* Sampled outside the loop: the instructions around the enabling ioctls. */
#define PRECISE_AROUND	2

struct precise_samples {
	unsigned long samples;
	unsigned long on_loop;		/* exactly on the DEC or the JNZ */
	unsigned long throttled;
};

/* The samples in the ring of a precise sampling event. */
static void precise_ring(struct __test_metadata *_metadata, const char *ring,
			 struct precise_samples *ps)
{
	const struct perf_event_mmap_page *meta = (const void *)ring;
	size_t page = getpagesize();
	const struct perf_event_header *ev;
	__u64 head, off, ip;

	memset(ps, 0, sizeof(*ps));
	head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	ASSERT_LE(head, RING_PAGES * page);
	for (off = 0; off < head; off += ev->size) {
		ev = (const void *)(ring + page + off);
		ps->throttled += ev->type == PERF_RECORD_THROTTLE;
		if (ev->type != PERF_RECORD_SAMPLE)
			continue;
		ip = *(const __u64 *)(ev + 1);
		ps->samples++;
		ps->on_loop += ip == (unsigned long)pmu_loop ||
			       ip == (unsigned long)pmu_loop_jnz;
	}
}

/* Run pmu_loop() under the precise sampling event @fd, read its samples. */
static void precise_loop(struct __test_metadata *_metadata, int fd,
			 struct precise_samples *ps)
{
	size_t len = (RING_PAGES + 1) * getpagesize();
	char *ring;

	ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, ring);
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_RESET, 0));
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_ENABLE, 0));
	pmu_loop(PRECISE_LOOPS);
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_DISABLE, 0));
	precise_ring(_metadata, ring, ps);
	munmap(ring, len);
}

/*
 * PEBS samples, each exactly on an instruction of the loop, and all of
 * them unless perf throttled the event (a slow host makes PMIs long).
 */
static void expect_precise(struct __test_metadata *_metadata,
			   const struct precise_samples *ps)
{
	EXPECT_LT(PRECISE_AROUND, ps->samples);
	if (!ps->throttled)
		EXPECT_LE(2 * PRECISE_LOOPS / PRECISE_PERIOD, ps->samples);
	EXPECT_LE(ps->samples - PRECISE_AROUND, ps->on_loop) {
		TH_LOG("%lu of %lu precise samples on the loop", ps->on_loop,
		       ps->samples);
	}
}

/* User-mode instructions the counting event @fd counts in pmu_loop(@n). */
static __u64 counted_loop(struct __test_metadata *_metadata, int fd,
			  unsigned long n)
{
	__u64 count = 0;

	EXPECT_EQ(0, ioctl(fd, PERF_EVENT_IOC_RESET, 0));
	EXPECT_EQ(0, ioctl(fd, PERF_EVENT_IOC_ENABLE, 0));
	pmu_loop(n);
	EXPECT_EQ(0, ioctl(fd, PERF_EVENT_IOC_DISABLE, 0));
	EXPECT_EQ(sizeof(count), read(fd, &count, sizeof(count)));
	return count;
}

/*
 * Exactly 2 instructions per iteration: the difference of two runs of
 * different lengths cancels what the ioctls around them add.
 */
static void expect_exact_count(struct __test_metadata *_metadata, int fd)
{
	__u64 short_run = counted_loop(_metadata, fd, PRECISE_LOOPS / 2);
	__u64 long_run = counted_loop(_metadata, fd, PRECISE_LOOPS);

	EXPECT_EQ(PRECISE_LOOPS, long_run - short_run);
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
 * A hardware ptrace trace first: it holds the BTS half of the Debug Store,
 * so perf's BTS event is refused with EBUSY while it exists, and works
 * again once it is gone; perf's precise events use the PEBS half and are
 * never refused.
 */
TEST_F(ds_perf, ptrace_first)
{
	int precise;

	self->pid = start_tracee(_metadata, PTRACE_BTS_BACKEND_HARDWARE);
	EXPECT_EQ(-1, open_perf_bts(0, true));
	EXPECT_EQ(EBUSY, errno);
	precise = open_perf_hw(PERF_COUNT_HW_INSTRUCTIONS, 100003, 2);
	EXPECT_LE(0, precise) {
		TH_LOG("a precise event beside a hardware trace: %m");
	}
	if (precise >= 0)
		close(precise);
	check_tracee(_metadata, self->pid);

	kill(self->pid, SIGKILL);
	waitpid(self->pid, NULL, 0);
	self->pid = 0;
	self->fd = open_perf_bts_after_release();
	ASSERT_LE(0, self->fd);
	EXPECT_EQ((int)ARRAY_SIZE(jmp_trace), perf_trace_jmp(_metadata, self->fd));
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
 * the PEBS half held by the precise event that holds it, which goes on
 * sampling, exactly, while a hardware trace runs beside it.
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

	struct precise_samples ps;

	self->counting = open_perf_hw(PERF_COUNT_HW_INSTRUCTIONS,
				      PRECISE_PERIOD, 2);
	ASSERT_LE(0, self->counting);
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(-1, syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
		EXPECT_EQ(ENOENT, errno);
	}
	self->pid = start_tracee(_metadata, PTRACE_BTS_BACKEND_HARDWARE);
	check_tracee(_metadata, self->pid);
	precise_loop(_metadata, self->counting, &ps);
	expect_precise(_metadata, &ps);
}

/*
 * Nothing sticks: a counting event opened while a hardware trace exists
 * does not keep perf from either half of the Debug Store once the trace
 * is gone: a precise event and perf's BTS event open, and both record.
 */
TEST_F(ds_perf, counting_not_sticky)
{
	struct precise_samples ps;
	int precise;

	self->pid = start_tracee(_metadata, PTRACE_BTS_BACKEND_HARDWARE);
	self->counting = open_perf_hw(PERF_COUNT_HW_CPU_CYCLES, 0, 0);
	ASSERT_LE(0, self->counting);
	check_tracee(_metadata, self->pid);

	kill(self->pid, SIGKILL);
	waitpid(self->pid, NULL, 0);
	self->pid = 0;
	precise = open_perf_hw(PERF_COUNT_HW_INSTRUCTIONS, PRECISE_PERIOD, 2);
	ASSERT_LE(0, precise) {
		TH_LOG("a precise event after the hardware trace: %m");
	}
	self->fd = open_perf_bts_after_release();
	ASSERT_LE(0, self->fd) {
		TH_LOG("perf's BTS event after the hardware trace: %m");
	}
	EXPECT_EQ((int)ARRAY_SIZE(jmp_trace), perf_trace_jmp(_metadata, self->fd));
	ASSERT_EQ(0, ioctl(precise, PERF_EVENT_IOC_DISABLE, 0));
	precise_loop(_metadata, precise, &ps);
	expect_precise(_metadata, &ps);
	close(precise);
}

/*
 * The halves of the Debug Store are handed out separately: with a cycles
 * and an exact instructions counting event open and a precise (PEBS) event
 * sampling on this task, as a profiler runs beside the NMI watchdog's
 * cycles events, a ptrace trace still gets the hardware for BTS and is
 * exact, and perf's count and PEBS samples stay exact before and after it.
 */
TEST_F(ds_perf, precise_beside_ptrace)
{
	struct perf_event_attr attr = {
		.type		= PERF_TYPE_HARDWARE,
		.size		= sizeof(attr),
		.config		= PERF_COUNT_HW_INSTRUCTIONS,
		.disabled	= 1,
		.exclude_kernel	= 1,
		.exclude_hv	= 1,
	};
	__u64 cycles_before, cycles_after;
	struct precise_samples ps;
	int cycles;

	cycles = open_perf_hw(PERF_COUNT_HW_CPU_CYCLES, 0, 0);
	ASSERT_LE(0, cycles);
	ASSERT_EQ(sizeof(cycles_before),
		  read(cycles, &cycles_before, sizeof(cycles_before)));
	self->counting = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
	ASSERT_LE(0, self->counting);
	self->fd = open_perf_hw(PERF_COUNT_HW_INSTRUCTIONS, PRECISE_PERIOD, 2);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, ioctl(self->fd, PERF_EVENT_IOC_DISABLE, 0));

	precise_loop(_metadata, self->fd, &ps);
	expect_precise(_metadata, &ps);
	self->pid = start_tracee(_metadata, PTRACE_BTS_BACKEND_HARDWARE);
	expect_exact_count(_metadata, self->counting);
	precise_loop(_metadata, self->fd, &ps);
	expect_precise(_metadata, &ps);
	check_tracee(_metadata, self->pid);
	expect_exact_count(_metadata, self->counting);
	precise_loop(_metadata, self->fd, &ps);
	expect_precise(_metadata, &ps);

	/* The cycles event counted all along, as the watchdog's does. */
	ASSERT_EQ(sizeof(cycles_after),
		  read(cycles, &cycles_after, sizeof(cycles_after)));
	EXPECT_LT(cycles_before, cycles_after);
	close(cycles);
}

/* Records of the tracee's wrapped trace: the newest of pmu_loop()'s. */
#define LOOP_TRACE	512

/*
 * Both halves at once on the CPU the tracee runs on: a precise event
 * samples the tracee while its hardware trace crosses the BTS threshold
 * again and again in pmu_loop(), so PEBS and BTS threshold PMIs come
 * together and each must reach its owner. The trace ends with the loop's
 * branches, exactly; the samples are all on the loop.
 */
TEST_F(ds_perf, precise_and_bts_one_task)
{
	struct ptrace_bts_config cfg = {
		.size = LOOP_TRACE * BTS_REC,
		.flags = PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC,
	};
	struct perf_event_attr attr = {
		.type		= PERF_TYPE_HARDWARE,
		.size		= sizeof(attr),
		.config		= PERF_COUNT_HW_INSTRUCTIONS,
		.sample_period	= PRECISE_PERIOD,
		.sample_type	= PERF_SAMPLE_IP,
		.precise_ip	= 2,
		.exclude_kernel	= 1,
		.exclude_hv	= 1,
	};
	size_t len = (RING_PAGES + 1) * getpagesize();
	static struct bts_struct rec[LOOP_TRACE];
	struct ptrace_bts_config now;
	struct precise_samples ps;
	int status, i, jnz = 0;
	char *ring;
	long n;

	self->pid = fork();
	ASSERT_LE(0, self->pid);
	if (self->pid == 0) {
		if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
			_exit(90);
		raise(SIGSTOP);
		pmu_loop(PRECISE_LOOPS);
		raise(SIGSTOP);
		_exit(0);
	}
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, 0));
	ASSERT_TRUE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP);
	ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CONFIG, self->pid, &cfg, sizeof(cfg)));
	ASSERT_EQ(sizeof(now), sys_ptrace(PTRACE_BTS_STATUS, self->pid, &now,
					  sizeof(now)));
	ASSERT_EQ(PTRACE_BTS_BACKEND_HARDWARE, now.backend);
	self->fd = syscall(SYS_perf_event_open, &attr, self->pid, -1, -1, 0);
	ASSERT_LE(0, self->fd);
	ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0);
	ASSERT_NE(MAP_FAILED, ring);

	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, 0));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, 0));
	ASSERT_TRUE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP);
	/*
	 * The tracee reports its stop before it is switched out, and perf
	 * drains a large PEBS buffer at the switch: disabling drains it now.
	 */
	ASSERT_EQ(0, ioctl(self->fd, PERF_EVENT_IOC_DISABLE, 0));
	precise_ring(_metadata, ring, &ps);
	munmap(ring, len);
	expect_precise(_metadata, &ps);

	n = sys_ptrace(PTRACE_BTS_DRAIN, self->pid, rec, sizeof(rec));
	ASSERT_EQ(LOOP_TRACE, n);
	for (i = 0; i < n; i++) {
		if (rec[i].variant.lbr.from != (unsigned long)pmu_loop_jnz)
			continue;
		jnz++;
		EXPECT_EQ((unsigned long)pmu_loop, rec[i].variant.lbr.to);
	}
	/* After the loop: its RET, raise() and the syscall's return. */
	EXPECT_LT(LOOP_TRACE / 2, jnz);
}

/*
 * perf's BTS event first: it holds the BTS half, so the ptrace trace is
 * emulated, exact all the same, and perf's event goes on recording.
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
