// SPDX-License-Identifier: GPL-2.0
/*
 * The PTRACE_BTS_* requests where branch tracing cannot be had.
 *
 * Without CONFIG_X86_DS every request is EIO, as any unknown request. With
 * it, CONFIG fails with EOPNOTSUPP where there is neither BTS hardware nor
 * the emulated backend (CONFIG_X86_DS_EMULATE=n, or ds.emulation=0, on a
 * CPU without BTS), and
 * with EBUSY where perf holds the Debug Store and there is no emulated
 * backend to fall back to (and succeeds once perf's event is gone). A
 * failed CONFIG leaves the tracee as it was: unconfigured, nothing charged,
 * every other request answering as for an untraced thread.
 *
 * Which of the three a kernel must give depends on its configuration and
 * the machine, which user space cannot read reliably (no /proc/config.gz in
 * a minimal kernel), so whoever boots the kernel says it: PTRACE_BTS_ERRNO
 * is EIO, EOPNOTSUPP or EBUSY. Without it the test skips.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/perf_event.h>
#include <linux/ptrace.h>

#include "../kselftest_harness.h"
#include "ptrace_bts_util.h"

#define BTS_REC			sizeof(struct bts_struct)
#define BTS_TRACE_ALLOC		(PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC)
/* The request numbers around the PTRACE_BTS_* block. */
#define PTRACE_BTS_FIRST	PTRACE_BTS_CONFIG
#define PTRACE_BTS_LAST		PTRACE_BTS_DRAIN

static const struct {
	const char	*name;
	int		err;
} bts_errnos[] = {
	{ "EIO", EIO }, { "EOPNOTSUPP", EOPNOTSUPP }, { "EBUSY", EBUSY },
};

/* The errno PTRACE_BTS_ERRNO names, 0 when unset, -1 when unknown. */
static int expected_errno(void)
{
	const char *name = getenv("PTRACE_BTS_ERRNO");
	unsigned int i;

	if (!name)
		return 0;
	for (i = 0; i < ARRAY_SIZE(bts_errnos); i++)
		if (!strcmp(name, bts_errnos[i].name))
			return bts_errnos[i].err;
	return -1;
}

FIXTURE(bts_errno) {
	int errno_expected;
	pid_t tracee;
	int perf_fd;
};

/* A tracee stopped in a ptrace stop, and perf's event on it for EBUSY. */
FIXTURE_SETUP(bts_errno)
{
	int status;

	self->tracee = 0;
	self->perf_fd = -1;
	self->errno_expected = expected_errno();
	if (!self->errno_expected)
		SKIP(return, "PTRACE_BTS_ERRNO (EIO, EOPNOTSUPP or EBUSY) not set");
	ASSERT_LT(0, self->errno_expected) {
		TH_LOG("PTRACE_BTS_ERRNO=%s is not EIO, EOPNOTSUPP or EBUSY",
		       getenv("PTRACE_BTS_ERRNO"));
	}

	self->tracee = fork();
	ASSERT_LE(0, self->tracee);
	if (self->tracee == 0) {
		if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
			_exit(1);
		raise(SIGSTOP);
		_exit(0);
	}
	ASSERT_EQ(self->tracee, waitpid(self->tracee, &status, 0));
	ASSERT_TRUE(WIFSTOPPED(status));

	if (self->errno_expected == EBUSY) {
		self->perf_fd = open_perf_bts(self->tracee, false);
		ASSERT_LE(0, self->perf_fd) {
			TH_LOG("perf's BTS event on the tracee: %m");
		}
	}
}

FIXTURE_TEARDOWN(bts_errno)
{
	if (self->perf_fd >= 0)
		close(self->perf_fd);
	if (self->tracee > 0) {
		kill(self->tracee, SIGKILL);
		waitpid(self->tracee, NULL, 0);
	}
}

/*
 * The control of EBUSY: once perf's event is gone, the same CONFIG gets
 * the hardware. So the EBUSY came from perf, not from a path that always
 * fails.
 */
static void busy_because_of_perf(struct __test_metadata *_metadata,
				 pid_t tracee, int *perf_fd)
{
	struct ptrace_bts_config cfg = { .size = 64 * BTS_REC, .flags = BTS_TRACE_ALLOC };
	struct ptrace_bts_config status;
	long ret;
	int i;

	close(*perf_fd);
	*perf_fd = -1;
	/* perf may let go of the Debug Store a little after the close. */
	for (i = 0; i < 100; i++) {
		ret = sys_ptrace(PTRACE_BTS_CONFIG, tracee, &cfg, sizeof(cfg));
		if (ret == 0 || errno != EBUSY)
			break;
		usleep(10000);
	}
	ASSERT_EQ(0, ret) {
		TH_LOG("PTRACE_BTS_CONFIG without perf's event: %m");
	}
	ASSERT_EQ((long)sizeof(status),
		  sys_ptrace(PTRACE_BTS_STATUS, tracee, &status, sizeof(status)));
	EXPECT_EQ((__u32)PTRACE_BTS_BACKEND_HARDWARE, status.backend);
	cfg.flags = 0;
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_CONFIG, tracee, &cfg, sizeof(cfg)));
}

/* CONFIG that would start tracing fails with the expected errno. */
TEST_F(bts_errno, config_fails)
{
	struct ptrace_bts_config cfg = {
		.size = 64 * BTS_REC,
		.flags = BTS_TRACE_ALLOC,
	};

	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->tracee, &cfg, sizeof(cfg)));
	EXPECT_EQ(self->errno_expected, errno) {
		TH_LOG("PTRACE_BTS_CONFIG: %m, want %s", strerror(self->errno_expected));
	}
	/* Also with the signal on overflow and the schedule records. */
	cfg.flags |= PTRACE_BTS_O_SIGNAL | PTRACE_BTS_O_SCHED;
	cfg.signal = SIGUSR2;
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->tracee, &cfg, sizeof(cfg)));
	EXPECT_EQ(self->errno_expected, errno);
	EXPECT_EQ(0, vmpin_kb(0)) {
		TH_LOG("a failed CONFIG left memory charged");
	}
	if (self->errno_expected == EBUSY)
		busy_because_of_perf(_metadata, self->tracee, &self->perf_fd);
}

/* Without CONFIG_X86_DS the block of requests is unknown: each is EIO. */
static void every_request_eio(struct __test_metadata *_metadata, pid_t tracee)
{
	struct ptrace_bts_config cfg = { .size = BTS_REC, .flags = BTS_TRACE_ALLOC };
	struct bts_struct rec;
	long request;
	void *addr;

	for (request = PTRACE_BTS_FIRST; request <= PTRACE_BTS_LAST; request++) {
		addr = request == PTRACE_BTS_GET ? (void *)&rec : (void *)&cfg;
		errno = 0;
		EXPECT_EQ(-1, sys_ptrace(request, tracee, addr,
					 request == PTRACE_BTS_GET ? 0 : sizeof(cfg)));
		EXPECT_EQ(EIO, errno) {
			TH_LOG("request %ld: %m", request);
		}
	}
}

/*
 * Where the requests exist, the tracee whose CONFIG failed is untraced:
 * STATUS says unconfigured, there are no records, GET has none, CLEAR and
 * DRAIN have nothing to do.
 */
static void untraced_answers(struct __test_metadata *_metadata, pid_t tracee)
{
	struct ptrace_bts_config status;
	struct bts_struct rec[4];

	memset(&status, 0xa5, sizeof(status));
	EXPECT_LE((long)sizeof(status),
		  sys_ptrace(PTRACE_BTS_STATUS, tracee, &status, sizeof(status))) {
		TH_LOG("PTRACE_BTS_STATUS: %m");
	}
	EXPECT_EQ(0u, status.size);
	EXPECT_EQ(0u, status.flags);
	EXPECT_EQ(0u, status.signal);
	EXPECT_EQ(BTS_REC, status.bts_size);
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_SIZE, tracee, NULL, 0));
	EXPECT_EQ(-1, sys_ptrace(PTRACE_BTS_GET, tracee, rec, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_CLEAR, tracee, NULL, 0));
	EXPECT_EQ(0, sys_ptrace(PTRACE_BTS_DRAIN, tracee, rec, sizeof(rec)));
}

/* After a failed CONFIG, every other request answers as for an untraced thread. */
TEST_F(bts_errno, other_requests)
{
	struct ptrace_bts_config cfg = { .size = 64 * BTS_REC, .flags = BTS_TRACE_ALLOC };

	ASSERT_EQ(-1, sys_ptrace(PTRACE_BTS_CONFIG, self->tracee, &cfg, sizeof(cfg)));
	ASSERT_EQ(self->errno_expected, errno);
	if (self->errno_expected == EIO)
		every_request_eio(_metadata, self->tracee);
	else
		untraced_answers(_metadata, self->tracee);
	EXPECT_EQ(0, vmpin_kb(0));
}

TEST_HARNESS_MAIN
