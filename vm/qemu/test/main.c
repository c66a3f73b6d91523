// SPDX-License-Identifier: GPL-2.0
/*
 * Test kernel for the BTS machine model (QEMU -cpu ...,bts=on).
 *
 * Runs known code sequences (seq.S) with IA32_DEBUGCTL.TR|BTS set and
 * compares the records in the BTS buffer with the ones the Intel SDM's
 * branch trace store would write.  Results go to the serial port in TAP
 * form; the exit status goes through isa-debug-exit (test.h).
 *
 * Command line (multiboot): "fault=unmapped-buffer", "fault=readonly-buffer"
 * or "fault=unmapped-ds" point the buffer or the DS area at a bad page and
 * expect QEMU to stop the machine on the first record.
 */
#include <stdint.h>
#include <stddef.h>
#include "test.h"

typedef uint64_t u64;
typedef uint32_t u32;
typedef uint16_t u16;
typedef uint8_t u8;

struct bts_record {
	u64 from;
	u64 to;
	u64 flags;
};

struct ds_area {
	u64 bts_buffer_base;
	u64 bts_index;
	u64 bts_absolute_maximum;
	u64 bts_interrupt_threshold;
	u64 pebs[6];
};

#define REC_SIZE	sizeof(struct bts_record)

/* seq.S */
extern void seq_direct(u32 ctl);
extern void seq_jcc(u32 ctl);
extern void seq_indirect(u32 ctl);
extern void seq_exceptions(u32 ctl, u64 unmapped);
extern void seq_jmp6(u32 ctl);
extern void seq_jmp6_sti(u32 ctl);
extern void seq_fault(u32 ctl);
extern void run_user(void *entry, u32 ctl);
extern char sd_site[], sd_to[];
extern char sj_short_site[], sj_short_to[], sj_near_site[], sj_near_to[];
extern char sj_loop_site[];
extern char si_jmp_site[], si_jmp_to[], si_call_site[], si_after_call[];
extern char si_func[], si_ret_site[], si_dcall_site[], si_after_dcall[];
extern char si_func2[], si_ret2_site[];
extern char sx_int3_site[], sx_int80_site[], sx_ud_site[], sx_pf_site[];
extern char sx_after_pf[];
extern char bp_handler[], bp_iret_site[], int80_handler[], int80_iret_site[];
extern char ud_handler[], ud_iret_site[], pf_handler[], pf_iret_site[];
extern char gp_handler[], nmi_handler[], nmi_iret_site[];
extern char pmi_handler[], pmi_iret_site[];
extern char w0[], w1[], w2[], w3[], w4[], w5[], w6[];
extern char ru_iret_site[], user_exit_handler[], syscall_entry[];
extern char sysret_site[], user_seq[], u_jmp_site[], u_jmp_to[];
extern char u_syscall_site[], u_after_syscall[], u_exit_site[];
extern char vector_stubs[];
extern u8 idt[];
extern u32 mb_info;
extern volatile u32 gp_count, nmi_count, pmi_count;
extern volatile u64 pmi_index;

static volatile struct ds_area *const ds = (void *)DS_PAGE;
static struct bts_record *const buf = (void *)BTS_BUFFER;

/* ---- Low-level helpers ---- */

static inline void outb(u16 port, u8 v)
{
	asm volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static inline u8 inb(u16 port)
{
	u8 v;

	asm volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline void outl(u16 port, u32 v)
{
	asm volatile("outl %0, %1" : : "a"(v), "Nd"(port));
}

static inline u64 rdmsr(u32 msr)
{
	u32 lo, hi;

	asm volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return lo | ((u64)hi << 32);
}

static inline void wrmsr(u32 msr, u64 v)
{
	asm volatile("wrmsr" : : "c"(msr), "a"((u32)v), "d"((u32)(v >> 32))
		     : "memory");
}

static inline void cpuid(u32 leaf, u32 *a, u32 *b, u32 *c, u32 *d)
{
	asm volatile("cpuid" : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d)
		     : "a"(leaf), "c"(0));
}

static inline void apic_write(u32 reg, u32 v)
{
	*(volatile u32 *)(u64)(APIC_BASE + reg) = v;
}

void *memset(void *d, int c, size_t n)
{
	u8 *p = d;

	while (n--)
		*p++ = c;
	return d;
}

void *memcpy(void *d, const void *s, size_t n)
{
	u8 *p = d;
	const u8 *q = s;

	while (n--)
		*p++ = *q++;
	return d;
}

static void putc_serial(char c)
{
	while (!(inb(0x3f8 + 5) & 0x20))
		;
	outb(0x3f8, c);
}

static void puts_serial(const char *s)
{
	for (; *s; s++) {
		if (*s == '\n')
			putc_serial('\r');
		putc_serial(*s);
	}
}

static void put_hex(u64 v)
{
	char b[19];
	int i;

	b[0] = '0';
	b[1] = 'x';
	for (i = 0; i < 16; i++)
		b[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
	b[18] = 0;
	puts_serial(b);
}

static void put_dec(u64 v)
{
	char b[21];
	int i = 20;

	b[i] = 0;
	do {
		b[--i] = '0' + v % 10;
		v /= 10;
	} while (v);
	puts_serial(b + i);
}

static void __attribute__((noreturn)) qemu_exit(u32 code)
{
	outl(0xf4, code);
	for (;;)
		asm volatile("cli; hlt");
}

/* ---- TAP ---- */

static int test_no;
static int failures;

static void tap(int ok, const char *name)
{
	puts_serial(ok ? "ok " : "not ok ");
	put_dec(++test_no);
	puts_serial(" - ");
	puts_serial(name);
	puts_serial("\n");
	if (!ok)
		failures++;
}

static void diag_hex(const char *what, u64 v)
{
	puts_serial("# ");
	puts_serial(what);
	puts_serial(" ");
	put_hex(v);
	puts_serial("\n");
}

/* ---- IDT ---- */

static void set_gate(int vec, void *handler, int dpl)
{
	u8 *g = idt + 16 * vec;
	u64 a = (u64)handler;

	g[0] = a;
	g[1] = a >> 8;
	g[2] = KERNEL_CS;
	g[3] = 0;
	g[4] = 0;				/* IST */
	g[5] = 0x8e | (dpl << 5);		/* present, interrupt gate */
	g[6] = a >> 16;
	g[7] = a >> 24;
	g[8] = a >> 32;
	g[9] = a >> 40;
	g[10] = a >> 48;
	g[11] = a >> 56;
	g[12] = g[13] = g[14] = g[15] = 0;
}

void idt_init(void)
{
	int v;

	for (v = 0; v < 256; v++)
		set_gate(v, vector_stubs + 16 * v, 0);
	set_gate(2, nmi_handler, 0);
	set_gate(3, bp_handler, 3);
	set_gate(6, ud_handler, 0);
	set_gate(13, gp_handler, 0);
	set_gate(14, pf_handler, 0);
	set_gate(0x80, int80_handler, 3);
	set_gate(USER_EXIT_VECTOR, user_exit_handler, 3);
	set_gate(PMI_VECTOR, pmi_handler, 0);
}

void unexpected_vector(u64 vec, u64 w1, u64 w2)
{
	puts_serial("# unexpected vector ");
	put_dec(vec);
	puts_serial(", stack words ");
	put_hex(w1);
	puts_serial(" ");
	put_hex(w2);
	puts_serial("\nnot ok - unexpected interrupt or exception\n");
	qemu_exit(EXIT_FAIL);
}

/* ---- Buffer set-up and checks ---- */

/*
 * Every test starts with this many records of the buffer poisoned: a
 * record the model must not write has to keep the poison.
 */
#define POISON_RECS	64
#define POISON_BYTE	0xa5

static void ds_setup(int nrec, u64 thresh)
{
	memset((void *)buf, POISON_BYTE, POISON_RECS * REC_SIZE);
	ds->bts_buffer_base = (u64)buf;
	ds->bts_index = (u64)buf;
	ds->bts_absolute_maximum = (u64)buf + nrec * REC_SIZE;
	ds->bts_interrupt_threshold = thresh;
	wrmsr(MSR_DS_AREA, DS_PAGE);
}

/* A roomy buffer whose threshold is never reached. */
static void ds_setup_plain(void)
{
	ds_setup(32, (u64)buf + 33 * REC_SIZE);
}

#define R(f, t)	{ (u64)(f), (u64)(t), 0 }

/* The slots [n, POISON_RECS) still hold the poison ds_setup() wrote. */
static int check_untouched(int n)
{
	const u8 *p = (const u8 *)&buf[n];
	const u8 *end = (const u8 *)&buf[POISON_RECS];

	for (; p < end; p++) {
		if (*p == POISON_BYTE)
			continue;
		puts_serial("# written beyond the expected records: byte ");
		put_hex((u64)(p - (const u8 *)buf));
		puts_serial(" of the buffer\n");
		return 0;
	}
	return 1;
}

/*
 * Compare the slots [0, n) and the index (in records from the base), and
 * check that nothing was written after slot n.
 */
static int check_slots(const struct bts_record *exp, int n, int index)
{
	int ok, i;

	ok = check_untouched(n);

	if (ds->bts_index != (u64)buf + index * REC_SIZE) {
		diag_hex("bts_index", ds->bts_index);
		diag_hex("expected ", (u64)buf + index * REC_SIZE);
		ok = 0;
	}
	for (i = 0; i < n; i++) {
		if (buf[i].from == exp[i].from && buf[i].to == exp[i].to &&
		    buf[i].flags == exp[i].flags)
			continue;
		puts_serial("# record ");
		put_dec(i);
		puts_serial(": got ");
		put_hex(buf[i].from);
		puts_serial(" -> ");
		put_hex(buf[i].to);
		puts_serial(" flags ");
		put_hex(buf[i].flags);
		puts_serial(", expected ");
		put_hex(exp[i].from);
		puts_serial(" -> ");
		put_hex(exp[i].to);
		puts_serial("\n");
		ok = 0;
	}
	return ok;
}

static int check(const struct bts_record *exp, int n)
{
	return check_slots(exp, n, n);
}

/* ---- Tests ---- */

static void test_msrs(void)
{
	u64 misc = rdmsr(MSR_MISC_ENABLE);
	u64 v;

	tap(!(misc & (1 << 11)) && (misc & (1 << 12)),
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

	wrmsr(MSR_DEBUGCTL, DEBUGCTL_LBR | DEBUGCTL_BTF | DEBUGCTL_BTINT |
	      DEBUGCTL_BTS_OFF_OS | DEBUGCTL_BTS_OFF_USR | (1 << 11));
	v = rdmsr(MSR_DEBUGCTL);
	wrmsr(MSR_DEBUGCTL, 0);
	tap(v == (DEBUGCTL_BTINT | DEBUGCTL_BTS_OFF_OS | DEBUGCTL_BTS_OFF_USR),
	    "IA32_DEBUGCTL keeps BTINT/BTS_OFF_*; LBR, BTF, bit 11 read 0 as before");
	tap(rdmsr(MSR_DEBUGCTL) == 0, "IA32_DEBUGCTL cleared");
}

#define CTL_ALL	(DEBUGCTL_TR | DEBUGCTL_BTS)

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

static void test_user(void)
{
	static const struct bts_record all[] = {
		R(ru_iret_site, user_seq),		/* CPL 0 */
		R(u_jmp_site, u_jmp_to),		/* CPL 3 */
		R(u_syscall_site, syscall_entry),	/* CPL 3 */
		R(sysret_site, u_after_syscall),	/* CPL 0 */
		R(u_exit_site, user_exit_handler),	/* CPL 3 */
	};
	static const struct bts_record usr[] = { all[1], all[2], all[4] };
	static const struct bts_record os[] = { all[0], all[3] };

	ds_setup_plain();
	run_user(user_seq, CTL_ALL);
	tap(check(all, 5), "ring 3: IRETQ, JMP, SYSCALL, SYSRETQ, INT n (DS supervisor-only)");

	ds_setup_plain();
	run_user(user_seq, CTL_ALL | DEBUGCTL_BTS_OFF_OS);
	tap(check(usr, 3), "BTS_OFF_OS: only transfers made at CPL 3 (SYSCALL, INT n included)");

	ds_setup_plain();
	run_user(user_seq, CTL_ALL | DEBUGCTL_BTS_OFF_USR);
	tap(check(os, 2), "BTS_OFF_USR: only transfers made at CPL 0 (IRETQ, SYSRETQ)");

	ds_setup_plain();
	run_user(user_seq, CTL_ALL | DEBUGCTL_BTS_OFF_OS | DEBUGCTL_BTS_OFF_USR);
	tap(check(all, 0), "BTS_OFF_OS|BTS_OFF_USR: nothing recorded");
}

static const struct bts_record jmp6[] = {
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

static void test_threshold(void)
{
	/* threshold after 3 records; the PMI is taken at the 3rd JMP's target */
	const struct bts_record nmi_exp[] = {
		jmp6[0], jmp6[1], jmp6[2],
		R(w3, nmi_handler), R(nmi_iret_site, w3),
		jmp6[3], jmp6[4], jmp6[5],
	};
	const struct bts_record pmi_exp[] = {
		jmp6[0], jmp6[1], jmp6[2],
		R(w3, pmi_handler), R(pmi_iret_site, w3),
		jmp6[3], jmp6[4], jmp6[5],
	};
	u64 thresh = (u64)buf + 3 * REC_SIZE;

	nmi_count = 0;
	apic_write(APIC_LVTPC, 0x400);			/* NMI, unmasked */
	ds_setup(10, thresh);
	seq_jmp6(CTL_ALL | DEBUGCTL_BTINT);
	tap(check(nmi_exp, 8) && nmi_count == 1 &&
	    pmi_index == (u64)buf + 4 * REC_SIZE,
	    "BTINT: one PMI (LVTPC NMI) when bts_index reaches the threshold");

	pmi_count = 0;
	apic_write(APIC_LVTPC, PMI_VECTOR);		/* fixed vector */
	ds_setup(10, thresh);
	seq_jmp6_sti(CTL_ALL | DEBUGCTL_BTINT);
	tap(check(pmi_exp, 8) && pmi_count == 1,
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
	seq_jmp6(CTL_ALL);
	tap(check(nmi_exp, 8) && nmi_count == 1,
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
	} else {
		puts_serial("not ok - unknown fault= test\n");
		qemu_exit(EXIT_FAIL);
	}
	puts_serial("# fault test: the machine should stop now\n");
	seq_fault(CTL_ALL);
	puts_serial("not ok - fault test: the store fault was not reported\n");
	qemu_exit(EXIT_FAIL);
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

	test_msrs();
	test_direct();
	test_jcc();
	test_indirect();
	test_exceptions();
	test_user();
	test_buffer_end();
	test_threshold();

	puts_serial("1..");
	put_dec(test_no);
	puts_serial("\n");
	qemu_exit(failures ? EXIT_FAIL : EXIT_PASS);
}
