// SPDX-License-Identifier: GPL-2.0
/*
 * ptrace_bts_hostile: the tracers and their tracees, the watchdog, CPU
 * hotplug, fault injection aimed at the series' text, the fuzzer's run,
 * and the kmemleak scan.
 */
#define _GNU_SOURCE
#include "ptrace_bts_hostile.h"

/* ---- the tracers ---- */

/**
 * struct ho_tracer - a tracer's tracees
 * @slot:	what the supervisor sees of it
 * @tids:	the tracees: its own, their children and threads
 * @child:	which of @tids were attached automatically
 * @n:		number of @tids
 */
struct ho_tracer {
	struct ho_slot	*slot;
	pid_t		tids[HO_TRACEES * 4];
	bool		child[HO_TRACEES * 4];
	int		n;
};

static void ho_publish(struct ho_tracer *t)
{
	int i;

	for (i = 0; i < t->n; i++)
		atomic_store(&t->slot->tids[i], t->tids[i]);
	atomic_store(&t->slot->n, t->n);
}

static int ho_find(struct ho_tracer *t, pid_t tid)
{
	int i;

	for (i = 0; i < t->n; i++)
		if (t->tids[i] == tid)
			return i;
	return -1;
}

static void ho_forget(struct ho_tracer *t, pid_t tid)
{
	int i = ho_find(t, tid);

	if (i < 0)
		return;
	t->n--;
	t->tids[i] = t->tids[t->n];
	t->child[i] = t->child[t->n];
	ho_publish(t);
}

static void ho_adopt(struct ho_tracer *t, pid_t tid, bool child)
{
	if (ho_find(t, tid) >= 0)
		return;
	/* Too many: it dies at its first stop, or now. */
	if (t->n == (int)ARRAY_SIZE(t->tids)) {
		kill(tid, SIGKILL);
		return;
	}
	t->tids[t->n] = tid;
	t->child[t->n] = child;
	t->n++;
	ho_publish(t);
	if (child)
		atomic_fetch_add(&ho->adopted, 1);
}

/* Random requests on a tracee; counted apart for an attached child. */
static void ho_some(struct ho_tracer *t, pid_t tid, int n)
{
	int i = ho_find(t, tid);

	if (i >= 0 && t->child[i])
		atomic_fetch_add(&ho->child_ops, n);
	while (n--)
		ho_one(tid);
}

static long ho_options(void)
{
	return PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
	       PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC |
	       (ho_below(2) ? PTRACE_O_EXITKILL : 0) |
	       (ho_below(2) ? PTRACE_O_TRACEEXIT : 0);
}

static void ho_spawn(struct ho_tracer *t)
{
	char arg_seed[32], arg_end[32];
	pid_t pid;

	snprintf(arg_seed, sizeof(arg_seed), "%llu",
		 (unsigned long long)ho_rand());
	snprintf(arg_end, sizeof(arg_end), "%ld",
		 ho_now_ms() + (long)ho_below(HO_TRACEE_LIFE_MS));
	pid = fork();
	if (pid == 0) {
		execl(ho_self, ho_self, "--tracee", arg_seed, arg_end, NULL);
		_exit(HO_EXEC_FAILED);
	}
	if (pid < 0)
		return;
	if (sys_ptrace(PTRACE_SEIZE, pid, NULL, ho_options())) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return;
	}
	ho_adopt(t, pid, false);
}

/* Resume a stopped tracee: the signal it stopped for, none, or another. */
static void ho_resume(pid_t tid, int sig)
{
	int inject = sig;

	switch (ho_below(6)) {
	case 0:
		inject = 0;
		break;
	case 1:
		inject = ho_below(2) ? SIGUSR1 : 65 + (int)ho_below(100);
		break;
	}
	if (sys_ptrace(PTRACE_CONT, tid, NULL, inject))
		sys_ptrace(PTRACE_CONT, tid, NULL, 0);
}

/*
 * A fork, vfork, clone or exec event: the new child or thread is attached
 * already and gets requests of its own, maybe before its first stop
 * (ESRCH). An exec by a thread other than the leader takes the leader's
 * pid: the thread's own id is gone.
 */
static void ho_event(struct ho_tracer *t, pid_t tid, int event)
{
	unsigned long msg;

	if (sys_ptrace(PTRACE_GETEVENTMSG, tid, NULL, (unsigned long)&msg))
		return;
	switch (event) {
	case PTRACE_EVENT_FORK:
		atomic_fetch_add(&ho->forks, 1);
		break;
	case PTRACE_EVENT_VFORK:
		atomic_fetch_add(&ho->vforks, 1);
		break;
	case PTRACE_EVENT_CLONE:
		atomic_fetch_add(&ho->clones, 1);
		break;
	case PTRACE_EVENT_EXEC:
		atomic_fetch_add(&ho->execs, 1);
		if ((pid_t)msg != tid)
			ho_forget(t, msg);
		return;
	default:
		return;
	}
	ho_adopt(t, msg, true);
	if (ho_below(2))
		ho_some(t, msg, 1);
}

/* A tracee stopped: requests on it, maybe detach, then let it go on. */
static void ho_stopped(struct ho_tracer *t, pid_t tid, int status)
{
	int event = status >> 16, sig = WSTOPSIG(status);

	atomic_fetch_add(&ho->stops, 1);
	if (event)
		ho_event(t, tid, event);
	/* Group stops, events and our interrupts deliver no signal. */
	if (event || sig == SIGTRAP || sig == SIGSTOP)
		sig = 0;
	ho_some(t, tid, 1 + ho_below(4));
	if (!ho_below(25)) {
		atomic_fetch_add(&ho->detaches, 1);
		sys_ptrace(PTRACE_DETACH, tid, NULL, ho_below(2) ? sig : 0);
		ho_forget(t, tid);
		return;
	}
	ho_resume(tid, sig);
	/* And once more while it runs: ESRCH, or it stopped again. */
	if (!ho_below(4))
		ho_some(t, tid, 1);
}

/*
 * Handles the next state change of any tracee; every stop reported is
 * resumed or detached, none is dropped. Returns the tracee, 0 when none
 * is pending (@block false), -1 when there are none left.
 */
static pid_t ho_wait(struct ho_tracer *t, bool block)
{
	int status;
	pid_t tid;

	tid = waitpid(-1, &status, __WALL | (block ? 0 : WNOHANG));
	if (tid < 0) {
		if (errno == ECHILD) {
			t->n = 0;
			ho_publish(t);
		}
		return -1;
	}
	if (!tid)
		return 0;
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		atomic_fetch_add(&ho->exits, 1);
		if (WIFEXITED(status) && WEXITSTATUS(status) == HO_EXEC_FAILED) {
			atomic_fetch_add(&ho->exec_failed, 1);
			atomic_fetch_add(&ho->bad, 1);
			fprintf(stderr, "# hostile: tracee %d could not exec %s\n",
				tid, ho_self);
		}
		ho_forget(t, tid);
	} else if (WIFSTOPPED(status)) {
		ho_stopped(t, tid, status);
	}
	return tid;
}

static void ho_tracer(uint64_t seed, int nr, struct ho_slot *slot)
{
	struct ho_tracer t = { .slot = slot };
	pid_t tid;
	int i;

	ho_srand(seed, 1000 + nr);
	ho_maps();
	while (atomic_load(&ho->ops) < ho->limit) {
		if (t.n < HO_TRACEES && (t.n < 2 || !ho_below(8)))
			ho_spawn(&t);
		if (!t.n)
			continue;
		tid = t.tids[ho_below(t.n)];
		if (sys_ptrace(PTRACE_INTERRUPT, tid, NULL, 0)) {
			/* Gone, maybe a thread that exec'ed: reap it. */
			ho_request(PTRACE_BTS_SIZE, tid, NULL, 0);
			ho_forget(&t, tid);
			continue;
		}
		/* The supervisor's watchdog looks at this. */
		atomic_store(&slot->interrupted, tid);
		atomic_store(&slot->waiting, ho_now_ms());
		ho_wait(&t, true);
		atomic_store(&slot->waiting, 0);
		for (i = 0; i < 3 && ho_wait(&t, false) > 0; i++)
			;
	}
	/* Done: the tracees die with us or run out their time. */
	for (i = 0; i < t.n; i++)
		kill(t.tids[i], SIGKILL);
	_exit(0);
}

/* ---- the run ---- */

/*
 * Become the unprivileged tracer uid with a small RLIMIT_MEMLOCK and no
 * capabilities, as an ordinary debugger is.
 */
int ho_unprivileged(void)
{
	struct rlimit rl = { HO_MEMLOCK, HO_MEMLOCK };

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return -1;
	if (setgid(HO_UID) || setuid(HO_UID))
		return -1;
	return prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}

static pid_t ho_start_tracer(uint64_t seed, int nr, struct ho_slot *slot)
{
	pid_t pid;

	atomic_store(&slot->waiting, 0);
	atomic_store(&slot->n, 0);
	pid = fork();
	if (pid) {
		atomic_store(&slot->pid, pid > 0 ? pid : 0);
		return pid;
	}
	/* Fault injection for this process and what it forks. */
	ho_write("/proc/self/make-it-fail", "1");
	if (ho_unprivileged())
		_exit(2);
	ho_tracer(seed, nr, slot);
	return 0;
}

/* Where a task is: its state, wait channel and kernel stack. */
static void ho_show(const char *who, pid_t pid)
{
	char path[64], line[256], wchan[64] = "", state[256] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/wchan", pid);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(wchan, sizeof(wchan), f))
			wchan[0] = 0;
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "State:", 6))
			snprintf(state, sizeof(state), "%s", line + 7);
	if (f)
		fclose(f);
	state[strcspn(state, "\n")] = 0;
	ksft_print_msg("watchdog: %s %d: %s, wchan %s\n", who, pid,
		       f ? state : "gone", wchan);
	snprintf(path, sizeof(path), "/proc/%d/stack", pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		ksft_print_msg("watchdog:   %s", line);
	if (f)
		fclose(f);
}

/* How long the tracer of @slot has waited for a stop, in ms; 0 if not. */
static long ho_waited(struct ho_slot *slot)
{
	long since = atomic_load(&slot->waiting);

	return since ? ho_now_ms() - since : 0;
}

/*
 * A tracer stuck waiting for a stop after a PTRACE_INTERRUPT that
 * succeeded: show where it and its tracees are, then kill it.
 */
static void ho_watchdog(struct ho_slot *slot)
{
	pid_t pid = atomic_load(&slot->pid);
	int i, n;

	if (!pid || ho_waited(slot) < HO_HANG_S * 1000L)
		return;
	ksft_print_msg("watchdog: tracer %d waited %ld ms after PTRACE_INTERRUPT of %d\n",
		       pid, ho_waited(slot), atomic_load(&slot->interrupted));
	ho_show("tracer", pid);
	n = atomic_load(&slot->n);
	for (i = 0; i < n && i < (int)ARRAY_SIZE(slot->tids); i++)
		ho_show("tracee", atomic_load(&slot->tids[i]));
	atomic_store(&slot->waiting, 0);
	if (!kill(pid, SIGKILL)) {
		atomic_fetch_add(&ho->hangs, 1);
		atomic_fetch_add(&ho->bad, 1);
	}
}

static pid_t ho_start_hotplug(void)
{
	char state[4] = "1";
	pid_t pid;

	if (access(HO_CPU1, W_OK))
		return 0;
	pid = fork();
	if (pid)
		return pid;
	while (!atomic_load(&ho->stop)) {
		usleep(HO_HOTPLUG_EVERY_MS * 1000);
		state[0] = state[0] == '1' ? '0' : '1';
		if (!ho_write(HO_CPU1, state) && state[0] == '1')
			atomic_fetch_add(&ho->toggles, 1);
	}
	ho_write(HO_CPU1, "1");
	_exit(0);
}

/*
 * The stack trace filter's range: the text of ds.o, ptrace_bts.o and
 * ds_emulate.o, linked in that order and next to each other
 * (arch/x86/kernel/Makefile). Their functions are named ds_* and
 * ptrace_bts_*, but the compiler places copies of static inline helpers
 * (mmgrab, lock_is_held, ...) and KASAN's constructors among them, so the
 * range is the cluster of those names around ptrace_bts_request, with at
 * most HO_FOREIGN_RUN other symbols in a row inside. It may take in the
 * KUnit suites linked next (ds_hw_*, ds_stress_*): harmless, the filter is
 * also by task. One function of each file must be inside.
 */
static bool ho_ours(const char *name)
{
	if (!strncmp(name, "__pfx_", 6))
		name += 6;
	return !strncmp(name, "ds_", 3) || !strncmp(name, "ptrace_bts_", 11);
}

static const char *const ho_anchors[] = {
	"ds_request_bts_task",		/* ds.c */
	"ptrace_bts_request",		/* ptrace_bts.c */
	"ds_emu_exit_thread",		/* ds_emulate.c */
};

#define HO_MAX_SYMS	200000

struct ho_sym {
	unsigned long	addr;
	bool		ours;
	int		anchor;		/* index in ho_anchors, or -1 */
};

/* The text symbols, in address order; returns their number. */
static int ho_text_syms(struct ho_sym *syms)
{
	char type, name[256], line[512];
	unsigned long addr;
	int n = 0, i;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return 0;
	while (n < HO_MAX_SYMS && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx %c %255s", &addr, &type, name) != 3 ||
		    (type != 't' && type != 'T'))
			continue;
		if (n && addr < syms[n - 1].addr)
			break;	/* not sorted: give up */
		syms[n].addr = addr;
		syms[n].ours = ho_ours(name);
		syms[n].anchor = -1;
		for (i = 0; i < (int)ARRAY_SIZE(ho_anchors); i++)
			if (!strcmp(name, ho_anchors[i]))
				syms[n].anchor = i;
		n++;
	}
	fclose(f);
	return n;
}

static int ho_text_range(unsigned long *start, unsigned long *end)
{
	int n, i, lo, hi, mid = -1, covered = 0;
	struct ho_sym *syms;

	*start = *end = 0;
	syms = calloc(HO_MAX_SYMS, sizeof(*syms));
	if (!syms)
		return -1;
	n = ho_text_syms(syms);
	for (i = 0; i < n; i++)
		if (syms[i].anchor == 1)
			mid = i;
	if (mid < 0) {
		free(syms);
		return -1;
	}
	for (lo = mid, i = mid; i >= 0 && lo - i <= HO_FOREIGN_RUN; i--)
		if (syms[i].ours)
			lo = i;
	for (hi = mid, i = mid; i < n && i - hi <= HO_FOREIGN_RUN; i++)
		if (syms[i].ours)
			hi = i;
	for (i = lo; i <= hi; i++)
		if (syms[i].anchor >= 0)
			covered |= 1 << syms[i].anchor;
	*start = syms[lo].addr;
	*end = hi + 1 < n ? syms[hi + 1].addr : syms[hi].addr + 1;
	free(syms);
	for (i = 0; i < (int)ARRAY_SIZE(ho_anchors); i++)
		if (!(covered & 1 << i))
			ksft_print_msg("fault range misses %s\n", ho_anchors[i]);
	return covered == (1 << ARRAY_SIZE(ho_anchors)) - 1 ? 0 : -1;
}

static const char *const ho_fail_attrs[] = { "failslab", "fail_page_alloc" };

static void ho_fault_attr(const char *attr, const char *file, const char *val)
{
	char path[128];

	snprintf(path, sizeof(path), HO_DEBUGFS "/%s/%s", attr, file);
	ho_write(path, val);
}

/* Aim both at the series' code; returns 0 when set up. */
static int ho_faults_on(unsigned long start, unsigned long end)
{
	char s[32], e[32];
	unsigned int i;

	snprintf(s, sizeof(s), "%lu", start);
	snprintf(e, sizeof(e), "%lu", end);
	for (i = 0; i < 2; i++) {
		const char *a = ho_fail_attrs[i];

		ho_fault_attr(a, "probability", "0");
		ho_fault_attr(a, "verbose", "0");
		ho_fault_attr(a, "task-filter", "Y");
		ho_fault_attr(a, "ignore-gfp-wait", "N");
		/*
		 * fail_page_alloc: vmalloc's pages are __GFP_HIGHMEM and
		 * order 0, both ignored by default.
		 */
		ho_fault_attr(a, "ignore-gfp-highmem", "N");
		ho_fault_attr(a, "min-order", "0");
		ho_fault_attr(a, "interval", "1");
		ho_fault_attr(a, "space", "0");
		ho_fault_attr(a, "stacktrace-depth", "32");
		ho_fault_attr(a, "require-start", s);
		ho_fault_attr(a, "require-end", e);
		ho_fault_attr(a, "times", HO_FAIL_TIMES);
		ho_fault_attr(a, "probability", HO_FAIL_PROBABILITY);
	}
	return 0;
}

static long ho_faults_left(const char *attr)
{
	char path[128], buf[32] = "";
	int fd;

	snprintf(path, sizeof(path), HO_DEBUGFS "/%s/times", attr);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	if (read(fd, buf, sizeof(buf) - 1) < 0)
		buf[0] = 0;
	close(fd);
	return strtol(buf, NULL, 0);
}

static void ho_faults_off(void)
{
	unsigned int i;

	for (i = 0; i < 2; i++)
		ho_fault_attr(ho_fail_attrs[i], "probability", "0");
}

/* Runs the fuzzer; returns the number of bad answers. */
long ho_run(uint64_t seed, long ops)
{
	pid_t tracers[HO_TRACERS], hotplug;
	unsigned long start = 0, end = 0;
	long faults[2], last_kill;
	int i, alive, status, nr = 0;

	ho = mmap(NULL, sizeof(*ho), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ho == MAP_FAILED)
		return 1;
	memset(ho, 0, sizeof(*ho));
	ho->limit = ops;
	ho_srand(seed, 0);

	if (ho_text_range(&start, &end)) {
		ksft_print_msg("%s\n",
			       "the series' text is not in /proc/kallsyms: no faults");
		start = 0;
	} else {
		ksft_print_msg("faults aimed at %#lx-%#lx (ds.c, ptrace_bts.c, ds_emulate.c)\n",
			       start, end);
	}
	if (start && !access(HO_DEBUGFS "/failslab", F_OK))
		ho_faults_on(start, end);
	faults[0] = ho_faults_left("failslab");
	faults[1] = ho_faults_left("fail_page_alloc");

	hotplug = ho_start_hotplug();
	for (i = 0; i < HO_TRACERS; i++)
		tracers[i] = ho_start_tracer(seed, nr++, &ho->slots[i]);
	last_kill = ho_now_ms();
	alive = HO_TRACERS;
	while (alive) {
		usleep(20000);
		/*
		 * Kill one in the middle of whatever it does; start another.
		 * Not one that has waited long for a stop: the watchdog
		 * judges that one.
		 */
		if (ho_now_ms() - last_kill > HO_KILL_EVERY_MS &&
		    atomic_load(&ho->ops) < ops) {
			last_kill = ho_now_ms();
			i = ho_below(HO_TRACERS);
			if (tracers[i] > 0 &&
			    ho_waited(&ho->slots[i]) < HO_SUSPECT_MS &&
			    !kill(tracers[i], SIGKILL))
				atomic_fetch_add(&ho->kills, 1);
		}
		for (i = 0; i < HO_TRACERS; i++) {
			if (tracers[i] <= 0)
				continue;
			ho_watchdog(&ho->slots[i]);
			if (waitpid(tracers[i], &status, WNOHANG) != tracers[i])
				continue;
			if (WIFEXITED(status) && WEXITSTATUS(status)) {
				ksft_print_msg("tracer %d: exit status %d\n",
					       tracers[i], WEXITSTATUS(status));
				atomic_fetch_add(&ho->bad, 1);
			}
			atomic_store(&ho->slots[i].pid, 0);
			tracers[i] = atomic_load(&ho->ops) < ops ?
				     ho_start_tracer(seed, nr++,
						     &ho->slots[i]) : 0;
			if (!tracers[i])
				alive--;
		}
	}
	ho_faults_off();
	atomic_store(&ho->stop, 1);
	if (hotplug > 0)
		waitpid(hotplug, NULL, 0);

	ksft_print_msg("seed %llu: %ld operations, %ld stops\n",
		       (unsigned long long)seed, atomic_load(&ho->ops),
		       atomic_load(&ho->stops));
	ksft_print_msg("events: %ld fork, %ld vfork, %ld clone, %ld exec\n",
		       atomic_load(&ho->forks), atomic_load(&ho->vforks),
		       atomic_load(&ho->clones), atomic_load(&ho->execs));
	ksft_print_msg("%ld attached children and threads, %ld requests on them\n",
		       atomic_load(&ho->adopted), atomic_load(&ho->child_ops));
	ksft_print_msg("%ld tracee exits, %ld detaches, %d tracers, %ld killed\n",
		       atomic_load(&ho->exits), atomic_load(&ho->detaches), nr,
		       atomic_load(&ho->kills));
	ksft_print_msg("%ld CPU 1 toggles, %ld tracers stuck, %ld tracees that could not exec\n",
		       atomic_load(&ho->toggles), atomic_load(&ho->hangs),
		       atomic_load(&ho->exec_failed));
	ksft_print_msg("%ld buffers, %ld ENOMEM, injected: %ld slab, %ld page\n",
		       atomic_load(&ho->granted), atomic_load(&ho->enomem),
		       faults[0] < 0 ? -1 : faults[0] - ho_faults_left("failslab"),
		       faults[1] < 0 ? -1 :
		       faults[1] - ho_faults_left("fail_page_alloc"));
	return atomic_load(&ho->bad);
}

/* ---- kmemleak ---- */

/* Suspects naming the series' functions; the others are listed. */
int ho_kmemleak(int *others)
{
	char line[512], block[8192] = "";
	int ours = 0, fd;
	bool in = false;
	FILE *f;

	*others = 0;
	sleep(HO_KMEMLEAK_SETTLE_S);
	fd = open(HO_DEBUGFS "/kmemleak", O_WRONLY);
	if (fd < 0)
		return -1;
	if (write(fd, "scan", 4) != 4) {
		close(fd);
		return -1;
	}
	close(fd);
	f = fopen(HO_DEBUGFS "/kmemleak", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f) || in) {
		bool last = feof(f);

		if (!strncmp(line, "unreferenced object", 19) || last) {
			if (in) {
				if (strstr(block, " ds_") ||
				    strstr(block, " ptrace_bts_"))
					ours++;
				else
					(*others)++;
				fprintf(stderr, "# %s", block);
			}
			in = !last;
			block[0] = 0;
			if (last)
				break;
		}
		if (in && strlen(block) + strlen(line) < sizeof(block))
			strcat(block, line);
	}
	fclose(f);
	return ours;
}
