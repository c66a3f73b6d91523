/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The routines of ptrace_bts_asm.S and the labels at their branches, for
 * the ptrace_bts_* programs: each test names the exact source and target
 * of every branch it expects.
 */
#ifndef PTRACE_BTS_H
#define PTRACE_BTS_H

/* Labels: <routine>_s and _e at the breakpoints, _f<n> -> _t<n> a branch. */
extern const char jmp_s[], jmp_e[], jmp_f0[], jmp_t0[], jmp_f1[], jmp_t1[],
		  jmp_f2[], jmp_t2[], jmp_f3[];
extern const char jcc_s[], jcc_e[], jcc_f0[], jcc_t0[], jcc_f1[], jcc_t1[],
		  jcc_f2[], jcc_t2[];
extern const char call_s[], call_e[], call_f0[], call_r0[], call_fn1[],
		  call_f1[], call_r1[], call_f2[], call_fn2[], call_f3[];
extern const char ind_s[], ind_e[], ind_f0[], ind_t0[], ind_f1[], ind_r1[],
		  ind_f2[], ind_t2[], ind_f3[], ind_r3[], ind_fn[], ind_f1r[],
		  ind_fn2[], ind_f3r[];
extern const char loop_s[], loop_e[], loop_t0[], loop_f0[], loop_f1[],
		  loop_t1[], loop_f2[], loop_f3[], loop_t3[];
extern const char far_s[], far_e[], far_f0[], far_t0[], far_f1[], far_t1[],
		  far_f2[], far_r2[], far_fn[], far_f3[];
extern const char rep_s[], rep_e[], rep_f0[], rep_t0[];
extern const char self_s[], self_e[], self_f0[], self_f1[], self_t1[];
extern const char next_s[], next_e[], next_f0[], next_t0[], next_f2[],
		  next_t2[], next_f3[], next_t3[];
extern const char kentry_s[], kentry_e[], kentry_f0[], kentry_t0[], kentry_f1[],
		  kentry_t1[], kentry_f2[], kentry_t2[], kentry_f3[],
		  kentry_t3[];
extern const char sig_s[], sig_e[], sig_f0[], sig_t0[], sig_f1[], sig_t1[];
extern const char sigh_f0[], sigh_t0[], sigh_f1[];
extern const char bts_sig_restorer[];
extern const char bts_sig_handler[];
extern const char icebp_s[], icebp_e[], icebp_f0[], icebp_t0[], icebp_a[];
extern const char icebph_f0[];
extern const char bts_icebp_handler[];
extern const char utf_s[], utf_e[], utf_f0[], utf_t0[];
extern const char step_s[], step_e[], step_f0[], step_t0[], step_f1[],
		  step_t1[];
extern const char block_s[], block_e[], block_f0[], block_t0[], block_sc[],
		  block_n1[], block_f1[], block_fn[], block_f2[], block_r2[],
		  block_f3[], block_t3[];
extern const char many_s[], many_e[], many_f0[], many_t0[], many_f1[],
		  many_t1[];
extern const char sleep_s[], sleep_e[], sleep_f0[], sleep_t0[], sleep_f1[],
		  sleep_t1[];
extern const char vex_s[], vex_e[], vex_f0[], vex_t0[];
extern const char r11_s[], r11_e[], r11sys_s[], r11sys_e[];
extern const char ldtss_s[], ldtss_e[], ldtss_f0[], ldtss_t0[], ldtss_f1[],
		  ldtss_t1[];
extern const char movss_s[], movss_e[], movss_f0[], movss_t0[], movss_f1[],
		  movss_t1[];
extern const char uprobe_s[], uprobe_e[], uprobe_f0[], uprobe_t0[],
		  uprobe_n0[], uprobe_f1[], uprobe_t1[], uprobe_f2[],
		  uprobe_r2[], uprobe_f3[], uprobe_t3[], uprobe_fn[],
		  uprobe_f4[];
extern const char nofetch_jmp[], nofetch_e[];

void bts_jmp(void);
void bts_jcc(void);
void bts_call(void);
void bts_ind(void);
void bts_loop(void);
void bts_far(void);
void bts_rep(void);
void bts_self(void);
void bts_next(void);
void bts_kentry(void);
void bts_sig(void);
void bts_icebp(void);
void bts_usertf(void);
void bts_step(void);
void bts_block(void);
void bts_many(unsigned long n);
void bts_vex(void);
void bts_r11(void);
void bts_syscall_r11(void);
void bts_movss(void);
void bts_uprobe(void);
void nofetch_jump(void *page);
void bts_ldt_ss(unsigned int sel, unsigned long esp);
void bts_sleep(void);

/* The page bts_kentry writes to first, to take a page fault. */
extern void *bts_fault_addr;
/* Top of a stack below 4 GiB, for bts_far's 32-bit far call in 64-bit mode. */
extern void *bts_low_stack;
/* The SIGTRAPs bts_icebp_handler took. */
extern int bts_icebp_count;

#endif /* PTRACE_BTS_H */
