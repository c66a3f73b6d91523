// SPDX-License-Identifier: GPL-2.0
/*
 * The PMU model's counting cases (arch-pmu=on): exact counts of retired
 * instructions and branches for known code at CPL 0 and CPL 3, faults that
 * do not retire, cycles that advance, the overflow PMI and the freeze on
 * PMI.  Each count is compared with what the code retires by construction
 * (pmu_seq.S), never with what a previous run of the model gave.
 */
#include "kernel.h"

extern void pmu_loop(u64 n);
extern void pmu_rep(u64 n);
extern char pmu_loop_dec[], pmu_loop_jnz[], pmu_loop_ret[];
extern char user_loop_short[], user_loop_long[], user_ud[], user_rdpmc[];
extern volatile u64 user_pmc;
extern char ud_handler[];

#define GP_BRANCHES	0	/* general counter 0: branches */
#define GP_INSNS	1	/* general counter 1: instructions */
#define ALL_COUNTERS	(0xfULL | (7ULL << 32))
/* Iterations of a loop that takes milliseconds under TCG. */
#define PMU_CYCLES_LOOP	1000000

struct counts {
	u64 insns;	/* IA32_FIXED_CTR0 */
	u64 cycles;	/* IA32_FIXED_CTR1 */
	u64 branches;	/* general counter 0 */
	u64 gp_insns;	/* general counter 1, the other CPL */
};

static void pmu_off(void)
{
	int i;

	wrmsr(MSR_GLOBAL_CTRL, 0);
	wrmsr(MSR_FIXED_CTR_CTRL, 0);
	for (i = 0; i < 4; i++) {
		wrmsr(MSR_PERFEVTSEL0 + i, 0);
		wrmsr(MSR_IA32_PMC0 + i, 0);
	}
	for (i = 0; i < 3; i++)
		wrmsr(MSR_FIXED_CTR0 + i, 0);
	wrmsr(MSR_GLOBAL_STATUS_RESET, rdmsr(MSR_GLOBAL_STATUS));
}

/*
 * Fixed counters 0 and 1 and general counter 0 (branches) at @cpl_bits of
 * the fixed control (FIXED_OS, FIXED_USR); general counter 1 counts the
 * instructions at the other CPL.
 */
static void pmu_on(u32 fixed_bits)
{
	u32 mine = fixed_bits == FIXED_OS ? EVTSEL_OS : EVTSEL_USR;
	u32 other = fixed_bits == FIXED_OS ? EVTSEL_USR : EVTSEL_OS;

	pmu_off();
	wrmsr(MSR_FIXED_CTR_CTRL, fixed_bits | fixed_bits << 4);
	wrmsr(MSR_PERFEVTSEL0 + GP_BRANCHES, EVENT_BRANCHES | EVTSEL_EN | mine);
	wrmsr(MSR_PERFEVTSEL0 + GP_INSNS, EVENT_INSNS | EVTSEL_EN | other);
	wrmsr(MSR_GLOBAL_CTRL, ALL_COUNTERS);
}

static void pmu_read(struct counts *c)
{
	wrmsr(MSR_GLOBAL_CTRL, 0);
	c->insns = rdmsr(MSR_FIXED_CTR0);
	c->cycles = rdmsr(MSR_FIXED_CTR0 + 1);
	c->branches = rdmsr(MSR_IA32_PMC0 + GP_BRANCHES);
	c->gp_insns = rdmsr(MSR_IA32_PMC0 + GP_INSNS);
}

static void kernel_loop(u64 n, struct counts *c)
{
	pmu_on(FIXED_OS);
	pmu_loop(n);
	pmu_read(c);
}

static void user_run(void *entry, struct counts *c)
{
	pmu_on(FIXED_USR);
	run_user(entry, 0, USER_CS);
	pmu_read(c);
}

static void diag_counts(const char *what, const struct counts *c)
{
	diag_hex(what, c->insns);
	diag_hex("  branches", c->branches);
	diag_hex("  other CPL", c->gp_insns);
}

static void test_kernel_counts(void)
{
	struct counts s, l;
	int ok;

	kernel_loop(PMU_SHORT, &s);
	kernel_loop(PMU_LONG, &l);
	ok = l.insns - s.insns == 2 * (PMU_LONG - PMU_SHORT) &&
	     l.branches - s.branches == PMU_LONG - PMU_SHORT;
	tap(ok, "PMU: CPL 0 loop: instructions and branches retired, exact");
	if (!ok) {
		diag_counts("short", &s);
		diag_counts("long", &l);
	}
	tap(s.gp_insns == 0 && l.gp_insns == 0,
	    "PMU: a USR-only counter counts nothing at CPL 0");
}

/* A REP string instruction retires once, however many iterations. */
static void test_rep_once(void)
{
	struct counts s, l;

	pmu_on(FIXED_OS);
	pmu_rep(1);
	pmu_read(&s);
	pmu_on(FIXED_OS);
	pmu_rep(PMU_SHORT);
	pmu_read(&l);
	tap(s.insns == l.insns,
	    "PMU: REP STOSB retires once, for 1 byte as for 100");
	if (s.insns != l.insns) {
		diag_hex("1 byte", s.insns);
		diag_hex("100 bytes", l.insns);
	}
}

/*
 * perf's precise cycles on Skylake: INST_RETIRED with INV and CMASK 16,
 * cycles in which fewer than 16 instructions retire, which is every one.
 */
static void test_cycles_alias(void)
{
	u64 v;

	pmu_off();
	wrmsr(MSR_PERFEVTSEL0, EVENT_INSNS | EVTSEL_EN | EVTSEL_OS |
	      (1 << 23) | (16ULL << 24));
	wrmsr(MSR_GLOBAL_CTRL, 1);
	pmu_loop(PMU_CYCLES_LOOP);
	wrmsr(MSR_GLOBAL_CTRL, 0);
	v = rdmsr(MSR_IA32_PMC0);
	pmu_off();
	tap(v > 0, "PMU: INST_RETIRED with INV and CMASK (perf's cycles:pp on Skylake) counts cycles");
}

/*
 * Cycles follow the vCPU thread's CPU time: a loop a thousand times longer
 * than another takes more of it, whatever the host does meanwhile.
 */
static void test_cycles(void)
{
	struct counts s, l;

	kernel_loop(PMU_SHORT, &s);
	kernel_loop(PMU_CYCLES_LOOP, &l);
	tap(s.cycles > 0 && l.cycles > s.cycles,
	    "PMU: core cycles advance, more for the longer loop");
	if (!s.cycles || l.cycles <= s.cycles) {
		diag_hex("short", s.cycles);
		diag_hex("long", l.cycles);
	}
}

static void test_user_counts(void)
{
	struct counts s, l;
	int ok;

	user_run(user_loop_short, &s);
	user_run(user_loop_long, &l);
	ok = s.insns == 2 * PMU_SHORT + 2 && l.insns == 2 * PMU_LONG + 2 &&
	     s.branches == PMU_SHORT + 1 && l.branches == PMU_LONG + 1;
	tap(ok, "PMU: CPL 3 loop: MOV, DEC/JNZ, INT retired, exact, per CPL");
	if (!ok) {
		diag_counts("short", &s);
		diag_counts("long", &l);
	}
	/* The way in and out at CPL 0 is the same code for both. */
	tap(s.gp_insns == l.gp_insns && s.gp_insns > 0,
	    "PMU: the OS-only counter sees the same CPL 0 code for both loops");
}

static void test_faults_not_counted(void)
{
	u64 cr4, pce_off, pce_on;
	struct counts c;

	set_gate(6, fix_ud, 0);
	fix_reset(0, 2);
	user_run(user_ud, &c);
	set_gate(6, ud_handler, 0);
	tap(fix_count == 1 && c.insns == 3 && c.branches == 1,
	    "PMU: a UD2 that faults does not retire");
	if (c.insns != 3)
		diag_hex("instructions", c.insns);

	/* RDPMC faults in its helper: the fault takes the count back. */
	asm volatile("mov %%cr4, %0" : "=r"(cr4));
	set_gate(13, fix_gp, 0);
	fix_reset(0, 2);
	asm volatile("mov %0, %%cr4" : : "r"(cr4 & ~(1ULL << 8)));
	user_run(user_rdpmc, &c);
	pce_off = c.insns;
	asm volatile("mov %0, %%cr4" : : "r"(cr4 | (1ULL << 8)));
	user_run(user_rdpmc, &c);
	pce_on = c.insns;
	asm volatile("mov %0, %%cr4" : : "r"(cr4));
	set_gate(13, gp_handler, 0);
	tap(fix_count == 1 && pce_off == 6 && pce_on == 7,
	    "PMU: RDPMC that raises #GP does not retire, one that reads does");
	if (pce_off != 6 || pce_on != 7) {
		diag_hex("#GP", pce_off);
		diag_hex("read", pce_on);
	}
}

/*
 * General counter GP_INSNS, 500 instructions short of wrapping, with INT
 * and a PMI handler, over a loop of 2 * PMU_LONG instructions with
 * interrupts on: it wraps in the loop. @debugctl is written first.
 */
static void overflow_in_loop(u64 debugctl)
{
	pmu_off();
	set_gate(PMI_VECTOR, pmi_handler, 0);
	apic_write(APIC_LVTPC, PMI_VECTOR);
	pmi_count = 0;
	if (debugctl)
		wrmsr(MSR_DEBUGCTL, debugctl);
	wrmsr(MSR_IA32_PMC0 + GP_INSNS, (1ULL << 48) - 500);
	wrmsr(MSR_PERFEVTSEL0 + GP_INSNS,
	      EVENT_INSNS | EVTSEL_EN | EVTSEL_OS | EVTSEL_INT);
	wrmsr(MSR_GLOBAL_CTRL, 1ULL << GP_INSNS);
	asm volatile("sti");
	pmu_loop(PMU_LONG);
	asm volatile("cli");
}

static void test_overflow_pmi(void)
{
	u64 status, value;
	u32 lvtpc;

	overflow_in_loop(0);
	wrmsr(MSR_GLOBAL_CTRL, 0);
	status = rdmsr(MSR_GLOBAL_STATUS);
	value = rdmsr(MSR_IA32_PMC0 + GP_INSNS);
	lvtpc = apic_read(APIC_LVTPC);
	tap(pmi_count == 1 && status == 1ULL << GP_INSNS &&
	    value > 2 * PMU_LONG - 500 && value < 2 * PMU_LONG &&
	    (lvtpc & (1 << 16)),
	    "PMU: the wrap of a counter with INT sets its status bit and raises one PMI through LVTPC, which it masks");
	if (pmi_count != 1 || status != 1ULL << GP_INSNS) {
		diag_hex("PMIs", pmi_count);
		diag_hex("status", status);
		diag_hex("counter", value);
	}
	wrmsr(MSR_GLOBAL_STATUS_RESET, status);
	tap(rdmsr(MSR_GLOBAL_STATUS) == 0,
	    "PMU: GLOBAL_STATUS_RESET clears the overflow bit");
	apic_write(APIC_LVTPC, 1 << 16);
	pmu_off();
}

static void test_freeze(void)
{
	u64 status, frozen, after, thawed;

	overflow_in_loop(DEBUGCTL_FREEZE_PERFMON_ON_PMI);
	status = rdmsr(MSR_GLOBAL_STATUS);
	frozen = rdmsr(MSR_IA32_PMC0 + GP_INSNS);
	pmu_loop(PMU_LONG);
	after = rdmsr(MSR_IA32_PMC0 + GP_INSNS);
	wrmsr(MSR_GLOBAL_STATUS_RESET, status);
	pmu_loop(PMU_LONG);
	thawed = rdmsr(MSR_IA32_PMC0 + GP_INSNS);
	wrmsr(MSR_DEBUGCTL, 0);
	tap(pmi_count == 1 && (status & GLOBAL_CTR_FRZ) && after == frozen &&
	    thawed > after + 2 * PMU_LONG,
	    "PMU: FREEZE_PERFMON_ON_PMI: the PMI sets CTR_FRZ and stops the counters until it is cleared");
	/* The frozen stretch must not leave code uncounted once thawed. */
	test_kernel_counts();
	if (!(status & GLOBAL_CTR_FRZ) || after != frozen) {
		diag_hex("status", status);
		diag_hex("frozen", frozen);
		diag_hex("after", after);
		diag_hex("thawed", thawed);
	}
	apic_write(APIC_LVTPC, 1 << 16);
	pmu_off();
}

static void test_reserved(void)
{
	gp_count = 0;
	wrmsr(MSR_GLOBAL_CTRL, 1ULL << 4);
	wrmsr(MSR_PERFEVTSEL0, 1ULL << 32);
	wrmsr(MSR_FIXED_CTR_CTRL, 1ULL << 12);
	wrmsr(MSR_GLOBAL_STATUS, 0);
	tap(gp_count == 4 && rdmsr(MSR_GLOBAL_CTRL) == 0 &&
	    rdmsr(MSR_PERFEVTSEL0) == 0 && rdmsr(MSR_FIXED_CTR_CTRL) == 0,
	    "PMU: reserved bits of GLOBAL_CTRL, PERFEVTSEL and FIXED_CTR_CTRL, and a write to GLOBAL_STATUS, raise #GP");
}

/* The PEBS fields of the 64-bit DS save area, and a format 3 record. */
enum {
	DS_PEBS_BASE = 4, DS_PEBS_INDEX, DS_PEBS_ABSMAX, DS_PEBS_THRESHOLD,
	DS_PEBS_RESET0,
};

struct pebs_record {
	u64 flags, ip;
	u64 ax, bx, cx, dx, si, di, bp, sp;
	u64 r8, r9, r10, r11, r12, r13, r14, r15;
	u64 status, dla, dse, lat, eventing_ip, tsx, tsc;
};

/* Sampling period of the PEBS case: odd, so records alternate DEC and JNZ. */
#define PEBS_PERIOD	7
#define PEBS_LOOPS	100
#define PEBS_PMI_AT	10

static void pebs_setup(u64 reset)
{
	volatile u64 *area = (volatile u64 *)DS_PAGE;
	int i;

	memset((void *)PEBS_BUFFER, 0, PEBS_RECORDS * PEBS_RECORD_SIZE);
	memset((void *)DS_PAGE, 0, 0x80);
	area[DS_PEBS_BASE] = PEBS_BUFFER;
	area[DS_PEBS_INDEX] = PEBS_BUFFER;
	area[DS_PEBS_ABSMAX] = PEBS_BUFFER + PEBS_RECORDS * PEBS_RECORD_SIZE;
	area[DS_PEBS_THRESHOLD] = PEBS_BUFFER + PEBS_PMI_AT * PEBS_RECORD_SIZE;
	for (i = 0; i < 4; i++)
		area[DS_PEBS_RESET0 + i] = reset;
	wrmsr(MSR_DS_AREA, DS_PAGE);
}

/*
 * Where a record's eventing instruction is in the PEBS case's loop of
 * PEBS_LOOPS iterations: DEC of iteration j is instruction 2j - 1, its
 * JNZ 2j, and RDI after either is PEBS_LOOPS - j. -1 if not in the loop.
 */
static long pebs_position(const struct pebs_record *r)
{
	if (r->eventing_ip == (u64)pmu_loop_dec &&
	    r->ip == (u64)pmu_loop_jnz)
		return 2 * (PEBS_LOOPS - r->di) - 1;
	if (r->eventing_ip == (u64)pmu_loop_jnz &&
	    r->ip == (r->di ? (u64)pmu_loop_dec : (u64)pmu_loop_ret))
		return 2 * (PEBS_LOOPS - r->di);
	return -1;
}

/*
 * PEBS on instructions retired: every PEBS_PERIOD-th instruction writes a
 * record with the eventing IP, the IP after it and the registers then; the
 * counter reloads from the save area; the record that reaches the
 * threshold raises the PMI with OvfBuffer.  The records' own registers
 * place them in the loop: consecutive ones must be exactly PEBS_PERIOD
 * instructions apart.
 */
static void test_pebs(void)
{
	const struct pebs_record *rec = (const void *)PEBS_BUFFER;
	volatile u64 *area = (volatile u64 *)DS_PAGE;
	u64 reset = (1ULL << 48) - PEBS_PERIOD;
	long pos, prev = -1, in_loop = 0, apart = 0, pairs = 0;
	u64 status, caps, misc;
	int n, i;

	caps = rdmsr(MSR_PERF_CAPABILITIES);
	misc = rdmsr(MSR_MISC_ENABLE);
	tap(((caps >> 8) & 0xf) == 3 && (caps & (1 << 6)) &&
	    !(misc & (1 << 12)),
	    "PEBS: available (IA32_MISC_ENABLE), format 3 and trap-like (IA32_PERF_CAPABILITIES)");

	pmu_off();
	pebs_setup(reset);
	set_gate(PMI_VECTOR, pmi_handler, 0);
	apic_write(APIC_LVTPC, PMI_VECTOR);
	pmi_count = 0;
	wrmsr(MSR_IA32_PMC0, reset);
	wrmsr(MSR_PERFEVTSEL0, EVENT_INSNS | EVTSEL_EN | EVTSEL_OS | EVTSEL_INT);
	wrmsr(MSR_PEBS_ENABLE, 1);
	wrmsr(MSR_GLOBAL_CTRL, 1);
	asm volatile("sti");
	pmu_loop(PEBS_LOOPS);
	asm volatile("cli");
	wrmsr(MSR_GLOBAL_CTRL, 0);
	wrmsr(MSR_PEBS_ENABLE, 0);
	status = rdmsr(MSR_GLOBAL_STATUS);
	n = (area[DS_PEBS_INDEX] - PEBS_BUFFER) / PEBS_RECORD_SIZE;

	/*
	 * Adjacent records in the loop are PEBS_PERIOD apart; the threshold
	 * PMI's handler counts too, and breaks the loop's run once.
	 */
	for (i = 0; i < n; i++) {
		pos = pebs_position(&rec[i]);
		if (pos < 0) {
			prev = -1;
			continue;
		}
		in_loop++;
		if (prev >= 0) {
			pairs++;
			if (pos - prev == PEBS_PERIOD) {
				apart++;
			} else {
				diag_hex("record", i);
				diag_hex("  position", pos);
				diag_hex("  previous", prev);
			}
		}
		prev = pos;
	}
	/* 200 instructions in the loop: 28 or 29 records, a few outside. */
	tap(in_loop >= 2 * PEBS_LOOPS / PEBS_PERIOD - 3 && apart == pairs &&
	    pairs >= in_loop - 3,
	    "PEBS: records every 7th instruction, eventing IP exact, IP and RDI after it");
	if (in_loop < 2 * PEBS_LOOPS / PEBS_PERIOD - 3 || apart != pairs) {
		diag_hex("records", n);
		diag_hex("in the loop", in_loop);
		diag_hex("7 apart", apart);
	}
	tap(n > PEBS_PMI_AT && pmi_count == 1 && (status & GLOBAL_OVF_BUFFER) &&
	    !(status & 1) && rec[0].status == 1,
	    "PEBS: the record that reaches the threshold raises one PMI with OvfBuffer; the counter's own overflow bit stays clear");
	if (pmi_count != 1 || !(status & GLOBAL_OVF_BUFFER)) {
		diag_hex("PMIs", pmi_count);
		diag_hex("status", status);
	}
	tap(rec[1].sp == rec[2].sp && rec[1].flags & 2 && rec[1].tsc &&
	    rec[2].tsc > rec[1].tsc && !rec[1].dla && !rec[1].lat,
	    "PEBS: RSP, RFLAGS and TSC recorded; data address and latency 0");
	wrmsr(MSR_GLOBAL_STATUS_RESET, status);
	wrmsr(MSR_DS_AREA, 0);
	apic_write(APIC_LVTPC, 1 << 16);
	pmu_off();
}

/* The benchmark's loop, and its runs per configuration (the fastest counts). */
#define BENCH_LOOPS	2000000
#define BENCH_RUNS	3
#define BENCH_PERIOD	100003

static u64 rdtsc(void)
{
	u32 lo, hi;

	asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return lo | (u64)hi << 32;
}

static u64 bench_loop(void)
{
	u64 best = ~0ULL, t;
	int i;

	for (i = 0; i < BENCH_RUNS; i++) {
		t = rdtsc();
		pmu_loop(BENCH_LOOPS);
		t = rdtsc() - t;
		if (t < best)
			best = t;
	}
	return best;
}

static void bench_print(const char *what, u64 t, u64 ref)
{
	u64 pct = t * 100 / (ref ? ref : 1);

	puts_serial("# bench: ");
	puts_serial(what);
	puts_serial(": ");
	put_dec(pct / 100);
	puts_serial(".");
	puts_serial(pct % 100 < 10 ? "0" : "");
	put_dec(pct % 100);
	puts_serial("x the loop with no counter enabled\n");
}

/*
 * Not a test: what counting costs under TCG, as ratios to the same loop
 * with every counter off in this boot (the TSC follows the host's time).
 * With every counter off the translated code is QEMU's own: the model
 * adds nothing to it.
 */
static void bench_pmu(void)
{
	u64 off, insns, branches, pebs, cycles;

	pmu_off();
	off = bench_loop();

	wrmsr(MSR_FIXED_CTR_CTRL, FIXED_OS << 4);
	wrmsr(MSR_GLOBAL_CTRL, 1ULL << 33);
	cycles = bench_loop();
	pmu_off();

	wrmsr(MSR_FIXED_CTR_CTRL, FIXED_OS);
	wrmsr(MSR_GLOBAL_CTRL, 1ULL << 32);
	insns = bench_loop();
	pmu_off();

	wrmsr(MSR_PERFEVTSEL0, EVENT_BRANCHES | EVTSEL_EN | EVTSEL_OS);
	wrmsr(MSR_GLOBAL_CTRL, 1);
	branches = bench_loop();
	pmu_off();

	pebs_setup((1ULL << 48) - BENCH_PERIOD);
	((volatile u64 *)DS_PAGE)[DS_PEBS_THRESHOLD] = ~0ULL;
	wrmsr(MSR_IA32_PMC0, (1ULL << 48) - BENCH_PERIOD);
	wrmsr(MSR_PERFEVTSEL0, EVENT_INSNS | EVTSEL_EN | EVTSEL_OS);
	wrmsr(MSR_PEBS_ENABLE, 1);
	wrmsr(MSR_GLOBAL_CTRL, 1);
	pebs = bench_loop();
	wrmsr(MSR_PEBS_ENABLE, 0);
	wrmsr(MSR_DS_AREA, 0);
	pmu_off();

	bench_print("core cycles counted (fixed counter 1)", cycles, off);
	bench_print("instructions counted (fixed counter 0)", insns, off);
	bench_print("branches counted (general counter 0)", branches, off);
	bench_print("PEBS on instructions, period 100003", pebs, off);
}

/*
 * Not a test either: the loop's time with no counter enabled, in TSC ticks,
 * printed in every boot. mk/qemu-test.sh divides a boot with the PMU by one
 * without: what a PMU that nobody uses costs.
 */
void bench_idle(void)
{
	if (rd.arch_pmu)
		pmu_off();
	puts_serial("# bench: idle loop ticks: ");
	put_dec(bench_loop());
	puts_serial("\n");
}

void test_pmu_counts(void)
{
	if (!rd.arch_pmu)
		return;
	test_kernel_counts();
	test_rep_once();
	test_cycles_alias();
	test_cycles();
	test_user_counts();
	test_faults_not_counted();
	test_overflow_pmi();
	test_freeze();
	test_reserved();
	test_pebs();
	bench_pmu();
	pmu_off();
}
