// SPDX-License-Identifier: GPL-2.0
/*
 * Branch tracing through ptrace, the NT_X86_BTS regset: PTRACE_GETREGSET
 * and the branch trace in the core dump of a traced program.
 *
 * The oracle of a core dump is a PTRACE_BTS_READ at the last stop before
 * the crash: the tracer makes the tracee die of a signal at that stop, so
 * that it takes no branch after the read, and the note must hold the same
 * records, byte for byte.
 *
 * The core dumps go to a directory of the test's own, through
 * /proc/sys/kernel/core_pattern, which the test restores.
 *
 * The helpers and the fixture are in ptrace_bts_harness.h.
 */
#define _GNU_SOURCE
#include "ptrace_bts_harness.h"

/* The core of a tracee is of its class: this program's. */
#ifdef __x86_64__
#define core_ehdr	elf64_hdr
#define core_phdr	elf64_phdr
#define core_nhdr	elf64_note
#define CORE_CLASS	ELFCLASS64
#else
#define core_ehdr	elf32_hdr
#define core_phdr	elf32_phdr
#define core_nhdr	elf32_note
#define CORE_CLASS	ELFCLASS32
#endif

#define CORE_DIR	"/tmp/ptrace_bts_core"
/* The records a note holds at most: the newest. */
#define NOTE_RECORDS	1024
#define CORE_PATTERN	"/proc/sys/kernel/core_pattern"
#define NOTE_ALIGN(n)	(((n) + 3) & ~3UL)

static long bts_read_all(pid_t pid, struct bts_struct *buf, long n)
{
	struct ptrace_bts_read rd = {
		.buf = (unsigned long)buf,
		.size = n * BTS_REC,
	};

	return sys_ptrace(PTRACE_BTS_READ, pid, &rd, sizeof(rd));
}

static long get_regset(pid_t pid, void *buf, size_t len)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	if (sys_ptrace(PTRACE_GETREGSET, pid, (void *)NT_X86_BTS,
		       (unsigned long)&iov))
		return -1;
	return iov.iov_len;
}

/* The regset gives the newest records that fit, oldest first. */
TEST_F(bts, regset_newest_first_fit)
{
	const long n = 30;
	struct bts_struct rec[32], all[32];

	self->pid = start_many(_metadata, n, 32, 0);
	cont_to(_metadata, self->pid, 0, many_e);
	ASSERT_EQ(n, bts_read_all(self->pid, all, 32));

	memset(rec, 0xa5, sizeof(rec));
	EXPECT_EQ(3 * BTS_REC, get_regset(self->pid, rec, 3 * BTS_REC));
	EXPECT_EQ(0, memcmp(rec, all + n - 3, 3 * BTS_REC));
	EXPECT_EQ(0xa5a5a5a5a5a5a5a5ULL, rec[3].qualifier);

	/* A larger iovec: all of them, the rest untouched. */
	memset(rec, 0xa5, sizeof(rec));
	EXPECT_EQ(sizeof(rec), get_regset(self->pid, rec, sizeof(rec)));
	EXPECT_EQ(0, memcmp(rec, all, n * BTS_REC));
	EXPECT_EQ(0xa5a5a5a5a5a5a5a5ULL, rec[n].qualifier);
	/* Whole records only. */
	EXPECT_EQ(-1, get_regset(self->pid, rec, 3 * BTS_REC + 5));
	EXPECT_EQ(EINVAL, errno);
	/* Nothing dropped. */
	EXPECT_EQ(n, bts_size(self->pid));
}

/* A thread that is not traced has no such regset. */
TEST_F(bts, regset_untraced)
{
	struct bts_struct rec[4];

	self->pid = spawn(_metadata, run_routine, (unsigned long)bts_jmp, 0);
	EXPECT_EQ(-1, get_regset(self->pid, rec, sizeof(rec)));
	EXPECT_EQ(ENODATA, errno);
}

/* ---- core dumps ---- */

static char saved_pattern[256];

static void set_core_pattern(struct __test_metadata *_metadata)
{
	int fd = open(CORE_PATTERN, O_RDWR);
	ssize_t n;

	if (fd < 0 && errno == ENOENT)
		SKIP(return, "no core dumps (CONFIG_COREDUMP=n)");
	ASSERT_LE(0, fd);
	n = read(fd, saved_pattern, sizeof(saved_pattern) - 1);
	ASSERT_LT(0, n);
	saved_pattern[n] = 0;
	mkdir(CORE_DIR, 0700);
	ASSERT_EQ(0, lseek(fd, 0, SEEK_SET));
	ASSERT_LT(0, write(fd, CORE_DIR "/core.%p", strlen(CORE_DIR) + 8));
	close(fd);
}

static void restore_core_pattern(void)
{
	int fd = open(CORE_PATTERN, O_WRONLY);

	if (fd >= 0) {
		if (write(fd, saved_pattern, strlen(saved_pattern)) < 0)
			perror("restoring " CORE_PATTERN);
		close(fd);
	}
}

/* The file's bytes, malloc()ed, or NULL; *@len is the length. */
static void *read_file(const char *path, size_t *len)
{
	struct stat st;
	void *p = NULL;
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	if (!fstat(fd, &st) && st.st_size > 0) {
		p = malloc(st.st_size);
		if (p && read(fd, p, st.st_size) != st.st_size) {
			free(p);
			p = NULL;
		}
	}
	close(fd);
	*len = p ? st.st_size : 0;
	return p;
}

/*
 * The descriptor of the @type note in the core's PT_NOTE segments: its
 * payload and size; NULL if there is none, or more than one.
 */
static const void *find_note(const void *core, size_t len, unsigned int type,
			     size_t *size)
{
	const struct core_ehdr *eh = core;
	const void *found = NULL;
	int i, count = 0;

	if (len < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != CORE_CLASS || eh->e_type != ET_CORE)
		return NULL;
	for (i = 0; i < eh->e_phnum; i++) {
		const struct core_phdr *ph = core + eh->e_phoff +
					     i * eh->e_phentsize;
		size_t off, end;

		if ((void *)(ph + 1) > core + len || ph->p_type != PT_NOTE)
			continue;
		end = ph->p_offset + ph->p_filesz;
		for (off = ph->p_offset;
		     off + sizeof(struct core_nhdr) <= end && end <= len;) {
			const struct core_nhdr *nh = core + off;
			size_t desc = off + sizeof(*nh) + NOTE_ALIGN(nh->n_namesz);

			if (nh->n_type == type && desc + nh->n_descsz <= end) {
				found = core + desc;
				*size = nh->n_descsz;
				count++;
			}
			off = desc + NOTE_ALIGN(nh->n_descsz);
		}
	}
	return count == 1 ? found : NULL;
}

/*
 * A traced program dies of SIGSEGV at the stop after bts_many(@n): its core
 * holds the records a READ gave at that stop, exactly.
 */
static void crash_and_compare(struct __test_metadata *_metadata, pid_t pid,
			      long n, long records)
{
	struct bts_struct *before = poisoned_records(records + 1);
	const struct bts_struct *note;
	char path[64];
	size_t len, size;
	void *core;
	int status;
	long got, keep;

	ASSERT_FALSE(!before);
	cont_to(_metadata, pid, 0, many_e);
	got = bts_read_all(pid, before, records + 1);
	ASSERT_EQ(n < records ? n : records, got);
	/* Dies at the stop: no branch after the read. */
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, pid, NULL, SIGSEGV));
	ASSERT_EQ(pid, waitpid(pid, &status, __WALL));
	ASSERT_TRUE(WIFSIGNALED(status) && WCOREDUMP(status)) {
		TH_LOG("status %#x", status);
	}

	snprintf(path, sizeof(path), CORE_DIR "/core.%d", pid);
	core = read_file(path, &len);
	unlink(path);
	ASSERT_FALSE(!core) {
		TH_LOG("no core file %s", path);
	}
	note = find_note(core, len, NT_X86_BTS, &size);
	ASSERT_FALSE(!note) {
		TH_LOG("no single NT_X86_BTS note in %zu bytes", len);
	}
	keep = got < NOTE_RECORDS ? got : NOTE_RECORDS;
	EXPECT_EQ(keep * BTS_REC, size);
	EXPECT_EQ(0, memcmp(note, before + got - keep, keep * BTS_REC));
	free(core);
	free(before);
}

/* False where the kernel makes no core dumps: the test skipped. */
static bool core_setup(struct __test_metadata *_metadata)
{
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };

	ASSERT_EQ(0, setrlimit(RLIMIT_CORE, &rl));
	set_core_pattern(_metadata);
	return _metadata->exit_code != KSFT_SKIP;
}

TEST_F(bts, core_has_branches)
{
	if (!core_setup(_metadata))
		return;
	self->pid = start_many(_metadata, 40, 64, 0);
	crash_and_compare(_metadata, self->pid, 40, 64);
	self->pid = 0;
	restore_core_pattern();
}

/* A wrapped buffer: the newest records, as READ gives them. */
TEST_F(bts, core_after_wrap)
{
	if (!core_setup(_metadata))
		return;
	self->pid = start_many(_metadata, 3 * BTS_DRAIN_BATCH, BTS_DRAIN_BATCH,
			       0);
	crash_and_compare(_metadata, self->pid, 3 * BTS_DRAIN_BATCH,
			  BTS_DRAIN_BATCH);
	self->pid = 0;
	restore_core_pattern();
}

/* A buffer larger than a note: the newest records that fit. */
TEST_F(bts, core_note_limit)
{
	if (!core_setup(_metadata))
		return;
	self->pid = start_many(_metadata, 1500, 2048, 0);
	crash_and_compare(_metadata, self->pid, 1500, 2048);
	self->pid = 0;
	restore_core_pattern();
}

/* No trace, no note. */
TEST_F(bts, core_untraced)
{
	char path[64];
	size_t len, size;
	void *core;
	int status;

	if (!core_setup(_metadata))
		return;
	self->pid = spawn(_metadata, (void (*)(unsigned long))bts_many, 10, 0);
	cont_to(_metadata, self->pid, 0, many_s);
	ASSERT_EQ(0, sys_ptrace(PTRACE_CONT, self->pid, NULL, SIGSEGV));
	ASSERT_EQ(self->pid, waitpid(self->pid, &status, __WALL));
	ASSERT_TRUE(WIFSIGNALED(status) && WCOREDUMP(status));
	snprintf(path, sizeof(path), CORE_DIR "/core.%d", self->pid);
	core = read_file(path, &len);
	unlink(path);
	ASSERT_FALSE(!core);
	EXPECT_TRUE(!find_note(core, len, NT_X86_BTS, &size));
	/* The core is a core: it has the registers. */
	EXPECT_TRUE(!!find_note(core, len, NT_PRSTATUS, &size));
	free(core);
	self->pid = 0;
	restore_core_pattern();
}

TEST_HARNESS_MAIN
