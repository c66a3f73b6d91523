// SPDX-License-Identifier: GPL-2.0
/*
 * Control transfers beyond seq.S's: RET imm16, far JMP/CALL/RET, IRETQ,
 * call gates, compatibility mode with a CS base, SYSENTER/SYSEXIT, INTO,
 * ICEBP, and branches that fault.  The records hold linear addresses
 * (SDM vol. 3, "Branch Trace Store"), which the labels of xfer_seq.S are,
 * whatever the CS base.
 */
#include "kernel.h"

extern void seq_far(u32 ctl);
extern void seq_compat(u32 ctl);
extern void seq_badret(u32 ctl, u64 addr);
extern void seq_badjmp(u32 ctl, u64 addr);
extern void seq_badcall(u32 ctl, u64 addr);
extern void seq_badsel(u32 ctl, const void *jmp_ptr, const void *call_ptr);
extern void seq_badstack(u32 ctl, u64 rsp);
extern char sf_call_site[], sf_reti[], sf_reti_site[], sf_after_call[];
extern char sf_ljmp_site[], sf_ljmp_to[], sf_lcall_site[], sf_lfunc[];
extern char sf_lret_site[], sf_after_lcall[], sf_lcall32_site[];
extern char sf_lfunc32[], sf_lret32_site[], sf_after_lcall32[];
extern char sf_gate_site[], gate_target[], gate_lret_site[];
extern char sf_after_gate[], sf_iret_site[], sf_iret_to[];
extern char sc_enter_site[], sc_back[], c_entry[], c_jmp_site[];
extern char c_jmp_to[], c_ljmp_site[], c_ljmp_to[], c_call_site[];
extern char c_func[], c_ret_site[], c_after_call[], c_lcall_site[];
extern char c_after_lcall[], c_int_site[], c_after_int[], c_into_site[];
extern char c_after_into[], c_icebp_site[], c_after_icebp[], c_lret_site[];
extern char u32_seq[], u32_jmp_site[], u32_jmp_to[], u32_se_site[];
extern char u32_after_se[], u32_gate_site[], u32_after_gate[];
extern char u32_icebp_site[], u32_after_icebp[], u32_int_site[];
extern char u32_after_int[], u32_exit_site[];
extern char sysenter_entry[], sysexit_site[], sysenter_stack_top[];
extern char fb_ret_site[], fb_after_ret[], fb_jmp_site[], fb_after_jmp[];
extern char fb_call_site[], fb_after_call[], fb_ljmp_site[];
extern char fb_after_ljmp[], fb_lcall_site[], fb_after_lcall[];
extern char fb_scall_site[], fb_after_scall[];
extern char pf_handler[], ud_handler[];
extern u8 gdt[];
extern volatile u64 fault_rsp;

#define NONCANONICAL	0x0000800000000000ULL
#define DR6_INIT	0xffff0ff0ULL

/* A 64-bit call gate (16 bytes) at sel to KERNEL_CS:target */
static void set_call_gate(u16 sel, void *target, int dpl)
{
	/* present, 64-bit call gate */
	gate64(gdt + sel, (u64)target, 0x8c | (dpl << 5), 0);
}

static void write_dr6(u64 v)
{
	asm volatile("mov %0, %%dr6" : : "r"(v));
}

static void xfer_init(void)
{
	set_call_gate(GATE3_SEL, gate_target, 3);
	set_call_gate(GATE0_SEL, gate_target, 0);
	wrmsr(MSR_SYSENTER_CS, SYSENTER_CS);
	wrmsr(MSR_SYSENTER_ESP, (u64)sysenter_stack_top);
	wrmsr(MSR_SYSENTER_EIP, (u64)sysenter_entry);
	set_gate(1, fix_db, 0);
	set_gate(4, fix_of, 0);
}

static void far_expect(void)
{
	exp_reset();
	exp_add((u64)sf_call_site, (u64)sf_reti);
	exp_add((u64)sf_reti_site, (u64)sf_after_call);
	exp_add((u64)sf_ljmp_site, (u64)sf_ljmp_to);
	exp_add((u64)sf_lcall_site, (u64)sf_lfunc);
	exp_add((u64)sf_lret_site, (u64)sf_after_lcall);
	exp_add((u64)sf_lcall32_site, (u64)sf_lfunc32);
	exp_add((u64)sf_lret32_site, (u64)sf_after_lcall32);
	exp_add((u64)sf_gate_site, (u64)gate_target);
	exp_add((u64)gate_lret_site, (u64)sf_after_gate);
	exp_add((u64)sf_iret_site, (u64)sf_iret_to);
}

void test_transfers(void)
{
	xfer_init();

	far_expect();
	ds_setup_plain();
	seq_far(CTL_ALL);
	tap(exp_check(),
	    "RET imm16, far JMP/CALL m16:64, far CALL m16:32, LRETQ/LRET, DPL-0 call gate, IRETQ (ring 0)");

	ds_setup_plain();
	seq_far(CTL_ALL | DEBUGCTL_BTS_OFF_USR);
	tap(exp_check(), "BTS_OFF_USR: the ring-0 far transfers all recorded");

	exp_reset();
	ds_setup_plain();
	seq_far(CTL_ALL | DEBUGCTL_BTS_OFF_OS);
	tap(exp_check(), "BTS_OFF_OS: no ring-0 far transfer recorded");
}

void test_compat(void)
{
	xfer_init();
	fix_reset(0, 0);
	write_dr6(DR6_INIT);
	/* On a model without ICEBP, its #UD must not derail the case */
	set_gate(6, ud_handler, 0);

	exp_reset();
	exp_add((u64)sc_enter_site, (u64)c_entry);
	exp_add((u64)c_jmp_site, (u64)c_jmp_to);
	exp_add((u64)c_ljmp_site, (u64)c_ljmp_to);
	exp_add((u64)c_call_site, (u64)c_func);
	exp_add((u64)c_ret_site, (u64)c_after_call);
	exp_add((u64)c_lcall_site, (u64)sf_lfunc32);
	exp_add((u64)sf_lret32_site, (u64)c_after_lcall);
	exp_add((u64)c_int_site, (u64)int80_handler);
	exp_add((u64)int80_iret_site, (u64)c_after_int);
	exp_add((u64)c_into_site, (u64)fix_of);		/* INTO like INT n */
	exp_add((u64)fix_of_iret, (u64)c_after_into);
	/* ICEBP is a trap: from per bts-trap-from */
	exp_add(trap_from((u64)c_icebp_site, (u64)c_after_icebp), (u64)fix_db);
	exp_add((u64)fix_db_iret, (u64)c_after_icebp);
	exp_add((u64)c_lret_site, (u64)sc_back);
	ds_setup_plain();
	seq_compat(CTL_ALL);
	tap(exp_check(),
	    "compat mode, CS base 0x54000: linear from/to of JMP, LJMP, CALL, RET, LCALL/LRET to 64-bit, INT n, INTO, ICEBP, LRET");

	/* the last fix_* was ICEBP's: a trap, EIP (not linear) past the F1 */
	tap(fix_count == 2 && fix_vec == 1 && fix_cs == KERNEL_CS32B &&
	    fix_rip == (u64)c_after_icebp - CS32_BASE && fix_dr6 == DR6_INIT,
	    "compat-mode INTO taken once (OF=1, not OF=0); ICEBP: #DB trap at EIP+1, DR6 unchanged");
	if (fix_count != 2 || fix_vec != 1) {
		diag_hex("fix_count", fix_count);
		diag_hex("last vector", fix_vec);
		diag_hex("saved RIP", fix_rip);
	}
}

/*
 * user_seq32 (compatibility mode, ring 3): every transfer crosses or stays
 * in ring 3 as noted, and bts-cpl= decides which CPL the filter looks at.
 */
static int user32_run(u32 ctl)
{
	exp_reset();
	exp_cpl((u64)ru_iret_site, (u64)u32_seq, ctl, 0, 3);
	exp_cpl((u64)u32_jmp_site, (u64)u32_jmp_to, ctl, 3, 3);
	exp_cpl((u64)u32_se_site, (u64)sysenter_entry, ctl, 3, 0);
	exp_cpl((u64)sysexit_site, (u64)u32_after_se, ctl, 0, 3);
	exp_cpl((u64)u32_gate_site, (u64)gate_target, ctl, 3, 0);
	exp_cpl((u64)gate_lret_site, (u64)u32_after_gate, ctl, 0, 3);
	exp_cpl(trap_from((u64)u32_icebp_site, (u64)u32_after_icebp),
		(u64)fix_db, ctl, 3, 0);
	exp_cpl((u64)fix_db_iret, (u64)u32_after_icebp, ctl, 0, 3);
	exp_cpl((u64)u32_int_site, (u64)int80_handler, ctl, 3, 0);
	exp_cpl((u64)int80_iret_site, (u64)u32_after_int, ctl, 0, 3);
	exp_cpl((u64)u32_exit_site, (u64)user_exit_handler, ctl, 3, 0);
	ds_setup_plain();
	fix_reset(0, 0);
	run_user(u32_seq, ctl, USER_CS32);
	return exp_check();
}

void test_user_filter(void)
{
	xfer_init();
	set_gate(6, ud_handler, 0);

	tap(user32_run(CTL_ALL) && fix_count == 1 && fix_vec == 1,
	    "compat ring 3: IRETQ, JMP, SYSENTER, SYSEXIT, call gate + LRETQ, ICEBP (DPL-0 gate), INT n");
	tap(user32_run(CTL_ALL | DEBUGCTL_BTS_OFF_OS),
	    "compat ring 3, BTS_OFF_OS: as bts-cpl= reads");
	tap(user32_run(CTL_ALL | DEBUGCTL_BTS_OFF_USR),
	    "compat ring 3, BTS_OFF_USR: as bts-cpl= reads");
	tap(user32_run(CTL_ALL | DEBUGCTL_BTS_OFF_OS | DEBUGCTL_BTS_OFF_USR),
	    "compat ring 3, BTS_OFF_OS|BTS_OFF_USR: nothing");
}

/* The records of a branch that faults: only the exception's, and its IRETQ */
static void fault_expect(const char *site, const char *handler,
			 const char *iret_site, const char *resume)
{
	exp_add((u64)site, (u64)handler);
	exp_add((u64)iret_site, (u64)resume);
}

static void test_noncanonical(void)
{
	set_gate(13, fix_gp, 0);

	exp_reset();
	fault_expect(fb_ret_site, fix_gp, fix_gp_iret, fb_after_ret);
	fix_reset((u64)fb_after_ret, 0);
	ds_setup_plain();
	seq_badret(CTL_ALL, NONCANONICAL);
	tap(exp_check() && fix_count == 1 && fix_vec == 13 && fix_err == 0 &&
	    fix_rip == (u64)fb_ret_site && fix_rsp == fault_rsp,
	    "RET to a non-canonical address: #GP(0) at the RET, RSP not moved, no branch record");

	exp_reset();
	fault_expect(fb_jmp_site, fix_gp, fix_gp_iret, fb_after_jmp);
	fix_reset((u64)fb_after_jmp, 0);
	ds_setup_plain();
	seq_badjmp(CTL_ALL, NONCANONICAL);
	tap(exp_check() && fix_count == 1 && fix_err == 0 &&
	    fix_rip == (u64)fb_jmp_site,
	    "JMP to a non-canonical address: #GP(0) at the JMP, no branch record");

	exp_reset();
	fault_expect(fb_call_site, fix_gp, fix_gp_iret, fb_after_call);
	fix_reset((u64)fb_after_call, 0);
	ds_setup_plain();
	seq_badcall(CTL_ALL, 0xffff7fffffff0000ULL);
	tap(exp_check() && fix_count == 1 && fix_err == 0 &&
	    fix_rip == (u64)fb_call_site && fix_rsp == fault_rsp,
	    "CALL to a non-canonical address: #GP(0) at the CALL, RSP not moved, no branch record");

	/* no tracing: the #GP is architectural, not a BTS effect */
	fix_reset((u64)fb_after_ret, 0);
	seq_badret(0, NONCANONICAL);
	tap(fix_count == 1 && fix_rip == (u64)fb_ret_site && fix_rsp == fault_rsp,
	    "tracing off: RET to a non-canonical address still #GP at the RET");
	if (fix_count != 1 || fix_rip != (u64)fb_ret_site)
		diag_hex("saved RIP", fix_rip);
}

struct far64 {
	u64 off;
	u16 sel;
} __attribute__((packed));

struct far32 {
	u32 off;
	u16 sel;
} __attribute__((packed));

static void test_badsel(void)
{
	static const struct far64 jmp = { 0, 0xfff8 };	/* beyond the GDT */
	static const struct far32 call = { 0, KERNEL_DS };	/* not code */

	set_gate(13, fix_gp, 0);
	exp_reset();
	fault_expect(fb_ljmp_site, fix_gp, fix_gp_iret, fb_after_ljmp);
	fault_expect(fb_lcall_site, fix_gp, fix_gp_iret, fb_after_lcall);
	fix_reset(0, 3);			/* both are 3 bytes long */
	ds_setup_plain();
	seq_badsel(CTL_ALL, &jmp, &call);
	tap(exp_check() && fix_count == 2 && fix_err == KERNEL_DS &&
	    fix_rip == (u64)fb_lcall_site,
	    "far JMP/CALL with a bad selector: #GP(selector), only the exception's records");
}

static void test_badstack(void)
{
	u64 rsp = UNMAPPED_PAGE + 0x800;

	/* #PF on its own stack (IST1): the faulting one is not present */
	set_gate_ist(14, fix_pf, 0, 1);
	exp_reset();
	fault_expect(fb_scall_site, fix_pf, fix_pf_iret, fb_after_scall);
	fix_reset((u64)fb_after_scall, 0);
	ds_setup_plain();
	seq_badstack(CTL_ALL, rsp);
	set_gate(14, pf_handler, 0);
	tap(exp_check() && fix_count == 1 && fix_vec == 14 && fix_err == 2 &&
	    fix_cr2 == rsp - 8 && fix_rsp == rsp &&
	    fix_rip == (u64)fb_scall_site,
	    "CALL with an unmapped stack: #PF (write) at the CALL, RSP not moved, only the #PF record");
}

void test_faulting(void)
{
	test_noncanonical();
	test_badsel();
	test_badstack();
	set_gate(13, gp_handler, 0);
}
