// SPDX-License-Identifier: GPL-2.0
/*
 * Random differential testing of ptrace branch tracing.
 *
 * A seeded generator writes blocks of x86-64 machine code: every kind of
 * branch (short and near jcc, loop and jcxz, direct, indirect and far
 * jumps and calls, rets, iret, a trip through 32-bit compat code),
 * prefixes before branches and other instructions, VEX, EVEX and XOP
 * encodings, PUSHF/POPF/IRET games with the program's own TF, MOV SS,
 * syscalls, int1 and int3, and faults that a signal handler resumes.
 *
 * Each block runs in three long-lived tracees: one that is ptraced but not
 * branch traced, and one per backend under test (the emulated one; on
 * BTS hardware, the hardware one too). All must end the block in the same
 * state: general, x87/SSE and AVX registers, flags, the block's memory
 * (data and stack) and a digest of every signal the handler saw, with the
 * flags of its signal frame. Where two backends trace, their records must
 * be the same, record for record.
 *
 * A divergence prints the seed, then shrinks the block, one item at a
 * time, to the smallest one that still diverges, and dumps it.
 *
 * The test cases run a fixed number of blocks, in one worker process per
 * CPU (up to two), on the backend the kernel says the machine has (see
 * expected_backend()). A long run, the rerun of one block, and the test
 * cases with another number of blocks each:
 *	ptrace_bts_fuzz [--backend B] --seed S --blocks N
 *	ptrace_bts_fuzz [--backend B] --block-seed X
 *	ptrace_bts_fuzz [--backend B] [--case-blocks N] [harness options]
 * (or --name=value). B is hardware, emulated or any; "none" runs each block untraced twice,
 * a check of the test.
 *
 * This file has the test cases and the options; the generator is in
 * ptrace_bts_fuzz_gen.c and _items.c, the runner and the comparison in
 * _run.c, the code the xmod cases rewrite in _xmod.c.
 */
#define _GNU_SOURCE
#include "../kselftest_harness.h"
#include "ptrace_bts_fuzz.h"

/* The options of main(): --backend and --case-blocks. */
static const char *fz_opt_backend;
static unsigned long fz_opt_case_blocks;

#define FZ_BACKEND_NONE		(-1)
#define FZ_BACKEND_UNKNOWN	(-2)

/*
 * The backend --backend names, else the one the kernel says the machine
 * has; "none" runs each block untraced twice, a check of the test itself.
 */
static int fz_backend(void)
{
	const char *name = fz_opt_backend;

	if (!name)
		return expected_backend();
	if (!strcmp(name, "none"))
		return FZ_BACKEND_NONE;
	if (!strcmp(name, "any"))
		return PTRACE_BTS_BACKEND_ANY;
	if (!strcmp(name, "hardware"))
		return PTRACE_BTS_BACKEND_HARDWARE;
	if (!strcmp(name, "emulated"))
		return PTRACE_BTS_BACKEND_EMULATED;
	return FZ_BACKEND_UNKNOWN;
}

/* Blocks per test case, unless --case-blocks says otherwise. */
#define FZ_BLOCKS		1500
#define FZ_BLOCKS_HW		1000

static unsigned long fz_blocks(unsigned long dflt)
{
	return fz_opt_case_blocks ?: dflt;
}

/* Each case its own seed. */
FIXTURE(fuzz) {
};

FIXTURE_VARIANT(fuzz) {
	uint64_t seed;
};

FIXTURE_VARIANT_ADD(fuzz, seed_1) { .seed = 0x5eed0001 };
FIXTURE_VARIANT_ADD(fuzz, seed_2) { .seed = 0x5eed0002 };
FIXTURE_VARIANT_ADD(fuzz, seed_3) { .seed = 0x5eed0003 };
FIXTURE_VARIANT_ADD(fuzz, seed_4) { .seed = 0x5eed0004 };

FIXTURE_SETUP(fuzz)
{
}

FIXTURE_TEARDOWN(fuzz)
{
}

/*
 * Every block ends the same untraced and traced, and two backends record
 * the same branches. Where the hardware backend runs too, each block costs
 * a third run: fewer blocks per case.
 */
TEST_F_TIMEOUT(fuzz, blocks_agree, 300)
{
	int backend = fz_backend();
	struct fz_tally sum;

	EXPECT_EQ(0, fz_parallel(variant->seed,
				 fz_blocks(backend == PTRACE_BTS_BACKEND_HARDWARE ?
					   FZ_BLOCKS_HW : FZ_BLOCKS),
				 backend, fz_workers(), &sum));
	ksft_print_msg("%lu blocks, %lu runs, %lu records compared\n",
		       sum.blocks, sum.runs, sum.records);
}

static void xm_print(const char *how, const struct xm_result *r)
{
	ksft_print_msg("%s: %lu calls (%lu, %lu by form, %lu bad, first %#lx for %ld)\n",
		       how, r->calls, r->seen[0], r->seen[1], r->bad,
		       r->first_bad, r->first_arg);
	ksft_print_msg("%s: %lu rewrites, %lu hits, %lu preempted\n",
		       how, r->rewrites, r->hits, r->preempted);
	ksft_print_msg("%s: %lu taken, %lu records, %lu from site, %lu stray\n",
		       how, r->taken, r->records, r->from_site, r->stray);
}

FIXTURE(xmod) {
	struct xm_result *res;
};

FIXTURE_VARIANT(xmod) {
	unsigned int form;
};

FIXTURE_VARIANT_ADD(xmod, pushf) { .form = 0 };
FIXTURE_VARIANT_ADD(xmod, pushf_len) { .form = 1 };
FIXTURE_VARIANT_ADD(xmod, popf) { .form = 2 };
FIXTURE_VARIANT_ADD(xmod, popf_len) { .form = 3 };
FIXTURE_VARIANT_ADD(xmod, jcc) { .form = 4 };
FIXTURE_VARIANT_ADD(xmod, jcc_len) { .form = 5 };
FIXTURE_VARIANT_ADD(xmod, int3) { .form = 6 };
FIXTURE_VARIANT_ADD(xmod, uprobe) { .form = 7 };

FIXTURE_SETUP(xmod)
{
	self->res = mmap(NULL, sizeof(*self->res), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->res);
}

FIXTURE_TEARDOWN(xmod)
{
	munmap(self->res, sizeof(*self->res));
}

/*
 * Untraced first: every call's result is one that a form gives, and both
 * forms ran (the rewrites landed while the calls ran). Then traced: the
 * same, no signal of its own, and the jcc forms' records from the site
 * are exactly the taken calls (never more: a record is a branch the CPU
 * took; the jz/jnz forms, which the trace always decodes as one of them,
 * lose none).
 */
TEST_F_TIMEOUT(xmod, results_hold, 240)
{
	const struct xm_form *form = &xm_forms[variant->form];
	int backend = fz_backend();
	struct xm_result *r = self->res;

	ASSERT_EQ(0, xm_run(form, -1, r)) TH_LOG("untraced: %s", r->fail);
	xm_print("untraced", r);
	ASSERT_EQ(0, r->bad);
	ASSERT_NE(0, xm_by_tracer(form) ? r->hits : r->seen[0]);
	ASSERT_NE(0, r->seen[1]);
	if (backend < 0)
		return;
	EXPECT_EQ(0, xm_run(form, backend, r)) TH_LOG("traced: %s", r->fail);
	xm_print("traced", r);
	EXPECT_EQ(0, r->bad);
	EXPECT_NE(0, xm_by_tracer(form) ? r->hits : r->seen[0]);
	EXPECT_NE(0, r->seen[1]);
	if (!form->jcc)
		return;
	EXPECT_EQ(0, r->stray);
	/* where the forms differ in shape, a record may be lost, not made */
	EXPECT_GE(r->taken, r->from_site);
	if (form->check == xm_check_jcc)
		EXPECT_EQ(r->taken, r->from_site);
}

static void fz_usage(void)
{
	fprintf(stderr,
		"usage: ptrace_bts_fuzz [--backend B] --seed S --blocks N\n"
		"       ptrace_bts_fuzz [--backend B] --block-seed X\n"
		"       ptrace_bts_fuzz [--backend B] [--case-blocks N] [harness options]\n"
		"B: hardware, emulated, any or none (untraced twice)\n");
}

int main(int argc, char **argv)
{
	unsigned long long seed = 1, block_seed = 0;
	unsigned long blocks = 0;
	struct fz_tally sum;
	struct fz_block b;
	struct fz_ctx c;
	int i, bad;

	for (i = 1; i < argc && !strncmp(argv[i], "--", 2); i++) {
		char *name = argv[i], *val = strchr(name, '=');

		/* --name value, or --name=value */
		if (val)
			*val++ = 0;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			break;
		if (!strcmp(name, "--seed")) {
			seed = strtoull(val, NULL, 0);
		} else if (!strcmp(name, "--blocks")) {
			blocks = strtoul(val, NULL, 0);
		} else if (!strcmp(name, "--block-seed")) {
			block_seed = strtoull(val, NULL, 0);
		} else if (!strcmp(name, "--backend")) {
			fz_opt_backend = val;
		} else if (!strcmp(name, "--case-blocks")) {
			fz_opt_case_blocks = strtoul(val, NULL, 0);
		} else {
			fz_usage();
			return 2;
		}
	}
	if (fz_backend() == FZ_BACKEND_UNKNOWN ||
	    (i < argc && (blocks || block_seed))) {
		fz_usage();
		return 2;
	}
	if (block_seed) {
		if (fz_init(&c, fz_backend())) {
			perror("ptrace_bts_fuzz");
			return 2;
		}
		fz_block_init(&b, block_seed);
		bad = fz_one(&c, &b, "block");
		if (!bad)
			fz_dump(&c, &b);
		printf("%s\n", bad ? "diverges" : "agrees");
		fz_fini(&c);
		return bad;
	}
	if (!blocks) {
		/* The harness sees the program's name, then its own options. */
		argv[i - 1] = argv[0];
		return test_harness_run(argc - i + 1, argv + i - 1);
	}
	bad = fz_parallel(seed, blocks, fz_backend(), fz_workers(), &sum);
	printf("%lu blocks, %lu runs, %lu records compared, %d divergence%s\n",
	       sum.blocks, sum.runs, sum.records, bad, bad == 1 ? "" : "s");
	return bad ? 1 : 0;
}
