"""The files themselves: gzip'd profile.proto with the contract's sample
types, symbolized in the process (readable with no binary anywhere), and
mappings with path and build ID."""

import os
import re
import shutil
import subprocess

from common import CPU_TYPES, HEAP_TYPES, check, indent, is_libc, pprof_env


def _gzip_magic(path):
    with open(path, "rb") as f:
        head = f.read(2)
    check(head == b"\x1f\x8b", "%s is not gzip (starts %r)" % (path, head))


def test_cpu_file_format(ctx):
    r, d = ctx.profile(["cpu_split", "80"])
    path = os.path.join(d, "run.cpu.pprof")
    prof = ctx.read(path, r)
    _gzip_magic(path)
    check(prof.sample_types == CPU_TYPES, "CPU sample types %s, want %s" % (prof.sample_types, CPU_TYPES))
    check(prof.period_type == "cpu/nanoseconds", "CPU period type %r, want cpu/nanoseconds" % prof.period_type)
    samples, cpu = prof.total("samples"), prof.total("cpu")
    check(samples > 0, "no samples in ~0.5 s of CPU\n%s" % r.describe())
    per = cpu / samples
    check(0.9 * prof.period <= per <= 1.1 * prof.period,
          "cpu/nanoseconds per sample is %.0f but the period is %s" % (per, prof.period))


def test_heap_file_format(ctx):
    r, d = ctx.profile(["heap_hold"])
    path = os.path.join(d, "run.heap.pprof")
    prof = ctx.read(path, r)
    _gzip_magic(path)
    check(prof.sample_types == HEAP_TYPES, "heap sample types %s, want %s" % (prof.sample_types, HEAP_TYPES))
    check(prof.default_type == "inuse_space/bytes", "heap default sample type %r, want inuse_space" % prof.default_type)
    for s in prof.samples:
        a_obj, a_sp, i_obj, i_sp = s.values
        if not (0 <= i_obj <= a_obj and 0 <= i_sp <= a_sp):
            check(False, "a heap sample has inuse > alloc or negative values: %s at %s" % (
                s.values, [f.name for f in s.stack[:6]]))


def _run_moved_binary(ctx, prog, argv_tail=()):
    """Copies the workload into a temp dir, runs it from there, then deletes
    it: no binary with its build ID or path is left on this machine."""
    bindir = ctx.mkdtemp("bin")
    exe = os.path.join(bindir, prog)
    shutil.copy2(ctx.workload(prog), exe)
    r, d = ctx.profile([exe] + list(argv_tail))
    shutil.rmtree(bindir)
    return r, d


def _pprof_top_plain(ctx, path, sample_index=None):
    """`go tool pprof -top FILE` exactly as a user on another machine would
    run it (pprof may try to symbolize; nothing is there to find)."""
    work = ctx.mkdtemp("elsewhere")
    empty = ctx.mkdtemp("nobinaries")
    copy = os.path.join(work, os.path.basename(path))
    shutil.copyfile(path, copy)
    env = pprof_env(ctx.mkdtemp("home"))
    env["PPROF_BINARY_PATH"] = empty
    argv = [ctx.go, "tool", "pprof", "-top", "-nodecount=40"]
    if sample_index:
        argv.append("-sample_index=" + sample_index)
    p = subprocess.run(argv + [copy], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    check(p.returncode == 0, "go tool pprof -top %s failed:\n%s" % (path, indent(p.stderr.decode(errors="replace"))))
    return p.stdout.decode(errors="replace")


def test_symbols_readable_without_binaries(ctx):
    check(ctx.go, "go not found")
    r, d = _run_moved_binary(ctx, "cpu_split", ["100"])
    top = _pprof_top_plain(ctx, os.path.join(d, "run.cpu.pprof"))
    for fn in ("hot_a", "hot_b", "main"):
        check(re.search(r"\s%s\b" % fn, top), "`go tool pprof -top` with no binary around does not show %s:\n%s" % (
            fn, indent(top)))
    r, d = _run_moved_binary(ctx, "atexit_static")
    top = _pprof_top_plain(ctx, os.path.join(d, "run.heap.pprof"), "inuse_space")
    check("wl::hold_for_static_dtor" in top, "heap -top does not show the demangled C++ name "
          "wl::hold_for_static_dtor:\n%s" % indent(top))
    check("_ZN" not in top, "mangled C++ names in the heap profile:\n%s" % indent(top))


def _build_id(path):
    p = subprocess.run(["readelf", "-n", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    m = re.search(r"Build ID:\s*([0-9a-f]+)", p.stdout.decode())
    return m.group(1) if m else None


def test_mappings_have_path_and_build_id(ctx):
    exe = ctx.workload("cpu_split")
    r, d = ctx.profile([exe, "60"])
    prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    maps = "\n".join("%d: %#x-%#x off %#x %s %s %s" % (m.id, m.start, m.limit, m.offset, m.file, m.build_id, m.bits)
                     for m in prof.mappings)
    mine = [m for m in prof.mappings if os.path.realpath(m.file) == os.path.realpath(exe)]
    check(mine, "no mapping for the executable %s:\n%s" % (exe, indent(maps)))
    bid = _build_id(exe)
    check(bid, "cannot read the build ID of %s" % exe)
    check(any(m.build_id == bid for m in mine), "the executable's mapping lacks build ID %s:\n%s" % (bid, indent(maps)))
    check(any("[FN]" in m.bits for m in mine), "the executable's mapping does not say it has functions "
          "([FN]):\n%s" % indent(maps))
    check(prof.mappings[0] in mine, "the main executable should be the first mapping:\n%s" % indent(maps))
    hot = [loc for loc in prof.locations.values() if any(f.name == "hot_a" for f in loc.frames)]
    check(hot and all(loc.mapping in [m.id for m in mine] for loc in hot),
          "hot_a's locations are not attached to the executable's mapping")
    libc = [m for m in prof.mappings if is_libc(m.file)]
    check(libc and all(m.build_id for m in libc), "libc's mapping is missing or has no build ID:\n%s" % indent(maps))


# What a heap stack may start with inside the shim: the allocation call the
# program made (jemalloc serves it), nothing of the profiling machinery.
ALLOC_ENTRY_POINTS = {
    "malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc", "memalign",
    "valloc", "pvalloc", "strdup", "strndup", "__libc_malloc", "__libc_calloc", "__libc_realloc",
    "__libc_memalign", "__libc_valloc", "__libc_pvalloc",
}


def _is_entry_point(name):
    return name in ALLOC_ENTRY_POINTS or name.startswith("operator new")


def _env_with_lib(ctx, d, lib, **vars):
    env = ctx.env(PROFILE_DIR=d, PROFILE_NAME="run", **vars)
    if lib:
        env["LD_PRELOAD"] = lib
    return env


def _heap_stack_problems(ctx, lib=None):
    d = ctx.mkdtemp("prof")
    r = ctx.run(["heap_hold"], env=_env_with_lib(ctx, d, lib, PROFILE_HEAP_SAMPLE=32768))
    check(r.rc == 0, "heap_hold failed under the shim\n%s" % r.describe())
    path = os.path.join(d, "run.heap.pprof")
    prof = ctx.read(path, r)
    shim = prof.mapping_ids("libprofshim.so")
    bad = []
    for s in prof.samples:
        inside = [f.name for f, m in zip(s.stack, s.frame_mappings) if m in shim]
        lead = []
        for f, m in zip(s.stack, s.frame_mappings):
            if m not in shim:
                break
            lead.append(f.name)
        if len(inside) > 1 or any(not _is_entry_point(n) for n in inside) or len(lead) != len(inside):
            bad.append(" <- ".join(f.name for f in s.stack[:10]))
    if bad:
        return "%d of %d heap samples have shim-internal frames (want at most the allocation call, e.g. " \
               "malloc, as the leaf):\n%s\n%s" % (len(bad), len(prof.samples), indent("\n".join(bad[:8])),
                                                  indent(ctx.top(path, "inuse_space")))
    return None


def _cpu_stack_problems(ctx, lib=None):
    d = ctx.mkdtemp("prof")
    r = ctx.run(["cpu_split", "120"], env=_env_with_lib(ctx, d, lib))
    check(r.rc == 0, "cpu_split failed under the shim\n%s" % r.describe())
    path = os.path.join(d, "run.cpu.pprof")
    prof = ctx.read(path, r)
    shim = prof.mapping_ids("libprofshim.so")
    i = prof.index("samples")
    total = prof.total("samples")
    bad = [s for s in prof.samples if any(m in shim for m in s.frame_mappings)
           or any(f.name in ("__restore_rt", "__GI___restore_rt") for f in s.stack)]
    n = sum(s.values[i] for s in bad)
    if n > 0.02 * total:
        return "%d of %d CPU samples have frames of the shim or the signal trampoline:\n%s" % (
            n, total, indent("\n".join(" <- ".join(f.name for f in s.stack[:10]) for s in bad[:8])))
    return None


def test_heap_stacks_start_at_the_allocation_call(ctx):
    """Each heap sample's stack starts at the program's allocation call
    (malloc & co, at most one frame inside the shim): the shim's profiling
    machinery (jemalloc's prof_backtrace, tctx creation, internal malloc
    paths) must not be in the stacks, or `pprof -top` puts all the flat
    bytes on a profiler function."""
    problem = _heap_stack_problems(ctx)
    check(problem is None, problem)


def test_cpu_stacks_have_no_profiler_frames(ctx):
    """CPU stacks start at the interrupted code: no signal handler,
    unwinder or sampler frames from the shim."""
    problem = _cpu_stack_problems(ctx)
    check(problem is None, problem)


def test_stacks_clean_when_preloaded_by_other_paths(ctx):
    """The same when LD_PRELOAD names the shim by a symlink (as an install
    may) or by a path with '..' (as scripts/profshim does from the build
    tree): the shim must recognize its own mapping by what is mapped, not by
    the spelling of the path."""
    link = os.path.join(ctx.mkdtemp("lib"), "libprofshim.so")
    os.symlink(ctx.lib, link)
    dotdot = os.path.join(ctx.build, "..", os.path.basename(ctx.build), "libprofshim.so")
    problems = []
    for lib in (link, dotdot):
        for fn in (_heap_stack_problems, _cpu_stack_problems):
            problem = fn(ctx, lib)
            if problem:
                problems.append("LD_PRELOAD=%s:\n%s" % (lib, indent(problem)))
    check(not problems, "\n".join(problems))
