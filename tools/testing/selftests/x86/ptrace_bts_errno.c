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
 * Which of the three a kernel must give, it says itself: the requests
 * come with the allocator's parameters in /sys/module/ds/, the emulated
 * backend with ds.emulation, the CPU's BTS with the "bts" flag. Where a
 * backend traces, there is nothing to refuse, and these cases skip.
 *
 * Then the errors of a tracer that may not have what it asks for, on every
 * kernel and machine: bts_policy, perf's access policy for the hardware
 * backend at each perf_event_paranoid level, for an unprivileged tracer
 * with and without CAP_PERFMON, CAP_SYS_PTRACE or CAP_SYS_ADMIN, of its
 * own user's tracee and of root's, for each backend request, with and
 * without ds.force_emulation; bts_dumpable, a tracee that stops being
 * dumpable in the middle of its trace, by PR_SET_DUMPABLE or setresuid(),
 * with PTRACE_PEEKDATA as the oracle of who may still read it. They learn
 * what the machine has in the same way.
 *
 * The dumpable rule's tracer and tracees are in ptrace_bts_errno_dumpable.c.
 */
#define _GNU_SOURCE
#include "../kselftest_harness.h"
#include "ptrace_bts_errno.h"

/*
 * The errno CONFIG must fail with on this kernel and machine: EIO without
 * the requests, EOPNOTSUPP without a backend, EBUSY where there is no
 * emulated backend and perf holds the CPU's BTS (the fixture's event); 0
 * where a backend traces.
 */
static int expected_errno(void)
{
	int err = EOPNOTSUPP;

	if (!bts_requests_present())
		err = EIO;
	else if (bts_emulation_present())
		err = 0;
	else if (cpu_has_bts())
		err = EBUSY;
	return err;
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
		SKIP(return, "a backend traces here: nothing to refuse");
	if (self->errno_expected == EBUSY && !bts_hw_allowed())
		SKIP(return, "perf's policy refuses this user BTS: see bts_policy");

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

static int read_int(const char *path)
{
	char buf[16] = "";
	int fd, n;

	fd = open(path, O_RDONLY);
	if (fd < 0)
		return INT32_MIN;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? atoi(buf) : INT32_MIN;
}

static int write_int(const char *path, int val)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%d\n", val);
	return write_file(path, buf);
}

static int read_paranoid(void)
{
	return read_int(PERF_PARANOID);
}

static int write_paranoid(int level)
{
	return write_int(PERF_PARANOID, level);
}

/*
 * What the policy and dumpable cases change, as this program found it.
 * Each fixture's teardown puts it back; so does the harness's own process
 * when it exits, after a case that it killed at its timeout, whose
 * teardown never ran.
 */
static struct {
	pid_t	pid;
	int	paranoid;
	int	suid_dumpable;
	int	forced;
} bts_saved;

static void __attribute__((constructor)) bts_save_settings(void)
{
	bts_saved.pid = getpid();
	bts_saved.paranoid = read_paranoid();
	bts_saved.suid_dumpable = read_int(SUID_DUMPABLE);
	bts_saved.forced = read_sysfs_char(DS_FORCE_EMULATION);
}

static void bts_restore_settings(void)
{
	if (geteuid())
		return;
	if (bts_saved.paranoid != INT32_MIN)
		write_paranoid(bts_saved.paranoid);
	if (bts_saved.suid_dumpable != INT32_MIN)
		write_int(SUID_DUMPABLE, bts_saved.suid_dumpable);
	if (bts_saved.forced)
		write_file(DS_FORCE_EMULATION,
			   bts_saved.forced == 'Y' ? "1" : "0");
}

static void __attribute__((destructor)) bts_restore_at_exit(void)
{
	if (getpid() == bts_saved.pid)
		bts_restore_settings();
}

static void learn_machine(struct bts_machine *m)
{
	m->requests = bts_requests_present();
	m->hw = m->requests && cpu_has_bts();
	m->emu = m->requests && bts_emulation_present();
}

/*
 * Become POLICY_UID with @cap as the only capability (NO_CAP: none), as an
 * ordinary user that was given it: the ids change with the capabilities
 * kept (PR_SET_KEEPCAPS), then capset() leaves only @cap.
 */
int become_user(int cap)
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
 * that: the tracee is an ordinary program again. Forked by root, it stays
 * root's, unless @suid names a saved uid: then it becomes POLICY_UID,
 * with @suid as its saved uid, which it may make its effective uid later.
 * PTRACE_TRACEME records the tracee's own credentials as its tracer's.
 */
pid_t user_tracee(void (*body)(void), uid_t suid)
{
	int status;
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (suid && (setgroups(0, NULL) ||
			     setresgid(POLICY_UID, POLICY_UID, POLICY_UID) ||
			     setresuid(POLICY_UID, POLICY_UID, suid)))
			_exit(1);
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

/*
 * In a tracer of its own: CONFIG with @backend, as POLICY_UID with @cap,
 * on a tracee of POLICY_UID, or with @foreign on one of root's that it
 * traced while it was root: it may not read that one's state
 * (PTRACE_MODE_READ_REALCREDS) as itself.
 */
static void policy_tracer(int cap, __u32 backend, bool foreign, int out)
{
	struct ptrace_bts_config cfg = {
		.size		= POLICY_RECORDS * BTS_REC,
		.flags		= BTS_TRACE_ALLOC,
		.backend	= backend,
	};
	struct policy_result res = { .ret = -1, .err = 0 };
	struct ptrace_bts_config status;
	pid_t pid;

	pid = foreign ? user_tracee(NULL, 0) : 0;
	if (pid < 0 || become_user(cap)) {
		res.err = pid < 0 ? -ECHILD : -errno;
		goto out;
	}
	if (!foreign)
		pid = user_tracee(NULL, 0);
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
	/* Root's tracee takes no signal from this user: the tracer's. */
	sys_ptrace(PTRACE_CONT, pid, NULL, SIGKILL);
	waitpid(pid, NULL, 0);
out:
	if (write(out, &res, sizeof(res)) != sizeof(res))
		_exit(2);
	_exit(0);
}

static bool policy_run(int cap, __u32 backend, bool foreign,
		       struct policy_result *res)
{
	int fds[2], status;
	bool ok;
	pid_t pid;

	if (pipe(fds))
		return false;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		policy_tracer(cap, backend, foreign, fds[1]);
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
 * restrict only kernel and CPU-wide events, and a task event needs
 * CAP_PERFMON (or CAP_SYS_ADMIN) or the right to read the task's state
 * (a @foreign tracee's only with CAP_SYS_PTRACE); from 3 on (Debian's perf_paranoid_any())
 * perf_event_open() wants CAP_SYS_ADMIN, and CAP_PERFMON is not enough.
 * Missing BTS is EOPNOTSUPP before a refusal is EACCES.
 *
 * Return: the backend CONFIG must get, or -errno.
 */
static int policy_expect(const struct bts_machine *m, int level, int cap,
			 __u32 backend, bool forced, bool foreign)
{
	bool allowed = cap == CAP_SYS_ADMIN ||
		       (level <= 2 && (!foreign || cap == CAP_PERFMON ||
				       cap == CAP_SYS_PTRACE));

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
	case CAP_SYS_PTRACE:
		return "CAP_SYS_PTRACE";
	case CAP_SYS_ADMIN:
		return "CAP_SYS_ADMIN";
	default:
		return "no capability";
	}
}

FIXTURE(bts_policy) {
	struct bts_machine machine;
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
	if (geteuid())
		SKIP(return, "needs root: it sets perf_event_paranoid and changes users");
	learn_machine(&self->machine);
	ASSERT_NE(INT32_MIN, bts_saved.paranoid) {
		TH_LOG(PERF_PARANOID ": %m");
	}
	ASSERT_EQ(0, write_paranoid(variant->level)) {
		TH_LOG("perf_event_paranoid %d: %m", variant->level);
	}
}

/* In the parent: a test that crashed still gives the machine its settings. */
FIXTURE_TEARDOWN_PARENT(bts_policy)
{
	bts_restore_settings();
}

#define POLICY_FMT	"paranoid %d, %s, %s tracee, %s%s: "
#define POLICY_ARGS	level, cap_name(cap), foreign ? "root's" : "own", \
			backend_names[backend], forced ? ", forced emulation" : ""

static void policy_check(struct __test_metadata *_metadata,
			 const struct bts_machine *m, int level, int cap,
			 __u32 backend, bool forced, bool foreign)
{
	int want = policy_expect(m, level, cap, backend, forced, foreign);
	struct policy_result res;

	ASSERT_TRUE(policy_run(cap, backend, foreign, &res)) {
		TH_LOG(POLICY_FMT "the tracer did not report", POLICY_ARGS);
	}
	if (want < 0) {
		EXPECT_EQ(-1, res.ret);
		EXPECT_EQ(-want, res.err) {
			TH_LOG(POLICY_FMT "CONFIG gave %ld (%s), want %s",
			       POLICY_ARGS, res.ret, strerror(res.err),
			       strerror(-want));
		}
		return;
	}
	EXPECT_EQ(0, res.ret) {
		TH_LOG(POLICY_FMT "CONFIG: %s, want backend %d", POLICY_ARGS,
		       strerror(res.err), want);
	}
	EXPECT_EQ((__u32)want, res.backend) {
		TH_LOG(POLICY_FMT "STATUS says backend %u", POLICY_ARGS,
		       res.backend);
	}
}

/*
 * At this paranoid level, each request of a tracer without capabilities,
 * with CAP_PERFMON, CAP_SYS_PTRACE and CAP_SYS_ADMIN, on a tracee of its
 * own user and on one of root's; again with ds.force_emulation where there is an
 * emulated backend to force.
 */
TEST_F(bts_policy, matrix)
{
	static const int caps[] = {
		NO_CAP, CAP_PERFMON, CAP_SYS_PTRACE, CAP_SYS_ADMIN,
	};
	int forced, foreign, c;
	__u32 b;

	for (forced = 0; forced <= self->machine.emu; forced++) {
		if (self->machine.emu)
			ASSERT_EQ(0, write_file(DS_FORCE_EMULATION,
						forced ? "1" : "0"));
		for (foreign = 0; foreign <= 1; foreign++)
			for (c = 0; c < ARRAY_SIZE(caps); c++)
				for (b = PTRACE_BTS_BACKEND_ANY;
				     b <= PTRACE_BTS_BACKEND_EMULATED; b++)
					policy_check(_metadata, &self->machine,
						     variant->level, caps[c], b,
						     forced, foreign);
	}
}

FIXTURE(bts_dumpable) {
	struct bts_machine machine;
};

FIXTURE_VARIANT(bts_dumpable) {
	enum dumpable_how how;
};

FIXTURE_VARIANT_ADD(bts_dumpable, prctl) { .how = DUMPABLE_PRCTL };
FIXTURE_VARIANT_ADD(bts_dumpable, setresuid) { .how = DUMPABLE_SETRESUID };
FIXTURE_VARIANT_ADD(bts_dumpable, root_tracee) { .how = DUMPABLE_ROOT_TRACEE };
FIXTURE_VARIANT_ADD(bts_dumpable, root_tracer) { .how = DUMPABLE_ROOT_TRACER };
FIXTURE_VARIANT_ADD(bts_dumpable, root_attached) {
	.how = DUMPABLE_ROOT_ATTACHED,
};

/*
 * At paranoid 2, where CAP_PERFMON is enough for the hardware, and with
 * fs.suid_dumpable 0, so that a change of the effective uid ends the
 * dumpable state.
 */
FIXTURE_SETUP(bts_dumpable)
{
	if (geteuid())
		SKIP(return, "needs root: it changes users");
	learn_machine(&self->machine);
	if (!self->machine.requests)
		SKIP(return, "no PTRACE_BTS_* requests");
	if (!self->machine.hw && !self->machine.emu)
		SKIP(return, "no backend to trace with");
	ASSERT_NE(INT32_MIN, bts_saved.paranoid) {
		TH_LOG(PERF_PARANOID ": %m");
	}
	ASSERT_EQ(0, write_paranoid(2));
	ASSERT_EQ(0, write_int(SUID_DUMPABLE, 0)) {
		TH_LOG(SUID_DUMPABLE ": %m");
	}
}

FIXTURE_TEARDOWN_PARENT(bts_dumpable)
{
	bts_restore_settings();
}

/*
 * A tracee that stops being dumpable in the middle of its trace: from
 * then on SIZE, GET and DRAIN fail with EPERM, as CONFIG does and as
 * PTRACE_PEEKDATA does, until it is dumpable again; unless the ptrace
 * link recorded CAP_SYS_PTRACE over it. The tracer runs without
 * CAP_SYS_PTRACE, except as root over a tracee that attached itself.
 */
TEST_F(bts_dumpable, reads_follow_dumpable)
{
	int backend = self->machine.hw && !bts_emulation_forced() ?
		      PTRACE_BTS_BACKEND_HARDWARE : PTRACE_BTS_BACKEND_EMULATED;
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		dumpable_tracer(variant->how, backend);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status)) {
		TH_LOG("the tracer failed at step %d", WEXITSTATUS(status));
	}
}

TEST_HARNESS_MAIN
