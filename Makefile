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
I386_INITRD := $(BUILD)/initramfs-i386.cpio.gz
# make test boots two more kernels, the test config without the series'
# option (EIO; also make check's build, mk/builds.sh) and without the
# emulated backend (EOPNOTSUPP, EBUSY).
NODS_OBJ := $(BUILD)/obj-nods
NODS_BZIMAGE := $(NODS_OBJ)/arch/x86/boot/bzImage
NOEMU_OBJ := $(BUILD)/obj-noemu
NOEMU_BZIMAGE := $(NOEMU_OBJ)/arch/x86/boot/bzImage
# The hostile-use kernel: the test config with KASAN, fault injection and
# the memory cgroup (vm/stress.config), booted on stock QEMU and on the BTS
# model.
STRESS_OBJ := $(BUILD)/obj-stress
STRESS_BZIMAGE := $(STRESS_OBJ)/arch/x86/boot/bzImage
OUTGOING:= $(BUILD)/outgoing
JOBS    ?= $(shell nproc)

# Only one kernel build at a time on a 2-core machine, whoever starts it.
KMAKE   := flock /tmp/kbuild.lock $(MAKE) -s -C $(SRC) O=$(OBJ) ARCH=x86_64 -j$(JOBS)
SELFTEST_TARGETS := x86 ptrace

export BUILD

.PHONY: help deps apt-check report-test base tree refresh patches-check series check config kernel \
	run-kernel i386-kernel nods-kernel noemu-kernel stress-kernel initramfs-i386 bench headers selftests tools initramfs qemu qemu-test test run shell clean distclean

help:
	@echo "make run            boot the VM and show the demo"
	@echo "make bench          bts_bench with page table isolation on and off"
	@echo "make test           build everything, boot, run KUnit + kselftests"
	@echo "                    (ONLY=x86:single_step_syscall_64,... runs a subset)"
	@echo "make shell          boot the VM into an interactive shell"
	@echo "make tree           assemble base + series in build/src"
	@echo "make refresh        export edits made in build/src back into the repository"
	@echo "                    (ENTRY=<patch> names the entry for new files)"
	@echo "make patches-check  fail if build/src holds edits not in the repository"
	@echo "make series         write the upstream series to build/outgoing"
	@echo "make check          checkpatch --strict over that series, then the build"
	@echo "                    matrix: x86_64 without X86_DS, i386 with it (W=1, sparse)"
	@echo "make qemu           build the BTS machine model (patched QEMU, cached)"
	@echo "make qemu-test      the model's own test"
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

tree: base
	@python3 $(TOP)/mk/series.py tree $(if $(FORCE),--force)

refresh:
	@python3 $(TOP)/mk/series.py refresh $(if $(ENTRY),--entry $(ENTRY))

patches-check:
	@python3 $(TOP)/mk/series.py check

series: tree
	@python3 $(TOP)/mk/series.py export $(OUTGOING)

# Two --strict CHECKs are false positives here: _TIF_* flags keep their
# neighbours' "1 << TIF_x" style, and register_nmi_handler() lives only in
# <asm/nmi.h> (<linux/nmi.h> does not include it on x86).
CHECKPATCH_IGNORE := BIT_MACRO,ARCH_INCLUDE_LINUX

check: series
	@cd $(SRC) && PATH=/usr/bin:$$PATH ./scripts/checkpatch.pl --strict --codespell -q \
		--ignore $(CHECKPATCH_IGNORE) \
		$(filter-out %/0000-cover-letter.patch,$(wildcard $(OUTGOING)/*.patch)) && \
		echo "check: checkpatch --strict clean"
	@$(TOP)/mk/ds-owner-check.sh $(SRC)
	@$(TOP)/mk/builds.sh $(SRC) $(BUILD)
	@$(TOP)/mk/apt-check.sh
	@python3 $(TOP)/mk/report_test.py $(SRC)

# The config is regenerated only when the fragment or the series changed.
$(OBJ)/.config: $(TOP)/vm/kernel.config $(BUILD)/tree-head
	@$(TOP)/mk/kconfig.sh $(SRC) $(OBJ) $(TOP)/vm/kernel.config

config: tree
	@$(MAKE) -s $(OBJ)/.config

kernel: config
	@echo "kernel: building $(BZIMAGE)"
	@$(KMAKE) bzImage

# extra_kernel <target> <obj dir> <arch> <fragments>: a kernel of its own
# config; the config is regenerated only when a fragment or the series
# changed.
define extra_kernel
$(2)/.config: $(4) $(BUILD)/tree-head
	@ARCH=$(3) $(TOP)/mk/kconfig.sh $(SRC) $(2) $(4)

$(1): tree
	@$(MAKE) -s $(2)/.config
	@echo "kernel: building $(2)/arch/x86/boot/bzImage"
	@flock /tmp/kbuild.lock $(MAKE) -s -C $(SRC) O=$(2) ARCH=$(3) -j$(JOBS) bzImage
endef

$(eval $(call extra_kernel,i386-kernel,$(I386_OBJ),i386,\
	$(TOP)/vm/kernel.config $(TOP)/vm/i386.config $(TOP)/vm/i386-test.config))
$(eval $(call extra_kernel,nods-kernel,$(NODS_OBJ),x86_64,\
	$(TOP)/vm/kernel.config $(TOP)/vm/no-ds.config))
$(eval $(call extra_kernel,noemu-kernel,$(NOEMU_OBJ),x86_64,\
	$(TOP)/vm/kernel.config $(TOP)/vm/no-emulate.config))
$(eval $(call extra_kernel,stress-kernel,$(STRESS_OBJ),x86_64,\
	$(TOP)/vm/kernel.config $(TOP)/vm/stress.config))
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

# The demo client, the demo program and the benchmark, run by "make run".
BTS_TOOLS := $(BUILD)/bts/btrace $(BUILD)/bts/bts-demo $(BUILD)/bts/bts_bench

tools: headers
	@mkdir -p $(BUILD)/bts
	@$(MAKE) -s -C $(SRC)/tools/bts OUTPUT=$(BUILD)/bts/ \
		KHDR_INCLUDES="-isystem $(OBJ)/usr/include"

initramfs: selftests tools
	@cp $(TOP)/vm/demo.sh $(BUILD)/bts/demo
	@$(call MANIFEST_LIST,tcg) | tr , '\n' >$(BUILD)/tests-tcg.list
	@LIST=$(BUILD)/tests-tcg.list \
		$(TOP)/mk/initramfs.sh $(INITRD) $(KSFT) $(BTS_TOOLS) $(BUILD)/bts/demo

# The i386 VM's: Debian's 32-bit busybox-static, the 32-bit kselftests.
initramfs-i386: selftests
	@$(TOP)/mk/busybox32.sh $(BUILD)/busybox32
	@$(call MANIFEST_LIST,i386) | tr , '\n' >$(BUILD)/tests-i386.list
	@BUSYBOX=$(BUILD)/busybox32/busybox LIST=$(BUILD)/tests-i386.list \
		$(TOP)/mk/initramfs.sh $(I386_INITRD) $(KSFT)

# The BTS machine model: Debian's QEMU 7.2 patched to model the Branch Trace
# Store (vm/qemu/), with a GenuineIntel CPU model stripped of what TCG lacks.
QEMU_BTS := $(BUILD)/qemu/qemu-system-x86_64
BTS_CPU  := Skylake-Client,-pcid,-x2apic,-tsc-deadline,-hle,-rtm,-invpcid,-rdseed,-3dnowprefetch,-xsavec,bts=on
# The same model with a stand-in architectural PMU, so that perf's Intel
# driver loads: perf and ptrace sharing the Debug Store.
PMU_CPU  := $(BTS_CPU),arch-pmu=on
# The other readings of what the SDM leaves open (vm/qemu/README.md,
# "Evidence"): the BTS suites must pass under each.
BTS_ALT_CPU := $(BTS_CPU),bts-cpl=target,pmi-skid=64,pmi-late=on,bts-trap-from=insn,bts-threshold=store
PMU_ALT_CPU := $(PMU_CPU),bts-cpl=either,pmi-skid=160,bts-threshold=cross
SHELL := /bin/bash

qemu: deps
	@$(TOP)/mk/qemu.sh

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
run_only = $(shell $(call MANIFEST_LIST,$(1)))
run_emu  = $(patsubst %,vm.emu=%,$(shell $(call MANIFEST_LIST,$(1)) --pass emu))
# vm_test <run> <bzImage> <initramfs> <kernel arguments> [<environment>]
vm_test = @if [ -z "$(call run_only,$(1))" ]; then \
		rm -rf $(LOGS)/$(1); echo "test: run '$(1)' skipped: none of ONLY is in its manifest"; \
	else \
		echo "test: run '$(1)'"; ONLY=$(call run_only,$(1)) VM_PTI=on \
		VM_APPEND="$(4) $(call run_emu,$(1)) $(VM_APPEND)" $(5) \
		$(TOP)/mk/vm.sh test $(2) $(3) $(LOGS)/$(1); \
	fi
RUNS := tcg bts pmu bts-alt pmu-alt watchdog i386 nods noemu busy stress stress-bts model

# One verdict over all runs (vm/expected/README says what each proves):
#   tcg    the test kernel on stock QEMU: the emulated backend
#   bts    on the BTS model: the hardware backend, then ptrace_bts again
#          with ds.force_emulation=1
#   pmu    on the model with its stand-in PMU: perf and ptrace sharing
#   bts-alt, pmu-alt
#          bts and pmu again under the model's other readings of the SDM
#   watchdog
#          on the model with its PMU and the NMI watchdog on, as a default
#          Intel machine: ptrace BTS on the hardware next to the watchdog,
#          no false report, then a hard lockup provoked and reported (the
#          stuck CPU's RCU stall report, after rcu_cpu_stall_timeout,
#          must not come first)
#   i386   the test config as an i386 kernel with a 32-bit userspace
#   nods   the test config without X86_DS: every request is EIO
#   noemu  without the emulated backend on stock QEMU: EOPNOTSUPP
#   busy   the same kernel on the model with PMU, perf holding BTS: EBUSY
#   stress, stress-bts
#          the hostile-use kernel (KASAN, fault injection, memcg) on stock
#          QEMU and on the model: ptrace_bts_hostile and the x86_ds_stress
#          KUnit suite
#   model  the model's own test
test: kernel i386-kernel nods-kernel noemu-kernel stress-kernel initramfs initramfs-i386 qemu
	@echo "base: $(shell cat $(BUILD)/base-version 2>/dev/null)"
	@python3 $(TOP)/mk/report_test.py $(SRC)
	@$(TOP)/mk/ds-owner-check.sh $(SRC)
	$(call vm_test,tcg,$(BZIMAGE),$(INITRD),vm.env=PTRACE_BTS_BACKEND=emulated)
	$(call vm_test,bts,$(BZIMAGE),$(INITRD),vm.env=PTRACE_BTS_BACKEND=hardware ds.meltdown_kernel=1,QEMU=$(QEMU_BTS) VM_CPU=$(BTS_CPU))
	$(call vm_test,pmu,$(BZIMAGE),$(INITRD),vm.env=PTRACE_BTS_BACKEND=hardware ds.meltdown_kernel=1,QEMU=$(QEMU_BTS) VM_CPU=$(PMU_CPU))
	$(call vm_test,bts-alt,$(BZIMAGE),$(INITRD),vm.env=PTRACE_BTS_BACKEND=hardware ds.meltdown_kernel=1,QEMU=$(QEMU_BTS) VM_CPU=$(BTS_ALT_CPU))
	$(call vm_test,pmu-alt,$(BZIMAGE),$(INITRD),vm.env=PTRACE_BTS_BACKEND=hardware ds.meltdown_kernel=1,QEMU=$(QEMU_BTS) VM_CPU=$(PMU_ALT_CPU))
	$(call vm_test,watchdog,$(BZIMAGE),$(INITRD),vm.env=PTRACE_BTS_BACKEND=hardware ds.meltdown_kernel=1 vm.lockup=1 rcupdate.rcu_cpu_stall_timeout=100 kunit.filter_glob=x86_ds_hw,QEMU=$(QEMU_BTS) VM_CPU=$(PMU_CPU) VM_WATCHDOG=nmi_watchdog=1)
	$(call vm_test,i386,$(I386_BZIMAGE),$(I386_INITRD),vm.env=PTRACE_BTS_BACKEND=emulated)
	$(call vm_test,nods,$(NODS_BZIMAGE),$(INITRD),vm.env=PTRACE_BTS_ERRNO=EIO)
	$(call vm_test,noemu,$(NOEMU_BZIMAGE),$(INITRD),vm.env=PTRACE_BTS_ERRNO=EOPNOTSUPP)
	$(call vm_test,busy,$(NOEMU_BZIMAGE),$(INITRD),vm.env=PTRACE_BTS_ERRNO=EBUSY ds.meltdown_kernel=1,QEMU=$(QEMU_BTS) VM_CPU=$(PMU_CPU))
	$(call vm_test,stress,$(STRESS_BZIMAGE),$(INITRD),vm.env=PTRACE_BTS_BACKEND=emulated)
	$(call vm_test,stress-bts,$(STRESS_BZIMAGE),$(INITRD),vm.env=PTRACE_BTS_BACKEND=hardware ds.meltdown_kernel=1,QEMU=$(QEMU_BTS) VM_CPU=$(BTS_CPU))
	@echo "test: the model's own test"
	@$(MAKE) -s qemu-test
	@python3 $(TOP)/mk/report.py $(if $(ONLY),--only $(ONLY)) $(SRC) $(addprefix $(LOGS)/,$(RUNS))

run: run-kernel initramfs
	@VM_APPEND="kunit.enable=0 $(VM_APPEND)" \
		$(TOP)/mk/vm.sh run $(RUN_BZIMAGE) $(INITRD) $(LOGS)/run

# bts_bench on the run kernel with page table isolation on and off: under
# TCG each CR3 switch flushes QEMU's TLB, which dominates every kernel entry.
bench: run-kernel initramfs
	@for pti in on off; do \
		echo "bench: pti=$$pti"; \
		VM_PTI=$$pti VM_APPEND="kunit.enable=0 $(VM_APPEND)" $(TOP)/mk/vm.sh \
			bench $(RUN_BZIMAGE) $(INITRD) $(LOGS)/bench-pti-$$pti | \
			grep -A6 '^bts_bench: page'; \
	done

shell: kernel initramfs
	@$(TOP)/mk/vm.sh shell $(BZIMAGE) $(INITRD) $(LOGS)/shell

clean:
	rm -rf $(OBJ) $(RUN_OBJ) $(I386_OBJ) $(NODS_OBJ) $(NOEMU_OBJ) $(STRESS_OBJ) $(KSFT) $(INITRD) $(I386_INITRD) $(LOGS) $(OUTGOING)

distclean:
	rm -rf $(BUILD)
