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
 * is EIO, EOPNOTSUPP or EBUSY. Without it these cases skip.
 *
 * Then the errors of a tracer that may not have what it asks for, on every
 * kernel and machine: bts_policy, perf's access policy for the hardware
 * backend at each perf_event_paranoid level, for an unprivileged tracer
 * with and without CAP_PERFMON or CAP_SYS_ADMIN, for each backend request,
 * with and without ds.force_emulation; bts_dumpable, a tracee that stops
 * being dumpable in the middle of its trace. They learn what the machine
 * has from the kernel: the "bts" CPU flag and ds.emulation, and
 * PTRACE_BTS_ERRNO=EIO for a kernel without the requests.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/capability.h>
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

/* ---- perf's policy for the hardware backend ---- */

#ifndef CAP_PERFMON
#define CAP_PERFMON		38
#endif
#define PERF_PARANOID		"/proc/sys/kernel/perf_event_paranoid"
#define DS_EMULATION		"/sys/module/ds/parameters/emulation"
#define DS_FORCE_EMULATION	"/sys/module/ds/parameters/force_emulation"
/* The unprivileged user of the tracers and their tracees. */
#define POLICY_UID		65534
/* No capability at all. */
#define NO_CAP			-1
#define POLICY_RECORDS		64
#define DUMPABLE_RECORDS	4096

/* What the kernel and the machine offer. */
struct bts_machine {
	bool	requests;	/* the PTRACE_BTS_* requests exist */
	bool	hw;		/* BTS hardware */
	bool	emu;		/* the emulated backend */
};

/* What a tracer got from CONFIG, and the backend STATUS then reported. */
struct policy_result {
	long	ret;
	int	err;
	__u32	backend;
};

static int read_sysfs_char(const char *path)
{
	char c = 0;
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	if (read(fd, &c, 1) != 1)
		c = 0;
	close(fd);
	return c;
}

static int write_file(const char *path, const char *val)
{
	ssize_t len = strlen(val);
	int fd, ret;

	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	ret = write(fd, val, len) == len ? 0 : -1;
	close(fd);
	return ret;
}

static int read_paranoid(void)
{
	char buf[16] = "";
	int fd, n;

	fd = open(PERF_PARANOID, O_RDONLY);
	if (fd < 0)
		return INT32_MIN;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? atoi(buf) : INT32_MIN;
}

static int write_paranoid(int level)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%d\n", level);
	return write_file(PERF_PARANOID, buf);
}

static void learn_machine(struct bts_machine *m)
{
	const char *err = getenv("PTRACE_BTS_ERRNO");

	m->requests = !err || strcmp(err, "EIO");
	m->hw = m->requests && cpu_has_flag("bts");
	m->emu = m->requests && read_sysfs_char(DS_EMULATION) == 'Y';
}

/*
 * Become POLICY_UID with @cap as the only capability (NO_CAP: none), as an
 * ordinary user that was given it: the ids change with the capabilities
 * kept (PR_SET_KEEPCAPS), then capset() leaves only @cap.
 */
static int become_user(int cap)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	memset(data, 0, sizeof(data));
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) || setgroups(0, NULL) ||
	    setresgid(POLICY_UID, POLICY_UID, POLICY_UID) ||
	    setresuid(POLICY_UID, POLICY_UID, POLICY_UID))
		return -1;
	if (cap != NO_CAP) {
		data[CAP_TO_INDEX(cap)].effective = CAP_TO_MASK(cap);
		data[CAP_TO_INDEX(cap)].permitted = CAP_TO_MASK(cap);
	}
	return syscall(SYS_capset, &hdr, data);
}

/*
 * A tracee of the tracer's user, stopped in its first ptrace stop. The
 * tracer's change of ids made its image not dumpable, and the fork copied
 * that: the tracee is an ordinary program again.
 */
static pid_t user_tracee(void (*body)(void))
{
	int status;
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) ||
		    sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
			_exit(1);
		raise(SIGSTOP);
		if (body)
			body();
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
		kill(pid, SIGKILL);
		return -1;
	}
	return pid;
}

/* In a tracer of its own: CONFIG with @backend, as POLICY_UID with @cap. */
static void policy_tracer(int cap, __u32 backend, int out)
{
	struct ptrace_bts_config cfg = {
		.size		= POLICY_RECORDS * BTS_REC,
		.flags		= BTS_TRACE_ALLOC,
		.backend	= backend,
	};
	struct policy_result res = { .ret = -1, .err = 0 };
	struct ptrace_bts_config status;
	pid_t pid;

	if (become_user(cap)) {
		res.err = -errno;
		goto out;
	}
	pid = user_tracee(NULL);
	if (pid < 0) {
		res.err = -ECHILD;
		goto out;
	}
	errno = 0;
	res.ret = sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg));
	res.err = errno;
	memset(&status, 0, sizeof(status));
	if (sys_ptrace(PTRACE_BTS_STATUS, pid, &status, sizeof(status)) > 0)
		res.backend = status.backend;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
out:
	if (write(out, &res, sizeof(res)) != sizeof(res))
		_exit(2);
	_exit(0);
}

static bool policy_run(int cap, __u32 backend, struct policy_result *res)
{
	int fds[2], status;
	bool ok;
	pid_t pid;

	if (pipe(fds))
		return false;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		policy_tracer(cap, backend, fds[1]);
	}
	close(fds[1]);
	ok = pid > 0 && read(fds[0], res, sizeof(*res)) == sizeof(*res);
	close(fds[0]);
	if (pid > 0)
		ok &= waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		      !WEXITSTATUS(status);
	return ok;
}

/*
 * The policy: the hardware where perf would give this tracer the same
 * trace as a perf event (the user-mode branch-instructions event with
 * period 1 on the tracee), and ds.force_emulation is off. Levels 0 to 2
 * restrict only kernel and CPU-wide events; from 3 on (Debian's
 * perf_paranoid_any()) perf_event_open() wants CAP_SYS_ADMIN, and
 * CAP_PERFMON is not enough. Missing BTS is EOPNOTSUPP before a refusal
 * is EACCES.
 *
 * Return: the backend CONFIG must get, or -errno.
 */
static int policy_expect(const struct bts_machine *m, int level, int cap,
			 __u32 backend, bool forced)
{
	bool allowed = level <= 2 || cap == CAP_SYS_ADMIN;

	if (!m->requests)
		return -EIO;
	switch (backend) {
	case PTRACE_BTS_BACKEND_EMULATED:
		return m->emu ? PTRACE_BTS_BACKEND_EMULATED : -EOPNOTSUPP;
	case PTRACE_BTS_BACKEND_HARDWARE:
		if (!m->hw)
			return -EOPNOTSUPP;
		return forced || !allowed ? -EACCES : PTRACE_BTS_BACKEND_HARDWARE;
	default:
		if (m->hw && !forced && allowed)
			return PTRACE_BTS_BACKEND_HARDWARE;
		if (m->emu)
			return PTRACE_BTS_BACKEND_EMULATED;
		return m->hw ? -EACCES : -EOPNOTSUPP;
	}
}

static const char *const backend_names[] = { "ANY", "HARDWARE", "EMULATED" };

static const char *cap_name(int cap)
{
	switch (cap) {
	case CAP_PERFMON:
		return "CAP_PERFMON";
	case CAP_SYS_ADMIN:
		return "CAP_SYS_ADMIN";
	default:
		return "no capability";
	}
}

FIXTURE(bts_policy) {
	struct bts_machine machine;
	int saved_paranoid;
	int saved_forced;
};

FIXTURE_VARIANT(bts_policy) {
	int level;
};

FIXTURE_VARIANT_ADD(bts_policy, paranoid_m1) { .level = -1 };
FIXTURE_VARIANT_ADD(bts_policy, paranoid_0) { .level = 0 };
FIXTURE_VARIANT_ADD(bts_policy, paranoid_1) { .level = 1 };
FIXTURE_VARIANT_ADD(bts_policy, paranoid_2) { .level = 2 };
FIXTURE_VARIANT_ADD(bts_policy, paranoid_3) { .level = 3 };
FIXTURE_VARIANT_ADD(bts_policy, paranoid_4) { .level = 4 };

FIXTURE_SETUP(bts_policy)
{
	self->saved_paranoid = INT32_MIN;
	self->saved_forced = 0;
	if (geteuid())
		SKIP(return, "needs root: it sets perf_event_paranoid and changes users");
	learn_machine(&self->machine);
	self->saved_paranoid = read_paranoid();
	ASSERT_NE(INT32_MIN, self->saved_paranoid) {
		TH_LOG(PERF_PARANOID ": %m");
	}
	self->saved_forced = read_sysfs_char(DS_FORCE_EMULATION);
	ASSERT_EQ(0, write_paranoid(variant->level)) {
		TH_LOG("perf_event_paranoid %d: %m", variant->level);
	}
}

/* In the parent: a test that crashed still gives the machine its settings. */
FIXTURE_TEARDOWN_PARENT(bts_policy)
{
	if (self->saved_paranoid != INT32_MIN)
		write_paranoid(self->saved_paranoid);
	if (self->saved_forced)
		write_file(DS_FORCE_EMULATION, self->saved_forced == 'Y' ? "1" : "0");
}

static void policy_check(struct __test_metadata *_metadata,
			 const struct bts_machine *m, int level, int cap,
			 __u32 backend, bool forced)
{
	int want = policy_expect(m, level, cap, backend, forced);
	struct policy_result res;

	ASSERT_TRUE(policy_run(cap, backend, &res)) {
		TH_LOG("the tracer (%s) did not report", cap_name(cap));
	}
	if (want < 0) {
		EXPECT_EQ(-1, res.ret);
		EXPECT_EQ(-want, res.err) {
			TH_LOG("paranoid %d, %s, %s%s: CONFIG gave %ld (%s), want %s",
			       level, cap_name(cap), backend_names[backend],
			       forced ? ", forced emulation" : "", res.ret,
			       strerror(res.err), strerror(-want));
		}
		return;
	}
	EXPECT_EQ(0, res.ret) {
		TH_LOG("paranoid %d, %s, %s%s: CONFIG: %s, want backend %d",
		       level, cap_name(cap), backend_names[backend],
		       forced ? ", forced emulation" : "", strerror(res.err), want);
	}
	EXPECT_EQ((__u32)want, res.backend) {
		TH_LOG("paranoid %d, %s, %s%s: STATUS says backend %u",
		       level, cap_name(cap), backend_names[backend],
		       forced ? ", forced emulation" : "", res.backend);
	}
}

/*
 * At this paranoid level, each request of a tracer without capabilities,
 * with CAP_PERFMON and with CAP_SYS_ADMIN; again with ds.force_emulation
 * where there is an emulated backend to force.
 */
TEST_F(bts_policy, matrix)
{
	static const int caps[] = { NO_CAP, CAP_PERFMON, CAP_SYS_ADMIN };
	int forced, c;
	__u32 b;

	for (forced = 0; forced <= self->machine.emu; forced++) {
		if (self->machine.emu)
			ASSERT_EQ(0, write_file(DS_FORCE_EMULATION,
						forced ? "1" : "0"));
		for (c = 0; c < ARRAY_SIZE(caps); c++)
			for (b = PTRACE_BTS_BACKEND_ANY;
			     b <= PTRACE_BTS_BACKEND_EMULATED; b++)
				policy_check(_metadata, &self->machine,
					     variant->level, caps[c], b, forced);
	}
}

/* ---- the dumpable rule at every read ---- */

static unsigned int dumpable_sink;

/* Branches to record: a counted loop the compiler keeps. */
static void dumpable_loop(void)
{
	unsigned int i, sum = 0;

	for (i = 0; i < 32; i++) {
		sum += i;
		asm volatile("" : "+r" (sum));
	}
	dumpable_sink = sum;
}

/*
 * The tracee: branches, then not dumpable (more branches) and a stop, then
 * dumpable again and a stop.
 */
static void dumpable_body(void)
{
	dumpable_loop();
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		_exit(3);
	dumpable_loop();
	raise(SIGSTOP);
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0))
		_exit(4);
	raise(SIGSTOP);
}

#define TRACER_CHECK(cond, step, fmt, ...) do {			\
	int __step = (step);						\
									\
	if (!(cond)) {							\
		ksft_print_msg("tracer step %d: " fmt "\n", __step,	\
			       ##__VA_ARGS__);				\
		_exit(__step);						\
	}								\
} while (0)

static void tracee_resume_to_stop(pid_t pid, int step)
{
	int status;

	TRACER_CHECK(!sys_ptrace(PTRACE_CONT, pid, NULL, 0), step,
		     "PTRACE_CONT: %s", strerror(errno));
	TRACER_CHECK(waitpid(pid, &status, 0) == pid && WIFSTOPPED(status) &&
		     WSTOPSIG(status) == SIGSTOP, step,
		     "the tracee did not stop (status %#x)", status);
}

/* Every request that shows records, or their number, fails with @err. */
static void reads_fail(pid_t pid, int err, int step)
{
	struct bts_struct buf[DUMPABLE_RECORDS];

	errno = 0;
	TRACER_CHECK(sys_ptrace(PTRACE_BTS_SIZE, pid, NULL, 0) == -1 &&
		     errno == err, step, "SIZE: %s", strerror(errno));
	errno = 0;
	TRACER_CHECK(sys_ptrace(PTRACE_BTS_GET, pid, buf, 0) == -1 &&
		     errno == err, step + 1, "GET: %s", strerror(errno));
	errno = 0;
	TRACER_CHECK(sys_ptrace(PTRACE_BTS_DRAIN, pid, buf, sizeof(buf)) == -1 &&
		     errno == err, step + 2, "DRAIN: %s", strerror(errno));
}

/* In a tracer without capabilities: trace, read at each of the stops. */
static void dumpable_tracer(void)
{
	struct ptrace_bts_config cfg = {
		.size	= DUMPABLE_RECORDS * BTS_REC,
		.flags	= BTS_TRACE_ALLOC,
	};
	struct bts_struct buf[DUMPABLE_RECORDS];
	long size, n;
	pid_t pid;

	TRACER_CHECK(!become_user(NO_CAP), 10, "become_user: %s",
		     strerror(errno));
	pid = user_tracee(dumpable_body);
	TRACER_CHECK(pid > 0, 11, "no tracee");
	TRACER_CHECK(!sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg)), 12,
		     "CONFIG: %s", strerror(errno));

	/* Stopped while not dumpable: nothing of the trace shows. */
	tracee_resume_to_stop(pid, 13);
	reads_fail(pid, EPERM, 14);
	/* STATUS shows the configuration only; it still works. */
	TRACER_CHECK(sys_ptrace(PTRACE_BTS_STATUS, pid, &cfg, sizeof(cfg)) > 0,
		     17, "STATUS: %s", strerror(errno));
	/* Not even to a CONFIG that keeps the buffer. */
	cfg.flags = PTRACE_BTS_O_TRACE;
	cfg.backend = PTRACE_BTS_BACKEND_ANY;
	errno = 0;
	TRACER_CHECK(sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg)) == -1 &&
		     errno == EPERM, 18, "CONFIG: %s", strerror(errno));

	/* Dumpable again: the records are there, those of before too. */
	tracee_resume_to_stop(pid, 19);
	size = sys_ptrace(PTRACE_BTS_SIZE, pid, NULL, 0);
	TRACER_CHECK(size >= 32, 20, "SIZE %ld: %s", size, strerror(errno));
	TRACER_CHECK(!sys_ptrace(PTRACE_BTS_GET, pid, buf, 0), 21,
		     "GET: %s", strerror(errno));
	n = sys_ptrace(PTRACE_BTS_DRAIN, pid, buf, sizeof(buf));
	TRACER_CHECK(n == size, 22, "DRAIN %ld of %ld: %s", n, size,
		     strerror(errno));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	_exit(0);
}

FIXTURE(bts_dumpable) {
	struct bts_machine machine;
};

FIXTURE_SETUP(bts_dumpable)
{
	if (geteuid())
		SKIP(return, "needs root: it changes users");
	learn_machine(&self->machine);
	if (!self->machine.requests)
		SKIP(return, "no PTRACE_BTS_* requests");
	if (!self->machine.hw && !self->machine.emu)
		SKIP(return, "no backend to trace with");
}

FIXTURE_TEARDOWN(bts_dumpable)
{
}

/*
 * An unprivileged tracer (no CAP_SYS_PTRACE) of a tracee that calls
 * PR_SET_DUMPABLE(0) in the middle of its trace: from then on SIZE, GET
 * and DRAIN fail with EPERM, as CONFIG does, until PR_SET_DUMPABLE(1).
 */
TEST_F(bts_dumpable, reads_follow_dumpable)
{
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		dumpable_tracer();
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status)) {
		TH_LOG("the tracer failed at step %d", WEXITSTATUS(status));
	}
}

TEST_HARNESS_MAIN
