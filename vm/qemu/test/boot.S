/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Boot code of the BTS model's test kernel: a multiboot (v1) header with
 * the address fields, so that QEMU's -kernel loads this flat binary, a
 * 32-bit entry that builds identity page tables and enters long mode, and
 * the GDT, TSS and IDT the tests need.
 *
 * Memory map (all identity mapped, 2 MiB pages, user-accessible), except
 * 0x400000-0x5fffff which goes through a 4 KiB page table:
 *   0x400000-0x40ffff  supervisor-only, writable: DS area and BTS buffer
 *   0x410000           not present      (fault tests)
 *   0x411000           supervisor-only, read-only (fault tests)
 *   0x413000           not present until a test's #PF handler maps it
 *   0x414000           accessed and dirty flags clear (fault=clear-ad)
 *   0x415000           accessed set, dirty clear (fault=clear-d)
 *   the rest           supervisor-only, writable
 * The 4 KiB pages have their accessed and dirty flags set, as the SDM asks
 * of the DS area and the buffers, but for 0x414000 and 0x415000.
 */
#include "test.h"

#define MB_MAGIC	0x1badb002
#define MB_FLAGS	0x00010000	/* the header carries load addresses */

	.section .multiboot, "a"
	.align 4
mb_header:
	.long MB_MAGIC
	.long MB_FLAGS
	.long -(MB_MAGIC + MB_FLAGS)
	.long mb_header			/* header_addr */
	.long __load_start		/* load_addr */
	.long __load_end		/* load_end_addr */
	.long __bss_end			/* bss_end_addr */
	.long _start32			/* entry_addr */

	.section .text32, "ax"
	.code32
	.globl _start32
_start32:
	cli
	movl	$boot_stack_top, %esp
	movl	%ebx, mb_info		/* multiboot information */

	/* PML4[0] -> PDPT, PDPT[0..3] -> PD0..PD3: 4 GiB of 2 MiB pages */
	movl	$pdpt + 0x7, pml4
	movl	$pd + 0x7, %eax
	movl	$pdpt, %edi
	movl	$4, %ecx
1:	movl	%eax, (%edi)
	addl	$0x1000, %eax
	addl	$8, %edi
	loop	1b

	movl	$pd, %edi
	movl	$0x87, %eax		/* P | W | U | PS */
	xorl	%edx, %edx
	movl	$2048, %ecx
2:	movl	%eax, (%edi)
	movl	%edx, 4(%edi)
	addl	$0x200000, %eax
	adcl	$0, %edx
	addl	$8, %edi
	loop	2b

	/* 0x400000-0x5fffff through a 4 KiB page table */
	movl	$pt + 0x7, pd + 2 * 8
	movl	$pt, %edi
	movl	$0x400063, %eax		/* P | W | A | D, supervisor only */
	movl	$512, %ecx
3:	movl	%eax, (%edi)
	addl	$0x1000, %eax
	addl	$8, %edi
	loop	3b
	movl	$0, pt + 0x10 * 8			/* 0x410000: not present */
	movl	$0x411061, pt + 0x11 * 8		/* 0x411000: read-only */
	movl	$0, pt + 0x13 * 8			/* 0x413000: not yet */
	movl	$0x414003, pt + 0x14 * 8		/* 0x414000: A, D clear */
	movl	$0x415023, pt + 0x15 * 8		/* 0x415000: D clear */

	/* PAE, then long mode with SYSCALL, then paging */
	movl	%cr4, %eax
	orl	$(1 << 5), %eax
	movl	%eax, %cr4
	movl	$pml4, %eax
	movl	%eax, %cr3
	movl	$0xc0000080, %ecx
	rdmsr
	orl	$((1 << 8) | (1 << 0)), %eax	/* LME, SCE */
	wrmsr
	movl	%cr0, %eax
	orl	$0x80010001, %eax	/* PG, WP (as Linux), PE */
	movl	%eax, %cr0

	lgdt	gdt_desc32
	ljmp	$KERNEL_CS, $long_entry

	.section .text
	.code64
long_entry:
	movw	$KERNEL_DS, %ax
	movw	%ax, %ds
	movw	%ax, %es
	movw	%ax, %ss
	xorw	%ax, %ax
	movw	%ax, %fs
	movw	%ax, %gs
	movq	$boot_stack_top, %rsp

	/* the TSS descriptor, then load TR */
	leaq	tss(%rip), %rax
	movw	$TSS_SIZE - 1, gdt + TSS_SEL
	movw	%ax, gdt + TSS_SEL + 2
	shrq	$16, %rax
	movb	%al, gdt + TSS_SEL + 4
	movb	$0x89, gdt + TSS_SEL + 5	/* present, 64-bit TSS */
	movb	%ah, gdt + TSS_SEL + 7
	shrq	$16, %rax
	movl	%eax, gdt + TSS_SEL + 8
	movq	$int_stack_top, tss + 4		/* RSP0 */
	movq	$ist_stack_top, tss + 36	/* IST1: #PF on a bad stack */
	movw	$TSS_SIZE, tss + 102		/* no I/O bitmap */
	movw	$TSS_SEL, %ax
	ltr	%ax

	call	idt_init
	lidt	idt_desc
	movl	mb_info, %edi
	call	kmain
	/* kmain exits through isa-debug-exit; never here */
4:	hlt
	jmp	4b

/*
 * Application processor start-up (smp.c copies this to AP_TRAMPOLINE and
 * sends INIT-SIPI-SIPI): real mode, protected mode, the BSP's page tables
 * and long mode, then ap_main() on its own stack.
 */
	.code16
	.globl ap_tramp, ap_tramp_end
ap_tramp:
	cli
	xorw	%ax, %ax
	movw	%ax, %ds
	lgdtl	AP_TRAMPOLINE + (ap_gdt_desc - ap_tramp)
	movl	%cr0, %eax
	orl	$1, %eax
	movl	%eax, %cr0
	ljmpl	$FLAT_CS32, $(AP_TRAMPOLINE + (ap_tramp32 - ap_tramp))
	.code32
ap_tramp32:
	movw	$KERNEL_DS, %ax
	movw	%ax, %ds
	movw	%ax, %es
	movw	%ax, %ss
	movl	%cr4, %eax
	orl	$(1 << 5), %eax
	movl	%eax, %cr4
	movl	$pml4, %eax
	movl	%eax, %cr3
	movl	$0xc0000080, %ecx
	rdmsr
	orl	$((1 << 8) | (1 << 0)), %eax
	wrmsr
	movl	%cr0, %eax
	orl	$0x80010001, %eax
	movl	%eax, %cr0
	ljmp	$KERNEL_CS, $ap_long_entry
	.align 4
ap_gdt_desc:
	.word	gdt_end - gdt - 1
	.long	gdt
ap_tramp_end:

	.code64
ap_long_entry:
	movw	$KERNEL_DS, %ax
	movw	%ax, %ds
	movw	%ax, %es
	movw	%ax, %ss
	movq	$ap_stack_top, %rsp
	lidt	idt_desc
	call	ap_main
6:	cli
	hlt
	jmp	6b

/* Interrupt stubs: one per vector, all going to unexpected_vector(). */
	.align 16
	.globl vector_stubs
vector_stubs:
	.set vec, 0
	.rept 256
	.align 16
	pushq	$vec
	jmp	vector_common
	.set vec, vec + 1
	.endr

vector_common:
	movq	(%rsp), %rdi		/* vector */
	movq	8(%rsp), %rsi		/* error code or RIP */
	movq	16(%rsp), %rdx		/* RIP or CS */
	andq	$-16, %rsp
	call	unexpected_vector
5:	hlt
	jmp	5b

	.section .data
	.align 16
	.globl gdt, gdt_end
gdt:
	.quad 0				/* 0x00 */
	.quad 0x00af9a000000ffff	/* 0x08 kernel code, 64-bit */
	.quad 0x00cf92000000ffff	/* 0x10 kernel data */
	.quad 0x00cff2000000ffff	/* 0x18 user data (SYSRET SS) */
	.quad 0x00affa000000ffff	/* 0x20 user code, 64-bit (SYSRET CS) */
	.quad 0, 0			/* 0x28 TSS, filled in at boot */
	.quad 0x00af9a000000ffff	/* 0x38 SYSENTER_CS: kernel code, 64-bit */
	.quad 0x00cf92000000ffff	/* 0x40 its SS */
	.quad 0x00cffa000000ffff	/* 0x48 user code, 32-bit (SYSEXIT CS) */
	.quad 0x00cff2000000ffff	/* 0x50 user data (SYSEXIT SS) */
	/* 0x58 kernel code, 32-bit, base CS32_BASE, limit 4 GiB */
	.quad 0x00cf9a000000ffff | ((CS32_BASE & 0xffffff) << 16) | ((CS32_BASE >> 24) << 56)
	.quad 0, 0			/* 0x60 call gate, DPL 3 (main.c) */
	.quad 0, 0			/* 0x70 call gate, DPL 0 (main.c) */
	.quad 0x00cf9a000000ffff	/* 0x80 kernel code, 32-bit, flat */
gdt_end:

gdt_desc32:
	.word gdt_end - gdt - 1
	.long gdt

	.align 16
	.globl idt_desc
idt_desc:
	.word 256 * 16 - 1
	.quad idt

	.globl mb_info
mb_info:
	.long 0

	.section .bss
	.align 4096
	.globl pml4, pdpt, pd, pt
pml4:	.skip 4096
pdpt:	.skip 4096
pd:	.skip 4 * 4096
pt:	.skip 4096
	.globl idt
idt:	.skip 256 * 16
	.align 16
	.globl tss
tss:	.skip TSS_SIZE
	.align 16
	.skip 16384
boot_stack_top:
	.skip 16384
	.globl int_stack_top
int_stack_top:
	.skip 16384
	.globl user_stack_top
user_stack_top:
	.skip 16384
	.globl ist_stack_top
ist_stack_top:
	.skip 16384
	.globl ap_stack_top
ap_stack_top:
	.skip 4096
	.globl sysenter_stack_top
sysenter_stack_top:

	.section .note.GNU-stack, "", @progbits
