"""Whose frames a CPU stack shows.

Signal frames: the frame a signal interrupted is an interrupted instruction,
not a call's return address: it is looked up at its own address, not minus
one, and the trampoline between it and the handler (glibc's __restore_rt) is
not one of the program's frames. sig_resume's SIGILL and SIGSEGV handlers
burn CPU and resume trap_ill / trap_segv, whose faulting instruction is
their first byte, right after a one-byte prev_ill / prev_segv: read as a
return address it names prev_*. Before the fix every handler's CPU sat
under prev_* with an unnamed [libc.so.6] frame above it; the first fix
dropped trap_* and kept that frame (libunwind flags the interrupted frame as
the signal frame, not the trampoline).

The shim's own work on a program's thread: at every dlclose the shim's hook
records the library's sampled addresses (unload.h). That runs on the
program's thread; its frames (libprofshim.so's code other than the allocator
it serves the program with) must not be in the program's CPU profile. Shim
frames are told by their location's mapping (libprofshim.so) and file
offset (outside the profshim_alloc and profshim_heapprof sections, where
the allocator is).
"""

import os
import re
import shutil
import subprocess

from common import check, fail, indent

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(os.path.dirname(HERE), "workloads")


def _cpu_file(d):
    return os.path.join(d, "run.cpu.pprof")


def _truth(r, kind):
    for line in r.stdout_text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[:2] == ["truth", kind]:
            return {k: int(v) for k, v in (p.split("=", 1) for p in parts[2:])}
    fail("the workload printed no 'truth %s' line\n%s" % (kind, r.describe()))


def _stack_text(prof, s):
    maps = {m.id: os.path.basename(m.file) or "(anon)" for m in prof.mappings}
    out = []
    for lid in s.location_ids:
        loc = prof.locations[lid]
        names = ",".join(f.name for f in loc.frames) or "(no name)"
        out.append("%#x [%s] %s" % (loc.address, maps.get(loc.mapping, "?"), names))
    return " <- ".join(out)


def test_signal_handler_cpu_is_under_the_interrupted_function(ctx):
    """SIGILL at trap_ill's first byte (ud2) and SIGSEGV at trap_segv's (a
    load from 0); each handler burns CPU (1 s in all, 250 Hz) and resumes.
    Every stack through a handler shows trap_* right below the handler (no
    trampoline frame, no prev_*); trap_* holds >= 90% of the handlers' CPU
    as the program measured it; prev_* has none."""
    r, d = ctx.profile(["sig_resume", "1.0"], PROFILE_CPU_HZ=250)
    prof = ctx.read(_cpu_file(d), r)
    cpu = prof.index("cpu")
    for kind, handler in (("ill", "on_sigill"), ("segv", "on_sigsegv")):
        truth = _truth(r, kind)["cpu_ns"]
        trap, prev = "trap_" + kind, "prev_" + kind
        through = [s for s in prof.samples if any(f.name == handler for f in s.stack)]
        got = sum(s.values[cpu] for s in through)
        check(0.9 * truth <= got <= 1.15 * truth, "%s: the handler used %.3f s of CPU; stacks through it hold "
              "%.3f s\n%s" % (handler, truth / 1e9, got / 1e9, prof.cum_table("cpu")))
        bad = []
        for s in through:
            locs = [prof.locations[i] for i in s.location_ids]
            at = max(k for k, l in enumerate(locs) if any(f.name == handler for f in l.frames))
            below = locs[at + 1] if at + 1 < len(locs) else None
            if below is None or not below.frames or below.frames[0].name != trap:
                bad.append(s)
        check(not bad, "%s: the frame right below the handler must be %s, the function the signal "
              "interrupted (looked up at the faulting instruction, no trampoline frame between); %d of %d "
              "stacks are not so, e.g.:\n%s" % (handler, trap, len(bad), len(through), indent(
                  "\n".join(_stack_text(prof, s) for s in bad[:3]))))
        under = prof.cum(trap, "cpu")
        check(under >= 0.9 * truth, "%s holds %.3f s of the %.3f s its handler used\n%s" % (
            trap, under / 1e9, truth / 1e9, prof.cum_table("cpu")))
        check(not prof.has_function(prev), "%s (the function before %s) is in the profile: an interrupted "
              "address was looked up as a return address\n%s" % (prev, trap, prof.cum_table("cpu")))


def test_exit_from_a_handler_that_interrupted_malloc_makes_no_stop(ctx):
    """A SIGPROF handler calls exit() wherever the signal landed (mostly in
    malloc/free: handler_exit churns the heap). The program says whether
    the interrupted instruction is in the allocator's object (the shim);
    when it is, the stop must refuse (its state on this thread is half-way
    through: DESIGN.md, "The stop") with its one error line, and the exit
    status stays 0. The check walks from the frame the signal interrupted:
    before, it started one frame further out and missed a signal that
    landed in malloc's own code."""
    seen = 0
    for attempt in range(30):
        r, d = ctx.profile(["handler_exit"])
        lines = r.stderr_lines
        if "truth interrupted=allocator" not in lines:
            check("truth interrupted=other" in lines, "the workload said nothing\n%s" % r.describe())
            continue
        seen += 1
        check(any("exit was called in a signal handler that interrupted the allocator" in l
                  for l in r.error_lines()),
              "run %d: the signal interrupted the allocator and the handler called exit(); the stop must "
              "refuse with one error line\n%s" % (attempt + 1, r.describe()))
        if seen == 6:
            break
    check(seen >= 3, "only %d of 30 runs had the signal land in the allocator" % seen)


def _plugin(ctx):
    cc = shutil.which("gcc") or shutil.which("cc")
    check(cc, "no C compiler (gcc) to build the plugin")
    out = os.path.join(ctx.mkdtemp("plugin"), "cycle_plugin.so")
    p = subprocess.run([cc, "-shared", "-fPIC", "-g", "-O1", "-fno-omit-frame-pointer", "-o", out,
                        os.path.join(WORKLOADS, "plugins", "cycle_plugin.c")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check(p.returncode == 0, "building the plugin failed:\n%s" % p.stdout.decode("utf-8", "replace"))
    return out


def _section(path, name):
    """(file offset, size) of a section of an ELF file."""
    text = subprocess.run(["readelf", "-SW", path], stdout=subprocess.PIPE).stdout.decode()
    m = re.search(r"\]\s+%s\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)" % re.escape(name), text)
    check(m, "%s has no %s section:\n%s" % (path, name, indent(text[-2000:])))
    return int(m.group(1), 16), int(m.group(2), 16)


def test_dlclose_loop_has_no_shim_frames(ctx):
    """3,000 dlopen / cycle_work (100 us) / dlclose cycles at 1000 Hz: no
    location of the CPU profile lies in libprofshim.so's code other than
    its allocator (before the fix, the hook's scan of the whole stack table
    was ~10% of such a profile), and the plugin's work is there, named."""
    so = _plugin(ctx)
    r, d = ctx.profile(["dl_cycles", so, "3000", "100"], PROFILE_CPU_HZ=1000)
    t = _truth(r, "cycles")
    check(t["n"] == 3000 and t["unloaded"] == 3000, "the plugin was not loaded and unloaded 3000 times\n%s"
          % r.describe())
    prof = ctx.read(_cpu_file(d), r)
    real = os.path.realpath(ctx.lib)
    shim = {m.id: m for m in prof.mappings if os.path.basename(m.file) == os.path.basename(real)}
    # The allocator: jemalloc, and its heap-profiling code in a section of its own.
    alloc = [_section(real, "profshim_alloc"), _section(real, "profshim_heapprof")]
    bad, bad_cpu = [], 0
    cpu = prof.index("cpu")
    for s in prof.samples:
        for lid in s.location_ids:
            loc = prof.locations[lid]
            m = shim.get(loc.mapping)
            off = None if m is None else loc.address - m.start + m.offset
            if off is not None and not any(lo <= off < lo + size for lo, size in alloc):
                bad.append(s)
                bad_cpu += s.values[cpu]
                break
    check(not bad, "%d samples (%.3f s of %.3f s) go through the shim's own code (libprofshim.so outside "
          "profshim_alloc and profshim_heapprof), e.g.:\n%s\n%s" % (len(bad), bad_cpu / 1e9, prof.total("cpu") / 1e9, indent(
              "\n".join(_stack_text(prof, s) for s in bad[:3])), prof.cum_table("cpu")))
    work = prof.cum("cycle_work", "cpu")
    check(work >= 0.5 * 3000 * 100e3, "the plugin's cycle_work has %.3f s of the ~0.3 s it burned\n%s" % (
        work / 1e9, prof.cum_table("cpu")))


def _sample_labels(s):
    out = {}
    for line in s.labels:
        for k, v in re.findall(r"(\w+):\[([^\]]*)\]", line):
            out[k] = v
    return out


def _in_shim(prof, s):
    shim = {m.id for m in prof.mappings if os.path.basename(m.file) == "libprofshim.so"}
    return any(m in shim for m in s.frame_mappings)


_SAMPLING = ("prof_backtrace_impl", "je_prof_backtrace", "je_prof_tctx_create")


def test_the_shims_allocator_and_heap_sampling_are_labeled_in_the_cpu_profile(ctx):
    """With the heap profiled, jemalloc inside the shim serves the program's
    malloc, and a sampled allocation's stack is walked: both are the shim's,
    not the program's own work. heap_hold makes 786432 small allocations,
    every one of them sampled (PROFILE_HEAP_SAMPLE=64), at 1000 Hz: every CPU
    sample with a frame of the shim's is labeled profshim, those inside the
    sampled allocation's walk heap-profiling, and they have some CPU. Under
    PROFILE_HEAP_SAMPLE=0 the program's own allocator serves and no sample
    is labeled."""
    r, d = ctx.profile(["heap_hold", "return"], PROFILE_CPU_HZ=1000, PROFILE_HEAP_SAMPLE=64)
    prof = ctx.read(_cpu_file(d), r)
    i = prof.index("cpu")
    seen = {}
    for s in prof.samples:
        tag = _sample_labels(s).get("profshim")
        names = {f.name for loc in (prof.locations[l] for l in s.location_ids) for f in loc.frames}
        if _in_shim(prof, s):
            check(tag in ("allocator", "heap-profiling"),
                  "a sample in the shim's code is labeled profshim:[%s], want allocator or heap-profiling: %s"
                  % (tag, _stack_text(prof, s)))
        elif tag is not None:
            fail("a sample with no frame of the shim's is labeled profshim:[%s]: %s" % (tag, _stack_text(prof, s)))
        if names & set(_SAMPLING):
            check(tag == "heap-profiling", "a sample inside the walk of a sampled allocation is labeled "
                  "profshim:[%s], want heap-profiling: %s" % (tag, _stack_text(prof, s)))
        seen[tag] = seen.get(tag, 0) + s.values[i]
    check(seen.get("heap-profiling", 0) > 0 and seen.get("allocator", 0) > 0,
          "CPU by profshim label (nanoseconds): %s; want some under heap-profiling and allocator, every "
          "allocation being sampled\n%s" % (seen, r.describe()))

    r, d = ctx.profile(["heap_hold", "return"], PROFILE_CPU_HZ=1000, PROFILE_HEAP_SAMPLE=0)
    prof = ctx.read(_cpu_file(d), r)
    tagged = [s for s in prof.samples if "profshim" in _sample_labels(s)]
    check(not tagged, "the program's own allocator serves (PROFILE_HEAP_SAMPLE=0), yet %d samples are "
          "labeled profshim, e.g. %s" % (len(tagged), tagged and _stack_text(prof, tagged[0])))
