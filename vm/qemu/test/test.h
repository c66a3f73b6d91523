/* SPDX-License-Identifier: GPL-2.0 */
/* Constants shared by the assembly and C parts of the BTS model's test. */
#ifndef BTS_TEST_H
#define BTS_TEST_H

#define KERNEL_CS	0x08
#define KERNEL_DS	0x10
#define USER_DS		(0x18 | 3)
#define USER_CS		(0x20 | 3)
#define TSS_SEL		0x28
#define TSS_SIZE	104

#define MSR_EFER		0xc0000080
#define MSR_STAR		0xc0000081
#define MSR_LSTAR		0xc0000082
#define MSR_FMASK		0xc0000084
#define MSR_MISC_ENABLE		0x1a0
#define MSR_DEBUGCTL		0x1d9
#define MSR_DS_AREA		0x600

#define DEBUGCTL_LBR		(1 << 0)
#define DEBUGCTL_BTF		(1 << 1)
#define DEBUGCTL_TR		(1 << 6)
#define DEBUGCTL_BTS		(1 << 7)
#define DEBUGCTL_BTINT		(1 << 8)
#define DEBUGCTL_BTS_OFF_OS	(1 << 9)
#define DEBUGCTL_BTS_OFF_USR	(1 << 10)

/* Supervisor-only 4 KiB pages (see boot.S) */
#define DS_PAGE		0x400000	/* DS buffer management area */
#define BTS_BUFFER	0x401000	/* BTS buffer, up to 60 KiB */
#define UNMAPPED_PAGE	0x410000
#define READONLY_PAGE	0x411000

#define APIC_BASE	0xfee00000
#define APIC_EOI	0x0b0
#define APIC_SVR	0x0f0
#define APIC_LVTPC	0x340

#define PMI_VECTOR	0xf0
#define USER_EXIT_VECTOR 0x81

/* isa-debug-exit at 0xf4: QEMU exits with (value << 1) | 1 */
#define EXIT_PASS	0x10	/* status 33 */
#define EXIT_FAIL	0x11	/* status 35 */
#define EXIT_ABSENT	0x12	/* status 37: no BTS (CPUID.1:EDX.DS clear) */

#endif
