// SPDX-License-Identifier: GPL-2.0
/*
 * btrace: naming addresses. Every object a process maps (the executable,
 * PIE or not, ld.so, each shared library, the vDSO) gives its function
 * symbols, from .symtab or, when stripped, .dynsym, moved by the bias of
 * its mapping: from /proc/PID/maps for a live process, from the NT_FILE
 * and NT_AUXV notes for a core dump. The file and line of an address come
 * from the DWARF of its object's file (btrace_dwarf.c), opened when first
 * asked for.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <linux/elf.h>

#include "btrace.h"

/* <linux/elf.h> leaves out the GNU extension for indirect functions. */
#ifndef STT_GNU_IFUNC
#define STT_GNU_IFUNC	10
#endif
/* An unsized symbol (an assembly label) covers this much after it. */
#define SYM_UNSIZED_REACH	0x10000

static struct sym *syms;
static size_t nsyms;
static bool sorted;

/* Who frees an object's image when its names are dropped. */
enum owner {
	OWNER_NONE,	/* a core dump's segment: not ours */
	OWNER_MMAP,	/* a file we mapped */
	OWNER_MALLOC,	/* a vDSO we copied */
};

/* The loaded images, for the instruction bytes and lines at an address. */
struct object {
	const unsigned char *img;
	size_t len;
	bool is64;
	uint64_t bias;
	enum owner owner;
	/* Its file, for DWARF; NULL for the vDSO. */
	char *path;
	/* Opened at its first line lookup; NULL then if it has no DWARF. */
	struct dw_file *dw;
	bool dw_tried;
};

static struct object *objects;
static size_t nobjects;
/* Paths whose symbols are in: each object is read once. */
static char **paths;
static size_t npaths;
static uint64_t vdso_start;

/* An ELF image of either class, its headers widened. */
struct elf {
	const unsigned char *img;
	size_t len;
	bool is64;
};

struct shdr {
	unsigned int type, link;
	uint64_t offset, size;
};

struct phdr {
	unsigned int type;
	uint64_t offset, vaddr, filesz;
};

static bool elf_open(struct elf *e, const void *img, size_t len)
{
	const unsigned char *id = img;

	if (len < sizeof(struct elf64_hdr) || memcmp(id, ELFMAG, SELFMAG) ||
	    (id[EI_CLASS] != ELFCLASS32 && id[EI_CLASS] != ELFCLASS64))
		return false;
	e->img = img;
	e->len = len;
	e->is64 = id[EI_CLASS] == ELFCLASS64;
	return true;
}

static bool elf_shdr(const struct elf *e, unsigned int i, struct shdr *out)
{
	const struct elf64_hdr *h64 = (const void *)e->img;
	const struct elf32_hdr *h32 = (const void *)e->img;
	uint64_t off = e->is64 ? h64->e_shoff : h32->e_shoff;
	unsigned int num = e->is64 ? h64->e_shnum : h32->e_shnum;
	size_t ent = e->is64 ? sizeof(struct elf64_shdr) :
			       sizeof(struct elf32_shdr);
	const void *p = e->img + off + i * ent;

	if (!off || i >= num || off + (uint64_t)(i + 1) * ent > e->len)
		return false;
	if (e->is64) {
		const struct elf64_shdr *s = p;

		*out = (struct shdr){ s->sh_type, s->sh_link, s->sh_offset,
				      s->sh_size };
	} else {
		const struct elf32_shdr *s = p;

		*out = (struct shdr){ s->sh_type, s->sh_link, s->sh_offset,
				      s->sh_size };
	}
	return out->offset + out->size <= e->len || out->type == SHT_NOBITS;
}

static bool elf_phdr(const struct elf *e, unsigned int i, struct phdr *out)
{
	const struct elf64_hdr *h64 = (const void *)e->img;
	const struct elf32_hdr *h32 = (const void *)e->img;
	uint64_t off = e->is64 ? h64->e_phoff : h32->e_phoff;
	unsigned int num = e->is64 ? h64->e_phnum : h32->e_phnum;
	size_t ent = e->is64 ? sizeof(struct elf64_phdr) :
			       sizeof(struct elf32_phdr);
	const void *p = e->img + off + i * ent;

	if (!off || i >= num || off + (uint64_t)(i + 1) * ent > e->len)
		return false;
	if (e->is64) {
		const struct elf64_phdr *ph = p;

		*out = (struct phdr){ ph->p_type, ph->p_offset, ph->p_vaddr,
				      ph->p_filesz };
	} else {
		const struct elf32_phdr *ph = p;

		*out = (struct phdr){ ph->p_type, ph->p_offset, ph->p_vaddr,
				      ph->p_filesz };
	}
	return true;
}

/*
 * How far above its link addresses the image runs, if file offset @off is
 * mapped at @start: from the loadable segment that holds @off.
 */
static bool elf_bias(const struct elf *e, uint64_t start, uint64_t off,
		     uint64_t *bias)
{
	struct phdr ph;
	unsigned int i;

	for (i = 0; elf_phdr(e, i, &ph); i++) {
		uint64_t page = ph.offset & ~0xfffULL;

		if (ph.type != PT_LOAD || off < page ||
		    off >= ph.offset + ph.filesz)
			continue;
		*bias = start - (ph.vaddr - ph.offset + off);
		return true;
	}
	return false;
}

static void add_sym(uint64_t addr, uint64_t size, const char *name)
{
	if (!(nsyms & (nsyms + 1))) {
		syms = reallocarray(syms, 2 * nsyms + 1, sizeof(*syms));
		if (!syms)
			die("realloc");
	}
	syms[nsyms++] = (struct sym){ addr, size, name };
	sorted = false;
}

/* The function symbols of the @type symbol table, moved by @bias. */
static bool elf_syms(const struct elf *e, unsigned int type, uint64_t bias)
{
	struct shdr tab, str;
	uint64_t ent, j;
	unsigned int i;

	ent = e->is64 ? sizeof(struct elf64_sym) : sizeof(struct elf32_sym);
	for (i = 0; elf_shdr(e, i, &tab); i++)
		if (tab.type == type)
			break;
	if (tab.type != type || !elf_shdr(e, tab.link, &str))
		return false;
	for (j = 0; j < tab.size / ent; j++) {
		const void *p = e->img + tab.offset + j * ent;
		uint64_t value, size;
		unsigned int name, stype, shndx;

		if (e->is64) {
			const struct elf64_sym *s = p;

			value = s->st_value;
			size = s->st_size;
			name = s->st_name;
			shndx = s->st_shndx;
			stype = ELF64_ST_TYPE(s->st_info);
		} else {
			const struct elf32_sym *s = p;

			value = s->st_value;
			size = s->st_size;
			name = s->st_name;
			shndx = s->st_shndx;
			stype = ELF32_ST_TYPE(s->st_info);
		}
		/* Labels in assembly are NOTYPE: keep them too. */
		if (shndx == SHN_UNDEF || shndx >= SHN_LORESERVE ||
		    name >= str.size || !value ||
		    (stype != STT_FUNC && stype != STT_NOTYPE &&
		     stype != STT_GNU_IFUNC))
			continue;
		p = e->img + str.offset + name;
		if (*(const char *)p && *(const char *)p != '$')
			add_sym(value + bias, size, p);
	}
	return true;
}

static void elf_add(const struct elf *e, uint64_t bias, enum owner owner,
		    const char *path)
{
	struct object *o;

	if (!elf_syms(e, SHT_SYMTAB, bias))
		elf_syms(e, SHT_DYNSYM, bias);
	objects = reallocarray(objects, nobjects + 1, sizeof(*objects));
	if (!objects)
		die("realloc");
	o = &objects[nobjects++];
	*o = (struct object){ e->img, e->len, e->is64, bias, owner };
	if (path) {
		o->path = strdup(path);
		if (!o->path)
			die("strdup");
	}
}

/*
 * The object whose loaded image holds @addr, and in @ph the segment; the
 * file's bytes of the segment are in the image.
 */
static struct object *object_at(uint64_t addr, struct phdr *ph)
{
	size_t i;
	unsigned int j;

	for (i = 0; i < nobjects; i++) {
		struct object *o = &objects[i];
		struct elf e = { o->img, o->len, o->is64 };
		uint64_t vaddr = addr - o->bias;

		for (j = 0; elf_phdr(&e, j, ph); j++)
			if (ph->type == PT_LOAD && vaddr >= ph->vaddr &&
			    vaddr < ph->vaddr + ph->filesz &&
			    ph->offset + ph->filesz <= e.len)
				return o;
	}
	return NULL;
}

size_t sym_read(uint64_t addr, void *buf, size_t len)
{
	const struct object *o;
	struct phdr ph;
	uint64_t vaddr;
	size_t n;

	o = object_at(addr, &ph);
	if (!o)
		return 0;
	vaddr = addr - o->bias;
	n = ph.vaddr + ph.filesz - vaddr;
	n = n < len ? n : len;
	memcpy(buf, o->img + ph.offset + (vaddr - ph.vaddr), n);
	return n;
}

bool sym_line(uint64_t addr, const char **file, int *line)
{
	struct object *o;
	struct phdr ph;

	o = object_at(addr, &ph);
	if (!o || !o->path)
		return false;
	if (!o->dw_tried) {
		o->dw = dw_open(o->path);
		o->dw_tried = true;
	}
	/* DWARF has the addresses the object was linked at. */
	return dw_line(o->dw, addr - o->bias, file, line);
}

static bool add_image(const void *img, size_t len, uint64_t start,
		      enum owner owner)
{
	uint64_t bias;
	struct elf e;

	if (!elf_open(&e, img, len) || !elf_bias(&e, start, 0, &bias))
		return false;
	elf_add(&e, bias, owner, NULL);
	return true;
}

void sym_add_image(const void *img, size_t len, uint64_t start)
{
	add_image(img, len, start, OWNER_NONE);
}

void sym_add_file(const char *path, uint64_t start, uint64_t off)
{
	struct stat st;
	uint64_t bias;
	struct elf e;
	size_t i;
	void *img;
	int fd;

	for (i = 0; i < npaths; i++)
		if (!strcmp(paths[i], path))
			return;
	paths = reallocarray(paths, npaths + 1, sizeof(*paths));
	if (!paths)
		die("realloc");
	paths[npaths] = strdup(path);
	if (!paths[npaths])
		die("strdup");
	npaths++;
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	img = fstat(fd, &st) || !st.st_size ? MAP_FAILED :
	      mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (img == MAP_FAILED)
		return;
	/* The image stays mapped: the names point into it. */
	if (elf_open(&e, img, st.st_size) && elf_bias(&e, start, off, &bias))
		elf_add(&e, bias, OWNER_MMAP, path);
	else
		munmap(img, st.st_size);
}

/* Drop every object, its names and its DWARF (an exec, the end). */
void sym_reset(void)
{
	struct object *o;

	while (nobjects) {
		o = &objects[--nobjects];
		dw_close(o->dw);
		free(o->path);
		if (o->owner == OWNER_MMAP)
			munmap((void *)o->img, o->len);
		else if (o->owner == OWNER_MALLOC)
			free((void *)o->img);
	}
	nsyms = 0;
	vdso_start = 0;
	while (npaths)
		free(paths[--npaths]);
}

void sym_exit(void)
{
	sym_reset();
	free(syms);
	free(objects);
	free(paths);
	syms = NULL;
	objects = NULL;
	paths = NULL;
}

/* The vDSO is no file: its image is in the process. */
static void load_vdso(pid_t pid, uint64_t start, uint64_t end)
{
	char path[64];
	void *img;
	int fd;

	if (start == vdso_start)
		return;
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	/* Kept: the names point into it. */
	img = malloc(end - start);
	if (img && pread(fd, img, end - start, start) == (ssize_t)(end - start) &&
	    add_image(img, end - start, start, OWNER_MALLOC))
		vdso_start = start;
	else
		free(img);
	close(fd);
}

/* Add the objects @pid maps now that are not in yet. */
void sym_load_process(pid_t pid)
{
	char path[64], line[PATH_MAX + 128], *file;
	unsigned long long start, end, off;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%llx-%llx %*s %llx", &start, &end, &off) != 3)
			continue;
		file = strchr(line, '/');
		if (file)
			sym_add_file(file, start, off);
		else if (strstr(line, "[vdso]"))
			load_vdso(pid, start, end);
	}
	fclose(f);
}

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

const struct sym *sym_lookup(uint64_t addr)
{
	size_t lo = 0, hi = nsyms;
	const struct sym *s;

	if (!sorted) {
		qsort(syms, nsyms, sizeof(*syms), sym_cmp);
		sorted = true;
	}
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	s = &syms[lo - 1];
	if (s->size ? addr < s->addr + s->size :
		      addr - s->addr < SYM_UNSIZED_REACH)
		return s;
	return NULL;
}

const struct sym *sym_find(const char *name)
{
	size_t i;

	for (i = 0; i < nsyms; i++)
		if (!strcmp(syms[i].name, name))
			return &syms[i];
	return NULL;
}

void sym_format(uint64_t addr, char *buf, size_t len)
{
	const struct sym *s = sym_lookup(addr);

	if (s)
		snprintf(buf, len, "%s+0x%llx", s->name,
			 (unsigned long long)(addr - s->addr));
	else
		snprintf(buf, len, "?");
}
