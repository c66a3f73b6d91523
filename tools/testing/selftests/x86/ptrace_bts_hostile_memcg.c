// SPDX-License-Identifier: GPL-2.0
/*
 * ptrace_bts_hostile: the locked-memory budget of a user, and tracers in a
 * memory cgroup that pays for their buffers.
 */
#define _GNU_SOURCE
#include "ptrace_bts_hostile.h"

/* ---- the budget ---- */

/* A stopped tracee of this process, seized; 0 on failure. */
static pid_t ho_budget_tracee(void)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		for (;;)
			pause();
	}
	if (pid < 0 || sys_ptrace(PTRACE_SEIZE, pid, NULL, PTRACE_O_EXITKILL) ||
	    sys_ptrace(PTRACE_INTERRUPT, pid, NULL, 0) ||
	    waitpid(pid, &status, __WALL) != pid || !WIFSTOPPED(status))
		return 0;
	return pid;
}

static long ho_alloc(pid_t pid, unsigned long size)
{
	struct ptrace_bts_config cfg = {
		.size	= size,
		.flags	= size ? PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC : 0,
	};

	return sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg)) ? -errno : 0;
}

/* In the second tracer: nothing while the first holds the budget. */
static int ho_budget_second(void)
{
	pid_t pid = ho_budget_tracee();
	long err;

	if (!pid)
		return 10;
	err = ho_alloc(pid, HO_RECORD);
	if (err != -EDQUOT) {
		fprintf(stderr,
			"# a second tracer of the uid got a buffer (%ld) while the first holds RLIMIT_MEMLOCK: the budget is not per user\n",
			err);
		return 11;
	}
	return 0;
}

/*
 * As the tracer uid: exactly RLIMIT_MEMLOCK and not a page more, none for
 * a second tracer of the uid meanwhile, all of it again afterwards. Waits
 * for tracers that died to be refunded (from a workqueue).
 */
int ho_budget(void)
{
	struct ptrace_bts_config st;
	long err, deadline;
	int status;
	pid_t pid, second;

	if (ho_unprivileged())
		return 1;
	pid = ho_budget_tracee();
	if (!pid)
		return 2;
	deadline = ho_now_ms() + HO_REFUND_WAIT_MS;
	while ((err = ho_alloc(pid, HO_MEMLOCK)) == -EDQUOT &&
	       ho_now_ms() < deadline)
		usleep(100000);
	if (err) {
		fprintf(stderr, "# a buffer of RLIMIT_MEMLOCK: %ld\n", err);
		return 3;
	}
	if (sys_ptrace(PTRACE_BTS_STATUS, pid, &st, sizeof(st)) < 0 ||
	    st.size != HO_MEMLOCK / HO_RECORD * HO_RECORD)
		return 4;
	second = fork();
	if (second == 0)
		_exit(ho_budget_second());
	if (waitpid(second, &status, 0) != second || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		return 5;
	if (ho_alloc(pid, 0))
		return 6;
	err = ho_alloc(pid, HO_MEMLOCK + HO_PAGE);
	if (err != -EDQUOT) {
		fprintf(stderr, "# a page over RLIMIT_MEMLOCK: %ld\n", err);
		return 7;
	}
	if (ho_alloc(pid, HO_MEMLOCK) || ho_alloc(pid, 0))
		return 8;
	return 0;
}

long ho_memcg_current(const char *dir)
{
	return cgroup_read(dir, "memory.current", NULL);
}

/* Where cgroup2 is mounted already, if it is. */
static bool ho_memcg_find(char *mnt, size_t len)
{
	char dir[HO_MEMCG_PATH], type[64];
	bool found = false;
	FILE *f;

	f = fopen("/proc/self/mounts", "r");
	if (!f)
		return false;
	while (!found &&
	       fscanf(f, "%*s %255s %63s %*[^\n]", dir, type) == 2)
		found = !strcmp(type, "cgroup2");
	fclose(f);
	if (found)
		snprintf(mnt, len, "%s", dir);
	return found;
}

void ho_memcg_init(struct ho_memcg *mc)
{
	int i;

	memset(mc, 0, sizeof(*mc));
	for (i = 0; i < HO_MEMCG_TRACERS; i++) {
		mc->cmd[i] = -1;
		mc->ans[i] = -1;
	}
	mc->tol = sysconf(_SC_NPROCESSORS_CONF) * HO_MEMCG_STOCK +
		  HO_MEMCG_SLACK;
}

static int ho_memcg_mount(struct ho_memcg *mc)
{
	int err;

	if (ho_memcg_find(mc->mnt, sizeof(mc->mnt)))
		return 0;
	snprintf(mc->mnt, sizeof(mc->mnt), "/tmp/ptrace_bts_memcg.XXXXXX");
	if (!mkdtemp(mc->mnt)) {
		mc->mnt[0] = 0;
		return -1;
	}
	if (mount("cgroup2", mc->mnt, "cgroup2", 0, NULL)) {
		err = errno;
		rmdir(mc->mnt);
		mc->mnt[0] = 0;
		errno = err;
		return err == ENODEV ? HO_MEMCG_NO_CGROUP2 : -1;
	}
	mc->mounted = true;
	return 0;
}

/* 0, HO_MEMCG_NO_* when the kernel cannot, -1 on an error (errno). */
int ho_memcg_setup(struct ho_memcg *mc)
{
	int err = ho_memcg_mount(mc);

	if (err)
		return err;
	if (!cgroup_lists(mc->mnt, "cgroup.controllers", "memory"))
		return HO_MEMCG_NO_MEMCG;
	if (!cgroup_lists(mc->mnt, "cgroup.subtree_control", "memory")) {
		if (cgroup_write(mc->mnt, "cgroup.subtree_control", "+memory"))
			return -1;
		mc->enabled = true;
	}
	snprintf(mc->top, sizeof(mc->top), "%s/ptrace_bts_memcg.%d", mc->mnt,
		 getpid());
	if (mkdir(mc->top, 0755)) {
		mc->top[0] = 0;
		return -1;
	}
	/* Both children get memory.* files: no process lives in top. */
	if (cgroup_write(mc->top, "cgroup.subtree_control", "+memory"))
		return -1;
	snprintf(mc->tracers, sizeof(mc->tracers), "%s/tracers", mc->top);
	if (mkdir(mc->tracers, 0755)) {
		mc->tracers[0] = 0;
		return -1;
	}
	snprintf(mc->tracees, sizeof(mc->tracees), "%s/tracees", mc->top);
	if (mkdir(mc->tracees, 0755)) {
		mc->tracees[0] = 0;
		return -1;
	}
	return 0;
}

/* After ho_memcg_stop(): the cgroups are empty. */
void ho_memcg_cleanup(struct ho_memcg *mc)
{
	if (mc->tracees[0])
		rmdir(mc->tracees);
	if (mc->tracers[0])
		rmdir(mc->tracers);
	if (mc->top[0])
		rmdir(mc->top);
	if (mc->enabled)
		cgroup_write(mc->mnt, "cgroup.subtree_control", "-memory");
	if (mc->mounted) {
		umount2(mc->mnt, MNT_DETACH);
		rmdir(mc->mnt);
	}
}

/* Move the calling process into cgroup @dir. */
static int ho_memcg_join(const char *dir)
{
	return cgroup_write(dir, "cgroup.procs", "0");
}

/* In the tracer: a tracee of its own in the sibling cgroup, stopped. */
static pid_t ho_memcg_tracee(const struct ho_memcg *mc)
{
	int p[2], status;
	char ok = 0;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		ok = !ho_memcg_join(mc->tracees);
		if (write(p[1], &ok, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	/* Ready once in its cgroup: the baseline has everyone where they stay. */
	if (pid > 0 && (read(p[0], &ok, 1) != 1 || !ok ||
			sys_ptrace(PTRACE_SEIZE, pid, NULL, PTRACE_O_EXITKILL) ||
			sys_ptrace(PTRACE_INTERRUPT, pid, NULL, 0) ||
			waitpid(pid, &status, __WALL) != pid ||
			!WIFSTOPPED(status))) {
		/* Nothing else would end it: the reaper waits for everyone. */
		kill(pid, SIGKILL);
		pid = -1;
	}
	close(p[0]);
	return pid;
}

/*
 * A tracer in the limited cgroup, root with no RLIMIT_MEMLOCK: only the
 * cgroup can refuse it. It answers the supervisor until its pipe closes.
 */
static void ho_memcg_tracer(const struct ho_memcg *mc, int cmd, int ans)
{
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	int err = 0, status;
	pid_t pid = -1;
	char c;

	if (ho_memcg_join(mc->tracers))
		err = 1;
	else if (setrlimit(RLIMIT_MEMLOCK, &rl))
		err = 2;
	else
		pid = ho_memcg_tracee(mc);
	if (!err && pid < 0)
		err = 3;
	if (write(ans, &err, sizeof(err)) != sizeof(err) || err)
		_exit(err);
	while (read(cmd, &c, 1) == 1) {
		switch (c) {
		case HO_MEMCG_ALLOC:
			err = -ho_alloc(pid, HO_MEMCG_BUF);
			break;
		case HO_MEMCG_FREE:
			err = -ho_alloc(pid, 0);
			break;
		default:
			err = waitpid(pid, &status, WNOHANG | __WALL) ? ESRCH : 0;
			break;
		}
		if (write(ans, &err, sizeof(err)) != sizeof(err))
			break;
	}
	_exit(0);
}

/* The tracer's answer: 0 or an errno (its step, once started); -1 if gone. */
static int ho_memcg_answer(struct ho_memcg *mc, int i)
{
	int err;

	if (read(mc->ans[i], &err, sizeof(err)) != sizeof(err))
		return -1;
	return err;
}

int ho_memcg_ask(struct ho_memcg *mc, int i, char cmd)
{
	if (write(mc->cmd[i], &cmd, 1) != 1)
		return -1;
	return ho_memcg_answer(mc, i);
}

int ho_memcg_start(struct ho_memcg *mc, int i)
{
	int cmd[2], ans[2], j;

	if (pipe(cmd))
		return -1;
	if (pipe(ans)) {
		close(cmd[0]);
		close(cmd[1]);
		return -1;
	}
	mc->pid[i] = fork();
	if (mc->pid[i] == 0) {
		/* A tracer sees EOF only when no other one holds its pipe. */
		for (j = 0; j < i; j++) {
			close(mc->cmd[j]);
			close(mc->ans[j]);
		}
		close(cmd[1]);
		close(ans[0]);
		ho_memcg_tracer(mc, cmd[0], ans[1]);
	}
	close(cmd[0]);
	close(ans[1]);
	mc->cmd[i] = cmd[1];
	mc->ans[i] = ans[0];
	return mc->pid[i] < 0 ? -1 : ho_memcg_answer(mc, i);
}

/* Close the pipes, so every tracer exits, and reap whoever is left. */
void ho_memcg_stop(struct ho_memcg *mc)
{
	int i;

	for (i = 0; i < HO_MEMCG_TRACERS; i++) {
		if (mc->cmd[i] >= 0)
			close(mc->cmd[i]);
		if (mc->ans[i] >= 0)
			close(mc->ans[i]);
		mc->cmd[i] = -1;
		mc->ans[i] = -1;
	}
	while (waitpid(-1, NULL, __WALL) > 0)
		;
}

/* memory.current of @dir once at most @bytes, or after the refund wait. */
long ho_memcg_settle(const char *dir, long bytes)
{
	long deadline = ho_now_ms() + HO_REFUND_WAIT_MS, cur;

	while ((cur = ho_memcg_current(dir)) > bytes && ho_now_ms() < deadline)
		usleep(100000);
	return cur;
}

/* Tracer @i asks for a buffer: its answer, and what its cgroup counted. */
int ho_memcg_charge(struct ho_memcg *mc, int i, long *charged,
		    long *vmalloc)
{
	long cur = ho_memcg_current(mc->tracers);
	long vm = cgroup_read(mc->tracers, "memory.stat", "vmalloc");
	int err = ho_memcg_ask(mc, i, HO_MEMCG_ALLOC);

	*charged = ho_memcg_current(mc->tracers) - cur;
	*vmalloc = cgroup_read(mc->tracers, "memory.stat", "vmalloc") - vm;
	ksft_print_msg("memcg: tracer %d: %s, memory.current %+ld KiB, vmalloc %+ld KiB\n",
		       i, err ? strerror(err) : "granted", *charged >> 10,
		       *vmalloc >> 10);
	return err;
}
