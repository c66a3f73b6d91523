// SPDX-License-Identifier: GPL-2.0
/*
 * The workload of the Debug Store sample's check (samples/ds/, vm/init's
 * vm.sample=1): a known number of user-mode branches in a known address
 * range, on one CPU, started on cue.
 *
 * Usage: ds-sample-work <cpu>
 *
 * Pins itself to <cpu>, writes "<lo> <hi>\n" to stdout, the range of its
 * loop, then reads one byte from stdin. Once that arrives it takes exactly
 * LOOP_BRANCHES branches, each from the loop's jnz to the loop's start,
 * both in [lo, hi), and exits. From the write on, the code is one block of
 * assembly whose only taken branch is that jnz: a tracer of its user mode
 * that starts after the line was written records those branches and not
 * one other.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>

#define LOOP_BRANCHES	10000

#define STR(x)		#x
#define XSTR(x)		STR(x)

/* ds_sample_go(line, len): write the line, wait for the cue, loop, exit. */
void ds_sample_go(const char *line, size_t len) __attribute__((noreturn));
extern const char ds_sample_loop[], ds_sample_loop_end[];

asm(
"	.text\n"
"	.globl	ds_sample_go\n"
"	.type	ds_sample_go, @function\n"
"ds_sample_go:\n"
"	mov	%rsi, %rdx\n"
"	mov	%rdi, %rsi\n"
"	mov	$1, %edi\n"
"	mov	$" XSTR(SYS_write) ", %eax\n"
"	syscall\n"
	/* read(0, the red zone, 1): only its return matters, not the byte */
"	xor	%edi, %edi\n"
"	lea	-8(%rsp), %rsi\n"
"	mov	$1, %edx\n"
"	mov	$" XSTR(SYS_read) ", %eax\n"
"	syscall\n"
	/* LOOP_BRANCHES taken, then the last jnz falls through */
"	mov	$" XSTR(LOOP_BRANCHES) " + 1, %ecx\n"
"	.globl	ds_sample_loop\n"
"ds_sample_loop:\n"
"	dec	%ecx\n"
"	jnz	ds_sample_loop\n"
"	.globl	ds_sample_loop_end\n"
"ds_sample_loop_end:\n"
"	xor	%edi, %edi\n"
"	mov	$" XSTR(SYS_exit_group) ", %eax\n"
"	syscall\n"
"	ud2\n"
"	.size	ds_sample_go, . - ds_sample_go\n"
);

int main(int argc, char **argv)
{
	char line[64];
	cpu_set_t set;
	int len;

	if (argc != 2) {
		fprintf(stderr, "usage: ds-sample-work <cpu>\n");
		return 2;
	}
	CPU_ZERO(&set);
	CPU_SET(atoi(argv[1]), &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("ds-sample-work: sched_setaffinity");
		return 1;
	}
	len = snprintf(line, sizeof(line), "%#lx %#lx\n",
		       (unsigned long)ds_sample_loop,
		       (unsigned long)ds_sample_loop_end);
	ds_sample_go(line, len);
}
