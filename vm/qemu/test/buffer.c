// SPDX-License-Identifier: GPL-2.0
/*
 * The BTS buffer at its edges, the threshold interrupt, its skid, the LVT
 * performance-counter entry, and records and DS areas across a page.
 *
 * SDM vol. 3, "Branch Trace Store": with BTINT clear the buffer is
 * circular; with BTINT set, records that do not fit below the absolute
 * maximum are lost.  The PMI is raised when bts_index reaches the
 * threshold; the model compares for equality after a record is written,
 * so a threshold off the 24-byte grid never fires.
 */
#include "kernel.h"

extern void seq_msrw(u32 ctl, u32 msr, u64 val);
extern char mw_jmp1[], mw_a[], mw_b[], mw_c[], w6_off[];

static char *const w[] = { w0, w1, w2, w3, w4, w5, w6 };

#define SLOT(n)	((u64)buf + (n) * REC_SIZE)

/* Everything in the DS area at once; no PMI can happen (LVTPC masked) */
static void ds_set(u64 index, u64 absmax, u64 thresh)
{
	ds_setup(0, thresh);
	ds->bts_index = index;
	ds->bts_absolute_maximum = absmax;
}

static void exp_jmp6(int from, int to)
{
	for (; from < to; from++)
		exp_add(jmp6[from].from, jmp6[from].to);
}

/* index == absmax and index > absmax at the start */
static void test_index_at_end(void)
{
	static const int start[] = { 4, 8 };
	int i;

	apic_write(APIC_LVTPC, 1 << 16);
	for (i = 0; i < 2; i++) {
		exp_reset();
		ds_set(SLOT(start[i]), SLOT(4), SLOT(40));
		seq_jmp6(CTL_ALL | DEBUGCTL_BTINT);
		tap(check_slots(exp, 0, start[i]),
		    i ? "BTINT set, index > absmax: every record dropped, index kept"
		      : "BTINT set, index == absmax: every record dropped, index kept");

		/* j0 goes to the base; j3 fills the buffer and wraps it */
		exp_reset();
		exp_jmp6(4, 6);
		exp_jmp6(2, 4);
		ds_set(SLOT(start[i]), SLOT(4), SLOT(40));
		seq_jmp6(CTL_ALL);
		tap(check_slots(exp, 4, 2),
		    i ? "BTINT clear, index > absmax: the next record at the base"
		      : "BTINT clear, index == absmax: the next record at the base");
	}
}

/* an absolute maximum 10 bytes past the 4th record */
static void test_absmax_off_grid(void)
{
	u64 absmax = SLOT(4) + 10;

	exp_reset();
	exp_jmp6(0, 4);
	ds_set(SLOT(0), absmax, SLOT(40));
	seq_jmp6(CTL_ALL | DEBUGCTL_BTINT);
	tap(check_slots(exp, 4, 4),
	    "BTINT set, absmax not a multiple of 24: 4 records, the 5th does not fit");

	/*
	 * From slot 2: j0, j1 fill slots 2, 3 and leave the index at slot 4
	 * (10 bytes short of absmax, not wrapped); j2 does not fit and goes
	 * to the base; j5 ends at slot 4 again.
	 */
	exp_reset();
	exp_jmp6(2, 6);
	ds_set(SLOT(2), absmax, SLOT(40));
	seq_jmp6(CTL_ALL);
	tap(check_slots(exp, 4, 4),
	    "BTINT clear, absmax not a multiple of 24: the record that does not fit goes to the base");
}

/* absmax - index = r for r = 1..23, from slot 2 */
static void test_room_short(void)
{
	int r, ok_set = 1, ok_clear = 1;

	for (r = 1; r < (int)REC_SIZE; r++) {
		exp_reset();
		ds_set(SLOT(2), SLOT(2) + r, SLOT(40));
		seq_jmp6(CTL_ALL | DEBUGCTL_BTINT);
		if (!check_slots(exp, 0, 2)) {
			diag_hex("BTINT set, room", r);
			ok_set = 0;
		}

		/* j0 j1 at the base; j2 j3 again, j4 j5 again */
		exp_reset();
		exp_jmp6(4, 6);
		ds_set(SLOT(2), SLOT(2) + r, SLOT(40));
		seq_jmp6(CTL_ALL);
		if (!check_slots(exp, 2, 2)) {
			diag_hex("BTINT clear, room", r);
			ok_clear = 0;
		}
	}
	tap(ok_set, "BTINT set, absmax - index in 1..23: record dropped, index kept");
	tap(ok_clear, "BTINT clear, absmax - index in 1..23: record written at the base");
}

void test_edges(void)
{
	test_index_at_end();
	test_absmax_off_grid();
	test_room_short();
}

/* one PMI with the threshold at the k-th record, k = 1..6 */
static int threshold_at(int k, u32 ctl)
{
	int at, ok;

	nmi_count = 0;
	pmi_index = 0;
	apic_write(APIC_LVTPC, 0x400);
	ds_setup(20, SLOT(k));
	at = jmp6_stream(k, nmi_handler, nmi_iret_site);
	seq_jmp6(ctl);
	ok = exp_check() && nmi_count == 1 && pmi_index == SLOT(at);
	if (!ok) {
		diag_hex("threshold at record", k);
		diag_hex("PMIs", nmi_count);
		diag_hex("bts_index in the handler", pmi_index);
	}
	return ok;
}

static int no_pmi(u64 index, u64 thresh)
{
	nmi_count = 0;
	apic_write(APIC_LVTPC, 0x400);
	ds_setup(20, thresh);
	ds->bts_index = index;
	seq_jmp6(CTL_ALL | DEBUGCTL_BTINT);
	return nmi_count == 0;
}

/* thresh == absmax == 6 records */
static void test_threshold_at_absmax(void)
{
	int released = rd.skid == 0;	/* else at the closing WRMSR */

	nmi_count = 0;
	apic_write(APIC_LVTPC, 0x400);
	ds_setup(6, SLOT(6));
	seq_jmp6(CTL_ALL | DEBUGCTL_BTINT);
	/* BTINT: the PMI's own records do not fit */
	tap(check_slots(jmp6, 6, 6) && nmi_count == 1 && pmi_index == SLOT(6),
	    "BTINT set, threshold == absmax: PMI after the last record that fits");

	nmi_count = 0;
	apic_write(APIC_LVTPC, 0x400);
	ds_setup(6, SLOT(6));
	seq_jmp6(CTL_ALL);
	exp_reset();
	if (released) {
		/* the index wrapped: the PMI's records land at the base */
		exp_add((u64)w6, (u64)nmi_handler);
		exp_add((u64)nmi_iret_site, (u64)w6);
		exp_jmp6(2, 6);
	} else {
		exp_jmp6(0, 6);
	}
	tap(check_slots(exp, 6, released ? 2 : 0) && nmi_count == 1 &&
	    pmi_index == SLOT(released),
	    "BTINT clear, threshold == absmax: PMI as the index wraps");
}

void test_thresholds(void)
{
	int k, ok_set = 1, ok_clear = 1;

	for (k = 1; k <= 6; k++) {
		ok_set &= threshold_at(k, CTL_ALL | DEBUGCTL_BTINT);
		ok_clear &= threshold_at(k, CTL_ALL);
	}
	tap(ok_set, "BTINT set: threshold at each record boundary 1..6: one PMI, skid as read");
	tap(ok_clear, "BTINT clear: threshold at each record boundary 1..6: one PMI, skid as read");

	tap(no_pmi(SLOT(0), SLOT(3) + 8) && no_pmi(SLOT(0), SLOT(3) - 8),
	    "threshold off the record grid (8 bytes either side): never fires");
	tap(no_pmi(SLOT(3), SLOT(1)) && check_untouched(9),
	    "threshold below the index at the start: no PMI");
	test_threshold_at_absmax();
	apic_write(APIC_LVTPC, 1 << 16);
}

/*
 * pmi-skid=N: the PMI raised at the threshold (the first record here)
 * waits for N more branches, or for a write to DEBUGCTL or DS_AREA.
 */
static void skid_msr(u32 msr, u64 val, const char *name)
{
	const char *at = rd.skid ? mw_b : mw_a;

	nmi_count = 0;
	apic_write(APIC_LVTPC, 0x400);
	ds_setup(10, SLOT(1));
	exp_reset();
	exp_add((u64)mw_jmp1, (u64)mw_a);
	exp_add((u64)at, (u64)nmi_handler);
	exp_add((u64)nmi_iret_site, (u64)at);
	exp_add((u64)mw_b, (u64)mw_c);
	seq_msrw(CTL_ALL | DEBUGCTL_BTINT, msr, val);
	tap(exp_check() && nmi_count == 1 && pmi_index == SLOT(2), name);
}

void test_skid(void)
{
	int k = 1 + rd.skid;
	u64 rip = k <= 6 ? (u64)w[k] : (u64)w6_off;

	skid_msr(MSR_DEBUGCTL, CTL_ALL | DEBUGCTL_BTINT,
		 "a PMI held back by the skid goes out at a DEBUGCTL write");
	skid_msr(MSR_DS_AREA, (u64)ds,
		 "a PMI held back by the skid goes out at a DS_AREA write");

	/*
	 * The branches the skid counts need not be stored: the buffer
	 * holds one record; the PMI (a fixed vector, to see where it
	 * lands) comes pmi-skid= branches after it, or at the WRMSR.
	 */
	set_gate(TIMER_VECTOR, fix_timer, 0);
	fix_reset(0, 0);
	apic_write(APIC_LVTPC, TIMER_VECTOR);
	ds_setup(1, SLOT(1));
	seq_jmp6_sti(CTL_ALL | DEBUGCTL_BTINT);
	tap(check_slots(jmp6, 1, 1) && fix_count == 1 && fix_rip == rip,
	    "skid counts the branches a full BTINT buffer drops");
	if (fix_rip != rip) {
		diag_hex("PMI at", fix_rip);
		diag_hex("expected", rip);
	}
	apic_write(APIC_LVTPC, 1 << 16);
}

/* SDM 17.4.9.5 (and KVM): delivering the PMI masks LVTPC */
void test_lvtpc(void)
{
	u32 v;

	nmi_count = 0;
	apic_write(APIC_LVTPC, 0x400);
	ds_setup(10, SLOT(2));
	seq_jmp6(CTL_ALL | DEBUGCTL_BTINT);
	v = apic_read(APIC_LVTPC);
	tap(nmi_count == 1 && v == (0x400 | (1 << 16)),
	    "LVTPC (NMI) masked by the PMI's delivery");

	/* the handler did not unmask: the next threshold is silent */
	ds_setup(10, SLOT(2));
	seq_jmp6(CTL_ALL | DEBUGCTL_BTINT);
	tap(check(jmp6, 6) && nmi_count == 1,
	    "LVTPC left masked: no second PMI");

	pmi_count = 0;
	apic_write(APIC_LVTPC, PMI_VECTOR);
	ds_setup(10, SLOT(2));
	seq_jmp6_sti(CTL_ALL | DEBUGCTL_BTINT);
	v = apic_read(APIC_LVTPC);
	tap(pmi_count == 1 && v == (PMI_VECTOR | (1 << 16)),
	    "LVTPC (fixed vector) masked by the PMI's delivery");
	apic_write(APIC_LVTPC, 1 << 16);
}

/* A DS area and records across a page boundary, both pages mapped */
void test_straddle(void)
{
	struct bts_record *saved = buf;

	ds = (void *)(BTS_BUFFER + 0x1000 - 16);	/* fields 2, 3 next page */
	ds_setup_plain();
	seq_jmp6(CTL_ALL);
	tap(check(jmp6, 6) && ds->bts_index == SLOT(6),
	    "DS area across a page boundary");
	ds = (void *)DS_PAGE;

	buf = (void *)(BTS_BUFFER + 0x1000 - 2 * REC_SIZE - 12);
	ds_setup_plain();
	seq_jmp6(CTL_ALL);
	tap(check(jmp6, 6), "3rd record across a page boundary (12 + 12 bytes)");
	buf = saved;
}

/* fault=straddle-*: the second page is not present */
void straddle_fault(const char *how)
{
	if (how[9] == 'b') {		/* straddle-buffer */
		ds->bts_buffer_base = UNMAPPED_PAGE - 12;
		ds->bts_index = UNMAPPED_PAGE - 12;
		ds->bts_absolute_maximum = UNMAPPED_PAGE + 0x1000;
	} else {			/* straddle-ds: absmax, thresh unmapped */
		volatile u64 *f = (void *)(UNMAPPED_PAGE - 16);

		f[0] = BTS_BUFFER;
		f[1] = BTS_BUFFER;
		wrmsr(MSR_DS_AREA, UNMAPPED_PAGE - 16);
	}
}
