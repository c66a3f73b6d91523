// SPDX-License-Identifier: GPL-2.0
/*
 * perf's counting and sampling events on x86, against code whose counts
 * are known: a loop of DEC and JNZ retires two instructions and one
 * branch per iteration. The difference between a long and a short run
 * cancels whatever the calls around the loop add, so it must be exact on
 * any CPU that counts retired instructions and branches exactly, as
 * hardware does.
 *
 * Needs a hardware PMU that perf's driver loads on: without one (the
 * hardware events do not exist) the test says so and skips.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/perf_event.h>

#include "../kselftest_harness.h"
#include "perf_pmu_exact.h"

/* Iterations of the short and the long run. */
#define LOOP_SHORT	1000
#define LOOP_LONG	100000
/* Runs of each, which must all agree. */
#define ROUNDS		3
/* Instructions between samples: odd, so as not to beat with the loop. */
#define SAMPLE_PERIOD	4999
#define SAMPLE_LOOPS	200000
/* perf's ring buffer: one header page and 2^n data pages. */
#define RING_PAGES	64
/* Children and yields of the context-switch case. */
#define SWITCHERS	4
#define YIELDS		2000
#define NOBODY		65534

/* The loop's JNZ is a short one: 2 bytes. */
#define JNZ_SHORT	2

#define NO_PMU_REASON \
	"no hardware PMU for perf"

/*
 * Under emulation a PMI takes long, and perf lowers its sample rate and
 * throttles events that interrupt too often: samples go missing. The
 * sampling cases lift both limits (as root; restored after), and count
 * any throttling that happened all the same.
 */
#define SAMPLE_RATE_MAX		"/proc/sys/kernel/perf_event_max_sample_rate"
#define CPU_TIME_MAX		"/proc/sys/kernel/perf_cpu_time_max_percent"
#define UNTHROTTLED_RATE	"1000000"

static bool sysctl_swap(const char *path, const char *val, char *old,
			size_t len)
{
	FILE *f = fopen(path, "r+");
	bool ok;

	if (!f)
		return false;
	ok = fgets(old, len, f) && !fseek(f, 0, SEEK_SET) &&
	     fputs(val, f) >= 0;
	return !fclose(f) && ok;
}

struct unthrottled {
	char rate[32];
	char cpu_time[32];
	bool done;
};

/* The rate first: perf refuses it while the CPU time limit is off. */
static void unthrottle(struct unthrottled *u)
{
	u->done = sysctl_swap(SAMPLE_RATE_MAX, UNTHROTTLED_RATE, u->rate,
			      sizeof(u->rate)) &&
		  sysctl_swap(CPU_TIME_MAX, "0", u->cpu_time,
			      sizeof(u->cpu_time));
}

static void rethrottle(struct unthrottled *u)
{
	char dummy[32];

	if (!u->done)
		return;
	sysctl_swap(CPU_TIME_MAX, u->cpu_time, dummy, sizeof(dummy));
	sysctl_swap(SAMPLE_RATE_MAX, u->rate, dummy, sizeof(dummy));
}

static int perf_open(struct perf_event_attr *attr, pid_t pid, int group)
{
	return syscall(SYS_perf_event_open, attr, pid, -1, group, 0);
}

static void counting_attr(struct perf_event_attr *attr, __u64 config)
{
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
	attr->type = PERF_TYPE_HARDWARE;
	attr->config = config;
	attr->exclude_kernel = 1;
	attr->exclude_hv = 1;
}

/* Whether perf has hardware events here at all. */
static bool have_pmu(void)
{
	struct perf_event_attr attr;
	int fd;

	counting_attr(&attr, PERF_COUNT_HW_INSTRUCTIONS);
	fd = perf_open(&attr, 0, -1);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

FIXTURE(counting) {
	int insns;
	int branches;
};

FIXTURE_SETUP(counting)
{
	struct perf_event_attr attr;

	self->insns = -1;
	self->branches = -1;
	if (!have_pmu())
		SKIP(return, NO_PMU_REASON);
	counting_attr(&attr, PERF_COUNT_HW_INSTRUCTIONS);
	attr.disabled = 1;
	attr.read_format = PERF_FORMAT_GROUP;
	self->insns = perf_open(&attr, 0, -1);
	ASSERT_LE(0, self->insns);
	counting_attr(&attr, PERF_COUNT_HW_BRANCH_INSTRUCTIONS);
	self->branches = perf_open(&attr, 0, self->insns);
	ASSERT_LE(0, self->branches) TH_LOG("branches: %s", strerror(errno));
}

FIXTURE_TEARDOWN(counting)
{
	if (self->branches >= 0)
		close(self->branches);
	if (self->insns >= 0)
		close(self->insns);
}

struct counts {
	__u64 insns;
	__u64 branches;
};

static void count_loop(struct __test_metadata *_metadata, int group,
		       unsigned long n, struct counts *c)
{
	struct {
		__u64 nr;
		__u64 values[2];
	} group_read;

	ASSERT_EQ(0, ioctl(group, PERF_EVENT_IOC_RESET,
			   PERF_IOC_FLAG_GROUP));
	ASSERT_EQ(0, ioctl(group, PERF_EVENT_IOC_ENABLE,
			   PERF_IOC_FLAG_GROUP));
	pmu_loop(n);
	ASSERT_EQ(0, ioctl(group, PERF_EVENT_IOC_DISABLE,
			   PERF_IOC_FLAG_GROUP));
	ASSERT_EQ(sizeof(group_read),
		  read(group, &group_read, sizeof(group_read)));
	ASSERT_EQ(2, group_read.nr);
	c->insns = group_read.values[0];
	c->branches = group_read.values[1];
}

/*
 * Called through a pointer that another file could change, so that the
 * compiler cannot inline it into two call sites with different code
 * around the loop.
 */
void (*count_loop_call)(struct __test_metadata *_metadata, int group,
			unsigned long n, struct counts *c) = count_loop;

/* User-mode instructions and branches retired by the loop, exactly. */
TEST_F(counting, exact_loop)
{
	struct counts s, l;
	int round;

	for (round = 0; round < ROUNDS; round++) {
		count_loop_call(_metadata, self->insns, LOOP_SHORT, &s);
		count_loop_call(_metadata, self->insns, LOOP_LONG, &l);
		EXPECT_EQ(2 * (LOOP_LONG - LOOP_SHORT), l.insns - s.insns)
			TH_LOG("round %d: %llu and %llu instructions", round,
			       s.insns, l.insns);
		EXPECT_EQ(LOOP_LONG - LOOP_SHORT, l.branches - s.branches)
			TH_LOG("round %d: %llu and %llu branches", round,
			       s.branches, l.branches);
	}
}

static __u64 rdpmc(unsigned int counter)
{
	unsigned int lo, hi;

	asm volatile("rdpmc" : "=a"(lo), "=d"(hi) : "c"(counter));
	return lo | (__u64)hi << 32;
}

/* The count through the mmapped page and RDPMC, as perf's self-monitoring does. */
static __u64 read_self(struct __test_metadata *_metadata,
		       struct perf_event_mmap_page *pc)
{
	__u32 seq, index;
	__u16 width;
	__u64 count;
	__s64 pmc;

	do {
		seq = __atomic_load_n(&pc->lock, __ATOMIC_ACQUIRE);
		index = __atomic_load_n(&pc->index, __ATOMIC_RELAXED);
		count = __atomic_load_n(&pc->offset, __ATOMIC_RELAXED);
		width = __atomic_load_n(&pc->pmc_width, __ATOMIC_RELAXED);
		if (index) {
			pmc = rdpmc(index - 1);
			/* Sign-extend the counter's width. */
			pmc <<= 64 - width;
			pmc >>= 64 - width;
			count += pmc;
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while (__atomic_load_n(&pc->lock, __ATOMIC_RELAXED) != seq);
	EXPECT_NE(0, index);
	return count;
}

/* The loop between two reads. */
static __u64 rdpmc_run(struct __test_metadata *_metadata,
		       struct perf_event_mmap_page *pc, unsigned long n)
{
	__u64 before = read_self(_metadata, pc);

	pmu_loop(n);
	return read_self(_metadata, pc) - before;
}

/* Not inlined, as count_loop_call. */
__u64 (*rdpmc_run_call)(struct __test_metadata *_metadata,
			struct perf_event_mmap_page *pc,
			unsigned long n) = rdpmc_run;

/* RDPMC at CPL 3 on the event's counter, through perf's mmapped page. */
TEST(rdpmc_exact)
{
	struct perf_event_mmap_page *pc;
	struct perf_event_attr attr;
	bool exact = false;
	__u64 s, l;
	int fd, round, user_rdpmc;

	if (!have_pmu())
		SKIP(return, NO_PMU_REASON);
	counting_attr(&attr, PERF_COUNT_HW_INSTRUCTIONS);
	fd = perf_open(&attr, 0, -1);
	ASSERT_LE(0, fd);
	pc = mmap(NULL, getpagesize(), PROT_READ, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, pc);
	user_rdpmc = pc->cap_user_rdpmc;
	ASSERT_TRUE(user_rdpmc);

	/*
	 * A context switch in a read retries it, and the retry's
	 * instructions count: one round of several must be undisturbed.
	 */
	for (round = 0; round < ROUNDS && !exact; round++) {
		s = rdpmc_run_call(_metadata, pc, LOOP_SHORT);
		l = rdpmc_run_call(_metadata, pc, LOOP_LONG);
		exact = l - s == 2 * (LOOP_LONG - LOOP_SHORT);
		if (!exact)
			TH_LOG("round %d: %llu and %llu instructions", round,
			       s, l);
	}
	EXPECT_TRUE(exact);
	munmap((void *)pc, getpagesize());
	close(fd);
}

/* What the samples of one run of the loop were, by where their IP is. */
struct sampled {
	unsigned long samples;
	unsigned long throttled;
	unsigned long in_loop;		/* anywhere in pmu_loop */
	unsigned long dec, jnz;		/* exactly on the DEC, the JNZ */
	unsigned long elsewhere;	/* inside DEC or JNZ: no boundary */
};

static void sampled_add(struct sampled *sd, __u64 ip)
{
	sd->samples++;
	sd->in_loop += ip >= (unsigned long)pmu_loop &&
		       ip < (unsigned long)pmu_loop_end;
	if (ip == (unsigned long)pmu_loop)
		sd->dec++;
	else if (ip == (unsigned long)pmu_loop_jnz)
		sd->jnz++;
	else if (ip > (unsigned long)pmu_loop &&
		 ip < (unsigned long)pmu_loop_jnz + JNZ_SHORT)
		sd->elsewhere++;
}

/* Run the loop under the sampling event @fd, throttling lifted. */
static void sample_loop(struct __test_metadata *_metadata, int fd,
			struct sampled *sd)
{
	size_t len = (RING_PAGES + 1) * getpagesize();
	const struct perf_event_mmap_page *meta;
	const struct perf_event_header *ev;
	struct unthrottled u;
	__u64 head, off;
	char *ring;

	memset(sd, 0, sizeof(*sd));
	ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, ring);
	unthrottle(&u);
	ASSERT_TRUE(u.done);

	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_ENABLE, 0));
	pmu_loop(SAMPLE_LOOPS);
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_DISABLE, 0));
	rethrottle(&u);

	meta = (const void *)ring;
	head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	ASSERT_LE(head, RING_PAGES * getpagesize());
	for (off = 0; off < head; off += ev->size) {
		ev = (const void *)(ring + getpagesize() + off);
		sd->throttled += ev->type == PERF_RECORD_THROTTLE;
		if (ev->type == PERF_RECORD_SAMPLE)
			sampled_add(sd, *(const __u64 *)(ev + 1));
	}
	munmap(ring, len);
}

static void sampling_attr(struct perf_event_attr *attr)
{
	counting_attr(attr, PERF_COUNT_HW_INSTRUCTIONS);
	attr->disabled = 1;
	attr->sample_period = SAMPLE_PERIOD;
	attr->sample_type = PERF_SAMPLE_IP;
}

/*
 * Sampling on retired instructions: the PMI of each overflow arrives with
 * some skid, but the loop is nearly all the run, so nearly all samples
 * are in it, and their number follows the period.
 */
TEST(samples_in_loop)
{
	unsigned long expected = 2 * SAMPLE_LOOPS / SAMPLE_PERIOD;
	struct perf_event_attr attr;
	struct sampled sd;
	int fd;

	if (!have_pmu())
		SKIP(return, NO_PMU_REASON);
	sampling_attr(&attr);
	fd = perf_open(&attr, 0, -1);
	ASSERT_LE(0, fd);
	sample_loop(_metadata, fd, &sd);
	EXPECT_EQ(0, sd.throttled);
	EXPECT_LE(expected, sd.samples);
	EXPECT_GE(expected + 2, sd.samples);
	EXPECT_LE(sd.samples - 2, sd.in_loop)
		TH_LOG("%lu of %lu samples in the loop", sd.in_loop,
		       sd.samples);
	close(fd);
}

/*
 * Precise sampling (PEBS where the CPU has it): each sample's IP is the
 * instruction that made the counter overflow, exactly, so in the loop it
 * can only be the DEC or the JNZ, and with an odd period it is both.
 */
TEST(precise_samples)
{
	struct perf_event_attr attr;
	struct sampled sd;
	int fd;

	if (!have_pmu())
		SKIP(return, NO_PMU_REASON);
	sampling_attr(&attr);
	attr.precise_ip = 2;
	fd = perf_open(&attr, 0, -1);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EINVAL))
		SKIP(return, "no precise events (PEBS) on this CPU");
	ASSERT_LE(0, fd);
	sample_loop(_metadata, fd, &sd);
	EXPECT_EQ(0, sd.throttled);
	EXPECT_LE(2 * SAMPLE_LOOPS / SAMPLE_PERIOD, sd.samples);
	EXPECT_EQ(0, sd.elsewhere);
	EXPECT_LE(sd.samples - 2, sd.dec + sd.jnz)
		TH_LOG("%lu samples: %lu DEC, %lu JNZ", sd.samples, sd.dec,
		       sd.jnz);
	EXPECT_NE(0, sd.dec);
	EXPECT_NE(0, sd.jnz);
	close(fd);
}

static void switcher(void)
{
	int i;

	for (i = 0; i < YIELDS; i++)
		sched_yield();
	_exit(0);
}

/*
 * Counting events open across context switches, inherited by children
 * that yield to each other, and opened by an unprivileged user: nothing
 * may oops or warn (the kernel log shows a splat), and the counts add up.
 */
TEST(context_switches)
{
	struct perf_event_attr attr;
	__u64 cycles = 0, insns = 0;
	int fd_cycles, fd_insns, i, status;
	pid_t pid;

	if (!have_pmu())
		SKIP(return, NO_PMU_REASON);
	counting_attr(&attr, PERF_COUNT_HW_CPU_CYCLES);
	attr.inherit = 1;
	fd_cycles = perf_open(&attr, 0, -1);
	ASSERT_LE(0, fd_cycles);
	counting_attr(&attr, PERF_COUNT_HW_INSTRUCTIONS);
	attr.inherit = 1;
	fd_insns = perf_open(&attr, 0, -1);
	ASSERT_LE(0, fd_insns);

	for (i = 0; i < SWITCHERS; i++) {
		pid = fork();
		ASSERT_LE(0, pid);
		if (!pid)
			switcher();
	}
	for (i = 0; i < SWITCHERS; i++) {
		ASSERT_LT(0, wait(&status));
		EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status));
	}
	ASSERT_EQ(sizeof(cycles), read(fd_cycles, &cycles, sizeof(cycles)));
	ASSERT_EQ(sizeof(insns), read(fd_insns, &insns, sizeof(insns)));
	EXPECT_LT(0, cycles);
	/* Each yield retires at least its SYSCALL in user mode. */
	EXPECT_LE(SWITCHERS * YIELDS, insns);
	close(fd_insns);
	close(fd_cycles);

	/* Anyone may count their own user-mode cycles. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		int fd;

		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(2);
		counting_attr(&attr, PERF_COUNT_HW_CPU_CYCLES);
		fd = perf_open(&attr, 0, -1);
		if (fd < 0)
			_exit(3);
		for (i = 0; i < YIELDS; i++)
			sched_yield();
		if (read(fd, &cycles, sizeof(cycles)) != sizeof(cycles) ||
		    !cycles)
			_exit(4);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

TEST_HARNESS_MAIN
