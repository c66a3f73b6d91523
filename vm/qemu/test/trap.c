// SPDX-License-Identifier: GPL-2.0
/*
 * Traps and interrupts (single-step, data breakpoint, the APIC timer, an
 * interrupted REP MOVS), DEBUGCTL.BTF, the DEBUGCTL bits, RDPMC.
 *
 * SDM vol. 3, "Branch Trace Store": a trap or an interrupt is recorded
 * from the instruction it interrupts to the handler.  For interrupts and
 * data breakpoints that is the RIP saved for the handler; for the
 * single-step trap the SDM is not explicit, so it follows the booted
 * bts-trap-from= reading (trap_from()).
 */
#include "kernel.h"

extern void seq_step(u32 ctl);
extern void seq_watch(u32 ctl);
extern void seq_btf(u32 ctl);
extern void seq_sti(u32 ctl);
extern void seq_rep(u32 ctl, u64 src, u64 dst, u64 count);
extern char st_insn[], st_next[], st_jmp_site[], st_jmp_to[];
extern char dw_next[], bf_jmp_site[], bf_to[];
extern char tm_after[], rep_site[], user_rdpmc[];
extern char pf_handler[], ud_handler[];
extern volatile u32 watched;
extern volatile u64 user_pmc, user_rflags;
extern char user_irq[], ui_ud_site[], ui_exit_site[], ud_iret_site[];

#define DR6_INIT	0xffff0ff0ULL
#define DR6_BS		(1 << 14)
#define DR6_B0		(1 << 0)

void fix_reset(u64 to, u64 skip)
{
	fix_to = to;
	fix_skip = skip;
	fix_count = 0;
	fix_vec = 0;
	fix_err = fix_rip = fix_cs = fix_rsp = fix_rcx = fix_cr2 = 0;
	fix_dr6 = 0;
	fix_debugctl = 0;
}

static void write_dr(int n, u64 v)
{
	switch (n) {
	case 0:
		asm volatile("mov %0, %%dr0" : : "r"(v));
		break;
	case 6:
		asm volatile("mov %0, %%dr6" : : "r"(v));
		break;
	case 7:
		asm volatile("mov %0, %%dr7" : : "r"(v));
		break;
	}
}

static void test_single_step(void)
{
	set_gate(1, fix_db, 0);
	fix_reset(0, 0);
	write_dr(6, DR6_INIT);

	exp_reset();
	exp_add(trap_from((u64)st_insn, (u64)st_next), (u64)fix_db);
	exp_add((u64)fix_db_iret, (u64)st_next);
	exp_add((u64)st_jmp_site, (u64)st_jmp_to);
	exp_add(trap_from((u64)st_jmp_site, (u64)st_jmp_to), (u64)fix_db);
	exp_add((u64)fix_db_iret, (u64)st_jmp_to);
	ds_setup_plain();
	seq_step(CTL_ALL);
	tap(exp_check() && fix_count == 2 && fix_rip == (u64)st_jmp_to &&
	    (fix_dr6 & DR6_BS),
	    "TF single-step over a NOP and a taken JMP: #DB records, from as bts-trap-from= reads");
}

static void test_watchpoint(void)
{
	fix_reset(0, 0);
	write_dr(0, (u64)&watched);
	write_dr(7, 0x000d0001);	/* L0, write, 4 bytes */

	exp_reset();
	exp_add((u64)dw_next, (u64)fix_db);	/* the saved RIP, any reading */
	exp_add((u64)fix_db_iret, (u64)dw_next);
	ds_setup_plain();
	seq_watch(CTL_ALL);
	write_dr(7, 0);
	tap(exp_check() && fix_count == 1 && fix_rip == (u64)dw_next &&
	    (fix_dr6 & 0xf) == DR6_B0,
	    "DR0 write watchpoint: #DB trap recorded from the next instruction");
}

static void timer_arm(u32 count)
{
	apic_write(APIC_TDCR, 0xb);		/* divide by 1 */
	apic_write(APIC_LVTT, TIMER_VECTOR);	/* one-shot */
	apic_write(APIC_TMICT, count);
}

static int timer_pending(void)
{
	return apic_read(APIC_IRR + 0x10 * (TIMER_VECTOR / 32)) &
	       (1u << (TIMER_VECTOR % 32));
}

static void test_timer(void)
{
	long spin;

	set_gate(TIMER_VECTOR, fix_timer, 0);
	fix_reset(0, 0);
	timer_arm(1000);
	for (spin = 0; spin < 100000000 && !timer_pending(); spin++)
		;

	/* pending at STI: taken after the one-instruction STI shadow */
	exp_reset();
	exp_add((u64)tm_after, (u64)fix_timer);
	exp_add((u64)fix_timer_iret, (u64)tm_after);
	ds_setup_plain();
	seq_sti(CTL_ALL);
	tap(spin < 100000000 && exp_check() && fix_count == 1 &&
	    fix_rip == (u64)tm_after,
	    "APIC timer interrupt after STI's shadow: recorded from the saved RIP");
}

static void test_rep(void)
{
	const u64 count = 8 << 20;

	/*
	 * The timer goes off 10 ms into an 8 MiB REP MOVSB (TCG copies
	 * about 20 bytes a microsecond).
	 */
	fix_reset(0, 0);
	exp_reset();
	exp_add((u64)rep_site, (u64)fix_timer);
	exp_add((u64)fix_timer_iret, (u64)rep_site);
	ds_setup_plain();
	timer_arm(10000000);
	seq_rep(CTL_ALL, 0x1000000, 0x2000000, count);
	tap(exp_check() && fix_count == 1 && fix_rip == (u64)rep_site &&
	    fix_rcx > 0 && fix_rcx < count,
	    "REP MOVSB interrupted by the timer: from = the REP MOVSB (saved RIP), no record per iteration");
	if (fix_count != 1 || fix_rip != (u64)rep_site) {
		diag_hex("saved RIP", fix_rip);
		diag_hex("RCX", fix_rcx);
	}
	apic_write(APIC_LVTT, 1 << 16);

	/* a #PF at iteration 0x100, on a page the handler then maps */
	set_gate(14, fix_pfmap, 0);
	fix_reset(0, 0);
	exp_reset();
	exp_add((u64)rep_site, (u64)fix_pfmap);
	exp_add((u64)fix_pfmap_iret, (u64)rep_site);
	ds_setup_plain();
	seq_rep(CTL_ALL, 0x600000, LATE_PAGE - 0x100, 0x200);
	set_gate(14, pf_handler, 0);
	tap(exp_check() && fix_count == 1 && fix_rip == (u64)rep_site &&
	    fix_rcx == 0x100 && fix_cr2 == LATE_PAGE && fix_err == 2,
	    "REP MOVSB faulting mid-way (#PF, RCX 0x100 left): from = the REP MOVSB, then it resumes");
}

/*
 * From ring 3: the timer interrupt, pending when IRETQ sets IF, comes in
 * before the first user instruction; then a #UD.  Which records are kept
 * follows BTS_OFF_* and the bts-cpl= reading.
 */
static int user_irq_run(u32 ctl)
{
	long spin;

	exp_reset();
	exp_cpl((u64)ru_iret_site, (u64)user_irq, ctl, 0, 3);
	exp_cpl((u64)user_irq, (u64)fix_timer, ctl, 3, 0);
	exp_cpl((u64)fix_timer_iret, (u64)user_irq, ctl, 0, 3);
	exp_cpl((u64)ui_ud_site, (u64)ud_handler, ctl, 3, 0);
	exp_cpl((u64)ud_iret_site, (u64)ui_exit_site, ctl, 0, 3);
	exp_cpl((u64)ui_exit_site, (u64)user_exit_handler, ctl, 3, 0);

	fix_reset(0, 0);
	timer_arm(1000);
	for (spin = 0; spin < 100000000 && !timer_pending(); spin++)
		;
	ds_setup_plain();
	user_rflags = 0x202;
	run_user(user_irq, ctl, USER_CS);
	user_rflags = 0x2;
	return exp_check() && fix_count == 1 && fix_rip == (u64)user_irq;
}

static void test_user_irq(void)
{
	set_gate(6, ud_handler, 0);
	tap(user_irq_run(CTL_ALL),
	    "ring 3: a timer interrupt before the first instruction, a #UD, and their IRETQs");
	tap(user_irq_run(CTL_ALL | DEBUGCTL_BTS_OFF_OS),
	    "ring 3, BTS_OFF_OS: interrupt and exception entries/returns as bts-cpl= reads");
	tap(user_irq_run(CTL_ALL | DEBUGCTL_BTS_OFF_USR),
	    "ring 3, BTS_OFF_USR: interrupt and exception entries/returns as bts-cpl= reads");
}

void test_traps(void)
{
	test_single_step();
	test_watchpoint();
	test_timer();
	test_user_irq();
	test_rep();
}

/* BTF: a trap after branches only; #DB clears BTF (SDM 17.4.3) */
void test_btf(void)
{
	u32 ctl = CTL_ALL | DEBUGCTL_BTF;
	u64 v;

	set_gate(1, fix_db, 0);
	fix_reset(0, 0);
	exp_reset();
	exp_add((u64)bf_jmp_site, (u64)bf_to);
	exp_add(trap_from((u64)bf_jmp_site, (u64)bf_to), (u64)fix_db);
	exp_add((u64)fix_db_iret, (u64)bf_to);
	ds_setup_plain();
	seq_btf(ctl);
	tap(exp_check() && fix_count == 1 && fix_rip == (u64)bf_to &&
	    (fix_dr6 & DR6_BS),
	    "BTF+TF: no trap after NOP, not-taken JNZ, REP STOSB; one after the taken JMP");
	tap(fix_debugctl == CTL_ALL,
	    "BTF+TF: the #DB cleared DEBUGCTL.BTF and kept TR|BTS");
	if (fix_debugctl != CTL_ALL)
		diag_hex("DEBUGCTL in the handler", fix_debugctl);

	fix_reset(0, 0);
	exp_reset();
	ds_setup_plain();
	seq_btf(DEBUGCTL_BTF);
	tap(exp_check() && fix_count == 1 && fix_rip == (u64)bf_to &&
	    fix_debugctl == 0,
	    "BTF+TF without tracing: one trap, after the taken JMP; BTF cleared");

	/* ICEBP's #DB clears BTF too */
	set_gate(6, ud_handler, 0);
	fix_reset(0, 0);
	wrmsr(MSR_DEBUGCTL, DEBUGCTL_BTF);
	asm volatile(".byte 0xf1; nop" : : : "memory");
	v = rdmsr(MSR_DEBUGCTL);
	wrmsr(MSR_DEBUGCTL, 0);
	tap(fix_count == 1 && fix_vec == 1 && fix_debugctl == 0 && v == 0,
	    "ICEBP: #DB (not #UD), and it clears DEBUGCTL.BTF");
}

/* Which of the bits in mask does DEBUGCTL keep on its own? */
static void debugctl_bits(u64 mask)
{
	int bit;
	u64 v;

	for (bit = 0; bit < 64; bit++) {
		if (!(mask & (1ULL << bit)))
			continue;
		gp_count = 0;
		wrmsr(MSR_DEBUGCTL, 1ULL << bit);
		v = rdmsr(MSR_DEBUGCTL);
		wrmsr(MSR_DEBUGCTL, 0);
		if (v == 1ULL << bit && !gp_count)
			continue;
		diag_hex("bit", bit);
		diag_hex("  read", v);
		diag_hex("  #GP", gp_count);
	}
}

void test_debugctl(void)
{
	/*
	 * 14 (FREEZE_WHILE_SMM) and 15 (RTM_DEBUG) need PERF_CAPABILITIES[12]
	 * and RTM, which the model does not offer: reserved here.
	 */
	static const int reserved[] = { 2, 3, 4, 5, 14, 15, 16, 24, 31, 32, 63 };
	const u64 valid = DEBUGCTL_LBR | DEBUGCTL_BTF | DEBUGCTL_BTINT |
			  DEBUGCTL_BTS_OFF_OS | DEBUGCTL_BTS_OFF_USR | 0x3800;
	u32 a, b, c, d;
	int ok = 1;
	u64 v;
	unsigned int i;

	cpuid(1, &a, &b, &c, &d);
	tap(!!(c & (1 << 4)), "CPUID.1:ECX.DS-CPL set");

	wrmsr(MSR_DEBUGCTL, valid);
	v = rdmsr(MSR_DEBUGCTL);
	wrmsr(MSR_DEBUGCTL, 0);
	tap(v == valid, "DEBUGCTL: LBR, BTF, BTINT, BTS_OFF_OS/USR, bits 11-13 read back");
	if (v != valid)
		debugctl_bits(valid);

	ds_setup_plain();
	wrmsr(MSR_DEBUGCTL, CTL_ALL);
	v = rdmsr(MSR_DEBUGCTL);
	wrmsr(MSR_DEBUGCTL, 0);
	tap(v == CTL_ALL, "DEBUGCTL: TR|BTS read back");

	wrmsr(MSR_DEBUGCTL, DEBUGCTL_BTINT);
	for (i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
		gp_count = 0;
		wrmsr(MSR_DEBUGCTL, DEBUGCTL_BTINT | (1ULL << reserved[i]));
		v = rdmsr(MSR_DEBUGCTL);
		if (gp_count == 1 && v == DEBUGCTL_BTINT)
			continue;
		diag_hex("reserved bit", reserved[i]);
		diag_hex("read", v);
		ok = 0;
	}
	wrmsr(MSR_DEBUGCTL, 0);
	tap(ok, "DEBUGCTL: bits 2-5 and 14-63 raise #GP, the value is kept");
}

static u64 rdpmc(u32 idx)
{
	u32 lo, hi;

	asm volatile("rdpmc" : "=a"(lo), "=d"(hi) : "c"(idx));
	return lo | ((u64)hi << 32);
}

static u64 read_cr4(void)
{
	u64 v;

	asm volatile("mov %%cr4, %0" : "=r"(v));
	return v;
}

static void write_cr4(u64 v)
{
	asm volatile("mov %0, %%cr4" : : "r"(v));
}

static void test_rdpmc_user(void)
{
	u64 cr4 = read_cr4();

	set_gate(13, fix_gp, 0);
	fix_reset(0, 2);
	user_pmc = 0;
	write_cr4(cr4 & ~(1ULL << 8));
	run_user(user_rdpmc, 0, USER_CS);
	tap(fix_count == 1 && fix_vec == 13 && user_pmc == 0xbeef0000deadULL,
	    "RDPMC at CPL 3 without CR4.PCE: #GP");

	fix_reset(0, 2);
	write_cr4(cr4 | (1ULL << 8));
	run_user(user_rdpmc, 0, USER_CS);
	write_cr4(cr4);
	tap(fix_count == 0 && user_pmc == 0x7654321,
	    "RDPMC at CPL 3 with CR4.PCE: reads general counter 0");
	set_gate(13, gp_handler, 0);
}

void test_pmu(void)
{
	static const u64 fixed[3] = {
		0x123456789abcULL, 0x0000fedcba987ULL, 0x42,
	};
	u32 a, b, c, d;
	int ok = 1, i;

	/*
	 * No counters are advertised (CPUID leaf 0xA is zero), so every index
	 * is out of range: #GP, as on hardware and KVM without a vPMU.
	 */
	if (!rd.arch_pmu) {
		set_gate(13, fix_gp, 0);
		fix_reset(0, 2);
		rdpmc(0);
		set_gate(13, gp_handler, 0);
		tap(fix_count == 1 && fix_vec == 13,
		    "without arch-pmu: RDPMC raises #GP");
		if (fix_count != 1 || fix_vec != 13) {
			diag_hex("exceptions", fix_count);
			diag_hex("vector", fix_vec);
		}
		return;
	}

	cpuid(0xa, &a, &b, &c, &d);
	tap((a & 0xff) == 4 && ((a >> 8) & 0xff) == 4 &&
	    ((a >> 16) & 0xff) == 48 && (d & 0x1f) == 3 &&
	    ((d >> 5) & 0xff) == 48,
	    "arch-pmu: CPUID.0xA version 4, 4 general and 3 fixed counters, 48 bits");

	wrmsr(MSR_PMC0, 0x7654321);
	wrmsr(MSR_PMC0 + 1, 0x1234567);
	for (i = 0; i < 3; i++)
		wrmsr(MSR_FIXED_CTR0 + i, fixed[i]);
	set_gate(13, fix_gp, 0);
	fix_reset(0, 2);
	if (rdpmc(0) != 0x7654321 || rdpmc(1) != 0x1234567)
		ok = 0;
	for (i = 0; i < 3; i++)
		if (rdpmc((1u << 30) | i) != fixed[i])
			ok = 0;
	tap(ok && fix_count == 0,
	    "RDPMC reads back what was written to IA32_PMC0/1 and IA32_FIXED_CTR0-2");

	rdpmc(4);
	rdpmc((1u << 30) | 3);
	tap(fix_count == 2 && fix_vec == 13 && fix_err == 0,
	    "RDPMC of general counter 4 or fixed counter 3: #GP(0)");
	set_gate(13, gp_handler, 0);

	test_rdpmc_user();
}
