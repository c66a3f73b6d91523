// SPDX-License-Identifier: GPL-2.0
/*
 * Test kernel for the BTS machine model (QEMU -cpu ...,bts=on).
 *
 * Runs known code sequences (seq.S, xfer_seq.S, trap_seq.S) with
 * IA32_DEBUGCTL.TR|BTS set and compares the records in the BTS buffer with
 * the ones the Intel SDM's branch trace store would write.  Results go to
 * the serial port in TAP form; the exit status goes through isa-debug-exit
 * (test.h).
 *
 * Command line (multiboot):
 * - "fault=unmapped-buffer", "fault=readonly-buffer", "fault=unmapped-ds",
 *   "fault=straddle-buffer" or "fault=straddle-ds" point the buffer or the
 *   DS area at a bad page and expect QEMU to stop the machine on the first
 *   record;
 * - "bts-cpl=source|target|either", "pmi-skid=N", "bts-trap-from=next|insn"
 *   and "arch-pmu=on" say how the model was booted (the same -cpu
 *   properties), which is what the cases expect; "smp=2" asks for the
 *   two-vCPU cases.  Absent, they are the model's defaults.
 */
#include "kernel.h"

extern void seq_direct(u32 ctl);
extern void seq_jcc(u32 ctl);
extern void seq_indirect(u32 ctl);
extern void seq_exceptions(u32 ctl, u64 unmapped);
extern void seq_fault(u32 ctl);
extern char sd_site[], sd_to[];
extern char sj_short_site[], sj_short_to[], sj_near_site[], sj_near_to[];
extern char sj_loop_site[];
extern char si_jmp_site[], si_jmp_to[], si_call_site[], si_after_call[];
extern char si_func[], si_ret_site[], si_dcall_site[], si_after_dcall[];
extern char si_func2[], si_ret2_site[];
extern char sx_int3_site[], sx_int80_site[], sx_ud_site[], sx_pf_site[];
extern char sx_after_pf[];
extern char bp_handler[], bp_iret_site[];
extern char ud_handler[], ud_iret_site[], pf_handler[], pf_iret_site[];
extern char syscall_entry[];
extern char sysret_site[], user_seq[], u_jmp_site[], u_jmp_to[];
extern char u_syscall_site[], u_after_syscall[], u_exit_site[];
extern u32 mb_info;

struct reading rd;

/* ---- Tests ---- */

static void test_msrs(void)
{
	u64 misc = rdmsr(MSR_MISC_ENABLE);
	u64 v;

	tap(!(misc & (1 << 11)) && (!(misc & (1 << 12))) == rd.arch_pmu,
	    rd.arch_pmu ?
	    "IA32_MISC_ENABLE: BTS and PEBS available (bits 11 and 12 clear)" :
	    "IA32_MISC_ENABLE: BTS available (bit 11 clear), PEBS unavailable (bit 12 set)");

	wrmsr(MSR_MISC_ENABLE, misc | (1 << 11));
	v = rdmsr(MSR_MISC_ENABLE);
	wrmsr(MSR_MISC_ENABLE, misc);
	tap(!(v & (1 << 11)), "IA32_MISC_ENABLE: BTS_UNAVAILABLE stays clear");

	wrmsr(MSR_DS_AREA, 0xffffffff81234560ULL);
	tap(rdmsr(MSR_DS_AREA) == 0xffffffff81234560ULL,
	    "IA32_DS_AREA reads back what was written");

	gp_count = 0;
	wrmsr(MSR_DS_AREA, 0x0000800000000000ULL);
	tap(gp_count == 1 && rdmsr(MSR_DS_AREA) == 0xffffffff81234560ULL,
	    "IA32_DS_AREA: non-canonical address raises #GP, value kept");
	wrmsr(MSR_DS_AREA, 0);
}

static void test_direct(void)
{
	static const struct bts_record e[] = { R(sd_site, sd_to) };

	ds_setup_plain();
	seq_direct(CTL_ALL);
	tap(check(e, 1), "direct JMP: one record {jmp, target, 0}");

	ds_setup_plain();
	seq_direct(DEBUGCTL_BTS);
	tap(check(e, 0), "BTS without TR: no record");

	ds_setup_plain();
	seq_direct(DEBUGCTL_TR);
	tap(check(e, 0), "TR without BTS: no record");

	ds_setup_plain();
	seq_direct(CTL_ALL | DEBUGCTL_BTS_OFF_OS);
	tap(check(e, 0), "BTS_OFF_OS: ring-0 JMP not recorded");

	ds_setup_plain();
	seq_direct(CTL_ALL | DEBUGCTL_BTS_OFF_USR);
	tap(check(e, 1), "BTS_OFF_USR: ring-0 JMP recorded");
}

static void test_jcc(void)
{
	static const struct bts_record e[] = {
		R(sj_short_site, sj_short_to),
		R(sj_near_site, sj_near_to),
		R(sj_loop_site, sj_loop_site),
	};

	ds_setup_plain();
	seq_jcc(CTL_ALL);
	tap(check(e, 3), "Jcc: not-taken absent; short and near taken, LOOP taken once");
}

static void test_indirect(void)
{
	static const struct bts_record e[] = {
		R(si_jmp_site, si_jmp_to),
		R(si_call_site, si_func),
		R(si_ret_site, si_after_call),
		R(si_dcall_site, si_func2),
		R(si_ret2_site, si_after_dcall),
	};

	ds_setup_plain();
	seq_indirect(CTL_ALL);
	tap(check(e, 5), "indirect JMP, indirect CALL, RET, direct CALL, RET");
}

static void test_exceptions(void)
{
	static const struct bts_record e[] = {
		R(sx_int3_site, bp_handler),
		R(bp_iret_site, sx_int3_site + 1),
		R(sx_int80_site, int80_handler),
		R(int80_iret_site, sx_int80_site + 2),
		R(sx_ud_site, ud_handler),
		R(ud_iret_site, sx_ud_site + 2),
		R(sx_pf_site, pf_handler),
		R(pf_iret_site, sx_after_pf),
	};

	ds_setup_plain();
	seq_exceptions(CTL_ALL, UNMAPPED_PAGE);
	tap(check(e, 8), "INT3, INT $0x80, #UD, #PF and their IRETQs");
}

/* The records of user_seq under DEBUGCTL = ctl and the booted bts-cpl= */
static int user_run(u32 ctl)
{
	exp_reset();
	exp_cpl((u64)ru_iret_site, (u64)user_seq, ctl, 0, 3);
	exp_cpl((u64)u_jmp_site, (u64)u_jmp_to, ctl, 3, 3);
	exp_cpl((u64)u_syscall_site, (u64)syscall_entry, ctl, 3, 0);
	exp_cpl((u64)sysret_site, (u64)u_after_syscall, ctl, 0, 3);
	exp_cpl((u64)u_exit_site, (u64)user_exit_handler, ctl, 3, 0);
	ds_setup_plain();
	run_user(user_seq, ctl, USER_CS);
	return exp_check();
}

static void test_user(void)
{
	tap(user_run(CTL_ALL),
	    "ring 3: IRETQ, JMP, SYSCALL, SYSRETQ, INT n (DS supervisor-only)");
	tap(user_run(CTL_ALL | DEBUGCTL_BTS_OFF_OS),
	    "BTS_OFF_OS: ring-3 JMP; user/kernel crossings as bts-cpl= reads");
	tap(user_run(CTL_ALL | DEBUGCTL_BTS_OFF_USR),
	    "BTS_OFF_USR: no ring-3 JMP; user/kernel crossings as bts-cpl= reads");
	tap(user_run(CTL_ALL | DEBUGCTL_BTS_OFF_OS | DEBUGCTL_BTS_OFF_USR),
	    "BTS_OFF_OS|BTS_OFF_USR: nothing recorded");
}

const struct bts_record jmp6[6] = {
	R(w0, w1), R(w1, w2), R(w2, w3), R(w3, w4), R(w4, w5), R(w5, w6),
};

static void test_buffer_end(void)
{
	struct bts_record e[4];

	/* 4 records of room, threshold beyond the end: circular, no PMI */
	nmi_count = 0;
	apic_write(APIC_LVTPC, 0x400);			/* NMI */
	ds_setup(4, (u64)buf + 5 * REC_SIZE);
	seq_jmp6(CTL_ALL);
	e[0] = jmp6[4];
	e[1] = jmp6[5];
	e[2] = jmp6[2];
	e[3] = jmp6[3];
	tap(check_slots(e, 4, 2) && nmi_count == 0,
	    "BTINT clear: wraps to the base at the absolute maximum, no PMI");

	/* Exactly full: the index goes back to the base, never equals absmax */
	ds_setup(6, (u64)buf + 7 * REC_SIZE);
	seq_jmp6(CTL_ALL);
	tap(check_slots(jmp6, 6, 0), "BTINT clear: index wraps when it reaches the absolute maximum");

	/* BTINT set: no wrap, the records that do not fit are dropped */
	ds_setup(4, (u64)buf + 5 * REC_SIZE);
	seq_jmp6(CTL_ALL | DEBUGCTL_BTINT);
	tap(check_slots(jmp6, 4, 4) && nmi_count == 0,
	    "BTINT set: no wrap; records beyond the absolute maximum dropped");
}

/*
 * The records of seq_jmp6 when bts_index reaches the threshold with its
 * k-th record (k = 1..6; 0: never).  The PMI goes out pmi-skid= branch
 * events later, or at the DEBUGCTL write that ends the sequence, where
 * tracing is off by the time it is delivered.  Returns the number of
 * records in the buffer when the handler is entered (6: at the end).
 */
int jmp6_stream(int k, const char *handler, const char *iret_site)
{
	static char *const w[] = { w0, w1, w2, w3, w4, w5, w6 };
	int m = k ? k + rd.skid : 0;
	int i;

	exp_reset();
	for (i = 0; i < 6; i++) {
		exp_add(jmp6[i].from, jmp6[i].to);
		if (i + 1 == m) {
			exp_add((u64)w[m], (u64)handler);
			exp_add((u64)iret_site, (u64)w[m]);
		}
	}
	return m && m <= 6 ? m + 1 : 6;
}

static void test_threshold(void)
{
	u64 thresh = (u64)buf + 3 * REC_SIZE;
	int at;

	nmi_count = 0;
	apic_write(APIC_LVTPC, 0x400);			/* NMI, unmasked */
	ds_setup(10, thresh);
	at = jmp6_stream(3, nmi_handler, nmi_iret_site);
	seq_jmp6(CTL_ALL | DEBUGCTL_BTINT);
	tap(exp_check() && nmi_count == 1 &&
	    pmi_index == (u64)buf + at * REC_SIZE,
	    "BTINT: one PMI (LVTPC NMI) when bts_index reaches the threshold");

	pmi_count = 0;
	apic_write(APIC_LVTPC, PMI_VECTOR);		/* fixed vector */
	ds_setup(10, thresh);
	jmp6_stream(3, pmi_handler, pmi_iret_site);
	seq_jmp6_sti(CTL_ALL | DEBUGCTL_BTINT);
	tap(exp_check() && pmi_count == 1,
	    "BTINT: PMI through LVTPC with a fixed vector");

	nmi_count = 0;
	apic_write(APIC_LVTPC, 0x400 | (1 << 16));	/* NMI, masked */
	ds_setup(10, thresh);
	seq_jmp6(CTL_ALL | DEBUGCTL_BTINT);
	tap(check(jmp6, 6) && nmi_count == 0, "masked LVTPC: no PMI");

	/* SDM: clearing BTINT alone does not prevent the interrupt */
	nmi_count = 0;
	apic_write(APIC_LVTPC, 0x400);
	ds_setup(10, thresh);
	jmp6_stream(3, nmi_handler, nmi_iret_site);
	seq_jmp6(CTL_ALL);
	tap(exp_check() && nmi_count == 1,
	    "BTINT clear, threshold inside the buffer: PMI still raised (SDM note)");

	apic_write(APIC_LVTPC, 1 << 16);
}

static const char *cmdline(void)
{
	u32 *mbi = (u32 *)(u64)mb_info;

	if (mbi && (mbi[0] & (1 << 2)))
		return (const char *)(u64)mbi[4];
	return "";
}

static const char *find(const char *s, const char *w)
{
	const char *p, *q;

	for (; *s; s++) {
		for (p = s, q = w; *q && *p == *q; p++, q++)
			;
		if (!*q)
			return p;
	}
	return NULL;
}

/* The decimal number at s, if any */
static int number(const char *s)
{
	int n = 0;

	while (s && *s >= '0' && *s <= '9')
		n = 10 * n + *s++ - '0';
	return n;
}

/* What mk/qemu-test.sh says about the model's -cpu properties */
static void parse_reading(const char *cmd)
{
	if (find(cmd, "bts-cpl=target"))
		rd.cpl = CPL_TARGET;
	else if (find(cmd, "bts-cpl=either"))
		rd.cpl = CPL_EITHER;
	rd.skid = number(find(cmd, "pmi-skid="));
	rd.trap_insn = !!find(cmd, "bts-trap-from=insn");
	rd.arch_pmu = !!find(cmd, "arch-pmu=on");
	rd.smp = number(find(cmd, "smp="));

	puts_serial("# reading: bts-cpl=");
	puts_serial(rd.cpl == CPL_TARGET ? "target" :
		    rd.cpl == CPL_EITHER ? "either" : "source");
	puts_serial(" pmi-skid=");
	put_dec(rd.skid);
	puts_serial(rd.trap_insn ? " bts-trap-from=insn" : " bts-trap-from=next");
	puts_serial(rd.arch_pmu ? " arch-pmu=on\n" : " arch-pmu=off\n");
}

static void fault_test(const char *how)
{
	ds_setup_plain();
	if (find(how, "unmapped-buffer")) {
		ds->bts_buffer_base = UNMAPPED_PAGE;
		ds->bts_index = UNMAPPED_PAGE;
		ds->bts_absolute_maximum = UNMAPPED_PAGE + 32 * REC_SIZE;
	} else if (find(how, "readonly-buffer")) {
		ds->bts_buffer_base = READONLY_PAGE;
		ds->bts_index = READONLY_PAGE;
		ds->bts_absolute_maximum = READONLY_PAGE + 32 * REC_SIZE;
	} else if (find(how, "unmapped-ds")) {
		wrmsr(MSR_DS_AREA, UNMAPPED_PAGE);
	} else if (find(how, "straddle-")) {
		straddle_fault(how);
	} else if (find(how, "clear-d")) {
		/* Read is fine, but the first store would set D */
		ds->bts_buffer_base = CLEAR_D_PAGE;
		ds->bts_index = CLEAR_D_PAGE;
		ds->bts_absolute_maximum = CLEAR_D_PAGE + 32 * REC_SIZE;
	} else if (find(how, "clear-ad")) {
		/* Mapped writable, but the SDM wants A and D set beforehand */
		ds->bts_buffer_base = CLEAR_AD_PAGE;
		ds->bts_index = CLEAR_AD_PAGE;
		ds->bts_absolute_maximum = CLEAR_AD_PAGE + 32 * REC_SIZE;
	} else {
		puts_serial("not ok - unknown fault= test\n");
		qemu_exit(EXIT_FAIL);
	}
	puts_serial("# fault test: the machine should stop now\n");
	seq_fault(CTL_ALL);
	puts_serial("not ok - fault test: the store fault was not reported\n");
	qemu_exit(EXIT_FAIL);
}

/* The model without bts=on: ICEBP (F1) is a #DB trap there too */
static void test_icebp_nobts(void)
{
	set_gate(1, fix_db, 0);
	fix_reset(0, 0);
	asm volatile(".byte 0xf1; nop" : : : "memory");
	tap(fix_count == 1 && fix_vec == 1, "ICEBP raises #DB, not #UD");
}

void kmain(void)
{
	const char *how;
	u32 a, b, c, d;

	puts_serial("TAP version 13\n");
	puts_serial("# BTS machine model test\n");

	/* Mask the 8259s: the only interrupt the tests want is the PMI */
	outb(0x21, 0xff);
	outb(0xa1, 0xff);

	wrmsr(MSR_STAR, ((u64)(KERNEL_DS | 0) << 48) | ((u64)KERNEL_CS << 32));
	wrmsr(MSR_LSTAR, (u64)syscall_entry);
	wrmsr(MSR_FMASK, 0x4700);		/* TF, DF, IF, NT */

	cpuid(1, &a, &b, &c, &d);
	if (!(d & (1 << 21))) {
		/* Stock QEMU, or the model without bts=on */
		u64 ctl, area;

		wrmsr(MSR_DEBUGCTL, CTL_ALL);
		ctl = rdmsr(MSR_DEBUGCTL);
		wrmsr(MSR_DS_AREA, DS_PAGE);
		area = rdmsr(MSR_DS_AREA);
		puts_serial("# BTS absent: CPUID.1:EDX.DS clear\n");
		tap(!(c & (1 << 2)), "no BTS: CPUID.1:ECX.DTES64 clear too");
		tap(ctl == 0 && area == 0,
		    "no BTS: DEBUGCTL and DS_AREA writes ignored, read 0 (stock behaviour)");
		if (find(cmdline(), "icebp=db"))
			test_icebp_nobts();
		puts_serial("1..");
		put_dec(test_no);
		puts_serial("\n");
		qemu_exit(failures ? EXIT_FAIL : EXIT_ABSENT);
	}
	tap(1, "CPUID.1:EDX.DS set");
	tap(!!(c & (1 << 2)), "CPUID.1:ECX.DTES64 set");

	apic_write(APIC_SVR, 0x1ff);
	apic_write(APIC_LVTPC, 1 << 16);

	how = find(cmdline(), "fault=");
	if (how)
		fault_test(how);
	parse_reading(cmdline());

	test_msrs();
	test_direct();
	test_jcc();
	test_indirect();
	test_exceptions();
	test_user();
	test_buffer_end();
	test_threshold();

	test_transfers();
	test_compat();
	test_user_filter();
	test_faulting();
	test_traps();
	test_btf();
	test_debugctl();
	test_pmu();
	bench_idle();
	test_pmu_counts();
	test_edges();
	test_thresholds();
	test_skid();
	test_lvtpc();
	test_straddle();
	if (rd.smp > 1)
		test_smp();

	puts_serial("1..");
	put_dec(test_no);
	puts_serial("\n");
	qemu_exit(failures ? EXIT_FAIL : EXIT_PASS);
}
