/* SPDX-License-Identifier: GPL-2.0 */
/* What the C files of the BTS model's test kernel share. */
#ifndef BTS_KERNEL_H
#define BTS_KERNEL_H

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
#define CTL_ALL		(DEBUGCTL_TR | DEBUGCTL_BTS)
#define R(f, t)		{ (u64)(f), (u64)(t), 0 }

/*
 * The readings of the SDM the model was booted with (-cpu properties),
 * as mk/qemu-test.sh tells them on the command line; see main.c.
 */
enum { CPL_SOURCE, CPL_TARGET, CPL_EITHER };
struct reading {
	int cpl;	/* bts-cpl= */
	int skid;	/* pmi-skid= */
	int trap_insn;	/* bts-trap-from=insn */
	int arch_pmu;	/* arch-pmu=on */
	int smp;	/* smp=N */
};
extern struct reading rd;

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

static inline u32 apic_read(u32 reg)
{
	return *(volatile u32 *)(u64)(APIC_BASE + reg);
}

static inline void invlpg(u64 addr)
{
	asm volatile("invlpg (%0)" : : "r"(addr) : "memory");
}

/* main.c */
void *memset(void *d, int c, size_t n);
void *memcpy(void *d, const void *s, size_t n);
void puts_serial(const char *s);
void put_hex(u64 v);
void put_dec(u64 v);
void __attribute__((noreturn)) qemu_exit(u32 code);
extern int test_no, failures;
void tap(int ok, const char *name);
void diag_hex(const char *what, u64 v);
void gate64(u8 *g, u64 target, u8 type, int ist);
void set_gate(int vec, void *handler, int dpl);
void set_gate_ist(int vec, void *handler, int dpl, int ist);
void idt_init(void);

#define POISON_RECS	64
#define POISON_BYTE	0xa5

extern volatile struct ds_area *ds;
extern struct bts_record *buf;
void ds_setup(int nrec, u64 thresh);
void ds_setup_plain(void);
int check_untouched(int n);
int check_slots(const struct bts_record *exp, int n, int index);
int check(const struct bts_record *exp, int n);

/* The expected records of one case, built up as the case's code runs */
extern struct bts_record exp[];
extern int nexp;
void exp_reset(void);
void exp_add(u64 from, u64 to);
void exp_cpl(u64 from, u64 to, u32 ctl, int cpl_from, int cpl_to);
int recorded(u32 ctl, int cpl_from, int cpl_to);
u64 trap_from(u64 insn, u64 next);
int exp_check(void);

/* trap_seq.S: the straight-line handlers for expected exceptions */
extern char fix_db[], fix_db_iret[], fix_of[], fix_of_iret[];
extern char fix_ud[], fix_ud_iret[], fix_gp[], fix_gp_iret[];
extern char fix_pf[], fix_pf_iret[], fix_pfmap[], fix_pfmap_iret[];
extern char fix_timer[], fix_timer_iret[];
extern volatile u32 fix_vec, fix_count, fix_debugctl;
extern volatile u64 fix_err, fix_rip, fix_cs, fix_rsp, fix_rcx, fix_cr2;
extern volatile u64 fix_dr6, fix_to, fix_skip;
void fix_reset(u64 to, u64 skip);

/* seq.S */
extern void seq_jmp6(u32 ctl);
extern void seq_jmp6_sti(u32 ctl);
extern char w0[], w1[], w2[], w3[], w4[], w5[], w6[];
extern char nmi_handler[], nmi_iret_site[], pmi_handler[], pmi_iret_site[];
extern char gp_handler[], int80_handler[], int80_iret_site[];
extern char ru_iret_site[], user_exit_handler[];
extern volatile u32 gp_count, nmi_count, pmi_count;
extern volatile u64 pmi_index;
extern void run_user(void *entry, u32 ctl, u32 cs);
extern const struct bts_record jmp6[6];
int jmp6_stream(int k, const char *handler, const char *iret_site);

/* the case groups */
void test_transfers(void);
void test_compat(void);
void test_user_filter(void);
void test_faulting(void);
void test_traps(void);
void test_btf(void);
void test_debugctl(void);
void test_pmu(void);
void test_pmu_counts(void);
void bench_idle(void);
void test_edges(void);
void test_thresholds(void);
void test_skid(void);
void test_lvtpc(void);
void test_straddle(void);
void test_smp(void);
void straddle_fault(const char *how);

#endif
