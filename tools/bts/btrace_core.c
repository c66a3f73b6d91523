// SPDX-License-Identifier: GPL-2.0
/*
 * btrace --core FILE: the branches each thread of a crashed process took
 * last, from the NT_X86_BTS notes of its core dump, named with the symbols
 * of the files the NT_FILE note lists and of the vDSO (its address from
 * NT_AUXV, its image from the dump).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <linux/auxvec.h>
#include <linux/elf.h>

#include "btrace.h"

#define NOTE_ALIGN(n)	(((n) + 3) & ~(uint64_t)3)

struct note {
	unsigned int type;
	const unsigned char *desc;
	uint64_t size;
};

struct core {
	const unsigned char *img;
	size_t len;
	bool is64;
	/* The PT_NOTE segment's notes, in order. */
	struct note *notes;
	size_t nnotes;
};

/* A word of the dumped process: 8 bytes in a 64-bit core, 4 in a 32-bit one. */
static uint64_t core_word(const struct core *c, const unsigned char *p)
{
	uint64_t v = 0;

	memcpy(&v, p, c->is64 ? 8 : 4);
	return v;
}

struct seg {
	uint64_t offset, vaddr, filesz;
	unsigned int type;
};

static bool core_seg(const struct core *c, unsigned int i, struct seg *s)
{
	const struct elf64_hdr *h64 = (const void *)c->img;
	const struct elf32_hdr *h32 = (const void *)c->img;
	uint64_t off = c->is64 ? h64->e_phoff : h32->e_phoff;
	unsigned int num = c->is64 ? h64->e_phnum : h32->e_phnum;
	size_t ent = c->is64 ? sizeof(struct elf64_phdr) :
			       sizeof(struct elf32_phdr);
	const void *p = c->img + off + i * ent;

	if (i >= num || off + (uint64_t)(i + 1) * ent > c->len)
		return false;
	if (c->is64) {
		const struct elf64_phdr *ph = p;

		*s = (struct seg){ ph->p_offset, ph->p_vaddr, ph->p_filesz,
				   ph->p_type };
	} else {
		const struct elf32_phdr *ph = p;

		*s = (struct seg){ ph->p_offset, ph->p_vaddr, ph->p_filesz,
				   ph->p_type };
	}
	return s->offset + s->filesz <= c->len;
}

static void core_add_note(struct core *c, unsigned int type,
			  const unsigned char *desc, uint64_t size)
{
	c->notes = reallocarray(c->notes, c->nnotes + 1, sizeof(*c->notes));
	if (!c->notes)
		die("realloc");
	c->notes[c->nnotes++] = (struct note){ type, desc, size };
}

static bool core_open(struct core *c, const char *path)
{
	const struct elf64_hdr *eh;
	struct stat st;
	struct seg s;
	unsigned int i;
	void *img;
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	if (fstat(fd, &st))
		die(path);
	img = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (img == MAP_FAILED)
		die(path);
	memset(c, 0, sizeof(*c));
	c->img = img;
	c->len = st.st_size;
	eh = img;
	if (c->len < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_type != ET_CORE)
		return false;
	c->is64 = eh->e_ident[EI_CLASS] == ELFCLASS64;
	for (i = 0; core_seg(c, i, &s); i++) {
		uint64_t off = s.offset, end = s.offset + s.filesz;

		if (s.type != PT_NOTE)
			continue;
		/* Elf32_Nhdr and Elf64_Nhdr are the same three words. */
		while (off + sizeof(Elf32_Nhdr) <= end) {
			const Elf32_Nhdr *nh = (const void *)(c->img + off);
			uint64_t desc = off + sizeof(*nh) +
					NOTE_ALIGN(nh->n_namesz);

			if (desc + nh->n_descsz > end)
				break;
			core_add_note(c, nh->n_type, c->img + desc,
				      nh->n_descsz);
			off = desc + NOTE_ALIGN(nh->n_descsz);
		}
	}
	return true;
}

/* NT_FILE: count, page size, then (start, end, page offset) per file. */
static void core_files(const struct core *c, const struct note *n)
{
	uint64_t w = c->is64 ? 8 : 4, count, page, i;
	const unsigned char *p = n->desc, *name;

	if (n->size < 2 * w)
		return;
	count = core_word(c, p);
	page = core_word(c, p + w);
	if (count > (n->size - 2 * w) / (3 * w))
		return;
	name = p + 2 * w + count * 3 * w;
	for (i = 0; i < count && name < n->desc + n->size; i++) {
		const unsigned char *e = p + 2 * w + i * 3 * w;

		sym_add_file((const char *)name, core_word(c, e),
			     core_word(c, e + 2 * w) * page);
		name += strnlen((const char *)name,
				n->desc + n->size - name) + 1;
	}
}

/* The vDSO: AT_SYSINFO_EHDR of NT_AUXV, its image in a dumped segment. */
static void core_vdso(const struct core *c, const struct note *n)
{
	uint64_t w = c->is64 ? 8 : 4, off, base = 0;
	struct seg s;
	unsigned int i;

	for (off = 0; off + 2 * w <= n->size; off += 2 * w)
		if (core_word(c, n->desc + off) == AT_SYSINFO_EHDR)
			base = core_word(c, n->desc + off + w);
	if (!base)
		return;
	for (i = 0; core_seg(c, i, &s); i++)
		if (s.type == PT_LOAD && s.vaddr == base && s.filesz)
			sym_add_image(c->img + s.offset, s.filesz, base);
}

/*
 * struct elf_prstatus: pr_cursig after the 12 bytes of pr_info, pr_pid
 * after pr_sigpend and pr_sighold, two words.
 */
static void core_thread(const struct core *c, const struct note *n,
			int *tid, int *sig)
{
	uint64_t w = c->is64 ? 8 : 4, pid_off = 16 + 2 * w;
	short cursig;

	*tid = 0;
	*sig = 0;
	if (n->size < pid_off + 4)
		return;
	memcpy(&cursig, n->desc + 12, sizeof(cursig));
	memcpy(tid, n->desc + pid_off, sizeof(*tid));
	*sig = cursig;
}

/*
 * The thread's IP from the pr_reg of its NT_PRSTATUS: after the common
 * part (16 bytes, two words, 16 bytes, four timevals of two words), at
 * user_regs_struct's rip (word 16) or eip (word 12).
 */
static uint64_t core_ip(const struct core *c, const struct note *n)
{
	uint64_t w = c->is64 ? 8 : 4, off = 32 + 10 * w + (c->is64 ? 16 : 12) * w;

	return n && n->size >= off + w ? core_word(c, n->desc + off) : 0;
}

int core_print(const char *path)
{
	const struct note *pr = NULL;
	const struct bts_struct *rec;
	int tid = 0, sig = 0, traced = 0;
	struct core c;
	size_t i, j, n;

	if (!core_open(&c, path)) {
		fprintf(stderr, "btrace: %s is not a core dump\n", path);
		munmap((void *)c.img, c.len);
		return 1;
	}
	sym_reset();
	for (i = 0; i < c.nnotes; i++) {
		if (c.notes[i].type == NT_FILE)
			core_files(&c, &c.notes[i]);
		else if (c.notes[i].type == NT_AUXV)
			core_vdso(&c, &c.notes[i]);
	}
	/* Each thread's notes start with its NT_PRSTATUS. */
	for (i = 0; i < c.nnotes; i++) {
		if (c.notes[i].type == NT_PRSTATUS) {
			pr = &c.notes[i];
			core_thread(&c, pr, &tid, &sig);
		}
		if (c.notes[i].type != NT_X86_BTS)
			continue;
		rec = (const void *)c.notes[i].desc;
		n = c.notes[i].size / sizeof(*rec);
		for (j = 0; j < n; j++)
			out_record(tid, &rec[j]);
		if (sig)
			out_signal(tid, sig, core_ip(&c, pr), 0, false);
		traced++;
	}
	if (!traced)
		fprintf(stderr, "btrace: %s has no branch trace (NT_X86_BTS)\n",
			path);
	free(c.notes);
	munmap((void *)c.img, c.len);
	return !traced;
}
