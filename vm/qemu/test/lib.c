// SPDX-License-Identifier: GPL-2.0
/*
 * The test kernel's library: serial output, TAP, the IDT, the DS area and
 * the comparison of the BTS buffer with the expected records.
 */
#include "kernel.h"

extern char vector_stubs[];
extern u8 idt[];
extern char bp_handler[], ud_handler[], pf_handler[];

/* The DS area and buffer the checks look at (the straddle cases move them) */
volatile struct ds_area *ds = (void *)DS_PAGE;
struct bts_record *buf = (void *)BTS_BUFFER;

/* ---- Low-level helpers ---- */

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

void putc_serial(char c)
{
	while (!(inb(0x3f8 + 5) & 0x20))
		;
	outb(0x3f8, c);
}

void puts_serial(const char *s)
{
	for (; *s; s++) {
		if (*s == '\n')
			putc_serial('\r');
		putc_serial(*s);
	}
}

void put_hex(u64 v)
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

void put_dec(u64 v)
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

void __attribute__((noreturn)) qemu_exit(u32 code)
{
	outl(0xf4, code);
	for (;;)
		asm volatile("cli; hlt");
}

/* ---- TAP ---- */

int test_no;
int failures;

void tap(int ok, const char *name)
{
	puts_serial(ok ? "ok " : "not ok ");
	put_dec(++test_no);
	puts_serial(" - ");
	puts_serial(name);
	puts_serial("\n");
	if (!ok)
		failures++;
}

void diag_hex(const char *what, u64 v)
{
	puts_serial("# ");
	puts_serial(what);
	puts_serial(" ");
	put_hex(v);
	puts_serial("\n");
}

/* ---- IDT ---- */

/*
 * A 16-byte long-mode gate descriptor to KERNEL_CS:@target: @type is the
 * access byte (present, DPL, type), @ist the IST index (interrupt gates).
 */
void gate64(u8 *g, u64 target, u8 type, int ist)
{
	g[0] = target;
	g[1] = target >> 8;
	g[2] = KERNEL_CS;
	g[3] = 0;
	g[4] = ist;
	g[5] = type;
	g[6] = target >> 16;
	g[7] = target >> 24;
	g[8] = target >> 32;
	g[9] = target >> 40;
	g[10] = target >> 48;
	g[11] = target >> 56;
	g[12] = g[13] = g[14] = g[15] = 0;
}

void set_gate_ist(int vec, void *handler, int dpl, int ist)
{
	/* present, interrupt gate */
	gate64(idt + 16 * vec, (u64)handler, 0x8e | (dpl << 5), ist);
}

void set_gate(int vec, void *handler, int dpl)
{
	set_gate_ist(vec, handler, dpl, 0);
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

void ds_setup(int nrec, u64 thresh)
{
	memset((void *)buf, POISON_BYTE, POISON_RECS * REC_SIZE);
	ds->bts_buffer_base = (u64)buf;
	ds->bts_index = (u64)buf;
	ds->bts_absolute_maximum = (u64)buf + nrec * REC_SIZE;
	ds->bts_interrupt_threshold = thresh;
	wrmsr(MSR_DS_AREA, (u64)ds);
}

/* A roomy buffer whose threshold is never reached. */
void ds_setup_plain(void)
{
	ds_setup(32, (u64)buf + 33 * REC_SIZE);
}


/* The slots [n, POISON_RECS) still hold the poison ds_setup() wrote. */
int check_untouched(int n)
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
int check_slots(const struct bts_record *exp, int n, int index)
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

int check(const struct bts_record *exp, int n)
{
	return check_slots(exp, n, n);
}

/* ---- Expected records ---- */

struct bts_record exp[128];
int nexp;

void exp_reset(void)
{
	nexp = 0;
}

void exp_add(u64 from, u64 to)
{
	if (nexp == 128)
		return;
	exp[nexp].from = from;
	exp[nexp].to = to;
	exp[nexp].flags = 0;
	nexp++;
}

/* Does BTS_OFF_OS / BTS_OFF_USR let a transfer made at this CPL through? */
static int cpl_passes(u32 ctl, int cpl)
{
	return cpl ? !(ctl & DEBUGCTL_BTS_OFF_USR) : !(ctl & DEBUGCTL_BTS_OFF_OS);
}

/*
 * The SDM's "skipped if CPL is 0" / "greater than 0" does not say whether
 * the CPL before or after the transfer counts; the model was booted with
 * one reading (bts-cpl=), and so is the expectation.
 */
int recorded(u32 ctl, int cpl_from, int cpl_to)
{
	switch (rd.cpl) {
	case CPL_TARGET:
		return cpl_passes(ctl, cpl_to);
	case CPL_EITHER:
		return cpl_passes(ctl, cpl_from) || cpl_passes(ctl, cpl_to);
	default:
		return cpl_passes(ctl, cpl_from);
	}
}

/* A transfer from CPL cpl_from to CPL cpl_to, made with DEBUGCTL = ctl */
void exp_cpl(u64 from, u64 to, u32 ctl, int cpl_from, int cpl_to)
{
	if (recorded(ctl, cpl_from, cpl_to))
		exp_add(from, to);
}

/* The "from" of a single-step trap under the booted reading */
u64 trap_from(u64 insn, u64 next)
{
	return rd.trap_insn ? insn : next;
}

int exp_check(void)
{
	return check(exp, nexp);
}
