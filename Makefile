# SPDX-License-Identifier: GPL-2.0
#
# Build, boot and test the Debug Store series on the pinned Debian base.
# "make help" lists the targets; README.md explains the layout.

TOP     := $(abspath .)
BUILD   := $(TOP)/build
SRC     := $(BUILD)/src
OBJ     := $(BUILD)/obj
KSFT    := $(BUILD)/kselftest_install
INITRD  := $(BUILD)/initramfs.cpio.gz
LOGS    := $(BUILD)/logs
BZIMAGE := $(OBJ)/arch/x86/boot/bzImage
# make run boots a kernel without lockdep and list debugging (vm/run.config),
# where bts_bench's numbers mean something.
RUN_OBJ := $(BUILD)/obj-run
RUN_BZIMAGE := $(RUN_OBJ)/arch/x86/boot/bzImage
# make test also boots the test config built for i386 (vm/i386.config) with
# a 32-bit userspace.
I386_OBJ := $(BUILD)/obj-i386-test
I386_BZIMAGE := $(I386_OBJ)/arch/x86/boot/bzImage
# make test boots one more kernel, the test config without the series'
# option (EIO). make check builds it without vm/small.config, in its own
# object tree (mk/builds.sh), and also the test config without the
# emulated backend, which make test's runs 'noemu' and 'busy' turn off at
# boot instead (ds.emulation=0).
NODS_OBJ := $(BUILD)/obj-nods
NODS_BZIMAGE := $(NODS_OBJ)/arch/x86/boot/bzImage
# The hostile-use kernel: the test config with KASAN, fault injection and
# the memory cgroup (vm/stress.config), booted on stock QEMU and on the BTS
# model.
STRESS_OBJ := $(BUILD)/obj-stress
STRESS_BZIMAGE := $(STRESS_OBJ)/arch/x86/boot/bzImage
OUTGOING:= $(BUILD)/outgoing
JOBS    ?= $(shell nproc)

# ccache (make deps installs it) for the kernels and QEMU (mk/qemu.sh);
# the selftests compile and link in one step, which it cannot cache. The cache is shared by every object tree and
# every clone: paths under this checkout are rewritten relative to the
# compiler's working directory (BASEDIR), the working directory is not
# hashed (no debug info records it), and a tree unpacked afresh has new
# mtimes but the same contents. The depend mode hashes the sources and
# the headers the compiler's -MD output names, and never runs the
# preprocessor on its own: a miss costs no more than the compile, where
# the preprocessor mode adds a preprocessor pass to every object of a
# cold build. CCACHE_DIR is ccache's own default unless set; make test prints
# the hit rates.
CCACHE  := $(shell command -v ccache)
KCC     := $(if $(CCACHE),ccache gcc,gcc)
export CCACHE_BASEDIR := $(TOP)
export CCACHE_NOHASHDIR := true
export CCACHE_DEPEND := true
export CCACHE_SLOPPINESS := include_file_mtime,include_file_ctime,time_macros
export CCACHE_MAXSIZE := 8G

# Only one kernel build at a time on a 2-core machine, whoever starts it.
KMAKE   := flock /tmp/kbuild.lock $(MAKE) -s -C $(SRC) O=$(OBJ) ARCH=x86_64 -j$(JOBS) \
	CC="$(KCC)" HOSTCC="$(KCC)"
SELFTEST_TARGETS := x86 ptrace

export BUILD

.PHONY: help deps apt-check report-test base tree refresh patches-check series-roundtrip series check bisect-check config kernel \
	run-kernel i386-kernel nods-kernel stress-kernel bench-nods-kernel bench bench-initramfs headers selftests tools initramfs qemu qemu-test gdb gdb-check gdb-check-test test soak test-checks run-initramfs run shell clean distclean

help:
	@echo "make run            boot the VM and show the demo"
	@echo "make bench          benchmarks: untraced cost, real programs against gdb and"
	@echo "                    single-stepping, reads, requests, scaling (build/bench/)"
	@echo "make test           build everything, boot, run KUnit + kselftests"
	@echo "                    (ONLY=x86:single_step_syscall_64,... runs a subset,"
	@echo "                    RUNS=tcg,nods only these runs, DEADLINE=<epoch> bounds it)"
	@echo "make soak           ptrace_bts_fuzz with more blocks, in 'tcg' and 'bts'"
	@echo "make shell          boot the VM into an interactive shell"
	@echo "make tree           assemble base + series in build/src"
	@echo "make refresh        export build/src back into the repository: its work-tree"
	@echo "                    edits (ENTRY=<patch> for new files) or its rewritten commits"
	@echo "make patches-check  fail if build/src holds edits not in the repository"
	@echo "make series-roundtrip  refresh and tree map onto each other, byte for byte"
	@echo "make series         write the upstream series to build/outgoing"
	@echo "make check          checkpatch --strict over that series, then the build"
	@echo "                    matrix: x86_64 without X86_DS, i386 with it (W=1, sparse)"
	@echo "make bisect-check   every prefix of the series builds (x86_64, X86_DS=n, i386,"
	@echo "                    W=1) and boots clean at group ends (FROM=N, TO=N)"
	@echo "make qemu           build the BTS machine model (patched QEMU, cached)"
	@echo "make qemu-test      the model's own test"
	@echo "make gdb            build gdb with PTRACE_BTS (vm/gdb/, cached)"
	@echo "make gdb-check      gdb's gdb.btrace tests over PTRACE_BTS in the VM"
	@echo "                    (MACHINES=tcg or bts: one machine)"
	@echo "make deps           install the host packages (apt)"
	@echo "make report-test    make test's verdict catches runs broken on purpose"
	@echo "make apt-check      the package set-up survives a broken apt source"
	@echo "                    and leaves /etc/apt and dpkg's architectures alone"

deps:
	@$(TOP)/mk/deps.sh

apt-check:
	@$(TOP)/mk/apt-check.sh

# The verdict of make test against runs broken on purpose.
report-test: tree
	@python3 $(TOP)/mk/report_test.py $(SRC)

base: deps
	@$(TOP)/mk/base.sh

# mk/test.py runs deps, base and tree once, before its other jobs, and
# then passes TREE_DONE=1: two of those at once would race on build/src.
tree: $(if $(TREE_DONE),,base)
	@$(if $(TREE_DONE),true,python3 $(TOP)/mk/series.py tree $(if $(FORCE),--force))

refresh:
	@python3 $(TOP)/mk/series.py refresh $(if $(ENTRY),--entry $(ENTRY))

patches-check:
	@python3 $(TOP)/mk/series.py check

# The repository <-> build/src commits mapping, on scratch copies: refresh of
# the assembled series changes nothing; every entry exported afresh from its
# commit reassembles the same trees, byte for byte again; a file grown over
# two entries does too, and an entry after a file's owner may not touch it.
series-roundtrip: tree
	@python3 $(TOP)/mk/series.py roundtrip

series: tree
	@python3 $(TOP)/mk/series.py export $(OUTGOING)

# Every prefix of the series builds (x86_64 test config, X86_DS=n, i386; W=1,
# findings in the series' files fail) in build/bisect/, and boots its KUnit
# suites clean at each "# group:" end of patches/series (mk/bisect-check.py).
# FROM=N starts at entry N, TO=N stops after it, KEEP_GOING=1 goes on after a
# failed prefix, BUILDS=x86_64,nods,i386 picks builds.
bisect-check: tree
	@FROM=$(FROM) TO=$(TO) KEEP_GOING=$(KEEP_GOING) BUILDS=$(BUILDS) JOBS=$(JOBS) \
		python3 $(TOP)/mk/bisect-check.py

# Two --strict CHECKs are false positives here: _TIF_* flags keep their
# neighbours' "1 << TIF_x" style, and register_nmi_handler() lives only in
# <asm/nmi.h> (<linux/nmi.h> does not include it on x86).
CHECKPATCH_IGNORE := BIT_MACRO,ARCH_INCLUDE_LINUX

check: series series-roundtrip
	@cd $(SRC) && PATH=/usr/bin:$$PATH ./scripts/checkpatch.pl --strict --codespell -q \
		--ignore $(CHECKPATCH_IGNORE) \
		$(filter-out %/0000-cover-letter.patch,$(wildcard $(OUTGOING)/*.patch)) && \
		echo "check: checkpatch --strict clean"
	@$(TOP)/mk/ds-owner-check.sh $(SRC)
	@$(TOP)/mk/kdoc-check.sh $(SRC) $(TOP)/patches
	@$(TOP)/mk/docs-check.sh $(SRC) $(TOP)/patches $(BUILD)
	@$(TOP)/mk/builds.sh $(SRC) $(BUILD)
	@$(TOP)/mk/apt-check.sh
	@python3 $(TOP)/mk/report_test.py $(SRC)
	@$(MAKE) -s bisect-check TREE_DONE=1

# The config is regenerated only when the fragment or the series changed.
$(OBJ)/.config: $(TOP)/vm/kernel.config $(BUILD)/tree-head
	@$(TOP)/mk/kconfig.sh $(SRC) $(OBJ) $(TOP)/vm/kernel.config

config: tree
	@$(MAKE) -s $(OBJ)/.config

# The modules are the Debug Store sample's (samples/ds/), which runs 'tcg'
# and 'bts' load.
kernel: config
	@echo "kernel: building $(BZIMAGE)"
	@$(KMAKE) bzImage modules

# extra_kernel <target> <obj dir> <arch> <fragments>: a kernel of its own
# config; the config is regenerated only when a fragment or the series
# changed.
define extra_kernel
$(2)/.config: $(4) $(BUILD)/tree-head
	@ARCH=$(3) $(TOP)/mk/kconfig.sh $(SRC) $(2) $(4)

$(1): tree
	@$(MAKE) -s $(2)/.config
	@echo "kernel: building $(2)/arch/x86/boot/bzImage"
	@flock /tmp/kbuild.lock $(MAKE) -s -C $(SRC) O=$(2) ARCH=$(3) -j$(JOBS) \
		CC="$(KCC)" HOSTCC="$(KCC)" bzImage
endef

$(eval $(call extra_kernel,i386-kernel,$(I386_OBJ),i386,\
	$(TOP)/vm/kernel.config $(TOP)/vm/small.config $(TOP)/vm/i386.config $(TOP)/vm/i386-test.config))
$(eval $(call extra_kernel,nods-kernel,$(NODS_OBJ),x86_64,\
	$(TOP)/vm/kernel.config $(TOP)/vm/small.config $(TOP)/vm/no-ds.config))
$(eval $(call extra_kernel,stress-kernel,$(STRESS_OBJ),x86_64,\
	$(TOP)/vm/kernel.config $(TOP)/vm/small.config $(TOP)/vm/stress.config))
$(eval $(call extra_kernel,run-kernel,$(RUN_OBJ),x86_64,\
	$(TOP)/vm/kernel.config $(TOP)/vm/run.config))

headers: config
	@$(KMAKE) headers

selftests: headers
	@echo "selftests: $(SELFTEST_TARGETS) (static, 64- and 32-bit)"
	@flock /tmp/kbuild.lock $(MAKE) -s -C $(SRC)/tools/testing/selftests \
		O=$(OBJ) TARGETS="$(SELFTEST_TARGETS)" CC="gcc -static" \
		KSFT_INSTALL_PATH=$(KSFT) install >$(BUILD)/selftests.log 2>&1 || \
		{ tail -40 $(BUILD)/selftests.log; exit 1; }
	@# The selftests' install goes on past a target that fails to build; the
	@# series' own tests also build without warnings.
	@! grep -E '\*\*\* .* Error [0-9]+|(ptrace_bts|ds_perf_bts)[^:]*:[0-9]+:[0-9]+: (warning|note):' \
		$(BUILD)/selftests.log || \
		{ echo "selftests: build errors or warnings, see $(BUILD)/selftests.log"; exit 1; }

# The demo client, the demo programs and the benchmark, run by "make run";
# btrace's test programs (tools/bts), which a run boots with when its
# manifest lists bts:btrace_test or bts:btrace_test_32, and the C libraries
# of bts-crash, the dynamically linked one, taken from this machine.
BTS_TOOLS := $(BUILD)/bts/btrace $(BUILD)/bts/bts-demo $(BUILD)/bts/bts-crash \
	$(BUILD)/bts/bts_bench
BTS_TEST_TOOLS := $(BUILD)/bts/btrace $(BUILD)/bts/bts-demo \
	$(BUILD)/bts/bts-crash $(BUILD)/bts/btrace_32 $(BUILD)/bts/bts-demo_32 \
	$(BUILD)/bts/bts-crash_32
BTS_LIBS := /lib64/ld-linux-x86-64.so.2 /lib/x86_64-linux-gnu/libc.so.6 \
	/lib/ld-linux.so.2 /usr/lib32/libc.so.6

# gdb with PTRACE_BTS (vm/gdb/), which a run boots with when its manifest
# lists a gdb: program, and the programs its sessions debug (static, -O0,
# not position independent: the same code on every path).
GDB_ROOT := $(BUILD)/gdb/vmroot
GDB_TESTS := btrace-demo btrace-threads btrace-crash btrace-forkexec

# btrace_32's file:line: Debian's i386 libdw and what it needs, static
# archives fetched by mk/libdw32.sh (btrace links the host's libdw-dev).
LIBDW32 := $(BUILD)/libdw32
DW32_CFLAGS := -isystem $(LIBDW32)/usr/include
DW32_LIBS := -L$(LIBDW32)/usr/lib/i386-linux-gnu -ldw -lelf -lz -llzma \
	-lbz2 -pthread

tools: headers
	@mkdir -p $(BUILD)/bts
	@$(TOP)/mk/libdw32.sh $(LIBDW32)
	@$(MAKE) -s -C $(SRC)/tools/bts OUTPUT=$(BUILD)/bts/ \
		KHDR_INCLUDES="-isystem $(OBJ)/usr/include" \
		DW32_CFLAGS="$(DW32_CFLAGS)" DW32_LIBS="$(DW32_LIBS)" all all_32
	@gcc -static -O2 -Wall -Werror -isystem $(OBJ)/usr/include \
		-o $(BUILD)/bts/kexec-ds $(TOP)/vm/kexec-ds.c
	@gcc -static -O2 -Wall -Werror -o $(BUILD)/bts/ds-sample-work \
		$(TOP)/vm/ds-sample-work.c
	@mkdir -p $(KSFT)/gdb
	@for t in $(GDB_TESTS); do \
		gcc -static -O0 -g -fno-pie -no-pie -pthread -Wall -Werror \
			-o $(KSFT)/gdb/$$t $(TOP)/vm/gdb/test/$$t.c || exit 1; \
		cp $(TOP)/vm/gdb/test/$$t.c $(KSFT)/gdb/; \
	done
	@mkdir -p $(KSFT)/bench
	@for p in $(BENCH_PROGS); do \
		gcc -static -O2 -Wall -Werror -pthread -isystem $(OBJ)/usr/include \
			-o $(KSFT)/bench/$$p $(TOP)/vm/bench/$$p.c || exit 1; \
	done
	@install -m 755 $(TOP)/vm/bench/bench.sh $(TOP)/vm/bench/bench_smoke.sh \
		$(BUILD)/bts/bts_bench /usr/bin/tac $(KSFT)/bench/
	@echo "$(BENCH_PROGS) bench.sh bts_bench tac" | tr ' ' '\n' \
		>$(KSFT)/bench/bench_smoke.sh.files
	@install -m 755 $(TOP)/vm/gdb/test/gdb_btrace.sh $(TOP)/vm/gdb/test/gdb_btrace_perf.sh \
		$(KSFT)/gdb/
	@for f in gdb_btrace.sh gdb_btrace_perf.sh; do \
		{ [ $$f = gdb_btrace.sh ] || echo gdb_btrace.sh; \
		  for t in $(GDB_TESTS); do echo $$t; echo $$t.c; done; } >$(KSFT)/gdb/$$f.files; \
	done

initramfs: selftests tools
	@cp $(TOP)/vm/demo.sh $(BUILD)/bts/demo
	@$(call MANIFEST_LIST,tcg) | tr , '\n' >$(BUILD)/tests-tcg.list
	@LIST=$(BUILD)/tests-tcg.list LIBS="$(BTS_LIBS)" \
		$(TOP)/mk/initramfs.sh $(INITRD) $(KSFT) $(BTS_TOOLS) $(BUILD)/bts/demo

# The BTS machine model: Debian's QEMU 7.2 patched to model the Branch Trace
# Store (vm/qemu/); mk/test.py has the CPU models its runs boot.
QEMU_BTS := $(BUILD)/qemu/qemu-system-x86_64
SHELL := /bin/bash

qemu: $(if $(TREE_DONE),,deps)
	@$(TOP)/mk/qemu.sh

# gdb with PTRACE_BTS: Debian's gdb with vm/gdb/patches (cached).
gdb: $(if $(TREE_DONE),,deps)
	@$(TOP)/mk/gdb.sh

# gdb's own gdb.btrace tests against PTRACE_BTS, in the VM with a Debian
# userspace: stock QEMU (emulated) and the model (hardware). MACHINES=tcg
# runs one.
gdb-check: kernel gdb qemu
	@$(TOP)/mk/gdb-check.sh $(OBJ)/arch/x86/boot/bzImage $(or $(MACHINES),tcg bts)

# make test's share of it (run 'gdbcheck'): thirteen of the tests on stock
# QEMU, the emulated backend, as TAP for mk/report.py.
GDB_CHECK_SUBSET := gdb.btrace/record_goto.exp gdb.btrace/function_call_history.exp \
	gdb.btrace/instruction_history.exp gdb.btrace/delta.exp gdb.btrace/stepi.exp \
	gdb.btrace/step.exp gdb.btrace/segv.exp gdb.btrace/multi-thread-step.exp \
	gdb.btrace/non-stop.exp gdb.btrace/tailcall.exp gdb.btrace/bts-source.exp \
	gdb.btrace/buffer-size.exp gdb.python/py-record-btrace.exp
gdb-check-test:
	@rm -rf $(LOGS)/gdbcheck && mkdir -p $(LOGS)/gdbcheck
	@GDB_CHECK_OUT=$(BUILD)/gdb-check-test GDB_CHECK_TAP=$(LOGS)/gdbcheck/tap.log \
		GDB_CHECK_TESTS="$(GDB_CHECK_SUBSET)" GDB_CHECK_APPEND="pti=on" \
		$(TOP)/mk/gdb-check.sh $(OBJ)/arch/x86/boot/bzImage tcg \
		>$(LOGS)/gdbcheck/gdb-check.log 2>&1 || true

# The model's own test: known code sequences give exactly the expected records.
qemu-test: qemu
	@rm -rf $(LOGS)/model && mkdir -p $(LOGS)/model
	@QEMU=$(QEMU_BTS) $(TOP)/mk/qemu-test.sh >$(LOGS)/model/tap.log 2>&1 || true

# Every run has a manifest, vm/expected/<run>, of what it must report; the
# kselftests a run boots with are its manifest's.  ONLY=a:b,c:d keeps, in
# each run, those of them (a run with none of them does not boot), and the
# verdict then checks those programs and KUnit.
MANIFEST_LIST = python3 $(TOP)/mk/report.py --list $(TOP)/vm/expected/$(1) \
	$(if $(ONLY),--only $(ONLY))

# One verdict over all runs (the run table is in mk/test.py, what each run
# proves in its manifest, vm/expected/<run>, and in README.md). mk/test.py
# builds what the runs need, schedules builds and VMs by what each needs,
# bounds every run and the whole (DEADLINE=<epoch>), and ends with the time
# table and the verdict. RUNS=tcg,nods picks runs; LANES=1 boots one VM at
# a time.
test:
	@python3 $(TOP)/mk/test.py

# The long fuzz: ptrace_bts_fuzz in 'tcg' with 3,000 blocks per case (six
# times make test's, twice what make test ran before), in 'bts' with 1,000
# (as before; each block runs three times there, and a case may take
# 300 s), bounded only by DEADLINE.
soak:
	@RUNS=tcg,bts FUZZ_BLOCKS=3000,1000 python3 $(TOP)/mk/test.py

# The checks make test runs beside the builds.
test-checks: tree
	@python3 $(TOP)/mk/report_test.py $(SRC)
	@$(TOP)/mk/ds-owner-check.sh $(SRC)
	@$(TOP)/mk/kdoc-check.sh $(SRC) $(TOP)/patches

# A run's initramfs (mk/test.py): only the kselftests RUN_PROGS names;
# SAMPLE=1 adds the Debug Store sample, the test kernel's module, and its
# workload (vm/init's vm.sample=1).
SAMPLE_KO := $(OBJ)/samples/ds/ds_sample.ko

run-initramfs:
	@mkdir -p $(BUILD)/initramfs $(KSFT)/bts
	@cp $(BUILD)/bts/btrace_test $(BUILD)/bts/btrace_test_32 $(KSFT)/bts/
	@echo "$(RUN_PROGS)" | tr , '\n' >$(BUILD)/initramfs/$(RUN).list
	@PROGS=$(RUN_PROGS) LIST=$(BUILD)/initramfs/$(RUN).list \
		$(if $(findstring bts:,$(RUN_PROGS))$(findstring bench:,$(RUN_PROGS)),LIBS="$(BTS_LIBS)") \
		$(if $(findstring gdb:,$(RUN_PROGS))$(findstring bench:,$(RUN_PROGS)),ROOTS="$(GDB_ROOT)") \
		$(if $(filter i386,$(RUN)),BUSYBOX=$(BUILD)/busybox32/busybox) \
		$(if $(filter kexec,$(RUN)),KEXEC_KERNEL=$(OBJ)/arch/x86/boot/bzImage) \
		$(if $(SAMPLE),KMODULES=$(SAMPLE_KO)) \
		$(TOP)/mk/initramfs.sh $(BUILD)/initramfs/$(RUN).cpio.gz $(KSFT) \
		$(if $(filter kexec,$(RUN)),$(BUILD)/bts/kexec-ds) \
		$(if $(SAMPLE),$(BUILD)/bts/ds-sample-work) \
		$(if $(findstring bts:,$(RUN_PROGS)),$(BTS_TEST_TOOLS))

run: run-kernel initramfs
	@VM_APPEND="kunit.enable=0 $(VM_APPEND)" \
		$(TOP)/mk/vm.sh run $(RUN_BZIMAGE) $(INITRD) $(LOGS)/run

# make bench (mk/bench.py): the run kernel against the same kernel without
# X86_DS (vm/bench-nods.config), on stock QEMU and the BTS model, with the
# benchmark programs (vm/bench/), xz (a program with shared libraries) and
# gdb in the initramfs. Tables and plots in build/bench/.
# make test runs the same programs on tiny inputs as the kselftest
# collection "bench" (vm/bench/bench_smoke.sh), which tools installs.
BENCH_OBJ := $(BUILD)/obj-bench-nods
BENCH_PROGS := bench-trace bench-micro bench-spin bench-reads
BENCH_BINS := $(addprefix $(KSFT)/bench/,$(BENCH_PROGS) bench.sh bts_bench tac)
BENCH_INITRD := $(BUILD)/bench/initramfs.cpio.gz

$(eval $(call extra_kernel,bench-nods-kernel,$(BENCH_OBJ),x86_64,\
	$(TOP)/vm/kernel.config $(TOP)/vm/run.config $(TOP)/vm/bench-nods.config))

bench-initramfs: tools gdb
	@mkdir -p $(BUILD)/bench/empty
	@LIST=/dev/null LIBS="$(BTS_LIBS)" ROOTS="$(GDB_ROOT)" \
		$(TOP)/mk/initramfs.sh $(BENCH_INITRD) $(BUILD)/bench/empty $(BENCH_BINS)

bench: run-kernel bench-nods-kernel qemu bench-initramfs
	@python3 $(TOP)/mk/bench.py

shell: kernel initramfs
	@$(TOP)/mk/vm.sh shell $(BZIMAGE) $(INITRD) $(LOGS)/shell

clean:
	rm -rf $(OBJ) $(RUN_OBJ) $(I386_OBJ) $(NODS_OBJ) $(STRESS_OBJ) $(BUILD)/obj-check-* $(KSFT) $(INITRD) $(BUILD)/initramfs $(LOGS) $(OUTGOING)

distclean:
	rm -rf $(BUILD)
