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
 * a JSON parser, the record count btrace reports, and the source lines
 * of their functions that bts-demo and bts-crash print (--lines) from the
 * compiler's __LINE__.
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
	int out_fd = mkstemp(out), err_fd = mkstemp(err);
	pid_t pid;

	if (out_fd < 0 || err_fd < 0)
		exit(2);
	unlink(out);
	unlink(err);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(out_fd, 1);
		dup2(err_fd, 2);
		alarm(RUN_TIMEOUT_S);
		execvp(argv[0], argv);
		_exit(127);
	}
	waitpid(pid, &r->status, 0);
	r->out = slurp(out_fd);
	r->err = slurp(err_fd);
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
	/* The functions; their " (file:line)" is the case "lines". */
	for (i = 0; i < n; i++)
		if (strstr(lines[i], " ("))
			*strstr(lines[i], " (") = 0;
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

/* ---- file:line from DWARF, against the programs' own __LINE__ ---- */

#define OWN_LINES_MAX	8

/* A function whose every instruction is on one line, and that line. */
struct own_line {
	char fn[64];
	char file[64];
	int line;
};

/* What "@prog --lines" prints, untraced: "<function> <file> <line>". */
static size_t own_lines(char *prog, struct own_line *l, size_t max)
{
	char *argv[] = { prog, "--lines", NULL };
	size_t n = 0;
	struct run r;
	char *p;

	run(&r, argv);
	for (p = r.out; exited(r.status, 0) && *p && n < max;
	     p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
		if (sscanf(p, "%63s %63s %d", l[n].fn, l[n].file,
			   &l[n].line) == 3)
			n++;
	run_free(&r);
	return n;
}

/*
 * The plain listing: every address in @l's function is "<fn+0x..>
 * (file:line)" with @l's file and line, and there is one at least. @bad
 * is where it is not.
 */
static bool plain_at(const char *out, const struct own_line *l,
		     const char **bad)
{
	char name[80], where[96];
	const char *p, *end;
	int n = 0;

	snprintf(name, sizeof(name), "<%.63s+0x", l->fn);
	snprintf(where, sizeof(where), "> (%.63s:%d)", l->file, l->line);
	for (p = strstr(out, name); p; p = strstr(p + 1, name), n++) {
		end = strchr(p, '>');
		if (!end || strncmp(end, where, strlen(where))) {
			*bad = p;
			return false;
		}
	}
	*bad = out;
	return n > 0;
}

/* --calls, its @n @lines: each of @l's function ends in " (file:line)". */
static bool calls_at(char **lines, size_t n, const struct own_line *l,
		     const char **bad)
{
	size_t i, len = strlen(l->fn);
	char want[160];
	int seen = 0;

	snprintf(want, sizeof(want), "%.63s (%.63s:%d)", l->fn, l->file, l->line);
	*bad = "no line";
	for (i = 0; i < n; i++) {
		const char *p = lines[i] + strspn(lines[i], " ");

		if (strncmp(p, l->fn, len) || (p[len] && p[len] != ' '))
			continue;
		*bad = lines[i];
		if (strcmp(p, want))
			return false;
		seen++;
	}
	return seen;
}

/*
 * --json: each "<key>_sym":"fn+0x.." is followed by "<key>_file", a path
 * whose last part is @l's file, and "<key>_line", @l's line.
 */
static bool json_at(const char *out, const struct own_line *l,
		    const char **bad)
{
	char sym[80], key[16], key2[16], path[256], end;
	const char *p, *q, *base;
	int line, n = 0;

	snprintf(sym, sizeof(sym), "_sym\":\"%.63s+0x", l->fn);
	for (p = strstr(out, sym); p; p = strstr(p + 1, sym), n++) {
		*bad = p;
		q = strchr(p + strlen(sym), '"');
		if (!q || sscanf(q, "\",\"%15[a-z]_file\":\"%255[^\"]\",\"%15[a-z]_line\":%d%c",
				 key, path, key2, &line, &end) != 5)
			return false;
		base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		if (strcmp(key, key2) || strcmp(base, l->file) ||
		    line != l->line || (end != ',' && end != '}'))
			return false;
	}
	*bad = out;
	return n > 0;
}

/*
 * Where the programs' one-line functions ran, as btrace shows it from
 * their DWARF: bts-demo's in each view, bts-crash's by_value (a PIE: its
 * DWARF has the addresses before the load bias) in the plain one.
 */
static void test_lines(void)
{
	/* Three of prog()'s eight names, all kept. */
	char *btrace = prog("btrace"), *demo = prog("bts-demo"),
	     *crash = prog("bts-crash");
	char *plain_argv[] = { btrace, "-b", "main", demo, NULL };
	char *calls_argv[] = { btrace, "--calls", "-b", "main", demo, NULL };
	char *json_argv[] = { btrace, "--json", "-b", "main", demo, NULL };
	char *crash_argv[] = { btrace, "-b", "main", crash, NULL };
	struct own_line l[OWN_LINES_MAX + 1], *at = NULL;
	const char *bad = "", *view = "--lines";
	char *call_lines[256];
	struct run r, c, j, k;
	size_t n, ncalls, i;
	bool ok;

	n = own_lines(demo, l, OWN_LINES_MAX);
	/* bts-crash's function after bts-demo's. */
	ok = n == 4 && own_lines(crash, l + n, 1) == 1;
	run(&r, plain_argv);
	run(&c, calls_argv);
	run(&j, json_argv);
	run(&k, crash_argv);
	ncalls = split_lines(c.out, call_lines, 256);
	if (ok) {
		view = "status";
		ok = exited(r.status, 0) && exited(c.status, 0) &&
		     exited(j.status, 0) && killed_by(k.status, SIGSEGV);
	}
	for (i = 0; ok && i <= n; i++) {
		at = &l[i];
		view = i < n ? "plain" : "pie";
		ok = plain_at(i < n ? r.out : k.out, at, &bad);
		if (!ok || i == n)
			continue;
		view = "json";
		ok = json_at(j.out, at, &bad);
		if (!ok)
			continue;
		view = "calls";
		ok = calls_at(call_lines, ncalls, at, &bad);
	}
	tap(ok, "lines", "%s: %s %s:%d: %.160s", view, at ? at->fn : "",
	    at ? at->file : "", at ? at->line : 0, bad);
	run_free(&r);
	run_free(&c);
	run_free(&j);
	run_free(&k);
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
	size_t n_live, n_dumped, i;
	bool ok, cored = set_core_pattern();

	run(&r, argv);
	n_live = split_lines(r.out, live, 16);
	/* Six branches, the signal; the last branch the corrupted call. */
	tap(killed_by(r.status, SIGSEGV) && n_live == 7 &&
	    strstr(live[5], "<finish+") && strstr(live[5], "500 <?>") &&
	    strstr(live[6], "SIGSEGV at"), "on_crash",
	    "status %#x, %zu lines: %.300s", r.status, n_live, n_live ? live[0] : "");

	/* btrace ends killed by the signal, without a core of its own. */
	ok = cored && find_core(path, sizeof(path));
	if (!ok) {
		tap(false, "core", "no core dump (status %#x)", r.status);
		goto out;
	}
	run(&c, core_argv);
	unlink(path);
	n_dumped = split_lines(c.out, dumped, 4096);
	/*
	 * The dump has the records since btrace's last drain, at least one:
	 * the last of them are the last printed live.
	 */
	ok = exited(c.status, 0) && n_dumped >= 2 && n_live == 7;
	for (i = 0; ok && i < 6 && i < n_dumped - 1; i++)
		ok = !strcmp(dumped[n_dumped - 2 - i], live[5 - i]);
	/* The signal and the IP; a core has no fault address. */
	ok = ok && !strncmp(dumped[n_dumped - 1], live[6], strlen(dumped[n_dumped - 1]));
	tap(ok, "core", "status %#x; %zu lines; %.200s", c.status, n_dumped,
	    n_dumped ? dumped[n_dumped - 1] : c.err);
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
	printf("TAP version 13\n1..12\n");
	test_static();
	test_pie_crash();
	test_begin_never_reached();
	test_calls();
	test_json();
	test_lines();
	test_on_crash_and_core();
	test_attach_threads();
	test_exec();
	printf("# %d of %d failed\n", failed, ntest);
	return failed ? 1 : 0;
}
