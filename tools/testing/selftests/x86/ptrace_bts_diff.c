// SPDX-License-Identifier: GPL-2.0
/*
 * Differential tests of ptrace branch tracing, with oracles that do not
 * come from the tracer's own reading of the CPU:
 *
 * - traced against untraced: each program of a corpus of deterministic
 *   ones (glibc's string functions, chosen by IFUNC for this CPU, so AVX2
 *   or EVEX code where the CPU has it; busybox applets on a fixed input)
 *   must print the same bytes on stdout and stderr, exit the same way and
 *   leave the same registers (general, flags, FPU/SSE) at its exit stop
 *   whether traced or not; the untraced run is a ptrace tracee too, only
 *   without branch tracing;
 * - emulated against hardware: where the backend under test is the CPU's
 *   (see expected_backend(): the kernel drives the CPU's BTS and
 *   ds.force_emulation is off), the same program traced by the emulated
 *   backend must leave the same records, record for record, over the
 *   whole run: both runs stop at each PTRACE_BTS_O_SIGNAL overflow and are
 *   drained there, side by side, so no record is stored for long.
 *
 * Every traced run counts and digests all its records. Address space
 * randomisation is off for every run, and the tracer fixes what the kernel
 * gives at random (AT_RANDOM, getrandom()), so that two runs of a program
 * are the same run. The first divergence is printed.
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
#include <sys/user.h>
#include <sys/wait.h>
#include <elf.h>
#include <linux/ptrace.h>

#include "../kselftest_harness.h"
#include "ptrace_bts_util.h"

/*
 * Records per DRAIN: the trace buffer, which PTRACE_BTS_O_SIGNAL stops the
 * program at when full, to take every record of a whole run.
 */
#define DIFF_RECORDS		16384
#define DIFF_BUF_SIZE		(DIFF_RECORDS * sizeof(struct bts_struct))
/* The overflow signal; the tracer suppresses it, the corpus uses none. */
#define DIFF_OVERFLOW_SIG	SIGUSR2
/*
 * The records the hardware may lose after each overflow stop: those the
 * CPU writes during the PMI's skid past the full buffer, which ds.c drops
 * while tracing is paused (a skid of up to 160 is allowed for; ds.c
 * leaves 170 records of margin for it).
 */
#define DIFF_SKID_MAX		256
#define DIFF_OUT_MAX		(1 << 20)
#define DIFF_INPUT		"/tmp/ptrace_bts_diff.in"
#define BUSYBOX			"/bin/busybox"
#define FNV_OFFSET		0xcbf29ce484222325ULL
#define FNV_PRIME		0x100000001b3ULL
/* The size of what AT_RANDOM points to. */
#define AT_RANDOM_BYTES		16
/* getrandom() of 64-bit and of 32-bit tasks; the byte it returns. */
#define NR_GETRANDOM_64		318
#define NR_GETRANDOM_32		355
#define AUDIT_ARCH_X86_64_	0xc000003e
#define AUDIT_ARCH_I386_	0x40000003
#define GETRANDOM_BYTE		0x5a

/* One run of a program of the corpus, always as a ptrace tracee. */
struct diff_run {
	pid_t pid;
	int backend;		/* -1: no branch tracing */
	int out, err;		/* memfds of its stdout and stderr */
	bool exited;		/* reaped: the fields below are final */
	int status;
	struct user_regs_struct regs;	/* at the PTRACE_EVENT_EXIT stop */
	struct user_fpregs_struct fpregs;
	char *out_buf, *err_buf;
	size_t out_len, err_len;
	long records;		/* drained so far, all of them */
	long overflows;		/* overflow stops so far */
	uint64_t digest;	/* of every record so far, in order */
	struct bts_struct *chunk;	/* the last DRAIN's records */
	long chunk_len;
	bool in_getrandom;	/* between getrandom's entry and exit stops */
	uint64_t getrandom_buf;
};

/* --- the corpus's own work, run in a child by re-executing this program */

static uint64_t fnv(uint64_t h, uint64_t v)
{
	return (h ^ v) * FNV_PRIME;
}

/*
 * glibc's string and memory functions over many lengths and alignments:
 * the digest of everything they return and write.
 */
static int work_strings(void)
{
	static char abuf[2048 + 64], bbuf[2048 + 64];
	/* 64-byte aligned, so that "al" below is the alignment */
	char *a = (char *)(((uintptr_t)abuf + 63) & ~(uintptr_t)63);
	char *b = (char *)(((uintptr_t)bbuf + 63) & ~(uintptr_t)63);
	static const size_t lens[] = {
		0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100,
		127, 128, 129, 255, 256, 511, 1000,
	};
	uint64_t h = FNV_OFFSET;
	size_t i, n, al;

	for (i = 0; i < 2048; i++)
		a[i] = 'a' + (i * 7 + i / 13) % 26;
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
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

/*
 * qsort and printf: indirect calls, many branches, formatted output. 1000
 * elements are 4000 bytes, above what glibc sorts on the stack: its merge
 * sort in a malloc()ed buffer, as for any larger array, in about 50,000
 * branches; the emulated backend steps every instruction of it.
 */
static int work_qsort(void)
{
	static uint32_t v[1000];
	uint32_t x = 12345;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(v); i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		v[i] = x;
	}
	qsort(v, ARRAY_SIZE(v), sizeof(v[0]), cmp_u32);
	for (i = 0; i < ARRAY_SIZE(v); i += 97)
		printf("%zu %u\n", i, v[i]);
	return 0;
}

/* --- running one program, traced or not --- */

/*
 * The child: no randomisation, stdin from the input, stdout and stderr to
 * @out and @err; the parent's tracee from the exec on.
 */
static void exec_child(char *const argv[], int out, int err)
{
	int in = open(DIFF_INPUT, O_RDONLY);

	personality(ADDR_NO_RANDOMIZE);
	if (in >= 0)
		dup2(in, STDIN_FILENO);
	dup2(out, STDOUT_FILENO);
	dup2(err, STDERR_FILENO);
	if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
		_exit(90);
	execv(argv[0], argv);
	_exit(91);
}

static long config_trace(pid_t pid, unsigned int backend)
{
	struct ptrace_bts_config cfg = {
		.size = DIFF_BUF_SIZE,
		.flags = PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC |
			 PTRACE_BTS_O_SIGNAL,
		.signal = DIFF_OVERFLOW_SIG,
		.backend = backend,
	};

	return sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg));
}

/*
 * The kernel gives each exec 16 random bytes (AT_RANDOM), from which glibc
 * derives its stack protector canary and pointer guard, values that reach
 * the registers (a mangled pointer left in R10 at the exit). Pin them in
 * the tracee stopped after its exec, so that two runs of a program are the
 * same run. Through /proc/<pid>/mem: a 32-bit tracer may trace a 64-bit
 * program (busybox), whose stack is beyond its own pointers' reach.
 */
static void pin_at_random(struct __test_metadata *_metadata, pid_t pid)
{
	static const char fixed[AT_RANDOM_BYTES] = "ptrace_bts_diff";
	unsigned char ident[EI_NIDENT], auxv[4096];
	uint64_t type, val, addr = 0;
	size_t width, off;
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	fd = open(path, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(EI_NIDENT, read(fd, ident, EI_NIDENT));
	close(fd);
	width = ident[EI_CLASS] == ELFCLASS64 ? 8 : 4;
	snprintf(path, sizeof(path), "/proc/%d/auxv", pid);
	fd = open(path, O_RDONLY);
	ASSERT_LE(0, fd);
	n = read(fd, auxv, sizeof(auxv));
	close(fd);
	for (off = 0; n > 0 && off + 2 * width <= (size_t)n; off += 2 * width) {
		type = 0;
		val = 0;
		/* little endian: the low bytes of a u64 */
		memcpy(&type, auxv + off, width);
		memcpy(&val, auxv + off + width, width);
		if (type == AT_NULL)
			break;
		if (type == AT_RANDOM)
			addr = val;
	}
	ASSERT_NE(0, addr);
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	fd = open(path, O_RDWR);
	ASSERT_LE(0, fd);
	EXPECT_EQ(AT_RANDOM_BYTES,
		  pwrite64(fd, fixed, AT_RANDOM_BYTES, (off64_t)addr));
	close(fd);
}

/*
 * Start @argv as a tracee, stopped after its exec; @backend < 0: not
 * traced, else traced by that backend from the exec on.
 */
static void start_run(struct __test_metadata *_metadata, char *const argv[],
		      int backend, struct diff_run *r)
{
	int status;

	memset(r, 0, sizeof(*r));
	r->backend = backend;
	r->digest = FNV_OFFSET;
	r->out = memfd_create("ptrace_bts_diff.out", 0);
	r->err = memfd_create("ptrace_bts_diff.err", 0);
	ASSERT_LE(0, r->out);
	ASSERT_LE(0, r->err);
	r->chunk = calloc(DIFF_RECORDS, sizeof(*r->chunk));
	r->out_buf = malloc(DIFF_OUT_MAX);
	r->err_buf = malloc(DIFF_OUT_MAX);
	ASSERT_TRUE(r->chunk && r->out_buf && r->err_buf);
	r->pid = fork();
	ASSERT_LE(0, r->pid);
	if (r->pid == 0)
		exec_child(argv, r->out, r->err);
	/* the exec's SIGTRAP */
	ASSERT_EQ(r->pid, waitpid(r->pid, &status, 0));
	ASSERT_TRUE(WIFSTOPPED(status)) {
		TH_LOG("%s: status %#x before the exec", argv[0], status);
	}
	ASSERT_EQ(SIGTRAP, WSTOPSIG(status));
	ASSERT_EQ(0, sys_ptrace(PTRACE_SETOPTIONS, r->pid, NULL,
				PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL |
				PTRACE_O_TRACESYSGOOD));
	pin_at_random(_metadata, r->pid);
	if (backend < 0)
		return;
	ASSERT_EQ(0, config_trace(r->pid, backend)) {
		TH_LOG("PTRACE_BTS_CONFIG with backend %d: %m", backend);
	}
}

/* Write @len bytes GETRANDOM_BYTE at @addr of the tracee. */
static void fill_tracee(struct __test_metadata *_metadata, pid_t pid,
			uint64_t addr, uint64_t len)
{
	char path[64], buf[256];
	size_t n;
	int fd;

	memset(buf, GETRANDOM_BYTE, sizeof(buf));
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	fd = open(path, O_RDWR);
	ASSERT_LE(0, fd);
	for (; len; len -= n, addr += n) {
		n = len < sizeof(buf) ? len : sizeof(buf);
		ASSERT_EQ(n, pwrite64(fd, buf, n, (off64_t)addr));
	}
	close(fd);
}

/*
 * A system call stop: what getrandom() returns, glibc's malloc keeps (its
 * tcache key) and leaves in a register at the exit; the tracer overwrites
 * it with fixed bytes, as it pins AT_RANDOM. Through PTRACE_GET_SYSCALL_INFO:
 * a 32-bit tracer cannot read a 64-bit tracee's argument registers.
 */
static void syscall_stop(struct __test_metadata *_metadata, struct diff_run *r)
{
	struct ptrace_syscall_info info;
	long n;

	memset(&info, 0, sizeof(info));
	n = sys_ptrace(PTRACE_GET_SYSCALL_INFO, r->pid, (void *)sizeof(info),
		       (unsigned long)&info);
	ASSERT_LT(0, n) {
		TH_LOG("PTRACE_GET_SYSCALL_INFO: %m");
	}
	if (info.op == PTRACE_SYSCALL_INFO_ENTRY) {
		r->in_getrandom =
			(info.arch == AUDIT_ARCH_X86_64_ &&
			 info.entry.nr == NR_GETRANDOM_64) ||
			(info.arch == AUDIT_ARCH_I386_ &&
			 info.entry.nr == NR_GETRANDOM_32);
		r->getrandom_buf = info.entry.args[0];
		return;
	}
	if (info.op == PTRACE_SYSCALL_INFO_EXIT && r->in_getrandom &&
	    !info.exit.is_error && info.exit.rval > 0)
		fill_tracee(_metadata, r->pid, r->getrandom_buf,
			    info.exit.rval);
	r->in_getrandom = false;
}

/* DRAIN the stopped tracee into r->chunk, and count and digest it. */
static void drain_chunk(struct __test_metadata *_metadata, struct diff_run *r)
{
	const struct bts_struct *rec;
	long i;

	r->chunk_len = sys_ptrace(PTRACE_BTS_DRAIN, r->pid, r->chunk,
				  DIFF_BUF_SIZE);
	ASSERT_LE(0, r->chunk_len) {
		TH_LOG("PTRACE_BTS_DRAIN: %m");
	}
	for (i = 0; i < r->chunk_len; i++) {
		rec = &r->chunk[i];
		r->digest = fnv(r->digest, rec->qualifier);
		r->digest = fnv(r->digest, rec->variant.lbr.from);
		r->digest = fnv(r->digest, rec->variant.lbr.to);
	}
	r->records += r->chunk_len;
}

static size_t read_memfd(int fd, char *buf)
{
	ssize_t n = pread(fd, buf, DIFF_OUT_MAX, 0);

	close(fd);
	return n < 0 ? 0 : n;
}

/*
 * Let the tracee run to its next overflow stop, or to its end: the records
 * since the last stop go to r->chunk. At the PTRACE_EVENT_EXIT stop take
 * the final registers, then reap it and read what it wrote.
 */
static void advance(struct __test_metadata *_metadata, struct diff_run *r)
{
	int status;

	ASSERT_FALSE(r->exited);
	r->chunk_len = 0;
	for (;;) {
		ASSERT_EQ(0, sys_ptrace(PTRACE_SYSCALL, r->pid, NULL, 0));
		ASSERT_EQ(r->pid, waitpid(r->pid, &status, 0));
		ASSERT_TRUE(WIFSTOPPED(status)) {
			TH_LOG("status %#x before the exit stop", status);
		}
		if (status >> 8 == (SIGTRAP | (PTRACE_EVENT_EXIT << 8)))
			break;
		if (WSTOPSIG(status) == (SIGTRAP | 0x80)) {
			syscall_stop(_metadata, r);
			continue;
		}
		if (r->backend >= 0 && WSTOPSIG(status) == DIFF_OVERFLOW_SIG) {
			/* suppressed by the next PTRACE_CONT */
			r->overflows++;
			drain_chunk(_metadata, r);
			return;
		}
		/* the corpus gets no signals: any is a divergence */
		ASSERT_EQ(0, WSTOPSIG(status)) {
			TH_LOG("tracee stopped by signal %d", WSTOPSIG(status));
		}
	}
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETREGS, r->pid, NULL,
				(unsigned long)&r->regs));
	ASSERT_EQ(0, sys_ptrace(PTRACE_GETFPREGS, r->pid, NULL,
				(unsigned long)&r->fpregs));
	if (r->backend >= 0)
		drain_chunk(_metadata, r);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, r->pid, NULL, 0));
	ASSERT_EQ(r->pid, waitpid(r->pid, &status, 0));
	r->status = status;
	r->out_len = read_memfd(r->out, r->out_buf);
	r->err_len = read_memfd(r->err, r->err_buf);
	r->exited = true;
}

/* Run the tracee to its end, counting and digesting all its records. */
static void finish(struct __test_metadata *_metadata, struct diff_run *r)
{
	while (!r->exited)
		advance(_metadata, r);
}

static void free_run(struct diff_run *r)
{
	free(r->chunk);
	free(r->out_buf);
	free(r->err_buf);
}

/*
 * Byte streams @a and @b are the same, or the first difference is logged;
 * with @words, also the long that holds it (a register), on each side.
 */
static bool same_bytes(struct __test_metadata *_metadata, const char *what,
		       const char *name, const void *a, size_t a_len,
		       const void *b, size_t b_len, bool words)
{
	const unsigned char *x = a, *y = b;
	unsigned long wa, wb;
	size_t i, at;

	if (a_len == b_len && !memcmp(a, b, a_len))
		return true;
	for (i = 0; i < a_len && i < b_len; i++)
		if (x[i] != y[i])
			break;
	TH_LOG("%s: %s differs at byte %zu (%zu and %zu bytes)", what, name,
	       i, a_len, b_len);
	at = i & ~(sizeof(long) - 1);
	if (words && at + sizeof(long) <= a_len && a_len == b_len) {
		memcpy(&wa, x + at, sizeof(wa));
		memcpy(&wb, y + at, sizeof(wb));
		TH_LOG("  the long at byte %zu: %#lx untraced, %#lx traced",
		       at, wa, wb);
	}
	return false;
}

/*
 * The same end: exit status, stdout, stderr, and the registers at the exit
 * stop (all general registers and the flags, and the FPU/SSE state).
 */
static bool same_outcome(struct __test_metadata *_metadata, const char *what,
			 const struct diff_run *a, const struct diff_run *b)
{
	bool same = true;

	if (a->status != b->status) {
		TH_LOG("%s: status %#x untraced, %#x traced", what, a->status,
		       b->status);
		same = false;
	}
	same &= same_bytes(_metadata, what, "stdout", a->out_buf, a->out_len,
			   b->out_buf, b->out_len, false);
	same &= same_bytes(_metadata, what, "stderr", a->err_buf, a->err_len,
			   b->err_buf, b->err_len, false);
	same &= same_bytes(_metadata, what, "user_regs_struct", &a->regs,
			   sizeof(a->regs), &b->regs, sizeof(b->regs), true);
	same &= same_bytes(_metadata, what, "user_fpregs_struct", &a->fpregs,
			   sizeof(a->fpregs), &b->fpregs, sizeof(b->fpregs),
			   true);
	return same;
}

/*
 * The emulated records a hardware chunk is matched against: a window that
 * slides along the emulated run's stream, which advances on demand.
 */
struct diff_window {
	struct bts_struct *rec;
	long base;		/* stream index of rec[0] */
	long len;
	long cap;
};

/* Drop the window's records before stream index @pos. */
static void window_trim(struct diff_window *w, long pos)
{
	long drop = pos - w->base;

	if (drop <= 0)
		return;
	if (drop > w->len)
		drop = w->len;
	memmove(w->rec, w->rec + drop, (w->len - drop) * sizeof(*w->rec));
	w->base += drop;
	w->len -= drop;
}

/* Advance @emu until the window reaches stream index @end, or @emu ends. */
static void window_fill(struct __test_metadata *_metadata,
			struct diff_window *w, struct diff_run *emu, long end)
{
	while (!emu->exited && w->base + w->len < end) {
		advance(_metadata, emu);
		ASSERT_GE(w->cap - w->len, emu->chunk_len);
		memcpy(w->rec + w->len, emu->chunk,
		       emu->chunk_len * sizeof(*w->rec));
		w->len += emu->chunk_len;
	}
}

/*
 * Where the @n records at @rec are in the window, at stream index @pos or
 * up to @slack records later; -1 if nowhere.
 */
static long window_match(const struct diff_window *w, long pos, long slack,
			 const struct bts_struct *rec, long n)
{
	long p;

	for (p = pos; p <= pos + slack; p++) {
		if (p < w->base || p + n > w->base + w->len)
			break;
		if (!memcmp(w->rec + (p - w->base), rec, n * sizeof(*rec)))
			return p;
	}
	return -1;
}

/* Log the first record where @rec differs from the window at @pos. */
static void log_divergence(struct __test_metadata *_metadata, const char *what,
			   const struct diff_window *w, long pos,
			   const struct bts_struct *rec, long n)
{
	const struct bts_struct *e = NULL;
	long i;

	for (i = 0; i <= n; i++) {
		e = pos + i < w->base + w->len ? w->rec + (pos + i - w->base) :
						 NULL;
		if (i == n || !e || memcmp(e, rec + i, sizeof(*e)))
			break;
	}
	TH_LOG("%s: first divergence at record %ld", what, pos + i);
	if (i < n)
		TH_LOG("  hardware: %#llx -> %#llx",
		       (unsigned long long)rec[i].variant.lbr.from,
		       (unsigned long long)rec[i].variant.lbr.to);
	else
		TH_LOG("  hardware: no more records");
	if (e)
		TH_LOG("  emulated: %#llx -> %#llx",
		       (unsigned long long)e->variant.lbr.from,
		       (unsigned long long)e->variant.lbr.to);
	else
		TH_LOG("  emulated: no more records");
}

/*
 * Run @hw (the hardware backend) and @emu (the emulated one) side by
 * side, overflow stop by overflow stop, and match every record of the
 * hardware against the emulated run's, in order. The emulated backend
 * records in the trap after each branch and loses nothing at an overflow
 * stop; the hardware may lose up to DIFF_SKID_MAX records after each one
 * (the PMI's skid), so a hardware chunk after an overflow stop may start
 * that much later in the emulated stream. Nothing else may be missing,
 * and no record may differ. *@lost counts the records of the skid.
 */
static bool same_records(struct __test_metadata *_metadata, const char *what,
			 struct diff_run *hw, struct diff_run *emu, long *lost)
{
	struct diff_window w = { .cap = 2 * DIFF_RECORDS + DIFF_SKID_MAX };
	bool same = false;
	long pos = 0, slack = 0, p;

	*lost = 0;
	w.rec = calloc(w.cap, sizeof(*w.rec));
	ASSERT_TRUE(!!w.rec);
	while (!hw->exited) {
		advance(_metadata, hw);
		window_trim(&w, pos);
		window_fill(_metadata, &w, emu, pos + slack + hw->chunk_len);
		p = window_match(&w, pos, slack, hw->chunk, hw->chunk_len);
		if (p < 0) {
			log_divergence(_metadata, what, &w, pos, hw->chunk,
				       hw->chunk_len);
			goto out;
		}
		*lost += p - pos;
		pos = p + hw->chunk_len;
		slack = hw->exited ? 0 : DIFF_SKID_MAX;
	}
	/* and nothing after the hardware's last record */
	window_trim(&w, pos);
	while (!w.len && !emu->exited)
		window_fill(_metadata, &w, emu, pos + 1);
	if (w.len) {
		log_divergence(_metadata, what, &w, pos, NULL, 0);
		goto out;
	}
	same = true;
out:
	free(w.rec);
	return same;
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

	ASSERT_TRUE(!!f);
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
	if (access(argv[0], X_OK))
		SKIP(return, "%s: %m (install busybox for these cases)", argv[0]);
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
 * The program prints the same (stdout and stderr), exits the same and
 * leaves the same registers at its exit traced as untraced; on BTS
 * hardware the emulated backend records what the hardware records, every
 * record of the whole run. Single-stepping every instruction under TCG is
 * slow: a long timeout.
 */
TEST_F_TIMEOUT(diff, traced_as_untraced, 240)
{
	char *const *argv = corpus[variant->program];
	int backend = expected_backend();
	struct diff_run plain, traced, emu;
	long lost = 0;

	start_run(_metadata, argv, -1, &plain);
	finish(_metadata, &plain);
	start_run(_metadata, argv, backend, &traced);
	if (backend == PTRACE_BTS_BACKEND_HARDWARE) {
		start_run(_metadata, argv, PTRACE_BTS_BACKEND_EMULATED, &emu);
		EXPECT_TRUE(same_records(_metadata, self->what, &traced, &emu,
					 &lost));
		EXPECT_TRUE(same_outcome(_metadata, self->what, &plain, &emu));
		EXPECT_EQ(emu.records, traced.records + lost);
	} else {
		finish(_metadata, &traced);
	}
	EXPECT_TRUE(same_outcome(_metadata, self->what, &plain, &traced));
	/* a trace of a whole program is never empty */
	EXPECT_LT(0, traced.records);
	ksft_print_msg("%s: %ld records in %ld overflow stops, digest %016llx\n",
		       self->what, traced.records, traced.overflows,
		       (unsigned long long)traced.digest);
	if (backend == PTRACE_BTS_BACKEND_HARDWARE) {
		ksft_print_msg("%s: emulated: %ld records, digest %016llx\n",
			       self->what, emu.records,
			       (unsigned long long)emu.digest);
		ksft_print_msg("%s: %ld hardware records lost to skid\n",
			       self->what, lost);
		free_run(&emu);
	}
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
