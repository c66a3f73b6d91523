// SPDX-License-Identifier: GPL-2.0
/*
 * Debug Store: the hardware accessors, and the calls through which perf's
 * Intel driver drives the Debug Store. Built whenever that driver is
 * (CONFIG_X86_DS_CORE), with or without the allocator, so that nothing
 * else writes IA32_DS_AREA or the BTS bits of IA32_DEBUGCTL.
 */

#include <linux/bug.h>
#include <linux/mm.h>
#include <linux/preempt.h>
#include <linux/smp.h>
#include <linux/static_call.h>
#include <linux/string.h>
#include <linux/vmalloc.h>

#include <asm/apic.h>
#include <asm/cpu_entry_area.h>
#include <asm/debugreg.h>
#include <asm/ds.h>
#include <asm/intel_ds.h>
#include <asm/msr.h>
#include <asm/processor.h>
#include <asm/tlbflush.h>

#include "internal.h"

/* --- the real hardware --- */

static void ds_msr_probe(struct ds_hw_caps *caps)
{
	memset(caps, 0, sizeof(*caps));
	/*
	 * percpu_setup_debug_store() maps the CEA slots on Intel only, and
	 * the threshold PMI needs a local APIC, as perf's PMU does.
	 */
	if (boot_cpu_data.x86_vendor != X86_VENDOR_INTEL ||
	    !boot_cpu_has(X86_FEATURE_APIC) ||
	    boot_cpu_data.x86 == DS_NETBURST_FAMILY ||
	    !boot_cpu_has(X86_FEATURE_DTES64))
		return;

	caps->bts = boot_cpu_has(X86_FEATURE_BTS);
	caps->pebs = boot_cpu_has(X86_FEATURE_PEBS);
	caps->meltdown = boot_cpu_has_bug(X86_BUG_CPU_MELTDOWN);
}

static u64 ds_msr_read_debugctl(void)
{
	return get_debugctlmsr();
}

static void ds_msr_write_debugctl(u64 val)
{
	update_debugctlmsr(val);
}

static void ds_msr_write_ds_area(unsigned long addr)
{
	wrmsrl(MSR_IA32_DS_AREA, addr);
}

static u32 ds_msr_arm_pmi(void)
{
	u32 old = apic_read(APIC_LVTPC);

	apic_write(APIC_LVTPC, APIC_DM_NMI);
	return old;
}

/*
 * Many CPUs mask LVTPC when they deliver a PMI. A BTS threshold sets no
 * status bit (unlike PEBS, GLOBAL_STATUS.OvfBuffer, which is perf's), so
 * unmasking is all there is to acknowledge.
 */
static void ds_msr_ack_pmi(void)
{
	apic_write(APIC_LVTPC, APIC_DM_NMI);
}

static void ds_msr_restore_pmi(u32 lvtpc)
{
	apic_write(APIC_LVTPC, lvtpc);
}

/* Our staging pages are vmalloc()ed; perf's buffers are contiguous. */
static phys_addr_t ds_buf_phys(void *p)
{
	if (is_vmalloc_addr(p))
		return page_to_phys(vmalloc_to_page(p));
	return virt_to_phys(p);
}

/*
 * No flush of other CPUs: the slot is not present before, since every
 * unmap (ds_stage_free_all(), ds_perf_unmap_buffer()) is flushed on all
 * CPUs before its pages go, and x86 never caches a translation that is not
 * present (SDM vol. 3, 4.10.2.3). cea_set_pte() flushes this CPU's entry.
 */
VISIBLE_IF_KUNIT void ds_msr_map(void *cea, void *buf, size_t size)
{
	size_t off;

	preempt_disable();
	for (off = 0; off < size; off += PAGE_SIZE)
		cea_set_pte(cea + off, ds_buf_phys(buf + off), PAGE_KERNEL);
	preempt_enable();
}

/* The caller flushes, once for all the slots it unmaps: see ds_msr_flush(). */
VISIBLE_IF_KUNIT void ds_msr_unmap(void *cea, size_t size)
{
	size_t off;

	preempt_disable();
	for (off = 0; off < size; off += PAGE_SIZE)
		cea_set_pte(cea + off, 0, PAGE_NONE);
	preempt_enable();
}

/*
 * The slots are shared by all CPUs' page tables: flush them all. A range
 * over every CPU's slots becomes one broadcast flush of the whole TLB.
 */
VISIBLE_IF_KUNIT void ds_msr_flush(unsigned long start, unsigned long end)
{
	flush_tlb_kernel_range(start, end);
}

VISIBLE_IF_KUNIT const struct ds_hw_ops ds_msr_ops __maybe_unused = {
	.probe		= ds_msr_probe,
	.read_debugctl	= ds_msr_read_debugctl,
	.write_debugctl	= ds_msr_write_debugctl,
	.write_ds_area	= ds_msr_write_ds_area,
	.arm_pmi	= ds_msr_arm_pmi,
	.ack_pmi	= ds_msr_ack_pmi,
	.restore_pmi	= ds_msr_restore_pmi,
	.map		= ds_msr_map,
	.unmap		= ds_msr_unmap,
	.flush		= ds_msr_flush,
};

/*
 * Direct calls on the context switch and NMI paths; the KUnit suite points
 * them at its simulated CPU with ds_hw_install() and back.
 */
DEFINE_STATIC_CALL(ds_hw_probe, ds_msr_probe);
DEFINE_STATIC_CALL(ds_hw_read_debugctl, ds_msr_read_debugctl);
DEFINE_STATIC_CALL(ds_hw_write_debugctl, ds_msr_write_debugctl);
DEFINE_STATIC_CALL(ds_hw_write_ds_area, ds_msr_write_ds_area);
DEFINE_STATIC_CALL(ds_hw_arm_pmi, ds_msr_arm_pmi);
DEFINE_STATIC_CALL(ds_hw_ack_pmi, ds_msr_ack_pmi);
DEFINE_STATIC_CALL(ds_hw_restore_pmi, ds_msr_restore_pmi);
DEFINE_STATIC_CALL(ds_hw_map, ds_msr_map);
DEFINE_STATIC_CALL(ds_hw_unmap, ds_msr_unmap);
DEFINE_STATIC_CALL(ds_hw_flush, ds_msr_flush);

VISIBLE_IF_KUNIT void __maybe_unused ds_hw_install(const struct ds_hw_ops *ops)
{
	static_call_update(ds_hw_probe, ops->probe);
	static_call_update(ds_hw_read_debugctl, ops->read_debugctl);
	static_call_update(ds_hw_write_debugctl, ops->write_debugctl);
	static_call_update(ds_hw_write_ds_area, ops->write_ds_area);
	static_call_update(ds_hw_arm_pmi, ops->arm_pmi);
	static_call_update(ds_hw_ack_pmi, ops->ack_pmi);
	static_call_update(ds_hw_restore_pmi, ops->restore_pmi);
	static_call_update(ds_hw_map, ops->map);
	static_call_update(ds_hw_unmap, ops->unmap);
	static_call_update(ds_hw_flush, ops->flush);
}

/*
 * --- perf: the per-CPU client that fills the save area itself ---
 *
 * perf's Intel driver lays out the save area and reads it in its PMI
 * directly, as it always has: those are its hot paths. What it may not do
 * is drive the hardware: IA32_DS_AREA, the BTS bits of DEBUGCTL and the
 * cpu_entry_area slots go through these. With the allocator built, perf
 * drives a half (BTS or PEBS) only while it holds it (ds_perf_reserve()),
 * and the allocator's tracers the other: IA32_DS_AREA is the one thing
 * they share, and it is counted.
 */

struct debug_store *ds_perf_area(int cpu)
{
	return &get_cpu_entry_area(cpu)->cpu_debug_store;
}

void *ds_perf_map_buffer(int cpu, enum ds_kind kind, void *buf, size_t size)
{
	struct debug_store_buffers *slots =
		&get_cpu_entry_area(cpu)->cpu_debug_buffers;
	void *cea = kind == DS_BTS ? slots->bts_buffer : slots->pebs_buffer;
	size_t slot = kind == DS_BTS ? sizeof(slots->bts_buffer) :
				       sizeof(slots->pebs_buffer);

	if (kind != DS_BTS && kind != DS_PEBS)
		return NULL;
	if (WARN_ON_ONCE(!ds_perf_granted(kind)))
		return NULL;
	/* ds.h promises NULL here: the caller's error to handle, no WARN. */
	if (size > slot || !PAGE_ALIGNED(buf))
		return NULL;
	static_call(ds_hw_map)(cea, buf, size);
	/*
	 * ds_msr_map() says why no CPU can hold a stale entry here; perf
	 * flushed every CPU anyway (ds_update_cea()), and still does, so
	 * that moving its mapping here changes nothing it relies on.
	 */
	static_call(ds_hw_flush)((unsigned long)cea, (unsigned long)cea + size);
	return cea;
}

void ds_perf_unmap_buffer(int cpu, enum ds_kind kind, size_t size)
{
	struct debug_store_buffers *slots =
		&get_cpu_entry_area(cpu)->cpu_debug_buffers;

	void *cea = kind == DS_BTS ? slots->bts_buffer : slots->pebs_buffer;

	/* perf frees the buffer on return: flush before. */
	static_call(ds_hw_unmap)(cea, size);
	static_call(ds_hw_flush)((unsigned long)cea, (unsigned long)cea + size);
}

void ds_perf_install(int cpu)
{
	if (WARN_ON_ONCE(!ds_perf_granted_any()))
		return;
	smp_call_function_single(cpu, ds_perf_load_area, NULL, 1);
}

void ds_perf_uninstall(int cpu)
{
	smp_call_function_single(cpu, ds_perf_unload_area, NULL, 1);
}

void ds_perf_restore(struct debug_store *area)
{
	ds_perf_reload_area(area);
}

/*
 * From perf's PMU enable and disable paths, so also from NMI: fine, since
 * while perf holds the BTS half the allocator writes none of these bits.
 * As before, enabling adds to the bits already set; disabling clears all.
 */
void ds_perf_bts_enable(bool user, bool kernel, bool interrupt)
{
	u64 bits = DEBUGCTLMSR_TR | DEBUGCTLMSR_BTS;

	if (ds_perf_halted())
		return;
	if (interrupt)
		bits |= DEBUGCTLMSR_BTINT;
	if (!kernel)
		bits |= DEBUGCTLMSR_BTS_OFF_OS;
	if (!user)
		bits |= DEBUGCTLMSR_BTS_OFF_USR;
	static_call(ds_hw_write_debugctl)(static_call(ds_hw_read_debugctl)() | bits);
}

void ds_perf_bts_disable(void)
{
	u64 ctl = static_call(ds_hw_read_debugctl)();

	static_call(ds_hw_write_debugctl)(ctl & ~DS_DEBUGCTL_MASK);
}

/*
 * The real MSRs, whoever set them, on a CPU that never returns to perf or
 * to us: machine_kexec(), stop_this_cpu() and the crash path. IA32_DS_AREA
 * goes last, so that no BTS store or PEBS assist finds it cleared.
 */
void ds_emergency_stop(void)
{
	u64 ctl;

	if (boot_cpu_data.x86_vendor != X86_VENDOR_INTEL ||
	    boot_cpu_data.x86 == DS_NETBURST_FAMILY ||
	    !boot_cpu_has(X86_FEATURE_DS))
		return;
	ctl = get_debugctlmsr();
	if (ctl & DS_DEBUGCTL_MASK)
		update_debugctlmsr(ctl & ~DS_DEBUGCTL_MASK);
	if (boot_cpu_has(X86_FEATURE_PEBS))
		wrmsrl_safe(MSR_IA32_PEBS_ENABLE, 0);
	wrmsrl_safe(MSR_IA32_DS_AREA, 0);
}
