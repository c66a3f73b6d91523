// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite for the emulated Branch Trace Store.
 *
 * It reaches the classifier and the decode cache through ../emulate.h:
 * the classifier cases decode
 * a byte sequence in 32-bit or 64-bit mode and check the kind, the length
 * and the taken decision for given flags and count register; the condition
 * codes are checked against the SDM's definitions; the cache is looked up
 * on user memory the test maps and rewrites; a held PTRACE_SINGLEBLOCK lets
 * through the debugger's traps a CPU honouring DEBUGCTL.BTF would raise;
 * perf's register samples do not show a forced TF.
 */

#include <kunit/test.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/perf_regs.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <asm/debugreg.h>
#include <asm/ds_emulate.h>
#include <asm/insn.h>
#include <asm/ptrace.h>

#include "../emulate.h"
#include "../internal.h"

/* Flags with no condition bit set, and each bit on its own. */
#define DS_EMU_TEST_NONE	X86_EFLAGS_FIXED

/**
 * struct ds_emu_test_case - one instruction and what the trace makes of it
 * @name:   for the log
 * @bytes:  the instruction, padded with int3
 * @mode64: decode in 64-bit mode
 * @amd:    decode as an AMD CPU runs it
 * @len:    expected length
 * @kind:   expected enum ds_emu_kind
 * @flags:  flags after the instruction
 * @cx:     count register after the instruction
 * @taken:  expected decision
 */
struct ds_emu_test_case {
	const char	*name;
	u8		bytes[MAX_INSN_SIZE];
	bool		mode64;
	bool		amd;
	u8		len;
	u8		kind;
	unsigned long	flags;
	unsigned long	cx;
	bool		taken;
};

#define DS_EMU_T(_name, _m64, _len, _kind, _flags, _cx, _taken, ...)	\
	{ .name = _name, .bytes = { __VA_ARGS__ }, .mode64 = _m64,	\
	  .len = _len, .kind = _kind, .flags = _flags, .cx = _cx,	\
	  .taken = _taken }

/* The same, decoded as an AMD CPU runs it. */
#define DS_EMU_T_AMD(_name, _m64, _len, _kind, _flags, _cx, _taken, ...) \
	{ .name = _name, .bytes = { __VA_ARGS__ }, .mode64 = _m64,	\
	  .amd = true, .len = _len, .kind = _kind, .flags = _flags,	\
	  .cx = _cx, .taken = _taken }

static const struct ds_emu_test_case ds_emu_test_cases[] = {
	/* jcc rel8 against each flag, taken and not taken */
	DS_EMU_T("jz taken", true, 2, DS_EMU_JCC, X86_EFLAGS_ZF, 0, true,
		 0x74, 0x10),
	DS_EMU_T("jz not taken", true, 2, DS_EMU_JCC, DS_EMU_TEST_NONE, 0,
		 false, 0x74, 0x10),
	DS_EMU_T("jnz to fall-through", true, 2, DS_EMU_JCC,
		 DS_EMU_TEST_NONE, 0, true, 0x75, 0x00),
	DS_EMU_T("jnz to fall-through, ZF", true, 2, DS_EMU_JCC,
		 X86_EFLAGS_ZF, 0, false, 0x75, 0x00),
	DS_EMU_T("jo", true, 2, DS_EMU_JCC, X86_EFLAGS_OF, 0, true,
		 0x70, 0x02),
	DS_EMU_T("jno, OF", true, 2, DS_EMU_JCC, X86_EFLAGS_OF, 0, false,
		 0x71, 0x02),
	DS_EMU_T("jb", true, 2, DS_EMU_JCC, X86_EFLAGS_CF, 0, true,
		 0x72, 0x02),
	DS_EMU_T("jae, CF", true, 2, DS_EMU_JCC, X86_EFLAGS_CF, 0, false,
		 0x73, 0x02),
	DS_EMU_T("jbe, ZF", true, 2, DS_EMU_JCC, X86_EFLAGS_ZF, 0, true,
		 0x76, 0x02),
	DS_EMU_T("ja, CF", true, 2, DS_EMU_JCC, X86_EFLAGS_CF, 0, false,
		 0x77, 0x02),
	DS_EMU_T("js", true, 2, DS_EMU_JCC, X86_EFLAGS_SF, 0, true,
		 0x78, 0x02),
	DS_EMU_T("jns", true, 2, DS_EMU_JCC, DS_EMU_TEST_NONE, 0, true,
		 0x79, 0x02),
	DS_EMU_T("jp", true, 2, DS_EMU_JCC, X86_EFLAGS_PF, 0, true,
		 0x7a, 0x02),
	DS_EMU_T("jnp, PF", true, 2, DS_EMU_JCC, X86_EFLAGS_PF, 0, false,
		 0x7b, 0x02),
	DS_EMU_T("jl, SF", true, 2, DS_EMU_JCC, X86_EFLAGS_SF, 0, true,
		 0x7c, 0x02),
	DS_EMU_T("jl, SF and OF", true, 2, DS_EMU_JCC,
		 X86_EFLAGS_SF | X86_EFLAGS_OF, 0, false, 0x7c, 0x02),
	DS_EMU_T("jge, OF", true, 2, DS_EMU_JCC, X86_EFLAGS_OF, 0, false,
		 0x7d, 0x02),
	DS_EMU_T("jle, ZF", true, 2, DS_EMU_JCC, X86_EFLAGS_ZF, 0, true,
		 0x7e, 0x02),
	DS_EMU_T("jg", true, 2, DS_EMU_JCC, DS_EMU_TEST_NONE, 0, true,
		 0x7f, 0x02),
	/* jcc rel32, two-byte opcode */
	DS_EMU_T("jz rel32", true, 6, DS_EMU_JCC, X86_EFLAGS_ZF, 0, true,
		 0x0f, 0x84, 0x00, 0x01, 0x00, 0x00),
	DS_EMU_T("jnz rel32, ZF", false, 6, DS_EMU_JCC, X86_EFLAGS_ZF, 0,
		 false, 0x0f, 0x85, 0x00, 0x01, 0x00, 0x00),
	DS_EMU_T("jz rel16 (66)", false, 5, DS_EMU_JCC, X86_EFLAGS_ZF, 0,
		 true, 0x66, 0x0f, 0x84, 0x00, 0x01),
	/* unconditional near transfers */
	DS_EMU_T("jmp rel8 to itself", true, 2, DS_EMU_JUMP,
		 DS_EMU_TEST_NONE, 0, true, 0xeb, 0xfe),
	DS_EMU_T("jmp rel32", true, 5, DS_EMU_JUMP, DS_EMU_TEST_NONE, 0,
		 true, 0xe9, 0x00, 0x00, 0x00, 0x00),
	DS_EMU_T("call rel32 to next", true, 5, DS_EMU_JUMP,
		 DS_EMU_TEST_NONE, 0, true, 0xe8, 0x00, 0x00, 0x00, 0x00),
	DS_EMU_T("ret", true, 1, DS_EMU_JUMP, DS_EMU_TEST_NONE, 0, true,
		 0xc3),
	DS_EMU_T("ret imm16", false, 3, DS_EMU_JUMP, DS_EMU_TEST_NONE, 0,
		 true, 0xc2, 0x08, 0x00),
	DS_EMU_T("bnd ret", true, 2, DS_EMU_JUMP, DS_EMU_TEST_NONE, 0, true,
		 0xf2, 0xc3),
	DS_EMU_T("call *%rax", true, 2, DS_EMU_JUMP, DS_EMU_TEST_NONE, 0,
		 true, 0xff, 0xd0),
	DS_EMU_T("jmp *%r11", true, 3, DS_EMU_JUMP, DS_EMU_TEST_NONE, 0,
		 true, 0x41, 0xff, 0xe3),
	DS_EMU_T("call *disp(%rip)", true, 6, DS_EMU_JUMP, DS_EMU_TEST_NONE,
		 0, true, 0xff, 0x15, 0x00, 0x00, 0x00, 0x00),
	DS_EMU_T("jmp *(%eax)", false, 2, DS_EMU_JUMP, DS_EMU_TEST_NONE, 0,
		 true, 0xff, 0x20),
	DS_EMU_T("inc (%rax) is not a branch", true, 2, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0xff, 0x00),
	DS_EMU_T("push (%rax) is not a branch", true, 2, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0xff, 0x30),
	/* far transfers */
	DS_EMU_T("lret", true, 1, DS_EMU_JUMP, DS_EMU_TEST_NONE, 0, true,
		 0xcb),
	DS_EMU_T("lret imm16", false, 3, DS_EMU_JUMP, DS_EMU_TEST_NONE, 0,
		 true, 0xca, 0x04, 0x00),
	DS_EMU_T("ljmp *(%rax)", true, 2, DS_EMU_JUMP, DS_EMU_TEST_NONE, 0,
		 true, 0xff, 0x28),
	DS_EMU_T("lcall *(%rax)", true, 2, DS_EMU_JUMP, DS_EMU_TEST_NONE, 0,
		 true, 0xff, 0x18),
	DS_EMU_T("ljmp ptr16:32", false, 7, DS_EMU_JUMP, DS_EMU_TEST_NONE, 0,
		 true, 0xea, 0x00, 0x00, 0x00, 0x00, 0x23, 0x00),
	DS_EMU_T("lcall ptr16:32", false, 7, DS_EMU_JUMP, DS_EMU_TEST_NONE,
		 0, true, 0x9a, 0x00, 0x00, 0x00, 0x00, 0x23, 0x00),
	DS_EMU_T("iretq", true, 2, DS_EMU_IRET, DS_EMU_TEST_NONE, 0, true,
		 0x48, 0xcf),
	DS_EMU_T("iret", false, 1, DS_EMU_IRET, DS_EMU_TEST_NONE, 0, true,
		 0xcf),
	/* loop and jcxz: the count register after the instruction */
	DS_EMU_T("loop, rcx left", true, 2, DS_EMU_LOOP, DS_EMU_TEST_NONE, 1,
		 true, 0xe2, 0xfe),
	DS_EMU_T("loop, rcx zero", true, 2, DS_EMU_LOOP, DS_EMU_TEST_NONE, 0,
		 false, 0xe2, 0xfe),
	DS_EMU_T("loop to fall-through", true, 2, DS_EMU_LOOP,
		 DS_EMU_TEST_NONE, 5, true, 0xe2, 0x00),
#ifdef CONFIG_X86_64
	/* Only a 64-bit kernel has register bits above the 32 these ignore. */
	DS_EMU_T("loop (67), ecx zero", true, 3, DS_EMU_LOOP,
		 DS_EMU_TEST_NONE, 0x100000000UL, false, 0x67, 0xe2, 0xfe),
	DS_EMU_T("loop 32-bit, ecx zero", false, 2, DS_EMU_LOOP,
		 DS_EMU_TEST_NONE, 0xffff00000000UL, false, 0xe2, 0xfe),
#endif
	DS_EMU_T("loop 32-bit (67), cx left", false, 3, DS_EMU_LOOP,
		 DS_EMU_TEST_NONE, 0x10001, true, 0x67, 0xe2, 0xfe),
	DS_EMU_T("loope, ZF", true, 2, DS_EMU_LOOP, X86_EFLAGS_ZF, 3, true,
		 0xe1, 0xfe),
	DS_EMU_T("loope, no ZF", true, 2, DS_EMU_LOOP, DS_EMU_TEST_NONE, 3,
		 false, 0xe1, 0xfe),
	DS_EMU_T("loopne, no ZF", true, 2, DS_EMU_LOOP, DS_EMU_TEST_NONE, 3,
		 true, 0xe0, 0xfe),
	DS_EMU_T("loopne, ZF", true, 2, DS_EMU_LOOP, X86_EFLAGS_ZF, 3, false,
		 0xe0, 0xfe),
	DS_EMU_T("jrcxz, zero", true, 2, DS_EMU_JCXZ, DS_EMU_TEST_NONE, 0,
		 true, 0xe3, 0x00),
	DS_EMU_T("jrcxz, not zero", true, 2, DS_EMU_JCXZ, DS_EMU_TEST_NONE,
		 1, false, 0xe3, 0x00),
#ifdef CONFIG_X86_64
	DS_EMU_T("jecxz, high bits set", false, 2, DS_EMU_JCXZ,
		 DS_EMU_TEST_NONE, 0x100000000UL, true, 0xe3, 0x00),
#endif
	/* not branches */
	DS_EMU_T("rep movsb", true, 2, DS_EMU_OTHER, DS_EMU_TEST_NONE, 3,
		 false, 0xf3, 0xa4),
	DS_EMU_T("repne scasb", false, 2, DS_EMU_OTHER, X86_EFLAGS_ZF, 3,
		 false, 0xf2, 0xae),
	DS_EMU_T("nop", true, 1, DS_EMU_OTHER, DS_EMU_TEST_NONE, 0, false,
		 0x90),
	DS_EMU_T("mov imm64", true, 10, DS_EMU_OTHER, DS_EMU_TEST_NONE, 0,
		 false, 0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8),
	DS_EMU_T("dec %eax is REX in 64-bit", true, 3, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0x48, 0x89, 0xc0),
	DS_EMU_T("dec %eax in 32-bit", false, 1, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0x48, 0x89, 0xc0),
	DS_EMU_T("pushf", true, 1, DS_EMU_PUSHF, DS_EMU_TEST_NONE, 0, false,
		 0x9c),
	DS_EMU_T("popf", false, 1, DS_EMU_POPF, DS_EMU_TEST_NONE, 0, false,
		 0x9d),
	DS_EMU_T("syscall", true, 2, DS_EMU_OTHER, DS_EMU_TEST_NONE, 0, false,
		 0x0f, 0x05),
	DS_EMU_T("int $0x80", false, 2, DS_EMU_OTHER, DS_EMU_TEST_NONE, 0,
		 false, 0xcd, 0x80),
	DS_EMU_T("setz is not jcc", true, 3, DS_EMU_OTHER, X86_EFLAGS_ZF, 0,
		 false, 0x0f, 0x94, 0xc0),
	/*
	 * VEX and EVEX: the opcode byte after the prefix is of another map.
	 * The flags are those under which the one-byte reading would branch.
	 */
	/* prefixes as the CPU reads them, not as the decoder stops at them */
	DS_EMU_T("REX before 66: pushw", true, 3, DS_EMU_PUSHF,
		 DS_EMU_TEST_NONE, 0, false, 0x48, 0x66, 0x9c),
	DS_EMU_T("REX before 66: popfw", true, 3, DS_EMU_POPF,
		 DS_EMU_TEST_NONE, 0, false, 0x48, 0x66, 0x9d),
	DS_EMU_T("five prefixes: pushf", true, 6, DS_EMU_PUSHF,
		 DS_EMU_TEST_NONE, 0, false, 0x26, 0x2e, 0x36, 0x3e, 0x64,
		 0x9c),
	DS_EMU_T("REX before a hint: jz", true, 4, DS_EMU_JCC, X86_EFLAGS_ZF,
		 0, true, 0x40, 0x2e, 0x74, 0x02),
	DS_EMU_T("REX before rep: ret", true, 3, DS_EMU_JUMP,
		 DS_EMU_TEST_NONE, 0, true, 0x48, 0xf3, 0xc3),
	DS_EMU_T("six prefixes: jnz rel32", false, 12, DS_EMU_JCC,
		 DS_EMU_TEST_NONE, 0, true, 0x26, 0x2e, 0x36, 0x3e, 0x64, 0x65,
		 0x0f, 0x85, 0x00, 0x01, 0x00, 0x00),
	DS_EMU_T("five prefixes keep 67: loopw", false, 7, DS_EMU_LOOP,
		 DS_EMU_TEST_NONE, 0x10000, false, 0x2e, 0x3e, 0x26, 0x36, 0x67,
		 0xe2, 0xfe),
	DS_EMU_T("REX.W before the opcode counts: jmp *%r8", true, 5,
		 DS_EMU_JUMP, DS_EMU_TEST_NONE, 0, true, 0x2e, 0x3e, 0x41, 0xff,
		 0xe0),
	/* AMD XOP: 8F with a map of 8-0xa is not POP */
	DS_EMU_T("XOP vphaddbw is not pop", true, 5, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0x8f, 0xe9, 0x78, 0xc1, 0xc8),
	DS_EMU_T("XOP map 8 with imm8 and disp8", true, 7, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0x8f, 0xe8, 0x78, 0xc0, 0x40, 0x08,
		 0x03),
	DS_EMU_T("XOP map 0xa bextr imm32 in 32-bit", false, 9, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0x8f, 0xea, 0x78, 0x10, 0xc0, 0x01,
		 0x00, 0x00, 0x00),
	DS_EMU_T("pop (%rax) is still pop", true, 2, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0x8f, 0x00),
	DS_EMU_T("vzeroupper is not ja", true, 3, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0xc5, 0xf8, 0x77),
	DS_EMU_T("vzeroupper in 32-bit", false, 3, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0xc5, 0xf8, 0x77),
	DS_EMU_T("vpcmpeqb is not jz", true, 4, DS_EMU_OTHER, X86_EFLAGS_ZF,
		 0, false, 0xc5, 0xfd, 0x74, 0xc1),
	DS_EMU_T("vmovdqu store is not jg", true, 4, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0xc5, 0xfe, 0x7f, 0x07),
	DS_EMU_T("vpor is not jmp", true, 4, DS_EMU_OTHER, DS_EMU_TEST_NONE,
		 0, false, 0xc5, 0xfd, 0xeb, 0xc1),
	DS_EMU_T("vpsubsb is not call", true, 4, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0xc5, 0xfd, 0xe8, 0xc1),
	DS_EMU_T("vcmpps is not ret imm16", true, 5, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0xc5, 0xfc, 0xc2, 0xc1, 0x00),
	DS_EMU_T("vpsrad is not loop", true, 4, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 1, false, 0xc5, 0xfd, 0xe2, 0xc1),
	DS_EMU_T("vfnmadd132ps is not pushf", true, 5, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0xc4, 0xe2, 0x79, 0x9c, 0xc1),
	DS_EMU_T("vfnmadd132ss is not popf", true, 5, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0xc4, 0xe2, 0x79, 0x9d, 0xc1),
	DS_EMU_T("vgf2p8mulb is not iret", true, 5, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0xc4, 0xe2, 0x79, 0xcf, 0xc1),
	DS_EMU_T("EVEX vmovdqu64 store is not jg", true, 6, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0x62, 0xf1, 0xfe, 0x48, 0x7f, 0x07),
	/* the interrupt shadow: the trap comes after the next instruction */
	DS_EMU_T("mov %eax,%ss", true, 2, DS_EMU_SS, DS_EMU_TEST_NONE, 0,
		 false, 0x8e, 0xd0),
	DS_EMU_T("pop %ss", false, 1, DS_EMU_SS, DS_EMU_TEST_NONE, 0, false,
		 0x17),
	DS_EMU_T("mov %eax,%ds has no shadow", false, 2, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0x8e, 0xd8),
	/*
	 * REX2 (APX): map 1 opcodes are not one-byte opcodes, and JMPABS is
	 * a jump. All but JMPABS are #UD before APX; the lengths are the
	 * decoder's.
	 */
	DS_EMU_T("REX2 setl is not pushf", true, 4, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0xd5, 0x80, 0x9c, 0xc0),
	DS_EMU_T("REX2 setge is not popf", true, 4, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0xd5, 0x80, 0x9d, 0xc0),
	DS_EMU_T("REX2 bswap is not iret", true, 3, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0xd5, 0x80, 0xcf),
	DS_EMU_T("REX2 movnti is not ret", true, 4, DS_EMU_OTHER,
		 DS_EMU_TEST_NONE, 0, false, 0xd5, 0x80, 0xc3, 0x07),
	DS_EMU_T("REX2 jmpabs", true, 11, DS_EMU_JUMP, DS_EMU_TEST_NONE, 0,
		 true, 0xd5, 0x00, 0xa1, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00,
		 0x00, 0x00),
	DS_EMU_T("REX2 pushf", true, 3, DS_EMU_PUSHF, DS_EMU_TEST_NONE, 0,
		 false, 0xd5, 0x00, 0x9c),
	DS_EMU_T("REX2 call *%r16", true, 4, DS_EMU_JUMP, DS_EMU_TEST_NONE, 0,
		 true, 0xd5, 0x10, 0xff, 0xd0),
	/*
	 * 0x66 before a near branch in 64-bit mode: Intel ignores it, AMD
	 * takes a rel16 (and truncates the IP). In 32-bit code both do.
	 */
	DS_EMU_T("66 call rel32 (Intel)", true, 6, DS_EMU_JUMP,
		 DS_EMU_TEST_NONE, 0, true, 0x66, 0xe8, 0x00, 0x01, 0x00,
		 0x00),
	DS_EMU_T_AMD("66 call rel16 (AMD)", true, 4, DS_EMU_JUMP,
		     DS_EMU_TEST_NONE, 0, true, 0x66, 0xe8, 0x00, 0x01, 0x00,
		     0x00),
	DS_EMU_T("66 jmp rel32 (Intel)", true, 6, DS_EMU_JUMP,
		 DS_EMU_TEST_NONE, 0, true, 0x66, 0xe9, 0x00, 0x01, 0x00,
		 0x00),
	DS_EMU_T_AMD("66 jmp rel16 (AMD)", true, 4, DS_EMU_JUMP,
		     DS_EMU_TEST_NONE, 0, true, 0x66, 0xe9, 0x00, 0x01, 0x00,
		     0x00),
	DS_EMU_T("66 jz rel32 (Intel)", true, 7, DS_EMU_JCC, X86_EFLAGS_ZF,
		 0, true, 0x66, 0x0f, 0x84, 0x00, 0x01, 0x00, 0x00),
	DS_EMU_T_AMD("66 jz rel16 (AMD)", true, 5, DS_EMU_JCC, X86_EFLAGS_ZF,
		     0, true, 0x66, 0x0f, 0x84, 0x00, 0x01, 0x00, 0x00),
	DS_EMU_T_AMD("66 REX.W call rel32 (AMD)", true, 7, DS_EMU_JUMP,
		     DS_EMU_TEST_NONE, 0, true, 0x66, 0x48, 0xe8, 0x00, 0x01,
		     0x00, 0x00),
	DS_EMU_T_AMD("66 call rel16 in 32-bit code (AMD)", false, 4,
		     DS_EMU_JUMP, DS_EMU_TEST_NONE, 0, true, 0x66, 0xe8, 0x00,
		     0x01),
};

static void ds_emu_test_case_desc(const struct ds_emu_test_case *t,
				  char *desc)
{
	strscpy(desc, t->name, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(ds_emu_classify, ds_emu_test_cases, ds_emu_test_case_desc);

static void ds_emu_test_classify(struct kunit *test)
{
	const struct ds_emu_test_case *t = test->param_value;
	struct ds_emu_insn in = {};

	KUNIT_ASSERT_EQ(test, __ds_emu_classify(t->bytes, sizeof(t->bytes),
						t->mode64, t->amd, &in), 0);
	KUNIT_EXPECT_EQ(test, in.len, t->len);
	KUNIT_EXPECT_EQ(test, in.kind, t->kind);
	KUNIT_EXPECT_EQ(test, ds_emu_taken(&in, t->flags, t->cx), t->taken);
}

/*
 * AMD's 66 E8 rel16 is four bytes: it decodes from four, though the
 * kernel's decoder would read a rel32 (Intel's reading needs six).
 */
static void ds_emu_test_amd_rel16(struct kunit *test)
{
	static const u8 call16[] = { 0x66, 0xe8, 0x00, 0x01 };
	struct ds_emu_insn in = {};

	KUNIT_ASSERT_EQ(test, __ds_emu_classify(call16, sizeof(call16), true,
						true, &in), 0);
	KUNIT_EXPECT_EQ(test, in.len, sizeof(call16));
	KUNIT_EXPECT_EQ(test, in.rel, 0x100);
	KUNIT_EXPECT_EQ(test, __ds_emu_classify(call16, sizeof(call16), true,
						false, &in), -EINVAL);
}

/* Not all bytes there: an instruction cut short does not decode. */
static void ds_emu_test_truncated(struct kunit *test)
{
	static const u8 jz32[] = { 0x0f, 0x84, 0x00, 0x01 };
	struct ds_emu_insn in = {};

	KUNIT_EXPECT_EQ(test, ds_emu_classify(jz32, sizeof(jz32), true, &in),
			-EINVAL);
}

/*
 * The SDM's definition of each condition code (Jcc, "Jump if Condition Is
 * Met"), written out for all sixteen so that it shares nothing with the
 * classifier's pairing of a condition with its negation.
 */
static bool ds_emu_test_sdm_cond(unsigned int cc, unsigned long flags)
{
	bool of = flags & X86_EFLAGS_OF, sf = flags & X86_EFLAGS_SF;
	bool zf = flags & X86_EFLAGS_ZF, cf = flags & X86_EFLAGS_CF;
	bool pf = flags & X86_EFLAGS_PF;

	switch (cc) {
	case 0x0:			/* jo */
		return of;
	case 0x1:			/* jno */
		return !of;
	case 0x2:			/* jb, jc, jnae */
		return cf;
	case 0x3:			/* jae, jnc, jnb */
		return !cf;
	case 0x4:			/* je, jz */
		return zf;
	case 0x5:			/* jne, jnz */
		return !zf;
	case 0x6:			/* jbe, jna */
		return cf || zf;
	case 0x7:			/* ja, jnbe */
		return !cf && !zf;
	case 0x8:			/* js */
		return sf;
	case 0x9:			/* jns */
		return !sf;
	case 0xa:			/* jp, jpe */
		return pf;
	case 0xb:			/* jnp, jpo */
		return !pf;
	case 0xc:			/* jl, jnge */
		return sf != of;
	case 0xd:			/* jge, jnl */
		return sf == of;
	case 0xe:			/* jle, jng */
		return zf || sf != of;
	default:			/* jg, jnle */
		return !zf && sf == of;
	}
}

/* The five flags a condition code reads. */
static const unsigned long ds_emu_test_cond_flags[] = {
	X86_EFLAGS_CF, X86_EFLAGS_PF, X86_EFLAGS_ZF, X86_EFLAGS_SF,
	X86_EFLAGS_OF,
};

/* Flags no condition reads: they must not change a verdict. */
#define DS_EMU_TEST_OTHER_FLAGS	(X86_EFLAGS_AF | X86_EFLAGS_TF |	\
				 X86_EFLAGS_IF | X86_EFLAGS_DF)

/* Flags with the bits of @combo set, each bit standing for one flag. */
static unsigned long ds_emu_test_flags(unsigned int combo)
{
	unsigned long flags = DS_EMU_TEST_NONE;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(ds_emu_test_cond_flags); i++)
		if (combo & BIT(i))
			flags |= ds_emu_test_cond_flags[i];
	return flags;
}

/*
 * Every jcc, in its rel8 and its rel32 encoding, against every combination
 * of the flags it may read: the trace's verdict is the SDM's.
 */
static void ds_emu_test_cond_sdm(struct kunit *test)
{
	unsigned int cc, combo, nr = BIT(ARRAY_SIZE(ds_emu_test_cond_flags));
	u8 jcc8[MAX_INSN_SIZE] = { [0 ... MAX_INSN_SIZE - 1] = 0xcc };
	u8 jcc32[MAX_INSN_SIZE] = { [0 ... MAX_INSN_SIZE - 1] = 0xcc };
	struct ds_emu_insn in8 = {}, in32 = {};
	unsigned long flags;
	bool want;

	for (cc = 0; cc <= DS_EMU_CC_MASK; cc++) {
		/* 70+cc rel8, and 0f 80+cc rel32 */
		jcc8[0] = 0x70 + cc;
		jcc8[1] = 0x10;
		jcc32[0] = 0x0f;
		jcc32[1] = 0x80 + cc;
		memset(&jcc32[2], 0, 4);
		KUNIT_ASSERT_EQ(test, ds_emu_classify(jcc8, sizeof(jcc8), true,
						      &in8), 0);
		KUNIT_ASSERT_EQ(test, ds_emu_classify(jcc32, sizeof(jcc32),
						      false, &in32), 0);
		KUNIT_ASSERT_EQ(test, in8.kind, DS_EMU_JCC);
		KUNIT_ASSERT_EQ(test, in32.kind, DS_EMU_JCC);

		for (combo = 0; combo < nr; combo++) {
			flags = ds_emu_test_flags(combo);
			want = ds_emu_test_sdm_cond(cc, flags);
			KUNIT_EXPECT_EQ_MSG(test, ds_emu_taken(&in8, flags, 0),
					    want, "rel8 cc %#x flags %#lx",
					    cc, flags);
			KUNIT_EXPECT_EQ_MSG(test, ds_emu_taken(&in32, flags, 0),
					    want, "rel32 cc %#x flags %#lx",
					    cc, flags);
			flags |= DS_EMU_TEST_OTHER_FLAGS;
			KUNIT_EXPECT_EQ_MSG(test, ds_emu_taken(&in8, flags, 0),
					    want, "rel8 cc %#x flags %#lx",
					    cc, flags);
		}
	}
}

/* A page of user memory in the test's own mm. */
static unsigned long ds_emu_test_user_page(struct kunit *test)
{
	unsigned long addr;

	addr = kunit_vm_mmap(test, NULL, 0, PAGE_SIZE,
			     PROT_READ | PROT_WRITE | PROT_EXEC,
			     MAP_ANONYMOUS | MAP_PRIVATE, 0);
	KUNIT_ASSERT_NE_MSG(test, addr, 0, "no user mm for the test");
	KUNIT_ASSERT_LT_MSG(test, addr, (unsigned long)TASK_SIZE,
			    "no user page for the test");
	return addr;
}

static void ds_emu_test_poke(struct kunit *test, unsigned long ip,
			     const u8 *bytes, size_t len)
{
	KUNIT_ASSERT_EQ(test, copy_to_user((void __user *)ip, bytes, len), 0);
}

/* Spoil the cached entry at @ip: only a hit can hand the spoilt one back. */
static void ds_emu_test_mark(struct ds_emu_task *st, unsigned long ip)
{
	ds_emu_slot(st, ip)->cond = U8_MAX;
}

/*
 * The decode cache, through the real lookup on real user memory: a hit
 * only for the same IP, the same mode and the same instruction bytes. Any
 * one of them different, the instruction is fetched and decoded again:
 * another IP sharing the slot, the other mode, code that was rewritten.
 */
static void ds_emu_test_cache(struct kunit *test)
{
	static const u8 jz[] = { 0x74, 0x10 }, jnz[] = { 0x75, 0x10 };
	static const u8 disp = 0x20;
	const struct ds_emu_insn *in;
	unsigned long page, ip, other;
	struct ds_emu_task *st;

	st = kunit_kzalloc(test, sizeof(*st), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, st);
	page = ds_emu_test_user_page(test);
	ip = page;
	/* Another IP with the same slot, far enough not to overlap. */
	for (other = ip + MAX_INSN_SIZE; other + MAX_INSN_SIZE <= page +
	     PAGE_SIZE; other++)
		if (ds_emu_slot(st, other) == ds_emu_slot(st, ip))
			break;
	KUNIT_ASSERT_LE(test, other + MAX_INSN_SIZE, page + PAGE_SIZE);
	ds_emu_test_poke(test, ip, jz, sizeof(jz));
	ds_emu_test_poke(test, other, jz, sizeof(jz));

	/* First sight: fetched and decoded. */
	in = ds_emu_lookup(st, ip, true);
	KUNIT_ASSERT_NOT_NULL(test, in);
	KUNIT_EXPECT_EQ(test, in->ip, ip);
	KUNIT_EXPECT_EQ(test, in->kind, DS_EMU_JCC);
	KUNIT_EXPECT_FALSE(test, ds_emu_taken(in, DS_EMU_TEST_NONE, 0));
	KUNIT_EXPECT_EQ(test, st->misses, 1);
	KUNIT_EXPECT_EQ(test, st->hits, 0);

	/* Same IP, mode and bytes: the entry itself, not decoded again. */
	ds_emu_test_mark(st, ip);
	in = ds_emu_lookup(st, ip, true);
	KUNIT_ASSERT_NOT_NULL(test, in);
	KUNIT_EXPECT_EQ(test, in->cond, U8_MAX);
	KUNIT_EXPECT_EQ(test, st->hits, 1);
	KUNIT_EXPECT_EQ(test, st->misses, 1);

	/* Same slot, mode and bytes, another IP: decoded there. */
	in = ds_emu_lookup(st, other, true);
	KUNIT_ASSERT_NOT_NULL(test, in);
	KUNIT_EXPECT_EQ(test, in->ip, other);
	KUNIT_EXPECT_NE(test, in->cond, U8_MAX);
	KUNIT_EXPECT_EQ(test, st->misses, 2);

	/* Same IP and bytes, the other mode: decoded in that mode. */
	ds_emu_test_mark(st, other);
	in = ds_emu_lookup(st, other, false);
	KUNIT_ASSERT_NOT_NULL(test, in);
	KUNIT_EXPECT_FALSE(test, in->mode64);
	KUNIT_EXPECT_NE(test, in->cond, U8_MAX);
	KUNIT_EXPECT_EQ(test, st->misses, 3);
	in = ds_emu_lookup(st, other, false);
	KUNIT_EXPECT_EQ(test, st->hits, 2);

	/* Same IP and mode, rewritten: the new instruction, not the old. */
	ds_emu_test_mark(st, other);
	ds_emu_test_poke(test, other, jnz, sizeof(jnz));
	in = ds_emu_lookup(st, other, false);
	KUNIT_ASSERT_NOT_NULL(test, in);
	KUNIT_EXPECT_NE(test, in->cond, U8_MAX);
	KUNIT_EXPECT_TRUE(test, ds_emu_taken(in, DS_EMU_TEST_NONE, 0));
	KUNIT_EXPECT_FALSE(test, ds_emu_taken(in, X86_EFLAGS_ZF, 0));
	KUNIT_EXPECT_EQ(test, st->misses, 4);
	KUNIT_EXPECT_EQ(test, st->hits, 2);

	/* The last byte rewritten counts as much as the first. */
	ds_emu_test_mark(st, other);
	ds_emu_test_poke(test, other + 1, &disp, sizeof(disp));
	in = ds_emu_lookup(st, other, false);
	KUNIT_ASSERT_NOT_NULL(test, in);
	KUNIT_EXPECT_NE(test, in->cond, U8_MAX);
	KUNIT_EXPECT_EQ(test, st->misses, 5);
}

/**
 * struct ds_emu_test_block - a debugger's trap under a held block step
 * @name:	  for the log
 * @outcome:	  what the step made of the instruction
 * @dr6:	  DR6 bits still to handle
 * @vdr6:	  the debugger's virtual DR6
 * @dr6_after:	  @dr6 afterwards
 * @vdr6_after:	  @vdr6 afterwards
 * @held:	  the block step is still held: the trap was no news
 */
struct ds_emu_test_block {
	const char	*name;
	u8		outcome;
	unsigned long	dr6;
	unsigned long	vdr6;
	unsigned long	dr6_after;
	unsigned long	vdr6_after;
	bool		held;
};

/*
 * The stops a CPU honouring DEBUGCTL.BTF gives (SDM "Single-Stepping on
 * Branches"): a single-step trap only after a taken branch, and BTF
 * cleared by every #DB it delivers.
 */
static const struct ds_emu_test_block ds_emu_test_blocks[] = {
	{ "not taken: no stop", DS_EMU_NOT_TAKEN, DR_STEP, DR_STEP, 0, 0,
	  true },
	{ "taken: stop", DS_EMU_TAKEN, DR_STEP, DR_STEP, DR_STEP, DR_STEP,
	  false },
	{ "undecoded: stop", DS_EMU_UNKNOWN, DR_STEP, DR_STEP, DR_STEP,
	  DR_STEP, false },
	{ "not taken, ptrace watchpoint: its stop without BS",
	  DS_EMU_NOT_TAKEN, DR_STEP, DR_STEP | DR_TRAP1, 0, DR_TRAP1,
	  false },
	{ "taken, ptrace watchpoint: one stop", DS_EMU_TAKEN, DR_STEP,
	  DR_STEP | DR_TRAP1, DR_STEP, DR_STEP | DR_TRAP1, false },
	{ "not taken, bus lock: BTF cleared", DS_EMU_NOT_TAKEN,
	  DR_STEP | DR_BUS_LOCK, DR_STEP, DR_BUS_LOCK, 0, false },
	{ "not taken, breakpoint bit no breakpoint claimed: no stop",
	  DS_EMU_NOT_TAKEN, DR_STEP | DR_TRAP0, DR_STEP, 0, 0, true },
};

static void ds_emu_test_block_desc(const struct ds_emu_test_block *t,
				   char *desc)
{
	strscpy(desc, t->name, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(ds_emu_block, ds_emu_test_blocks, ds_emu_test_block_desc);

/* Which traps of a block step reach the debugger, and what ends it. */
static void ds_emu_test_block_trap(struct kunit *test)
{
	const struct ds_emu_test_block *t = test->param_value;
	unsigned long dr6 = t->dr6, vdr6 = t->vdr6;
	struct ds_emu_task *st;

	st = kunit_kzalloc(test, sizeof(*st), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, st);
	st->blockstep = true;
	ds_emu_block_trap(st, t->outcome, &dr6, &vdr6);
	KUNIT_EXPECT_EQ(test, dr6, t->dr6_after);
	KUNIT_EXPECT_EQ(test, vdr6, t->vdr6_after);
	KUNIT_EXPECT_EQ(test, st->blockstep, t->held);
}

#ifdef CONFIG_X86_64
/* The flags a forced step leaves: ours TF, the program's IF and ZF. */
#define DS_EMU_TEST_FLAGS	(X86_EFLAGS_FIXED | X86_EFLAGS_IF | \
				 X86_EFLAGS_ZF | X86_EFLAGS_TF)
/* A word with TF's bit that no PUSHF stores: bit 1 (FIXED) clear. */
#define DS_EMU_TEST_MARK	(0x5a00UL | X86_EFLAGS_TF)

/**
 * struct ds_emu_test_ran - a forced step whose code changed as it ran
 * @name:	for the log
 * @early:	the bytes decoded before the instruction ran, none if empty
 * @now:	the bytes there when the trap comes
 * @ran:	the length of what the CPU ran: the IP moves by it
 * @pushed:	the CPU pushed the flags (PUSHF) or popped a slot (-1: POPF)
 * @popped_tf:	the TF in the flags POPF loaded
 * @mark:	expected word at the marked slot below the old stack pointer
 * @tf:		expected TF in the flags the task returns with
 * @outcome:	expected enum ds_emu_outcome: NOT_TAKEN where a decode
 *		matched, UNKNOWN where none did
 */
struct ds_emu_test_ran {
	const char	*name;
	u8		early[4];
	u8		now[4];
	u8		ran;
	s8		pushed;
	bool		popped_tf;
	unsigned long	mark;
	bool		tf;
	u8		outcome;
};

static const struct ds_emu_test_ran ds_emu_test_rans[] = {
	{ "pushf decoded, nop ran: the data is the program's",
	  { 0x9c }, { 0x90 }, 1, 0, false, DS_EMU_TEST_MARK, false,
	  DS_EMU_NOT_TAKEN },
	{ "nop decoded, pushf ran and is there: pushed TF cleared",
	  { 0x90 }, { 0x9c }, 1, 1, false,
	  (u16)DS_EMU_TEST_FLAGS & ~X86_EFLAGS_TF, false,
	  DS_EMU_NOT_TAKEN },
	{ "nop decoded and there, pushf ran: pushed TF cleared",
	  { 0x90 }, { 0x90 }, 1, 1, false,
	  (u16)DS_EMU_TEST_FLAGS & ~X86_EFLAGS_TF, false,
	  DS_EMU_UNKNOWN },
	{ "pushf decoded and there, push ran: its value kept",
	  { 0x9c }, { 0x9c }, 1, 2, false, DS_EMU_TEST_MARK, false,
	  DS_EMU_UNKNOWN },
	{ "popf decoded, nop ran: our TF is not the program's",
	  { 0x9d }, { 0x90 }, 1, 0, false, DS_EMU_TEST_MARK, false,
	  DS_EMU_NOT_TAKEN },
	{ "popf decoded, 3-byte mov ran: our TF is not the program's",
	  { 0x9d }, { 0x8b, 0x2c, 0x24 }, 3, 0, false, DS_EMU_TEST_MARK,
	  false,
	  DS_EMU_NOT_TAKEN },
	{ "nop decoded, popf ran and is there: the program's TF",
	  { 0x90 }, { 0x9d }, 1, -1, true, DS_EMU_TEST_MARK, true,
	  DS_EMU_NOT_TAKEN },
	{ "popf decoded and ran, its TF clear",
	  { 0x9d }, { 0x9d }, 1, -1, false, DS_EMU_TEST_MARK, false,
	  DS_EMU_NOT_TAKEN },
	{ "nothing decoded, pushf ran: pushed TF cleared",
	  { }, { 0x9c }, 1, 1, false,
	  (u16)DS_EMU_TEST_FLAGS & ~X86_EFLAGS_TF, false,
	  DS_EMU_NOT_TAKEN },
	{ "lret decoded, pushf ran and is there: pushed TF cleared",
	  { 0xcb }, { 0x9c }, 1, 1, false,
	  (u16)DS_EMU_TEST_FLAGS & ~X86_EFLAGS_TF, false,
	  DS_EMU_NOT_TAKEN },
	{ "indirect jmp decoded, xor ran: no branch, no correction",
	  { 0xff, 0xe0 }, { 0x31, 0xc0 }, 2, 0, false, DS_EMU_TEST_MARK,
	  false,
	  DS_EMU_NOT_TAKEN },
};

static void ds_emu_test_ran_desc(const struct ds_emu_test_ran *t, char *desc)
{
	strscpy(desc, t->name, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(ds_emu_ran, ds_emu_test_rans, ds_emu_test_ran_desc);

static void ds_emu_test_put(struct kunit *test, unsigned long addr,
			    unsigned long word)
{
	ds_emu_test_poke(test, addr, (const u8 *)&word, sizeof(word));
}

static unsigned long ds_emu_test_get(struct kunit *test, unsigned long addr)
{
	unsigned long word;

	KUNIT_ASSERT_EQ(test, copy_from_user(&word, (void __user *)addr,
					     sizeof(word)), 0);
	return word;
}

/*
 * ds_emu_step() on real user memory after a forced step whose code another
 * thread rewrote around it: the TF corrections act on what the CPU shows
 * it ran, never on a decode of bytes it did not run. The slot below the
 * stack pointer is what a push writes, the one at it what POPF loads and
 * what a PUSHF correction of an unmoved stack would spoil. @pushed 2 is a
 * push of the mark, as PUSH imm would store it.
 */
static void ds_emu_test_ran(struct kunit *test)
{
	const struct ds_emu_test_ran *t = test->param_value;
	unsigned long uflags = DS_EMU_TEST_FLAGS, page, sp0, below, top;
	struct pt_regs regs = {};
	struct ds_emu_task *st;

	st = kunit_kzalloc(test, sizeof(*st), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, st);
	page = ds_emu_test_user_page(test);
	sp0 = page + PAGE_SIZE / 2;
	below = sp0 - sizeof(long);
	top = t->pushed < 0 ? X86_EFLAGS_FIXED | X86_EFLAGS_IF |
			      X86_EFLAGS_ZF |
			      (t->popped_tf ? X86_EFLAGS_TF : 0) :
			      DS_EMU_TEST_MARK;
	ds_emu_test_poke(test, page, t->now, sizeof(t->now));
	ds_emu_test_put(test, below, DS_EMU_TEST_MARK);
	ds_emu_test_put(test, sp0, top);

	st->ip = page;
	st->sp = sp0;
	st->mode64 = true;
	st->ip_valid = true;
	if (t->early[0]) {
		KUNIT_ASSERT_EQ(test, ds_emu_classify(t->early,
						      sizeof(t->early), true,
						      &st->next), 0);
		st->next.ip = page;
		st->next_valid = true;
	}
	regs.ip = page + t->ran;
	regs.sp = sp0;
	regs.cs = __USER_CS;
	regs.ss = __USER_DS;
	if (t->pushed > 0) {
		regs.sp = below;
		ds_emu_test_put(test, below, t->pushed == 1 ? (u16)uflags :
							     DS_EMU_TEST_MARK);
	} else if (t->pushed < 0) {
		regs.sp = sp0 + sizeof(long);
		if (!t->popped_tf)
			uflags &= ~X86_EFLAGS_TF;
	}
	/* The entry code hid the TF the CPU left. */
	regs.flags = uflags & ~X86_EFLAGS_TF;
	KUNIT_EXPECT_EQ(test, ds_emu_step(st, &regs, uflags, true, false),
			t->outcome);
	KUNIT_EXPECT_EQ(test, ds_emu_test_get(test, below), t->mark);
	KUNIT_EXPECT_EQ(test, ds_emu_test_get(test, sp0), top);
	KUNIT_EXPECT_EQ(test, !!(regs.flags & X86_EFLAGS_TF), t->tf);
}
#endif /* CONFIG_X86_64 */

#ifdef CONFIG_PERF_EVENTS
/*
 * perf's register samples of an NMI that interrupted user mode: the entry
 * code that hides a forced TF does not run for NMIs, perf_reg_value()
 * hides it. The program's own TF (no TIF_DS_EMU_TF) and kernel mode flags
 * are reported as they are.
 */
static void ds_emu_test_perf_flags(struct kunit *test)
{
	const unsigned long flags = X86_EFLAGS_FIXED | X86_EFLAGS_IF |
				    X86_EFLAGS_TF;
	bool had = test_thread_flag(TIF_DS_EMU_TF);
	struct pt_regs regs = {
		.cs	= __USER_CS,
		.flags	= flags,
	};

	/* This kernel thread never returns to user mode: no hook sees it. */
	set_thread_flag(TIF_DS_EMU_TF);
	KUNIT_EXPECT_EQ(test, perf_reg_value(&regs, PERF_REG_X86_FLAGS),
			flags & ~X86_EFLAGS_TF);
	regs.cs = __KERNEL_CS;
	KUNIT_EXPECT_EQ(test, perf_reg_value(&regs, PERF_REG_X86_FLAGS), flags);
	clear_thread_flag(TIF_DS_EMU_TF);
	regs.cs = __USER_CS;
	KUNIT_EXPECT_EQ(test, perf_reg_value(&regs, PERF_REG_X86_FLAGS), flags);
	/* The registers themselves are left alone. */
	KUNIT_EXPECT_EQ(test, regs.flags, flags);
	if (had)
		set_thread_flag(TIF_DS_EMU_TF);
}
#endif

static struct kunit_case ds_emu_test_cases_list[] = {
	KUNIT_CASE_PARAM(ds_emu_test_classify, ds_emu_classify_gen_params),
	KUNIT_CASE(ds_emu_test_truncated),
	KUNIT_CASE(ds_emu_test_amd_rel16),
	KUNIT_CASE(ds_emu_test_cond_sdm),
	KUNIT_CASE(ds_emu_test_cache),
	KUNIT_CASE_PARAM(ds_emu_test_block_trap, ds_emu_block_gen_params),
#ifdef CONFIG_X86_64
	KUNIT_CASE_PARAM(ds_emu_test_ran, ds_emu_ran_gen_params),
#endif
#ifdef CONFIG_PERF_EVENTS
	KUNIT_CASE(ds_emu_test_perf_flags),
#endif
	{}
};

static struct kunit_suite ds_emu_test_suite = {
	.name		= "x86_ds_emulate",
	.test_cases	= ds_emu_test_cases_list,
};

kunit_test_suites(&ds_emu_test_suite);
