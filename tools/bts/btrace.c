// SPDX-License-Identifier: GPL-2.0
/*
 * btrace: print the branch trace of a program, through PTRACE_BTS_*.
 *
 *   btrace [-n N] [-s size] [-f symbol] program [args...]
 *   btrace [-n N] [-s size] -p pid
 *
 * Runs the program (or attaches to pid) with branch tracing on and prints
 * every taken branch as "from -> to", symbolized from the ELF symbol table
 * of the traced executable. The buffer is configured with
 * PTRACE_BTS_O_SIGNAL, so when it fills the tracee stops, btrace drains
 * it and nothing is lost.
 *
 *   -n N       print only the last N branches
 *   -s size    trace buffer size in bytes (default 64 KiB)
 *   -f symbol  start tracing at the first execution of symbol (e.g. main)
 *   -p pid     attach to a running process (thread) until it exits or
 *              btrace gets SIGINT
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <linux/elf.h>
#include <linux/ptrace.h>

#define DEFAULT_SIZE	(64 << 10)
/* <linux/elf.h> leaves out the GNU extension for indirect functions. */
#ifndef STT_GNU_IFUNC
#define STT_GNU_IFUNC	10
#endif
/* Signal for a full buffer; btrace suppresses it, the tracee never sees it. */
#define OVERFLOW_SIG	SIGURG

#ifdef __x86_64__
# define REGS_IP(r)	((r).rip)
#else
# define REGS_IP(r)	((r).eip)
#endif

struct sym {
	uint64_t addr;
	uint64_t size;
	const char *name;
};

static struct sym *syms;
static size_t nsyms;

/* Records kept for -n, as a ring; all are printed as they come otherwise. */
static struct bts_struct *tail;
static unsigned long tail_max, tail_count;
static unsigned long total;

/* Set by the SIGINT handler: lock-free atomics are async-signal-safe. */
static atomic_int interrupted;

static long sys_ptrace(long request, pid_t pid, void *addr, unsigned long data)
{
	return syscall(SYS_ptrace, request, pid, addr, (void *)data);
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* A section header of either ELF class, widened. */
struct shdr {
	unsigned int type, link;
	uint64_t offset, size;
};

static void read_shdr(const unsigned char *sh, bool is64, struct shdr *out)
{
	const struct elf64_shdr *sh64 = (const void *)sh;
	const struct elf32_shdr *sh32 = (const void *)sh;

	out->type = is64 ? sh64->sh_type : sh32->sh_type;
	out->link = is64 ? sh64->sh_link : sh32->sh_link;
	out->offset = is64 ? sh64->sh_offset : sh32->sh_offset;
	out->size = is64 ? sh64->sh_size : sh32->sh_size;
}

/* Take the function and object symbols of a 32- or 64-bit ELF image. */
static void load_syms(const unsigned char *img, size_t len, uint64_t bias)
{
	const struct elf64_hdr *eh64 = (const void *)img;
	const struct elf32_hdr *eh32 = (const void *)img;
	bool is64 = img[EI_CLASS] == ELFCLASS64;
	uint64_t shoff, off, size, link_off, link_size, ent;
	unsigned int shnum, shentsize, i, j, link;
	struct shdr sh;

	shoff = is64 ? eh64->e_shoff : eh32->e_shoff;
	shnum = is64 ? eh64->e_shnum : eh32->e_shnum;
	shentsize = is64 ? sizeof(struct elf64_shdr) : sizeof(struct elf32_shdr);
	if (!shoff || shoff + (uint64_t)shnum * shentsize > len)
		return;
	for (i = 0; i < shnum; i++) {
		read_shdr(img + shoff + i * shentsize, is64, &sh);
		if (sh.type != SHT_SYMTAB)
			continue;
		off = sh.offset;
		size = sh.size;
		link = sh.link;
		if (link >= shnum)
			return;
		read_shdr(img + shoff + link * shentsize, is64, &sh);
		link_off = sh.offset;
		link_size = sh.size;
		if (off + size > len || link_off + link_size > len)
			return;
		ent = is64 ? sizeof(struct elf64_sym) : sizeof(struct elf32_sym);
		syms = calloc(size / ent, sizeof(*syms));
		if (!syms)
			die("calloc");
		for (j = 0; j < size / ent; j++) {
			const unsigned char *s = img + off + j * ent;
			uint64_t value, ssize;
			unsigned int name, stype;
			uint16_t shndx;

			if (is64) {
				const struct elf64_sym *e = (const void *)s;

				value = e->st_value;
				ssize = e->st_size;
				name = e->st_name;
				shndx = e->st_shndx;
				stype = ELF64_ST_TYPE(e->st_info);
			} else {
				const struct elf32_sym *e = (const void *)s;

				value = e->st_value;
				ssize = e->st_size;
				name = e->st_name;
				shndx = e->st_shndx;
				stype = ELF32_ST_TYPE(e->st_info);
			}
			/* labels in assembly are NOTYPE: keep them too */
			if (shndx == SHN_UNDEF || shndx >= SHN_LORESERVE ||
			    name >= link_size || !value ||
			    (stype != STT_FUNC && stype != STT_NOTYPE &&
			     stype != STT_GNU_IFUNC))
				continue;
			syms[nsyms].addr = value + bias;
			syms[nsyms].size = ssize;
			syms[nsyms].name = (const char *)img + link_off + name;
			if (!*syms[nsyms].name || syms[nsyms].name[0] == '$')
				continue;
			nsyms++;
		}
		qsort(syms, nsyms, sizeof(*syms), sym_cmp);
		return;
	}
}

/* Load base of a PIE executable: the start of its first mapping. */
static uint64_t exe_bias(pid_t pid, const unsigned char *img)
{
	char path[64], line[512], exe[PATH_MAX], *p;
	unsigned long start, pgoff;
	uint16_t type = ((struct elf32_hdr *)img)->e_type;
	ssize_t n;
	FILE *f;

	if (type != ET_DYN)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n < 0)
		return 0;
	exe[n] = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		p = strchr(line, '/');
		if (!p || strncmp(p, exe, n) ||
		    sscanf(line, "%lx-%*x %*s %lx", &start, &pgoff) != 2)
			continue;
		fclose(f);
		return start - pgoff;
	}
	fclose(f);
	return 0;
}

/* Symbols of the executable that @pid runs now (after exec, or attach). */
static void load_exe_syms(pid_t pid)
{
	char path[64];
	struct stat st;
	void *img;
	int fd;

	free(syms);
	syms = NULL;
	nsyms = 0;
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st) || st.st_size < (off_t)sizeof(struct elf32_hdr))
		goto out;
	img = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (img == MAP_FAILED)
		goto out;
	/* the image stays mapped: the names point into it */
	if (!memcmp(img, ELFMAG, SELFMAG))
		load_syms(img, st.st_size, exe_bias(pid, img));
out:
	if (fd >= 0)
		close(fd);
}

static const struct sym *lookup(uint64_t addr)
{
	size_t lo = 0, hi = nsyms;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	/* prefer a sized symbol that covers addr over a nearer label */
	return &syms[lo - 1];
}

static void print_addr(uint64_t addr)
{
	const struct sym *s = lookup(addr);

	if (s && (!s->size || addr < s->addr + s->size || addr - s->addr < 0x10000))
		printf("%#10llx <%s+%#llx>", (unsigned long long)addr, s->name,
		       (unsigned long long)(addr - s->addr));
	else
		printf("%#10llx <?>", (unsigned long long)addr);
}

static void print_record(const struct bts_struct *r)
{
	switch (r->qualifier) {
	case BTS_BRANCH:
		print_addr(r->variant.lbr.from);
		printf("  ->  ");
		print_addr(r->variant.lbr.to);
		printf("\n");
		break;
	case BTS_TASK_ARRIVES:
	case BTS_TASK_DEPARTS:
		printf("  [%llu.%09llu] task %u %s\n",
		       (unsigned long long)r->variant.event.clock / 1000000000,
		       (unsigned long long)r->variant.event.clock % 1000000000,
		       r->variant.event.pid,
		       r->qualifier == BTS_TASK_ARRIVES ? "arrives" : "departs");
		break;
	}
}

/* Drain the tracee's buffer: print now, or keep the newest for -n. */
static void drain(pid_t pid, unsigned int bufsize)
{
	static struct bts_struct *buf;
	long n, i;

	if (!buf) {
		buf = malloc(bufsize);
		if (!buf)
			die("malloc");
	}
	n = sys_ptrace(PTRACE_BTS_DRAIN, pid, buf, bufsize);
	if (n < 0) {
		if (errno != ESRCH)
			perror("PTRACE_BTS_DRAIN");
		return;
	}
	total += n;
	for (i = 0; i < n; i++) {
		if (!tail_max) {
			print_record(&buf[i]);
			continue;
		}
		tail[tail_count++ % tail_max] = buf[i];
	}
}

static void print_tail(void)
{
	unsigned long i, n = tail_count < tail_max ? tail_count : tail_max;

	for (i = tail_count - n; i < tail_count; i++)
		print_record(&tail[i % tail_max]);
}

/* Returns the backend the kernel chose, PTRACE_BTS_BACKEND_*. */
static unsigned int configure(pid_t pid, unsigned int size)
{
	struct ptrace_bts_config cfg = {
		.size = size,
		.flags = PTRACE_BTS_O_TRACE | PTRACE_BTS_O_ALLOC |
			 PTRACE_BTS_O_SIGNAL,
		.signal = OVERFLOW_SIG,
		.backend = PTRACE_BTS_BACKEND_ANY,
	};

	if (sys_ptrace(PTRACE_BTS_CONFIG, pid, &cfg, sizeof(cfg)))
		die("PTRACE_BTS_CONFIG");
	if (sys_ptrace(PTRACE_BTS_STATUS, pid, &cfg, sizeof(cfg)) < 0)
		die("PTRACE_BTS_STATUS");
	return cfg.backend;
}

static const char *backend_name(unsigned int backend)
{
	switch (backend) {
	case PTRACE_BTS_BACKEND_HARDWARE:
		return "the CPU's Branch Trace Store";
	case PTRACE_BTS_BACKEND_EMULATED:
		return "the emulated backend (single-stepping in the kernel)";
	default:
		return "an unknown backend";
	}
}

/* Is this stop the overflow signal rather than one from elsewhere? */
static bool buffer_full(pid_t pid, unsigned int size)
{
	struct ptrace_bts_config cfg;
	long n = sys_ptrace(PTRACE_BTS_SIZE, pid, NULL, 0);

	if (n < 0 || sys_ptrace(PTRACE_BTS_STATUS, pid, &cfg, sizeof(cfg)) < 0)
		return false;
	return (unsigned long)n * cfg.bts_size >= cfg.size;
}

/* Run @pid to the first execution of @addr with a breakpoint. */
static int run_to(pid_t pid, uint64_t addr)
{
	struct user_regs_struct regs;
	unsigned long orig, patched;
	int status;

	/* The raw PEEKTEXT stores the word at *data, unlike glibc's wrapper. */
	if (sys_ptrace(PTRACE_PEEKTEXT, pid, (void *)(uintptr_t)addr,
		       (unsigned long)&orig))
		die("PTRACE_PEEKTEXT");
	patched = (orig & ~0xffUL) | 0xcc;
	if (sys_ptrace(PTRACE_POKETEXT, pid, (void *)(uintptr_t)addr, patched))
		die("PTRACE_POKETEXT");
	for (;;) {
		if (sys_ptrace(PTRACE_CONT, pid, NULL, 0))
			die("PTRACE_CONT");
		if (waitpid(pid, &status, __WALL) != pid)
			die("waitpid");
		if (!WIFSTOPPED(status))
			return -1;
		if (WSTOPSIG(status) != SIGTRAP)
			continue;
		if (sys_ptrace(PTRACE_GETREGS, pid, NULL, (unsigned long)&regs))
			die("PTRACE_GETREGS");
		if (REGS_IP(regs) == addr + 1)
			break;
	}
	REGS_IP(regs) = addr;
	if (sys_ptrace(PTRACE_SETREGS, pid, NULL, (unsigned long)&regs) ||
	    sys_ptrace(PTRACE_POKETEXT, pid, (void *)(uintptr_t)addr, orig))
		die("restoring the breakpoint");
	return 0;
}

static void on_sigint(int sig)
{
	interrupted = 1;
}

/* Follow @pid until it exits (or we are interrupted), draining on the way. */
static int follow(pid_t pid, unsigned int size, bool seized)
{
	int status, sig, ret = 0;

	if (sys_ptrace(PTRACE_CONT, pid, NULL, 0))
		die("PTRACE_CONT");
	for (;;) {
		if (waitpid(pid, &status, __WALL) < 0) {
			if (errno == EINTR && interrupted && seized) {
				sys_ptrace(PTRACE_INTERRUPT, pid, NULL, 0);
				continue;
			}
			die("waitpid");
		}
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			ret = WIFEXITED(status) ? WEXITSTATUS(status) :
			      128 + WTERMSIG(status);
			break;
		}
		sig = WSTOPSIG(status);
		if (status >> 8 == (SIGTRAP | (PTRACE_EVENT_EXIT << 8))) {
			drain(pid, size);
			sig = 0;
		} else if (status >> 16 == PTRACE_EVENT_STOP) {
			/* our PTRACE_INTERRUPT (or a group stop) */
			if (interrupted) {
				drain(pid, size);
				sys_ptrace(PTRACE_BTS_CONFIG, pid,
					   &(struct ptrace_bts_config){ 0 },
					   sizeof(struct ptrace_bts_config));
				sys_ptrace(PTRACE_DETACH, pid, NULL, 0);
				break;
			}
			sig = 0;
		} else if (sig == OVERFLOW_SIG && buffer_full(pid, size)) {
			drain(pid, size);
			sig = 0;
		} else if (status >> 16) {
			sig = 0;
		}
		if (sys_ptrace(PTRACE_CONT, pid, NULL, sig))
			break;
	}
	return ret;
}

static void print_usage(void)
{
	fprintf(stderr,
		"usage: btrace [-n N] [-s size] [-f symbol] program [args...]\n"
		"       btrace [-n N] [-s size] -p pid\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned int size = DEFAULT_SIZE;
	const char *from_sym = NULL;
	pid_t pid = 0;
	unsigned int backend;
	int opt, status, ret;
	bool seized = false;
	size_t i;

	while ((opt = getopt(argc, argv, "+n:s:f:p:h")) != -1) {
		switch (opt) {
		case 'n':
			tail_max = strtoul(optarg, NULL, 0);
			break;
		case 's':
			size = strtoul(optarg, NULL, 0);
			break;
		case 'f':
			from_sym = optarg;
			break;
		case 'p':
			pid = strtol(optarg, NULL, 0);
			break;
		default:
			print_usage();
		}
	}
	if ((pid && optind != argc) || (!pid && optind == argc))
		print_usage();
	if (tail_max) {
		tail = calloc(tail_max, sizeof(*tail));
		if (!tail)
			die("calloc");
	}

	if (pid) {
		/* SEIZE, so that SIGINT can stop it with PTRACE_INTERRUPT */
		if (sys_ptrace(PTRACE_SEIZE, pid, NULL, PTRACE_O_TRACEEXIT))
			die("PTRACE_SEIZE");
		seized = true;
		sys_ptrace(PTRACE_INTERRUPT, pid, NULL, 0);
		if (waitpid(pid, &status, __WALL) != pid)
			die("waitpid");
		/* no SA_RESTART: SIGINT must interrupt waitpid() */
		sigaction(SIGINT, &(struct sigaction){ .sa_handler = on_sigint },
			  NULL);
	} else {
		pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			if (sys_ptrace(PTRACE_TRACEME, 0, NULL, 0))
				die("PTRACE_TRACEME");
			execvp(argv[optind], argv + optind);
			die(argv[optind]);
		}
		/* the stop after exec: the new image is there */
		if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
			fprintf(stderr, "btrace: %s did not start\n", argv[optind]);
			return 1;
		}
		if (sys_ptrace(PTRACE_SETOPTIONS, pid, NULL,
			       PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL))
			die("PTRACE_SETOPTIONS");
	}
	load_exe_syms(pid);

	if (from_sym) {
		for (i = 0; i < nsyms; i++)
			if (!strcmp(syms[i].name, from_sym))
				break;
		if (i == nsyms) {
			fprintf(stderr, "btrace: no symbol %s\n", from_sym);
			kill(pid, SIGKILL);
			return 1;
		}
		if (run_to(pid, syms[i].addr))
			return 1;
	}

	backend = configure(pid, size);
	ret = follow(pid, size, seized);
	if (tail_max)
		print_tail();
	fprintf(stderr, "btrace: traced by %s\n", backend_name(backend));
	fprintf(stderr, "btrace: %lu branch records%s\n", total,
		tail_max && total > tail_max ? " (the last ones shown)" : "");
	return ret;
}
