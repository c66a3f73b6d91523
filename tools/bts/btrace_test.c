// SPDX-License-Identifier: GPL-2.0
/*
 * btrace_test: btrace on known programs, each output checked against what
 * the program is known to do, or against another view of the same run.
 *
 *   btrace_test [suffix]
 *
 * Runs btrace, bts-demo and bts-crash from PATH; with a suffix, or as
 * btrace_test_32, btrace_32, bts-demo_32 and bts-crash_32: the 32-bit
 * builds, compat ones on a 64-bit kernel.
 * Needs a kernel with PTRACE_BTS_* and, for the core dump case, root (it
 * sets /proc/sys/kernel/core_pattern, and restores it). Prints TAP.
 *
 * The oracles: the program untraced (its output and how it ends), the
 * calls bts-demo makes, the last branches of a crash as --on-crash printed
 * them live and as --core reads them from the core dump of the same run,
 * a JSON parser, and the record count btrace reports.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define OUT_MAX		(8 << 20)
#define RUN_TIMEOUT_S	120
#define CORE_DIR	"/tmp/btrace_test"
#define CORE_PATTERN	"/proc/sys/kernel/core_pattern"

struct run {
	char *out;	/* stdout, NUL-terminated */
	char *err;	/* stderr */
	int status;	/* wait status */
};

static const char *suffix = "";
static int failed, ntest;

static void tap(bool ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	ntest++;
	printf("%sok %d btrace.%s\n", ok ? "" : "not ", ntest, name);
	if (!ok) {
		failed++;
		va_start(ap, fmt);
		printf("# ");
		vprintf(fmt, ap);
		printf("\n");
		va_end(ap);
	}
	fflush(stdout);
}

static char *slurp(int fd)
{
	char *buf = calloc(1, OUT_MAX + 1);
	size_t len = 0;
	ssize_t n;

	if (!buf)
		exit(2);
	lseek(fd, 0, SEEK_SET);
	while (len < OUT_MAX && (n = read(fd, buf + len, OUT_MAX - len)) > 0)
		len += n;
	close(fd);
	return buf;
}

/* Run @argv (NULL-terminated) to its end; stdout and stderr kept. */
static void run(struct run *r, char *const argv[])
{
	char out[] = "/tmp/btrace_test.out.XXXXXX";
	char err[] = "/tmp/btrace_test.err.XXXXXX";
	int fo = mkstemp(out), fe = mkstemp(err);
	pid_t pid;

	if (fo < 0 || fe < 0)
		exit(2);
	unlink(out);
	unlink(err);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(fo, 1);
		dup2(fe, 2);
		alarm(RUN_TIMEOUT_S);
		execvp(argv[0], argv);
		_exit(127);
	}
	waitpid(pid, &r->status, 0);
	r->out = slurp(fo);
	r->err = slurp(fe);
}

static void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

static char *prog(const char *name)
{
	static char buf[8][64];
	static int i;

	i = (i + 1) % 8;
	snprintf(buf[i], sizeof(buf[i]), "%s%s", name, suffix);
	return buf[i];
}

static bool killed_by(int status, int sig)
{
	return WIFSIGNALED(status) && WTERMSIG(status) == sig;
}

static bool exited(int status, int code)
{
	return WIFEXITED(status) && WEXITSTATUS(status) == code;
}

/* The @n-th line (0 first) of @s that starts with @prefix, or NULL. */
static char *line_with(char *s, const char *needle, int n)
{
	char *p;

	for (p = s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, needle, strlen(needle)) && !n--)
			return p;
	return NULL;
}

/* The lines of @s, in place. */
static size_t split_lines(char *s, char **lines, size_t max)
{
	size_t n = 0;
	char *save;

	for (char *l = strtok_r(s, "\n", &save); l && n < max;
	     l = strtok_r(NULL, "\n", &save))
		lines[n++] = l;
	return n;
}

/* ---- static program: symbols, the program untraced ---- */

static void test_static(void)
{
	char *argv[] = { prog("btrace"), "-b", "main", prog("bts-demo"),
			 NULL };
	char *plain[] = { prog("bts-demo"), NULL };
	struct run r, u;

	run(&u, plain);
	run(&r, argv);
	tap(exited(r.status, 0) && exited(u.status, 0) &&
	    strstr(r.out, u.out) && strstr(r.out, "<fact+0x0>") &&
	    strstr(r.out, "<main+") && !strstr(r.err, "lost"),
	    "static_symbols", "status %#x/%#x, stderr: %.200s", r.status,
	    u.status, r.err);
	run_free(&r);
	run_free(&u);
}

/* ---- PIE and shared objects; a crash shown, its signal kept ---- */

static void test_pie_crash(void)
{
	char *argv[] = { prog("btrace"), "-b", "main", prog("bts-crash"),
			 NULL };
	char *plain[] = { prog("bts-crash"), NULL };
	struct run r, u;
	char *sig;

	run(&u, plain);
	run(&r, argv);
	tap(killed_by(u.status, SIGSEGV) && killed_by(r.status, SIGSEGV),
	    "crash_signal_kept", "status %#x, untraced %#x", r.status,
	    u.status);
	/* The comparator the PIE gave libc's qsort(), called from libc. */
	tap(strstr(r.out, "<by_value+0x0>") && strstr(r.out, "<qsort") &&
	    strstr(r.out, "<fill+0x0>"), "pie_shared_symbols", "%.300s",
	    r.out);
	sig = line_with(r.out, "[", 0);
	tap(sig && strstr(sig, "] SIGSEGV at 0x") && strstr(sig, "500 <?>") &&
	    strstr(sig, ", address 0x") && !line_with(r.out, "[", 1),
	    "crash_shown", "%.200s", sig ?: r.out);
	run_free(&r);
	run_free(&u);
}

/* A signal before the breakpoint: delivered, and the end is the same. */
static void test_begin_never_reached(void)
{
	char *argv[] = { prog("btrace"), "-b", "print_sum", prog("bts-crash"),
			 NULL };
	struct run r;

	run(&r, argv);
	tap(killed_by(r.status, SIGSEGV), "begin_not_reached",
	    "status %#x: %.200s", r.status, r.err);
	run_free(&r);
}

/* ---- --calls: bts-demo's calls, known ---- */

static void test_calls(void)
{
	static const char *const want[] = {
		"main", "  is_odd", "main", "  square", "main", "  is_odd",
		"main", "  triple", "main", "  is_odd", "main", "  square",
		"main", "  fact", "    fact", "      fact", "    fact",
		"  fact", "main",
	};
	char *argv[] = { prog("btrace"), "--calls", "-b", "main",
			 prog("bts-demo"), NULL };
	char *lines[64];
	struct run r;
	size_t n, i;
	bool ok;

	run(&r, argv);
	n = split_lines(r.out, lines, 64);
	/* The program's own line, wherever it fell among btrace's. */
	for (i = 0; i < n; i++)
		if (!strncmp(lines[i], "bts-demo:", 9))
			memmove(&lines[i], &lines[i + 1],
				(--n - i) * sizeof(*lines));
	ok = exited(r.status, 0) && n > sizeof(want) / sizeof(*want);
	for (i = 0; ok && i < sizeof(want) / sizeof(*want); i++)
		ok = !strcmp(lines[i], want[i]);
	tap(ok, "calls", "line %zu: '%s', want '%s'", i ? i - 1 : 0,
	    i && i <= n ? lines[i - 1] : "", i ? want[i - 1] : "");
	run_free(&r);
}

/* ---- --json, read by a parser ---- */

static const char *json_value(const char *p);

static const char *json_ws(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

static const char *json_string(const char *p)
{
	if (*p++ != '"')
		return NULL;
	for (; *p != '"'; p++) {
		if (!*p || (unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\') {
			p++;
			if (*p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!isxdigit((unsigned char)p[i]))
						return NULL;
				p += 4;
			} else if (!strchr("\"\\/bfnrt", *p)) {
				return NULL;
			}
		}
	}
	return p + 1;
}

static const char *json_number(const char *p)
{
	const char *s = p;

	if (*p == '-')
		p++;
	if (!isdigit((unsigned char)*p))
		return NULL;
	if (*p == '0' && isdigit((unsigned char)p[1]))
		return NULL;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p == '.') {
		if (!isdigit((unsigned char)*++p))
			return NULL;
		while (isdigit((unsigned char)*p))
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char)*p))
			return NULL;
		while (isdigit((unsigned char)*p))
			p++;
	}
	return p > s ? p : NULL;
}

static const char *json_members(const char *p, char open, char close,
				bool keys)
{
	if (*p++ != open)
		return NULL;
	p = json_ws(p);
	if (*p == close)
		return p + 1;
	for (;;) {
		if (keys) {
			p = json_string(json_ws(p));
			if (!p)
				return NULL;
			p = json_ws(p);
			if (*p++ != ':')
				return NULL;
		}
		p = json_value(json_ws(p));
		if (!p)
			return NULL;
		p = json_ws(p);
		if (*p == close)
			return p + 1;
		if (*p++ != ',')
			return NULL;
	}
}

static const char *json_value(const char *p)
{
	if (*p == '{')
		return json_members(p, '{', '}', true);
	if (*p == '[')
		return json_members(p, '[', ']', false);
	if (*p == '"')
		return json_string(p);
	if (!strncmp(p, "true", 4))
		return p + 4;
	if (!strncmp(p, "false", 5))
		return p + 5;
	if (!strncmp(p, "null", 4))
		return p + 4;
	return json_number(p);
}

static void test_json(void)
{
	char *argv[] = { prog("btrace"), "--json", "-b", "main",
			 prog("bts-demo"), NULL };
	unsigned long records = 0, branches = 0;
	char *lines[4096], *count, *called;
	const char *end = NULL;
	struct run r;
	size_t n, i;
	bool ok;

	run(&r, argv);
	/* Before the lines are split apart. */
	called = strstr(r.out, "\"to_sym\":\"fact+0x0\"");
	count = strstr(r.err, "btrace: ");
	count = count ? strstr(count + 1, "btrace: ") : NULL;
	if (count)
		records = strtoul(count + 8, NULL, 10);
	n = split_lines(r.out, lines, 4096);
	ok = exited(r.status, 0) && n < 4096;
	for (i = 0; ok && i < n; i++) {
		/* The program's own output line. */
		if (lines[i][0] != '{')
			continue;
		end = json_value(lines[i]);
		ok = end && !*json_ws(end) && strstr(lines[i], "\"tid\":") &&
		     strstr(lines[i], "\"type\":");
		if (strstr(lines[i], "\"type\":\"branch\""))
			branches++;
	}
	tap(ok && branches && branches == records && called, "json",
	    "%lu branch objects, %lu records; line %zu: %.200s", branches,
	    records, i, i && i <= n ? lines[i - 1] : "");
	run_free(&r);
}

/* ---- --on-crash, and the core dump of the same crash ---- */

static char saved_pattern[256];

static bool set_core_pattern(void)
{
	int fd = open(CORE_PATTERN, O_RDWR);
	const char *pat = CORE_DIR "/core.%p";
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, saved_pattern, sizeof(saved_pattern) - 1);
	saved_pattern[n > 0 ? n : 0] = 0;
	mkdir(CORE_DIR, 0700);
	n = pwrite(fd, pat, strlen(pat), 0);
	close(fd);
	return n > 0 && !setrlimit(RLIMIT_CORE, &rl);
}

static void restore_core_pattern(void)
{
	int fd = open(CORE_PATTERN, O_WRONLY);

	if (fd >= 0) {
		if (write(fd, saved_pattern, strlen(saved_pattern)) < 0)
			perror(CORE_PATTERN);
		close(fd);
	}
}

/* The one core file in CORE_DIR, its path in @path; false if not one. */
static bool find_core(char *path, size_t len)
{
	struct dirent *d;
	int n = 0;
	DIR *dir = opendir(CORE_DIR);

	if (!dir)
		return false;
	while ((d = readdir(dir)))
		if (!strncmp(d->d_name, "core.", 5) && ++n == 1)
			snprintf(path, len, CORE_DIR "/%s", d->d_name);
	closedir(dir);
	return n == 1;
}

static void test_on_crash_and_core(void)
{
	char *argv[] = { prog("btrace"), "--on-crash=6", prog("bts-crash"),
			 NULL };
	char *live[16], *dumped[4096], path[320];
	char *core_argv[] = { prog("btrace"), "--core", path, NULL };
	struct run r, c;
	size_t nl, nd, i;
	bool ok, cored = set_core_pattern();

	run(&r, argv);
	nl = split_lines(r.out, live, 16);
	/* Six branches, the signal; the last branch the corrupted call. */
	tap(killed_by(r.status, SIGSEGV) && nl == 7 &&
	    strstr(live[5], "<finish+") && strstr(live[5], "500 <?>") &&
	    strstr(live[6], "SIGSEGV at"), "on_crash",
	    "status %#x, %zu lines: %.300s", r.status, nl, nl ? live[0] : "");

	/* btrace ends killed by the signal, without a core of its own. */
	ok = cored && find_core(path, sizeof(path));
	if (!ok) {
		tap(false, "core", "no core dump (status %#x)", r.status);
		goto out;
	}
	run(&c, core_argv);
	unlink(path);
	nd = split_lines(c.out, dumped, 4096);
	/*
	 * The dump has the records since btrace's last drain, at least one:
	 * the last of them are the last printed live.
	 */
	ok = exited(c.status, 0) && nd >= 2 && nl == 7;
	for (i = 0; ok && i < 6 && i < nd - 1; i++)
		ok = !strcmp(dumped[nd - 2 - i], live[5 - i]);
	/* The signal and the IP; a core has no fault address. */
	ok = ok && !strncmp(dumped[nd - 1], live[6], strlen(dumped[nd - 1]));
	tap(ok, "core", "status %#x; %zu lines; %.200s", c.status, nd,
	    nd ? dumped[nd - 1] : c.err);
	run_free(&c);
out:
	restore_core_pattern();
	run_free(&r);
}

/* ---- -p: every thread of a running process ---- */

static void test_attach_threads(void)
{
	char *argv[] = { prog("btrace"), "-n", "2000", "-p", NULL, NULL };
	char pidbuf[16], *p;
	struct timespec ts = { 0, 300 * 1000 * 1000 };
	int status, tids = 0, tid1 = 0, tid;
	struct run r;
	pid_t pid;

	pid = fork();
	if (pid == 0) {
		execlp(prog("bts-crash"), prog("bts-crash"), "threads", "3",
		       NULL);
		_exit(127);
	}
	/* Its threads are running. */
	nanosleep(&ts, NULL);
	snprintf(pidbuf, sizeof(pidbuf), "%d", pid);
	argv[4] = pidbuf;
	run(&r, argv);
	waitpid(pid, &status, 0);
	/* Two threads ran worker_step(): their last records show it. */
	for (p = r.out; (p = strstr(p, "<worker_step+0x0>"));) {
		char *line = p;

		while (line > r.out && line[-1] != '\n')
			line--;
		tid = *line == '[' ? atoi(line + 1) : 0;
		if (tid && tid != tid1) {
			if (!tid1)
				tid1 = tid;
			tids++;
		}
		p = strchr(p, '\n') ?: p + 1;
		if (tids >= 2)
			break;
	}
	tap(exited(r.status, 0) && exited(status, 0) && tids >= 2,
	    "attach_threads", "status %#x/%#x, %d threads: %.300s", r.status,
	    status, tids, r.out);
	run_free(&r);
}

/* ---- an exec after the first: the new image is traced, not killed ---- */

static void test_exec(void)
{
	char cmd[64];
	char *argv[] = { prog("btrace"), "sh", "-c", cmd, NULL };
	struct run r;

	snprintf(cmd, sizeof(cmd), "exec %s", prog("bts-demo"));
	run(&r, argv);
	tap(exited(r.status, 0) && strstr(r.out, "bts-demo: result") &&
	    strstr(r.out, "<fact+0x0>"), "exec_wrapper", "status %#x: %.200s",
	    r.status, r.err);
	run_free(&r);
}

int main(int argc, char **argv)
{
	size_t len = strlen(argv[0]);

	if (argc > 1)
		suffix = argv[1];
	else if (len > 3 && !strcmp(argv[0] + len - 3, "_32"))
		suffix = "_32";
	printf("TAP version 13\n1..11\n");
	test_static();
	test_pie_crash();
	test_begin_never_reached();
	test_calls();
	test_json();
	test_on_crash_and_core();
	test_attach_threads();
	test_exec();
	printf("# %d of %d failed\n", failed, ntest);
	return failed ? 1 : 0;
}
