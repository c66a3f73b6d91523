// SPDX-License-Identifier: GPL-2.0
/*
 * Differential tests of ptrace branch tracing, with oracles that do not
 * come from the tracer's own reading of the CPU:
 *
 * - traced against untraced: each program of a corpus of deterministic
 *   ones (glibc's string functions, chosen by IFUNC for this CPU, so AVX2
 *   or EVEX code where the CPU has it; busybox applets on a fixed input)
 *   must print the same bytes and exit the same way whether traced or not;
 * - emulated against hardware: where the backend under test is the CPU's
 *   (PTRACE_BTS_BACKEND=hardware), the same program traced by the emulated
 *   backend must leave the same records, record for record.
 *
 * Address space randomisation is off for every run, so that the branch
 * addresses of two runs can be compared. The first divergence is printed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/wait.h>
#include <linux/ptrace.h>

#include "../kselftest_harness.h"
#include "ptrace_bts_util.h"

/* Records kept of each traced run: the last ones of a wrapping buffer. */
#define DIFF_RECORDS		65536
#define DIFF_BUF_SIZE		(DIFF_RECORDS * sizeof(struct bts_struct))
#define DIFF_OUT_MAX		(1 << 20)
#define DIFF_INPUT		"/tmp/ptrace_bts_diff.in"
#define BUSYBOX			"/bin/busybox"

struct diff_run {
	int status;
	char *out;
	size_t out_len;
	long records;		/* PTRACE_BTS_SIZE at exit */
	struct bts_struct *rec;	/* the records, oldest first */
};

/* --- the corpus's own work, run in a child by re-executing this program */

static uint64_t fnv(uint64_t h, uint64_t v)
{
	return (h ^ v) * 0x100000001b3ULL;
}

/*
 * glibc's string and memory functions over many lengths and alignments:
 * the digest of everything they return and write.
 */
static int work_strings(void)
{
	static char a[2048] __attribute__((aligned(64)));
	static char b[2048] __attribute__((aligned(64)));
	static const size_t lens[] = {
		0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100,
		127, 128, 129, 255, 256, 511, 1000,
	};
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i, n, al;

	for (i = 0; i < sizeof(a); i++)
		a[i] = 'a' + (i * 7 + i / 13) % 26;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		n = lens[i];
		for (al = 0; al < 64; al += 5) {
			char *s = a + al, *d = b + (al * 3) % 64;
			char save = s[n];

			s[n] = '\0';
			h = fnv(h, strlen(s));
			h = fnv(h, (uintptr_t)strchr(s, 'q') - (uintptr_t)s);
			h = fnv(h, (uintptr_t)memchr(s, 'z', n) - (uintptr_t)s);
			h = fnv(h, (uintptr_t)strrchr(s, 'e') - (uintptr_t)s);
			memcpy(d, s, n + 1);
			h = fnv(h, memcmp(d, s, n + 1));
			h = fnv(h, strcmp(d, s));
			if (n)
				d[n - 1] ^= 1;
			h = fnv(h, strncmp(d, s, n) < 0);
			memmove(d + 1, d, n);
			memset(d, 'x', n / 2);
			h = fnv(h, strlen(d));
			h = fnv(h, strnlen(d, n));
			s[n] = save;
		}
	}
	printf("strings %016llx\n", (unsigned long long)h);
	return 0;
}

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return a < b ? -1 : a > b;
}

/* qsort and printf: indirect calls, many branches, formatted output. */
static int work_qsort(void)
{
	static uint32_t v[4000];
	uint32_t x = 12345;
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		v[i] = x;
	}
	qsort(v, sizeof(v) / sizeof(v[0]), sizeof(v[0]), cmp_u32);
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i += 397)
		printf("%zu %u\n", i, v[i]);
	return 0;
}

/* --- running one program, traced or not --- */

/* The child: no randomisation, stdout to @out, stdin from the input. */
static void exec_child(char *const argv[], int out, bool traced)
{
	int in = open(DIFF_INPUT, O_RDONLY);

	personality(ADDR_NO_RANDOMIZE);
	if (in >= 0)
		dup2(in, STDIN_FILENO);
	dup2(out, STDOUT_FILENO);
	if (traced && sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
		_exit(90);
	execv(argv[0], argv);
	_exit(91);
}

static long config_trace(pid_t pid, unsigned int backend)
{
	struct ptrace_bts_config cfg = {
		.size = DIFF_BUF_SIZE,
		.flags = PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC,
		.backend = backend,
	};

	return sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg));
}

/* At the tracee's exit stop: take its records. */
static void collect_records(struct __test_metadata *_metadata, pid_t pid,
			    struct diff_run *r)
{
	long n;

	r->records = sys_ptrace(PTRACE_BTS_SIZE, pid, NULL, 0);
	ASSERT_LE(0, r->records);
	r->rec = calloc(r->records + 1, sizeof(*r->rec));
	ASSERT_TRUE(r->rec != NULL);
	n = sys_ptrace(PTRACE_BTS_DRAIN, pid, r->rec,
		       (r->records + 1) * sizeof(*r->rec));
	ASSERT_EQ(r->records, n);
}

/*
 * Run @argv to its end; @backend < 0: untraced, else traced from exec on
 * by that backend. The output is whatever it wrote to stdout.
 */
static void run(struct __test_metadata *_metadata, char *const argv[],
		int backend, struct diff_run *r)
{
	int out = memfd_create("ptrace_bts_diff", 0), status;
	bool traced = backend >= 0;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	ASSERT_LE(0, out);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		exec_child(argv, out, traced);
	if (traced) {
		/* the exec's SIGTRAP */
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_TRUE(WIFSTOPPED(status));
		ASSERT_EQ(SIGTRAP, WSTOPSIG(status));
		ASSERT_EQ(0, sys_ptrace(PTRACE_SETOPTIONS, pid, NULL,
					PTRACE_O_TRACEEXIT |
					PTRACE_O_EXITKILL));
		ASSERT_EQ(0, config_trace(pid, backend)) {
			TH_LOG("PTRACE_BTS_CONFIG with backend %d: %m",
			       backend);
		}
		for (;;) {
			ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, 0));
			ASSERT_EQ(pid, waitpid(pid, &status, 0));
			ASSERT_TRUE(WIFSTOPPED(status)) {
				TH_LOG("status %#x before the exit stop",
				       status);
			}
			if (status >> 8 == (SIGTRAP | (PTRACE_EVENT_EXIT << 8)))
				break;
			/* the corpus gets no signals: any is a divergence */
			ASSERT_EQ(0, WSTOPSIG(status)) {
				TH_LOG("traced run stopped by signal %d",
				       WSTOPSIG(status));
			}
		}
		collect_records(_metadata, pid, r);
		ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, 0));
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	r->status = status;
	r->out = malloc(DIFF_OUT_MAX);
	ASSERT_TRUE(r->out != NULL);
	r->out_len = pread(out, r->out, DIFF_OUT_MAX, 0);
	close(out);
}

static void free_run(struct diff_run *r)
{
	free(r->out);
	free(r->rec);
}

/* The same bytes out and the same end, or the first difference. */
static bool same_outcome(struct __test_metadata *_metadata, const char *what,
			 const struct diff_run *a, const struct diff_run *b)
{
	size_t i;

	if (a->status != b->status) {
		TH_LOG("%s: status %#x untraced, %#x traced", what, a->status,
		       b->status);
		return false;
	}
	if (a->out_len != b->out_len || memcmp(a->out, b->out, a->out_len)) {
		for (i = 0; i < a->out_len && i < b->out_len; i++)
			if (a->out[i] != b->out[i])
				break;
		TH_LOG("%s: output differs at byte %zu (%zu and %zu bytes)",
		       what, i, a->out_len, b->out_len);
		return false;
	}
	return true;
}

/* The same records, or the first divergence. */
static bool same_records(struct __test_metadata *_metadata, const char *what,
			 const struct diff_run *hw, const struct diff_run *emu)
{
	long i;

	for (i = 0; i < hw->records && i < emu->records; i++)
		if (memcmp(&hw->rec[i], &emu->rec[i], sizeof(hw->rec[i])))
			break;
	if (i == hw->records && i == emu->records)
		return true;
	TH_LOG("%s: %ld records by the hardware, %ld emulated; first divergence at %ld",
	       what, hw->records, emu->records, i);
	if (i < hw->records)
		TH_LOG("  hardware: %#llx -> %#llx",
		       (unsigned long long)hw->rec[i].variant.lbr.from,
		       (unsigned long long)hw->rec[i].variant.lbr.to);
	if (i < emu->records)
		TH_LOG("  emulated: %#llx -> %#llx",
		       (unsigned long long)emu->rec[i].variant.lbr.from,
		       (unsigned long long)emu->rec[i].variant.lbr.to);
	return false;
}

/* The backend the harness names in PTRACE_BTS_BACKEND, else ANY. */
static int backend_under_test(void)
{
	const char *name = getenv("PTRACE_BTS_BACKEND");

	if (name && !strcmp(name, "hardware"))
		return PTRACE_BTS_BACKEND_HARDWARE;
	if (name && !strcmp(name, "emulated"))
		return PTRACE_BTS_BACKEND_EMULATED;
	return PTRACE_BTS_BACKEND_ANY;
}

/* A fixed input: lines of pseudo-random words. */
static void write_input(struct __test_metadata *_metadata)
{
	static const char *const words[] = {
		"alpha", "bravo", "charlie", "delta", "echo", "foxtrot",
		"golf", "hotel", "india", "juliett", "kilo", "lima",
	};
	uint32_t x = 2463534242u;
	FILE *f = fopen(DIFF_INPUT, "w");
	int line, w;

	ASSERT_TRUE(f != NULL);
	for (line = 0; line < 60; line++) {
		for (w = 0; w < 5; w++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			fprintf(f, "%s%s", w ? " " : "", words[x % 12]);
		}
		fprintf(f, " %u\n", x % 1000);
	}
	ASSERT_EQ(0, fclose(f));
}

static char self_path[4096];

/* The corpus: NULL-terminated argv vectors. */
static char *const corpus[][6] = {
	{ self_path, "--work", "strings", NULL },
	{ self_path, "--work", "qsort", NULL },
	{ BUSYBOX, "sort", DIFF_INPUT, NULL },
	{ BUSYBOX, "md5sum", DIFF_INPUT, NULL },
	{ BUSYBOX, "sed", "s/a/A/g;s/[0-9]/#/", DIFF_INPUT, NULL },
	{ BUSYBOX, "awk", "{ n[$1]++ } END { for (w in n) s += n[w] * length(w); print s }",
	  DIFF_INPUT, NULL },
	{ BUSYBOX, "gzip", "-c", DIFF_INPUT, NULL },
	{ BUSYBOX, "wc", DIFF_INPUT, NULL },
	{ BUSYBOX, "tr", "a-z", "A-Z", NULL },
};

FIXTURE(diff) {
	char what[128];
};

/* One program of the corpus per case: its index. */
FIXTURE_VARIANT(diff) {
	unsigned int program;
};

FIXTURE_VARIANT_ADD(diff, strings) { .program = 0 };
FIXTURE_VARIANT_ADD(diff, qsort) { .program = 1 };
FIXTURE_VARIANT_ADD(diff, sort) { .program = 2 };
FIXTURE_VARIANT_ADD(diff, md5sum) { .program = 3 };
FIXTURE_VARIANT_ADD(diff, sed) { .program = 4 };
FIXTURE_VARIANT_ADD(diff, awk) { .program = 5 };
FIXTURE_VARIANT_ADD(diff, gzip) { .program = 6 };
FIXTURE_VARIANT_ADD(diff, wc) { .program = 7 };
FIXTURE_VARIANT_ADD(diff, tr) { .program = 8 };

FIXTURE_SETUP(diff)
{
	char *const *argv = corpus[variant->program];

	ASSERT_LT(0, readlink("/proc/self/exe", self_path,
			      sizeof(self_path) - 1));
	ASSERT_EQ(0, access(argv[0], X_OK)) {
		TH_LOG("%s: %m", argv[0]);
	}
	snprintf(self->what, sizeof(self->what), "%s %s",
		 argv[0] == self_path ? "self" : "busybox",
		 argv[0] == self_path ? argv[2] : argv[1]);
	write_input(_metadata);
}

FIXTURE_TEARDOWN(diff)
{
	unlink(DIFF_INPUT);
}

/*
 * The program prints the same and exits the same traced as untraced; on
 * BTS hardware the emulated backend records what the hardware records.
 * Single-stepping every instruction under TCG is slow: a long timeout.
 */
TEST_F_TIMEOUT(diff, traced_as_untraced, 240)
{
	char *const *argv = corpus[variant->program];
	int backend = backend_under_test();
	struct diff_run plain, traced, emu;

	run(_metadata, argv, -1, &plain);
	run(_metadata, argv, backend, &traced);
	EXPECT_TRUE(same_outcome(_metadata, self->what, &plain, &traced));
	/* a trace of a whole program is never empty */
	EXPECT_LT(0, traced.records);
	if (backend == PTRACE_BTS_BACKEND_HARDWARE) {
		run(_metadata, argv, PTRACE_BTS_BACKEND_EMULATED, &emu);
		EXPECT_TRUE(same_outcome(_metadata, self->what, &plain, &emu));
		EXPECT_TRUE(same_records(_metadata, self->what, &traced, &emu));
		free_run(&emu);
	}
	ksft_print_msg("%s: %ld records%s\n", self->what, traced.records,
		       backend == PTRACE_BTS_BACKEND_HARDWARE ?
		       ", hardware and emulated alike" : "");
	free_run(&plain);
	free_run(&traced);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--work")) {
		if (!strcmp(argv[2], "strings"))
			return work_strings();
		if (!strcmp(argv[2], "qsort"))
			return work_qsort();
		return 2;
	}
	return test_harness_run(argc, argv);
}
