// SPDX-License-Identifier: GPL-2.0
/*
 * btrace: source lines. The DWARF line table of an object, read with
 * elfutils' libdw, gives the file and line of an address; btrace_sym.c
 * opens an object here the first time one of its addresses is shown, and
 * asks with the address the object was linked at (the run-time address
 * less the bias of its mapping). An object without DWARF (stripped, or
 * built without -g, as the C library usually is) gives no line, and is
 * not read again.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <dwarf.h>
#include <elfutils/libdw.h>

#include "btrace.h"

struct dw_file {
	int fd;
	Dwarf *dbg;
	/*
	 * No .debug_aranges (clang leaves it out by default): the CU of an
	 * address is then found by asking each CU for its ranges.
	 */
	bool scan_cus;
};

struct dw_file *dw_open(const char *path)
{
	struct dw_file *f;
	Dwarf_Aranges *ar;
	size_t nar = 0;

	f = calloc(1, sizeof(*f));
	if (!f)
		die("calloc");
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0)
		goto fail;
	/* Fails when the file has no DWARF sections at all. */
	f->dbg = dwarf_begin(f->fd, DWARF_C_READ);
	if (!f->dbg)
		goto fail;
	f->scan_cus = dwarf_getaranges(f->dbg, &ar, &nar) || !nar;
	return f;
fail:
	dw_close(f);
	return NULL;
}

void dw_close(struct dw_file *f)
{
	if (!f)
		return;
	if (f->dbg)
		dwarf_end(f->dbg);
	if (f->fd >= 0)
		close(f->fd);
	free(f);
}

/* The compilation unit whose code holds @addr, in @cu. */
static bool dw_cu_of(struct dw_file *f, uint64_t addr, Dwarf_Die *cu)
{
	Dwarf_CU *unit = NULL, *next;
	Dwarf_Half version;
	uint8_t type;

	if (!f->scan_cus)
		return dwarf_addrdie(f->dbg, addr, cu);
	for (; !dwarf_get_units(f->dbg, unit, &next, &version, &type, cu,
				NULL); unit = next) {
		if ((type == DW_UT_compile || type == DW_UT_partial ||
		     type == DW_UT_skeleton) && dwarf_haspc(cu, addr) > 0)
			return true;
	}
	return false;
}

bool dw_line(struct dw_file *f, uint64_t addr, const char **file, int *line)
{
	Dwarf_Line *row;
	Dwarf_Die cu;

	if (!f || !dw_cu_of(f, addr, &cu))
		return false;
	row = dwarf_getsrc_die(&cu, addr);
	if (!row || dwarf_lineno(row, line))
		return false;
	*file = dwarf_linesrc(row, NULL, NULL);
	/* Line 0: code the compiler made that belongs to no line. */
	return *file && *line > 0;
}
