// SPDX-License-Identifier: GPL-2.0
/*
 * Two vCPUs: the AP, started with INIT-SIPI-SIPI, and the BSP run the
 * same traced sequence at the same time, each with its own DS area,
 * buffer and threshold PMI (an NMI through its own LVTPC).
 */
#include "kernel.h"

extern char ap_tramp[], ap_tramp_end[];
extern char nmi_percpu[], nmi_percpu_iret[];
extern volatile u32 cpu_nmi_count[2], cpu_lvtpc[2];
extern volatile u64 cpu_pmi_index[2];

static volatile int ap_state;	/* 1: ready, 2: done */
static volatile int ap_go;

#define AP_NREC		10
#define AP_SLOT(n)	(AP_BUFFER + (n) * REC_SIZE)

static void ap_ds_setup(void)
{
	volatile struct ds_area *a = (void *)AP_DS_PAGE;

	memset((void *)AP_BUFFER, POISON_BYTE, POISON_RECS * REC_SIZE);
	a->bts_buffer_base = AP_BUFFER;
	a->bts_index = AP_BUFFER;
	a->bts_absolute_maximum = AP_SLOT(AP_NREC);
	a->bts_interrupt_threshold = AP_SLOT(3);
	wrmsr(MSR_DS_AREA, AP_DS_PAGE);
}

void ap_main(void)
{
	apic_write(APIC_SVR, 0x1ff);
	apic_write(APIC_LVTPC, 0x400);
	ap_ds_setup();
	ap_state = 1;
	while (!ap_go)
		asm volatile("pause");
	seq_jmp6(CTL_ALL | DEBUGCTL_BTINT);
	ap_state = 2;
}

static int wait_state(int s)
{
	long spin;

	for (spin = 0; spin < 200000000 && ap_state != s; spin++)
		asm volatile("pause");
	return ap_state == s;
}

static void ipi(u32 lo)
{
	apic_write(APIC_ICR_HI, 1u << 24);	/* APIC ID 1 */
	apic_write(APIC_ICR_LO, lo);
}

static int check_cpu(int cpu, int at)
{
	struct bts_record *saved = buf;
	volatile struct ds_area *saved_ds = ds;
	u64 base = cpu ? AP_BUFFER : BTS_BUFFER;
	int ok;

	if (cpu) {
		buf = (void *)AP_BUFFER;
		ds = (void *)AP_DS_PAGE;
	}
	ok = exp_check();
	buf = saved;
	ds = saved_ds;
	if (cpu_nmi_count[cpu] == 1 &&
	    cpu_pmi_index[cpu] == base + at * REC_SIZE &&
	    cpu_lvtpc[cpu] == (0x400 | (1 << 16)))
		return ok;
	diag_hex("PMIs", cpu_nmi_count[cpu]);
	diag_hex("bts_index in the handler", cpu_pmi_index[cpu]);
	diag_hex("LVTPC in the handler", cpu_lvtpc[cpu]);
	return 0;
}

void test_smp(void)
{
	int at, started;

	set_gate(2, nmi_percpu, 0);
	memcpy((void *)AP_TRAMPOLINE, ap_tramp, ap_tramp_end - ap_tramp);
	ipi(0x4500);				/* INIT */
	ipi(0x4600 | (AP_TRAMPOLINE >> 12));	/* SIPI */
	ipi(0x4600 | (AP_TRAMPOLINE >> 12));
	started = wait_state(1);
	tap(started, "AP started by INIT-SIPI-SIPI, in long mode");
	if (!started) {
		set_gate(2, nmi_handler, 0);
		return;
	}

	apic_write(APIC_LVTPC, 0x400);
	ds_setup(AP_NREC, (u64)buf + 3 * REC_SIZE);
	at = jmp6_stream(3, nmi_percpu, nmi_percpu_iret);
	ap_go = 1;
	seq_jmp6(CTL_ALL | DEBUGCTL_BTINT);
	wait_state(2);

	tap(check_cpu(0, at), "two vCPUs: the BSP's buffer, its PMI, its LVTPC masked");
	tap(ap_state == 2 && check_cpu(1, at),
	    "two vCPUs: the AP's own buffer, its PMI, its LVTPC masked");
	set_gate(2, nmi_handler, 0);
	apic_write(APIC_LVTPC, 1 << 16);
}
