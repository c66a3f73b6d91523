// SPDX-License-Identifier: GPL-2.0
/*
 * btrace: printing the records. Three views of the same records:
 *
 * - plain: one "from -> to" line per branch, named;
 * - --calls: the function each stretch of branches ran in, indented by
 *   call depth, as gdb's "record function-call-history /c": a branch to a
 *   function's first byte is a call, one back into a function on the
 *   stack a return, anything else a jump that keeps the depth;
 * - --json: one JSON object per line (JSON Lines), for programs.
 *
 * Where the object has DWARF, an address comes with its source line:
 * " (demo.c:31)" after its name in the plain and --calls views (the file's
 * base name, which is what a reader looks for), "<key>_file" (the path as
 * DWARF gives it) and "<key>_line" members in JSON. In --calls it is the
 * line of the stretch's first address: the entry of a function called,
 * the return address in the caller returned to.
 *
 * Each line says which thread it is of once a second thread is traced.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btrace.h"

#define CALL_DEPTH_MAX	256
#define NAME_MAX_LEN	256

/* The call stack --calls keeps for a thread: the functions' addresses. */
struct calls {
	pid_t tid;
	uint64_t fn[CALL_DEPTH_MAX];
	int depth;
	uint64_t cur;
};

static enum out_mode mode;
static bool show_tid;
static struct calls *calls;
static size_t ncalls;

void out_init(enum out_mode m)
{
	mode = m;
}

void out_threads(bool many)
{
	show_tid = many;
}

void out_exit(void)
{
	free(calls);
	calls = NULL;
	ncalls = 0;
}

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

/* " (file:line)" of @addr, the file's base name; nothing if not known. */
static void plain_line(uint64_t addr)
{
	const char *file, *base;
	int line;

	if (!sym_line(addr, &file, &line))
		return;
	base = strrchr(file, '/');
	printf(" (%s:%d)", base ? base + 1 : file, line);
}

static void plain_addr(uint64_t addr)
{
	char name[NAME_MAX_LEN];

	sym_format(addr, name, sizeof(name));
	printf("%#10llx <%s>", (unsigned long long)addr, name);
	plain_line(addr);
}

static void json_addr(const char *key, uint64_t addr)
{
	char name[NAME_MAX_LEN];
	const char *file;
	int line;

	sym_format(addr, name, sizeof(name));
	printf(",\"%s\":\"%#llx\",\"%s_sym\":", key, (unsigned long long)addr,
	       key);
	json_string(name);
	if (!sym_line(addr, &file, &line))
		return;
	printf(",\"%s_file\":", key);
	json_string(file);
	printf(",\"%s_line\":%d", key, line);
}

static struct calls *calls_of(pid_t tid)
{
	size_t i;

	for (i = 0; i < ncalls; i++)
		if (calls[i].tid == tid)
			return &calls[i];
	calls = reallocarray(calls, ncalls + 1, sizeof(*calls));
	if (!calls)
		die("realloc");
	memset(&calls[ncalls], 0, sizeof(*calls));
	calls[ncalls].tid = tid;
	return &calls[ncalls++];
}

/* Function @fn entered at @at: its name, and the line of @at. */
static void calls_line(pid_t tid, int depth, uint64_t fn, uint64_t at)
{
	char name[NAME_MAX_LEN], *plus;

	sym_format(fn, name, sizeof(name));
	/* The function, not the offset of the first address seen in it. */
	plus = strrchr(name, '+');
	if (plus && strcmp(name, "?"))
		*plus = 0;
	if (show_tid)
		printf("[%d] ", tid);
	printf("%*s%s", 2 * (depth < 40 ? depth : 40), "", name);
	plain_line(at);
	printf("\n");
}

/* Which function @addr is in: a symbol's start, or @addr if none. */
static uint64_t function_of(uint64_t addr)
{
	const struct sym *s = sym_lookup(addr);

	return s ? s->addr : addr;
}

enum branch_kind {
	BRANCH_JUMP,
	BRANCH_CALL,
	BRANCH_RET,
	BRANCH_UNKNOWN,
};

/* What the instruction at @from is, from the bytes of its object. */
static enum branch_kind branch_kind(uint64_t from)
{
	unsigned char insn[16];
	size_t n = sym_read(from, insn, sizeof(insn)), i = 0;

	/* Legacy prefixes (bnd, rep, operand size) and REX. */
	while (i < n && (insn[i] == 0xf2 || insn[i] == 0xf3 ||
			 insn[i] == 0x66 || (insn[i] & 0xf0) == 0x40))
		i++;
	if (i >= n)
		return BRANCH_UNKNOWN;
	switch (insn[i]) {
	case 0xc2:
	case 0xc3:
		return BRANCH_RET;
	case 0xe8:
		return BRANCH_CALL;
	case 0xff:
		/* ModRM reg 2: a near call through a register or memory. */
		if (i + 1 < n && ((insn[i + 1] >> 3) & 7) == 2)
			return BRANCH_CALL;
		return BRANCH_JUMP;
	default:
		return BRANCH_JUMP;
	}
}

static void calls_branch(pid_t tid, uint64_t from, uint64_t to)
{
	struct calls *c = calls_of(tid);
	uint64_t src = function_of(from), dst = function_of(to);
	enum branch_kind kind = branch_kind(from);
	int i;

	if (!c->cur) {
		c->cur = src;
		calls_line(tid, 0, src, from);
	}
	if (kind == BRANCH_UNKNOWN) {
		/* No bytes (no object): a function's first byte is a call. */
		if (dst == c->cur)
			return;
		kind = to == dst ? BRANCH_CALL : BRANCH_JUMP;
		for (i = c->depth - 1; kind == BRANCH_JUMP && i >= 0; i--)
			if (c->fn[i] == dst)
				kind = BRANCH_RET;
	}
	switch (kind) {
	case BRANCH_CALL:
		if (c->depth < CALL_DEPTH_MAX)
			c->fn[c->depth++] = c->cur;
		break;
	case BRANCH_RET:
		/* Back to the caller; above the first function seen, level. */
		if (c->depth)
			c->depth--;
		break;
	default:
		/* A jump within the function shows nothing; to another, a line. */
		if (dst == c->cur)
			return;
		break;
	}
	c->cur = dst;
	calls_line(tid, c->depth, dst, to);
}

static const char *gap_name(unsigned int reason)
{
	switch (reason) {
	case PTRACE_BTS_GAP_EXEC:
		return "exec";
	case PTRACE_BTS_GAP_EXEC_STOPPED:
		return "exec-stopped";
	case PTRACE_BTS_GAP_SIGNAL:
		return "signal";
	case PTRACE_BTS_GAP_SIGRETURN:
		return "sigreturn";
	case PTRACE_BTS_GAP_LOST:
		return "lost";
	case PTRACE_BTS_GAP_PAUSED:
		return "paused";
	default:
		return "unknown";
	}
}

/*
 * --calls: the kernel enters a handler as if called, and sigreturn leaves
 * it as if returning; after any other gap the depth is not known.
 */
static void calls_gap(pid_t tid, const struct bts_struct *r)
{
	struct calls *c = calls_of(tid);
	uint64_t ip = r->variant.gap.ip;

	switch (r->variant.gap.reason) {
	case PTRACE_BTS_GAP_SIGNAL:
		if (c->cur && c->depth < CALL_DEPTH_MAX)
			c->fn[c->depth++] = c->cur;
		break;
	case PTRACE_BTS_GAP_SIGRETURN:
		if (c->depth)
			c->depth--;
		break;
	default:
		c->depth = 0;
		c->cur = 0;
		return;
	}
	if (ip) {
		c->cur = function_of(ip);
		calls_line(tid, c->depth, c->cur, ip);
	}
}

void out_record(pid_t tid, const struct bts_struct *r)
{
	bool branch = r->qualifier == BTS_BRANCH;

	switch (mode) {
	case OUT_CALLS:
		if (branch)
			calls_branch(tid, r->variant.lbr.from,
				     r->variant.lbr.to);
		else if (r->qualifier == BTS_GAP)
			calls_gap(tid, r);
		return;
	case OUT_JSON:
		printf("{\"tid\":%d", tid);
		if (r->qualifier == BTS_GAP) {
			printf(",\"type\":\"gap\",\"reason\":\"%s\",\"info\":%u",
			       gap_name(r->variant.gap.reason),
			       r->variant.gap.info);
			if (r->variant.gap.ip)
				json_addr("ip", r->variant.gap.ip);
		} else if (branch) {
			printf(",\"type\":\"branch\"");
			json_addr("from", r->variant.lbr.from);
			json_addr("to", r->variant.lbr.to);
		} else {
			printf(",\"type\":\"%s\",\"clock_ns\":%llu",
			       r->qualifier == BTS_TASK_ARRIVES ? "arrives" :
								  "departs",
			       (unsigned long long)r->variant.event.clock);
		}
		printf("}\n");
		return;
	case OUT_PLAIN:
		break;
	}
	if (show_tid)
		printf("[%d] ", tid);
	if (r->qualifier == BTS_GAP) {
		printf("  -- %s", gap_name(r->variant.gap.reason));
		if (r->variant.gap.reason == PTRACE_BTS_GAP_SIGNAL)
			printf(" SIG%s", sigabbrev_np(r->variant.gap.info) ?: "?");
		if (r->variant.gap.ip) {
			printf(", on at ");
			plain_addr(r->variant.gap.ip);
		}
		printf("\n");
		return;
	}
	if (branch) {
		plain_addr(r->variant.lbr.from);
		printf("  ->  ");
		plain_addr(r->variant.lbr.to);
		printf("\n");
		return;
	}
	printf("  [%llu.%09llu] task %u %s\n",
	       (unsigned long long)r->variant.event.clock / 1000000000,
	       (unsigned long long)r->variant.event.clock % 1000000000,
	       r->variant.event.pid,
	       r->qualifier == BTS_TASK_ARRIVES ? "arrives" : "departs");
}

/*
 * A fatal signal: where the thread was and why it dies, on stdout with
 * the records (a JSON object there with --json).
 */
void out_signal(pid_t tid, int sig, uint64_t ip, uint64_t addr,
		bool has_addr)
{
	char name[NAME_MAX_LEN];

	sym_format(ip, name, sizeof(name));
	if (mode == OUT_JSON) {
		printf("{\"tid\":%d,\"type\":\"signal\",\"signal\":%d,\"name\":",
		       tid, sig);
		json_string(sigabbrev_np(sig) ?: "?");
		json_addr("ip", ip);
		if (has_addr)
			printf(",\"addr\":\"%#llx\"", (unsigned long long)addr);
		printf("}\n");
		return;
	}
	printf("[%d] SIG%s at %#llx <%s>", tid, sigabbrev_np(sig) ?: "?",
	       (unsigned long long)ip, name);
	plain_line(ip);
	if (has_addr)
		printf(", address %#llx", (unsigned long long)addr);
	printf("\n");
}
