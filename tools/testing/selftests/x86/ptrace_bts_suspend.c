// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace across a suspend to RAM (ACPI S3).
 *
 * The CPU loses IA32_DS_AREA and IA32_DEBUGCTL in S3. The other CPUs go
 * offline and online again around it and are set up afresh; the boot CPU
 * stays up and must be reloaded by the kernel on resume, or the next switch
 * into a traced task turns BTS on with the DS save area taken from linear
 * address 0. So a tracee pinned to CPU 0 keeps running a known loop under
 * branch tracing while the test suspends the machine and the RTC's alarm
 * wakes it; then every record of the trace, before and after the resume,
 * must be one of the loop's branches, one per iteration, none lost.
 *
 * This suspends the machine it runs on. It skips where there is no S3
 * (/sys/power/mem_sleep without "deep") or no RTC wake alarm.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <linux/ptrace.h>

#include "../kselftest_harness.h"
#include "ptrace_bts_suspend.h"
#include "ptrace_bts_util.h"

#define BTS_REC			sizeof(struct bts_struct)
#define BTS_TRACE_ALLOC		(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC)
/* One record per iteration, about one iteration per millisecond. */
#define TRACE_RECORDS		(1u << 16)
/* Iterations traced before the suspend, and after the resume. */
#define ITERS_BEFORE		20
#define ITERS_AFTER		20
/* The RTC wakes the machine this many seconds after the suspend starts. */
#define WAKE_AFTER_S		5
#define POLL_US			10000
/* How long the loop may take to reach its iteration counts. */
#define POLL_MAX		(60 * 1000000 / POLL_US)
#define NSEC_PER_SEC		1000000000LL
/* The tracee changes the counter, the tracer the stop flag, as it runs. */
#define READ_ONCE(x)		__atomic_load_n(&(x), __ATOMIC_RELAXED)
#define WRITE_ONCE(x, v)	__atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define BOOT_CPU		0

#define SYS_POWER		"/sys/power/"
#define WAKEALARM		"/sys/class/rtc/rtc0/wakealarm"

/* Read a sysfs file into @buf; false if it cannot be read. */
static bool read_text(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return true;
}

/* Write @text to a sysfs file in one write(); 0 or an errno. */
static int write_text(const char *path, const char *text)
{
	ssize_t n;
	int fd, err = 0;

	fd = open(path, O_WRONLY);
	if (fd < 0)
		return errno;
	n = write(fd, text, strlen(text));
	if (n < 0)
		err = errno;
	close(fd);
	return err;
}

/* A counter of /sys/power/suspend_stats, or -1. */
static long suspend_stat(const char *name)
{
	char path[128], buf[32];

	snprintf(path, sizeof(path), SYS_POWER "suspend_stats/%s", name);
	if (!read_text(path, buf, sizeof(buf)))
		return -1;
	return strtol(buf, NULL, 10);
}

/* Does the space-separated list in @path name @word (maybe as [word])? */
static bool lists(const char *path, const char *word)
{
	char buf[256], *tok, *save;

	if (!read_text(path, buf, sizeof(buf)))
		return false;
	for (tok = strtok_r(buf, "\n ", &save); tok;
	     tok = strtok_r(NULL, "\n ", &save)) {
		if (*tok == '[')
			tok++;
		tok[strcspn(tok, "]")] = '\0';
		if (!strcmp(tok, word))
			return true;
	}
	return false;
}

/* Time spent suspended so far: CLOCK_BOOTTIME - CLOCK_MONOTONIC, in ns. */
static long long slept_ns(void)
{
	struct timespec boot, mono;

	clock_gettime(CLOCK_BOOTTIME, &boot);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	return (boot.tv_sec - mono.tv_sec) * NSEC_PER_SEC +
	       (boot.tv_nsec - mono.tv_nsec);
}

/* The CPU @pid last ran on (field 39 of /proc/<pid>/stat), or -1. */
static int last_cpu(pid_t pid)
{
	char path[64], buf[1024], *p;
	int field, cpu = -1;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!read_text(path, buf, sizeof(buf)))
		return -1;
	/* Field 2, the command, is in parentheses and may hold spaces. */
	p = strrchr(buf, ')');
	if (!p)
		return -1;
	for (field = 2; p && field < 39; field++)
		p = strchr(p + 1, ' ');
	if (p)
		sscanf(p + 1, "%d", &cpu);
	return cpu;
}

static unsigned long get_ip(pid_t pid)
{
	struct user_regs_struct regs;

	if (sys_ptrace(PTRACE_GETREGS, pid, NULL, (unsigned long)&regs))
		return 0;
	return regs.rip;
}

/* Wait until the tracee's count reaches @iters; false on a timeout. */
static bool wait_iters(struct s3_loop_state *s, long iters)
{
	int i;

	for (i = 0; i < POLL_MAX; i++) {
		if (READ_ONCE(s->iters) >= iters)
			return true;
		usleep(POLL_US);
	}
	return false;
}

FIXTURE(suspend) {
	struct s3_loop_state *state;
	struct bts_struct *recs;
	pid_t tracee;
	bool alarm_set;
};

FIXTURE_SETUP(suspend)
{
	self->tracee = 0;
	self->alarm_set = false;
	self->recs = NULL;
	self->state = MAP_FAILED;

	if (!lists(SYS_POWER "state", "mem"))
		SKIP(return, "no suspend to RAM: /sys/power/state lacks \"mem\"");
	if (!lists(SYS_POWER "mem_sleep", "deep"))
		SKIP(return, "no S3: /sys/power/mem_sleep lacks \"deep\"");
	if (access(WAKEALARM, W_OK))
		SKIP(return, "no RTC wake alarm: " WAKEALARM ": %s",
		     strerror(errno));
	/* S3, not suspend to idle: the CPUs must lose their state. */
	ASSERT_EQ(0, write_text(SYS_POWER "mem_sleep", "deep"));

	self->state = mmap(NULL, sizeof(*self->state), PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->state);
	self->recs = calloc(TRACE_RECORDS, BTS_REC);
	ASSERT_NE(NULL, self->recs);
}

FIXTURE_TEARDOWN(suspend)
{
	if (self->tracee > 0) {
		kill(self->tracee, SIGKILL);
		waitpid(self->tracee, NULL, __WALL);
	}
	if (self->alarm_set)
		write_text(WAKEALARM, "0");
	if (self->state != MAP_FAILED)
		munmap(self->state, sizeof(*self->state));
	free(self->recs);
}

/* Fork the tracee, pinned to the boot CPU, stopped at s3_loop's start. */
static pid_t spawn_loop(struct __test_metadata *_metadata,
			struct s3_loop_state *s)
{
	cpu_set_t cpus;
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		CPU_ZERO(&cpus);
		CPU_SET(BOOT_CPU, &cpus);
		if (sched_setaffinity(0, sizeof(cpus), &cpus))
			_exit(1);
		if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
			_exit(2);
		raise(SIGSTOP);
		s3_loop(s);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status)) {
		TH_LOG("tracee status %#x", status);
	}
	ASSERT_EQ(0, sys_ptrace(PTRACE_SETOPTIONS, pid, NULL,
				PTRACE_O_EXITKILL));
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, 0));
	ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP) {
		TH_LOG("tracee status %#x, expected its first breakpoint",
		       status);
	}
	ASSERT_EQ((unsigned long)s3_loop_s, get_ip(pid));
	return pid;
}

/*
 * Suspend to RAM with the RTC set to wake the machine; returns when it is
 * back. The write blocks until the resume is complete.
 */
static void suspend_to_ram(struct __test_metadata *_metadata, bool *alarm_set)
{
	char when[16];

	/* A pending alarm must be cleared before another can be set. */
	ASSERT_EQ(0, write_text(WAKEALARM, "0"));
	snprintf(when, sizeof(when), "+%d", WAKE_AFTER_S);
	ASSERT_EQ(0, write_text(WAKEALARM, when)) {
		TH_LOG(WAKEALARM ": %s", strerror(errno));
	}
	*alarm_set = true;
	ASSERT_EQ(0, write_text(SYS_POWER "state", "mem")) {
		TH_LOG("suspend to RAM failed");
	}
	*alarm_set = false;
}

/*
 * The tracee runs its loop under branch tracing on the boot CPU while the
 * machine goes through S3 and back; then the trace holds exactly one
 * record per iteration, the loop's own branches, from before the suspend
 * and after the resume alike.
 */
TEST_F_TIMEOUT(suspend, trace_across_s3, 180)
{
	long before, resumed, iters, n, i, succ, fails;
	struct s3_loop_state *s = self->state;
	struct ptrace_bts_config cfg = {
		.size = TRACE_RECORDS * BTS_REC,
		.flags = BTS_TRACE_ALLOC,
		.backend = expected_backend(),
	};
	long long slept;
	int status;

	self->tracee = spawn_loop(_metadata, s);
	ASSERT_EQ(0, sys_ptrace(PTRACE_BTS_CONFIG, self->tracee, &cfg,
				sizeof(cfg))) {
		TH_LOG("PTRACE_BTS_CONFIG (backend %u): %m", cfg.backend);
	}
	ASSERT_EQ((long)sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, self->tracee,
						&cfg, sizeof(cfg)));
	ksft_print_msg("tracing with backend %u\n", cfg.backend);

	/* The tracer is live on the boot CPU, in the tracee, when S3 comes. */
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->tracee, NULL, 0));
	ASSERT_TRUE(wait_iters(s, ITERS_BEFORE)) {
		TH_LOG("the loop ran %ld iterations", READ_ONCE(s->iters));
	}
	succ = suspend_stat("success");
	fails = suspend_stat("fail");
	slept = slept_ns();
	before = READ_ONCE(s->iters);
	suspend_to_ram(_metadata, &self->alarm_set);
	resumed = READ_ONCE(s->iters);
	slept = slept_ns() - slept;
	ksft_print_msg("suspended for %lld ms; %ld iterations before, %ld at the resume\n",
		       slept / 1000000, before, resumed);
	EXPECT_EQ(succ + 1, suspend_stat("success"));
	EXPECT_EQ(fails, suspend_stat("fail"));
	/* The clock the RTC measured the sleep with: it did sleep. */
	EXPECT_LE(NSEC_PER_SEC, slept);

	/* Tracing goes on after the resume. */
	ASSERT_TRUE(wait_iters(s, resumed + ITERS_AFTER)) {
		TH_LOG("the loop stopped at %ld iterations after the resume",
		       READ_ONCE(s->iters));
	}
	WRITE_ONCE(s->stop, 1);
	ASSERT_EQ(self->tracee, waitpid(self->tracee, &status, __WALL));
	ASSERT_TRUE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP) {
		TH_LOG("tracee status %#x at %#lx, expected the final breakpoint",
		       status, get_ip(self->tracee));
	}
	ASSERT_EQ((unsigned long)s3_loop_e, get_ip(self->tracee));
	EXPECT_EQ(BOOT_CPU, last_cpu(self->tracee));
	iters = READ_ONCE(s->iters);
	ASSERT_GT(TRACE_RECORDS, iters) {
		TH_LOG("%ld iterations overran the %u-record buffer", iters,
		       TRACE_RECORDS);
	}

	/* Still traced, by the same backend. */
	memset(&cfg, 0, sizeof(cfg));
	ASSERT_EQ((long)sizeof(cfg), sys_ptrace(PTRACE_BTS_STATUS, self->tracee,
						&cfg, sizeof(cfg)));
	EXPECT_EQ((__u32)PTRACE_BTS_O_TRACE, cfg.flags & PTRACE_BTS_O_TRACE);
	EXPECT_EQ((unsigned int)expected_backend(), cfg.backend);

	/* One record per iteration: none lost, across the S3 too. */
	n = sys_ptrace(PTRACE_BTS_DRAIN, self->tracee, self->recs,
		       TRACE_RECORDS * BTS_REC);
	ASSERT_EQ(iters, n) {
		TH_LOG("%ld records for %ld iterations (%ld before the suspend, %ld at the resume)",
		       n, iters, before, resumed);
	}
	for (i = 0; i < n; i++) {
		const struct bts_struct *r = &self->recs[i];
		bool last = i == n - 1;
		__u64 from = (unsigned long)(last ? s3_loop_f1 : s3_loop_f0);
		__u64 to = (unsigned long)(last ? s3_loop_t1 : s3_loop_t0);

		/* Iteration i + 1 took this branch: before or after S3? */
		ASSERT_TRUE(r->qualifier == BTS_BRANCH &&
			    r->variant.lbr.from == from &&
			    r->variant.lbr.to == to) {
			TH_LOG("record %ld of %ld (iteration %ld, %s the resume):",
			       i, n, i + 1,
			       i + 1 <= resumed ? "before or at" : "after");
			TH_LOG("qualifier %llu %#llx -> %#llx, expected %#llx -> %#llx",
			       (unsigned long long)r->qualifier,
			       (unsigned long long)r->variant.lbr.from,
			       (unsigned long long)r->variant.lbr.to,
			       (unsigned long long)from, (unsigned long long)to);
		}
	}
	ksft_print_msg("%ld records, %ld of them after the resume: the loop's branches\n",
		       n, n - resumed);
}

TEST_HARNESS_MAIN
