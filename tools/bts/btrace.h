/* SPDX-License-Identifier: GPL-2.0 */
/*
 * btrace: what its files share. btrace.c traces, btrace_sym.c names
 * addresses, btrace_dwarf.c finds their source lines, btrace_out.c prints,
 * btrace_core.c reads the branch trace of a core dump.
 */
#ifndef BTRACE_H
#define BTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/ptrace.h>

/* A named address range of a loaded object. */
struct sym {
	uint64_t addr;
	uint64_t size;
	const char *name;
};

void die(const char *what);

/* btrace_sym.c */
void sym_reset(void);
void sym_add_file(const char *path, uint64_t start, uint64_t off);
void sym_add_image(const void *img, size_t len, uint64_t start);
void sym_load_process(pid_t pid);
const struct sym *sym_find(const char *name);
const struct sym *sym_lookup(uint64_t addr);
size_t sym_read(uint64_t addr, void *buf, size_t len);
void sym_format(uint64_t addr, char *buf, size_t len);
bool sym_line(uint64_t addr, const char **file, int *line);
void sym_exit(void);

/*
 * btrace_dwarf.c: the source file and line of an object's link-time
 * address, from its DWARF. dw_open() gives NULL for a file without DWARF;
 * dw_line() takes NULL (no line), and its *file lives until dw_close().
 */
struct dw_file;

struct dw_file *dw_open(const char *path);
bool dw_line(struct dw_file *f, uint64_t addr, const char **file, int *line);
void dw_close(struct dw_file *f);

/* btrace_out.c */
enum out_mode {
	OUT_PLAIN,
	OUT_CALLS,
	OUT_JSON,
};

void out_init(enum out_mode m);
void out_threads(bool many);
void out_exit(void);
void out_record(pid_t tid, const struct bts_struct *r);
void out_signal(pid_t tid, int sig, uint64_t ip, uint64_t addr,
		bool has_addr);

/* btrace_core.c */
int core_print(const char *path);

#endif /* BTRACE_H */
