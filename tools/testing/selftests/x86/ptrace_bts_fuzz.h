/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the files of ptrace_bts_fuzz share: the fixed addresses of the
 * tracees, the generator's state, a block, the tracees and the comparison.
 */
#ifndef PTRACE_BTS_FUZZ_H
#define PTRACE_BTS_FUZZ_H

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cpuid.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <linux/ptrace.h>

#include "ptrace_bts_util.h"

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(x)	(sizeof(x) / sizeof((x)[0]))
#endif

/*
 * Fixed addresses below 4 GiB, the same in every tracee: far transfers
 * and compat code take 32-bit addresses, and records compare as numbers.
 * Both areas are shared with the tracer, which writes the code and reads
 * the data without a ptrace call.
 */
#define FZ_CODE			0x20000000UL
#define FZ_CODE_SIZE		(64UL << 10)
#define FZ_DATA			0x20100000UL
#define FZ_DATA_SIZE		(16UL << 10)
#define FZ_SCRATCH_SIZE		256	/* the block's memory operands, %rbx */
/* 8-byte slots a positive disp8 reaches from %rbx */
#define FZ_DISP8_SLOTS		16
#define FZ_LOG			(FZ_DATA + 512)	/* struct fz_log */
#define FZ_STACK_TOP		(FZ_DATA + FZ_DATA_SIZE - 128)

#define FZ_USER_CS		0x33	/* __USER_CS */
#define FZ_USER32_CS		0x23	/* __USER32_CS */
#define FZ_USER_DS		0x2b	/* __USER_DS */
#define FZ_TF			0x100
#define FZ_ARITH_FLAGS		0x8d5	/* CF PF AF ZF SF OF */

#define FZ_MAX_ITEMS		24
#define FZ_MAX_STOPS		5000	/* signals and traps within one block */
#define FZ_RECORDS		16384
#define FZ_HANG_SECONDS		20

/* Registers by their encoding. */
enum { RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13,
	R14, R15 };

/* What the signal handler saw, in the shared data. */
struct fz_log {
	uint64_t signals;
	uint64_t digest;
};

/* A digest step; also derives the seeds of blocks and items (splitmix64). */
static inline uint64_t fz_mix(uint64_t h, uint64_t v)
{
	uint64_t z = h + 0x9e3779b97f4a7c15ULL * (v + 1);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* --- the generator --- */

struct fz_gen {
	uint8_t buf[FZ_CODE_SIZE];
	size_t len;
	uint64_t rng;
	bool compat;		/* emitting 32-bit code */
	bool tf;		/* the program's TF is on: every flag is seen */
};

#define EMIT(g, s)	emit(g, s, sizeof(s) - 1)

struct fz_item {
	const char *name;
	void (*emit)(struct fz_gen *g);
};

/*
 * A block: its seed and which of its items are in. Item i is drawn from
 * its own generator state, so leaving items out keeps the others as
 * they were.
 */
struct fz_block {
	uint64_t seed;
	unsigned int nr;
	bool in[FZ_MAX_ITEMS];
	uint8_t kind[FZ_MAX_ITEMS];
	size_t start[FZ_MAX_ITEMS + 1];
};

/* --- running a block --- */

struct fz_tracee {
	pid_t pid;
	int backend;	/* PTRACE_BTS_BACKEND_*, -1: not branch traced */
	struct user_regs_struct regs0;
	struct user_fpregs_struct fp0;
};

/* The end state of one run of a block. */
struct fz_state {
	struct user_regs_struct regs;
	struct user_fpregs_struct fp;
	uint8_t ymmh[256];
	uint8_t data[FZ_DATA_SIZE];
	long nrec;
	struct bts_struct rec[FZ_RECORDS];
	char fail[160];
};

/* --- comparing --- */

struct fz_ctx {
	struct fz_tracee tracee[3];	/* untraced, then the backends */
	unsigned int nr_tracees;
	struct fz_state *state[3];
	struct fz_gen gen;
	unsigned long blocks, runs, records;
};

/* What a worker tells the parent. */
struct fz_tally {
	unsigned long blocks, runs, records;
	int bad;
};

/* --- other threads: code rewritten while the traced thread runs it --- */

/*
 * The traced thread calls a small function in a page of a memfd, mapped
 * executable at XM_CODE and writable at XM_ALIAS. A second thread of the
 * tracee (not traced) stores one of two forms of the word at XM_SITE, as
 * fast as it can, while a third spins on the traced thread's CPU so that
 * it is preempted often. Every call returns a value that shows which form
 * ran and whether a TF that was not the program's got into its data or
 * its flags: a PUSHF that stored the program's TF clear, a word nothing
 * pushed left alone, a POPF that loaded the program's flags without a
 * single-step trap of its own. The jcc forms count the calls that took
 * the branch, which the records from XM_SITE must match. The calls go on
 * past XM_CALLS until both forms ran, for XM_SECONDS at most.
 */
#define XM_CODE			0x30000000UL
#define XM_ALIAS		0x30100000UL
#define XM_SITE_OFF		0x40		/* even: one 16-bit store */
#define XM_SITE			(XM_CODE + XM_SITE_OFF)
#define XM_CALLS		1000
#define XM_SECONDS		10	/* at most, to see both forms */

/**
 * struct xm_form - a function whose word at XM_SITE_OFF is rewritten
 * @head:   its bytes up to the site
 * @site:   the two bytes at the site, as the code starts
 * @alt:    the other form of those two bytes
 * @tail:   its bytes after the site
 * @stub:   bytes at XM_SITE + @target, if any
 * @check:  what a call's result says: 0 or 1 for the form that ran, -1 for
 *	    a result no form gives
 * @jcc:    the forms are a jcc to @target and what it is rewritten to
 * @target: the jcc's target, from XM_SITE
 * @int3:   no rewriter thread: the tracer inserts and removes an int3 at
 *	    the site through /proc/PID/mem, as a debugger in non-stop mode
 *	    does, and the code is a private mapping, as a program's is
 * @uprobe: no rewriter thread: the tracer registers and removes a uprobe
 *	    right before the site, in a private mapping as @int3
 *
 * Only the site's first byte differs between the forms: a CPU may fetch
 * the bytes of an instruction another CPU writes one at a time.
 */
struct xm_form {
	const uint8_t *head, *tail, *stub;
	uint8_t head_len, tail_len, stub_len;
	uint8_t site[2], alt[2];
	int (*check)(long r, long arg);
	bool jcc;
	unsigned int target;
	bool int3, uprobe;
};

/* What a run found, in memory the tracee shares with the tracer. */
struct xm_result {
	unsigned long calls, rewrites, seen[2], bad, taken, preempted, hits;
	int memfd;
	long first_bad, first_arg;
	int stop, done;
	/* the tracer's */
	unsigned long stops, records, from_site, stray;
	char fail[160];
};

/* ptrace_bts_fuzz_gen.c */
extern bool fz_has_avx, fz_has_xop, fz_amd;
uint64_t fz_rand(struct fz_gen *g);
unsigned int fz_below(struct fz_gen *g, unsigned int n);
void e8(struct fz_gen *g, uint8_t b);
void e16(struct fz_gen *g, uint16_t v);
void e32(struct fz_gen *g, uint32_t v);
void emit(struct fz_gen *g, const char *bytes, size_t n);
uint32_t fz_here(struct fz_gen *g);
void fz_land8(struct fz_gen *g, size_t at);
void fz_land32(struct fz_gen *g, size_t at);
void fz_back8(struct fz_gen *g, size_t target);
uint8_t fz_modrm(int mod, int reg, int rm);
void fz_rex(struct fz_gen *g, bool w, int reg, int rm, bool force);
int fz_reg(struct fz_gen *g, unsigned int avoid);
void fz_noise_prefix(struct fz_gen *g);
void fz_alu(struct fz_gen *g, unsigned int avoid);
void fz_tf_on(struct fz_gen *g);
void fz_tf_off(struct fz_gen *g);
void fz_filler(struct fz_gen *g, unsigned int avoid, unsigned int max);
void fz_junk(struct fz_gen *g);
size_t fz_lea_rip(struct fz_gen *g, int reg, bool w);
size_t fz_arm_resume(struct fz_gen *g);

/* ptrace_bts_fuzz_items.c */
extern const struct fz_item fz_items[];
void fz_block_init(struct fz_block *b, uint64_t seed);
uint32_t fz_block_code(struct fz_block *b, struct fz_gen *g);

/* ptrace_bts_fuzz_run.c */
void fz_dump(struct fz_ctx *c, struct fz_block *b);
int fz_init(struct fz_ctx *c, int backend);
void fz_fini(struct fz_ctx *c);
int fz_one(struct fz_ctx *c, struct fz_block *b, const char *where);
int fz_parallel(uint64_t seed, unsigned long blocks, int backend,
		unsigned int workers, struct fz_tally *sum);
unsigned int fz_workers(void);

/* ptrace_bts_fuzz_xmod.c */
int xm_check_jcc(long r, long arg);
extern const struct xm_form xm_forms[];
bool xm_by_tracer(const struct xm_form *form);
int xm_run(const struct xm_form *form, int backend,
	   struct xm_result *res);

#endif /* PTRACE_BTS_FUZZ_H */
