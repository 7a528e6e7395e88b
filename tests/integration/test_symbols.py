"""Self-contained symbolization: exact source lines, inlined frames, code gone
by the stop (dlclose), stripped binaries, libc's separate debug file,
generated code. Every profile is read from a copy in an empty directory with
PPROF_BINARY_PATH pointing nowhere (common.PprofReader), so every name and
line checked here comes from the file the shim wrote.
"""

import os
import platform
import re
import shutil
import subprocess

from common import check, fail, indent, is_libc

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(os.path.dirname(HERE), "workloads")

_TOP_ROW = re.compile(r"^\s*(\d+)\s+\S+%\s+\S+%\s+(\d+)\s+\S+%\s+(.*)$")


def _cpu_file(d, name="run"):
    return os.path.join(d, "%s.cpu.pprof" % name)


def _heap_file(d, name="run"):
    return os.path.join(d, "%s.heap.pprof" % name)


def _marker_line(source, marker):
    """The number of the one line of code in source whose trailing comment
    is marker (header comments that merely mention it do not count)."""
    hits = [i for i, l in enumerate(open(source).read().split("\n"), 1)
            if re.search(r"\S.*//\s*%s\s*$" % re.escape(marker), l) and not l.lstrip().startswith("//")]
    check(len(hits) == 1, "marker %s should end exactly one line of code in %s, found %s" % (marker, source, hits))
    return hits[0]


def _sh(argv, what):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        fail("%s failed (status %d): %s\n%s" % (what, p.returncode, " ".join(argv),
                                                indent(p.stderr.decode("utf-8", "replace"))))
    return p.stdout.decode("utf-8", "replace")


def _cc(ctx, source, out, flags):
    cc = shutil.which("gcc") or shutil.which("cc")
    check(cc, "no C compiler (gcc) to build %s" % source)
    _sh([cc] + flags + ["-o", out, source], "compiling %s" % os.path.basename(source))
    return out


def _build_id(path):
    m = re.search(r"Build ID: ([0-9a-f]+)", _sh(["readelf", "-n", path], "readelf -n"))
    check(m, "%s has no build ID" % path)
    return m.group(1)


def _lines_top(ctx, path):
    """`go tool pprof -lines -top` by sample count: [(flat, cum, name, file,
    line, inline)] and the text itself. pprof marks "(inline)" a line that
    is an inlined call inside its location."""
    text = ctx.pprof.run(path, ["-lines", "-top", "-nodecount=40", "-sample_index=samples"])
    rows = []
    for l in text.split("\n"):
        m = _TOP_ROW.match(l)
        if not m:
            continue
        rest = m.group(3).strip()
        inline = rest.endswith(" (inline)")
        if inline:
            rest = rest[:-len(" (inline)")]
        name, _, where = rest.rpartition(" ")
        file, _, line = where.rpartition(":")
        if not name or not line.isdigit():
            name, file, line = rest, "", "0"
        rows.append((int(m.group(1)), int(m.group(2)), name, file, int(line), inline))
    return rows, text


def _locations_text(prof, pred, limit=12):
    out = []
    for loc in sorted(prof.locations.values(), key=lambda l: l.id):
        if pred(loc):
            out.append("%d: %#x M=%s %s" % (loc.id, loc.address, loc.mapping, loc.frames))
    return "\n".join(out[:limit]) or "(none)"


def _mappings_text(prof):
    return "\n".join("%d: %#x-%#x off %#x %r %s %s" % (m.id, m.start, m.limit, m.offset, m.file, m.build_id,
                                                      m.bits) for m in prof.mappings)


def _leaf_samples(prof, pred):
    """Samples (by count) whose leaf location satisfies pred."""
    i = prof.index("samples")
    return sum(s.values[i] for s in prof.samples if s.location_ids and pred(prof.locations[s.location_ids[0]]))


def _stdout_field(result, regex):
    m = re.search(regex, result.stdout_text, re.M)
    check(m, "the workload did not print %r:\n%s" % (regex, result.describe()))
    return m


# --------------------------------------------------------------------------
# Source lines and inlined frames


def test_hot_loop_has_its_exact_source_line(ctx):
    """-lines names sym_lines.c at the very line of the hot loop (marked
    SYM_HOT_LOOP), for nearly all of sym_hot's samples."""
    src = os.path.join(WORKLOADS, "sym_lines.c")
    want = _marker_line(src, "SYM_HOT_LOOP")
    r, d = ctx.profile(["sym_lines", "0.6"])
    rows, text = _lines_top(ctx, _cpu_file(d))
    hot = [row for row in rows if row[2].startswith("sym_hot")]
    total = sum(row[0] for row in hot)
    check(total >= 30, "sym_hot has %d flat samples for ~0.6 s at 100 Hz\n%s" % (total, indent(text)))
    at = sum(row[0] for row in hot if row[3].endswith("sym_lines.c") and row[4] == want)
    check(at >= 0.9 * total,
          "only %d of sym_hot's %d samples are at sym_lines.c:%d, the line of its loop; "
          "go tool pprof -lines shows:\n%s" % (at, total, want, indent(text)))


def _check_inlined(ctx, argv, what):
    src = os.path.join(WORKLOADS, "sym_inline.c")
    body = _marker_line(src, "SYM_INLINE_BODY")
    call = _marker_line(src, "SYM_INLINE_CALL")
    r, d = ctx.profile(argv)
    prof = ctx.read(_cpu_file(d), r)
    rows, text = _lines_top(ctx, _cpu_file(d))
    n = prof.cum("sym_outer", "samples")
    check(n >= 30, "%s: sym_outer has %d samples for ~0.6 s at 100 Hz\n%s" % (what, n, indent(text)))

    def inlined(loc):
        f = loc.frames
        return (len(f) >= 2 and f[0].name.startswith("sym_mix") and f[0].file.endswith("sym_inline.c")
                and f[0].line == body and f[1].name.startswith("sym_outer")
                and f[1].file.endswith("sym_inline.c") and f[1].line == call)

    got = _leaf_samples(prof, inlined)
    check(got >= 0.8 * n,
          "%s: sym_mix (always inlined into sym_outer) should be a frame of its own at sym_inline.c:%d "
          "above sym_outer at the call, sym_inline.c:%d, in one location, for most of sym_outer's %d "
          "samples; %d are. Locations:\n%s\ngo tool pprof -lines:\n%s" % (
              what, body, call, n, got,
              indent(_locations_text(prof, lambda l: any(f.name.startswith("sym_") for f in l.frames))),
              indent(text)))
    flat = sum(row[0] for row in rows if row[2].startswith("sym_mix") and row[4] == body and row[5])
    check(flat >= 0.8 * n, "%s: go tool pprof -lines gives sym_mix sym_inline.c:%d (inline) only %d of %d "
          "samples:\n%s" % (what, body, flat, n, indent(text)))
    cum = sum(row[1] for row in rows if row[2].startswith("sym_outer") and row[4] == call)
    check(cum >= 0.8 * n, "%s: go tool pprof -lines gives sym_outer at the call, sym_inline.c:%d, only %d of %d "
          "samples:\n%s" % (what, call, cum, n, indent(text)))


def test_always_inline_is_its_own_frame_O1(ctx):
    """The Makefile's build (-O1 -fno-inline, which always_inline overrides)."""
    _check_inlined(ctx, ["sym_inline", "0.6"], "-O1 -fno-inline build")


def test_always_inline_is_its_own_frame_O2(ctx):
    """The same source built -O2 here."""
    exe = _cc(ctx, os.path.join(WORKLOADS, "sym_inline.c"), os.path.join(ctx.tmp, "sym_inline_O2"),
              ["-O2", "-g", "-fno-omit-frame-pointer"])
    _check_inlined(ctx, [exe, "0.6"], "-O2 build")


# --------------------------------------------------------------------------
# Code gone by the stop


def _plugin(ctx, name="sym_plugin.so"):
    src = os.path.join(WORKLOADS, "plugins", "sym_plugin.c")
    so = _cc(ctx, src, os.path.join(ctx.mkdtemp("plugin"), name),
             ["-shared", "-fPIC", "-g", "-O1", "-fno-inline", "-fno-omit-frame-pointer", "-Wl,--build-id"])
    return src, so, _build_id(so)


def _text_ranges(r):
    ranges = [(int(a, 16), int(b, 16)) for a, b in re.findall(r"^plugin spin=\S+ text=(0x[0-9a-f]+)-(0x[0-9a-f]+)$",
                                                               r.stdout_text, re.M)]
    check(ranges, "the workload printed no plugin text range:\n%s" % r.describe())
    return ranges


def _in_ranges(a, ranges):
    return any(lo <= a < hi for lo, hi in ranges)


def test_dlclosed_plugin_is_named(ctx):
    """A plugin dlopen()ed, sampled ~0.5 s, dlclose()d (really unloaded) and
    deleted before the program goes on and exits: its function, file and
    line, and its mapping with path and build ID, are in the CPU profile."""
    src, so, build_id = _plugin(ctx)
    line = _marker_line(src, "SYM_PLUGIN_LOOP")
    r, d = ctx.profile(["sym_dlclose", so, "seconds=0.5", "unlink"])
    check("unloaded=1" in r.stdout_text, "the plugin was not unloaded by dlclose:\n%s" % r.describe())
    check(not os.path.exists(so), "the workload did not delete %s" % so)
    ranges = _text_ranges(r)
    prof = ctx.read(_cpu_file(d), r)
    rows, text = _lines_top(ctx, _cpu_file(d))
    in_plugin = _leaf_samples(prof, lambda l: _in_ranges(l.address, ranges))
    check(in_plugin >= 25, "only %d samples have their leaf in the plugin's code (~0.5 s at 100 Hz)\n%s" % (
        in_plugin, indent(text)))
    named = _leaf_samples(prof, lambda l: _in_ranges(l.address, ranges) and l.frames
                          and l.frames[0].name == "sym_plugin_spin"
                          and l.frames[0].file.endswith("sym_plugin.c") and l.frames[0].line == line)
    check(named >= 0.9 * in_plugin,
          "of %d samples in the unloaded plugin, only %d are named sym_plugin_spin at sym_plugin.c:%d; "
          "plugin locations:\n%s\ngo tool pprof -lines:\n%s" % (
              in_plugin, named, line, indent(_locations_text(prof, lambda l: _in_ranges(l.address, ranges))),
              indent(text)))
    check(any(row[2] == "sym_plugin_spin" and row[3].endswith("sym_plugin.c") and row[4] == line
              for row in rows), "go tool pprof -lines does not show sym_plugin_spin sym_plugin.c:%d:\n%s" % (
                  line, indent(text)))
    check(prof.cum("sym_plugin_burn", "samples") >= 0.9 * in_plugin,
          "the plugin's caller frame sym_plugin_burn is missing:\n%s" % prof.cum_table("samples"))
    check(prof.cum("main_after_unload", "samples") >= 25,
          "the work after the dlclose is not in the profile:\n%s" % prof.cum_table("samples"))
    mine = [m for m in prof.mappings if m.file == so]
    check(len(mine) == 1 and mine[0].build_id == build_id,
          "want one mapping of %s with build ID %s; mappings:\n%s" % (so, build_id, indent(_mappings_text(prof))))
    plugin_locs = [l for l in prof.locations.values() if _in_ranges(l.address, ranges)]
    check(all(l.mapping == mine[0].id for l in plugin_locs),
          "plugin locations should all carry the plugin's mapping %d:\n%s" % (
              mine[0].id, indent(_locations_text(prof, lambda l: _in_ranges(l.address, ranges)))))
    check(mine[0].start <= min(lo for lo, _ in ranges) and max(hi for _, hi in ranges) <= mine[0].limit,
          "the plugin's mapping %#x-%#x does not cover its code %s" % (mine[0].start, mine[0].limit, ranges))


def test_dlclosed_plugin_heap_frames_keep_its_mapping(ctx):
    """Memory the unloaded plugin allocated and the program kept: its heap
    samples' frames in the plugin carry the plugin's mapping (path, build
    ID), and a name only if it is the plugin's own (heap addresses are not
    symbolized at the dlclose: unload.h says why)."""
    src, so, build_id = _plugin(ctx)
    r, d = ctx.profile(["sym_dlclose", so, "seconds=0.2", "alloc"])
    check("unloaded=1" in r.stdout_text, "the plugin was not unloaded by dlclose:\n%s" % r.describe())
    ranges = _text_ranges(r)
    prof = ctx.read(_heap_file(d), r)
    mine = [m for m in prof.mappings if m.file == so]
    check(len(mine) == 1 and mine[0].build_id == build_id,
          "the heap profile should have one mapping of %s with build ID %s; mappings:\n%s" % (
              so, build_id, indent(_mappings_text(prof))))
    i = prof.index("inuse_space")
    through = 0
    for s in prof.samples:
        locs = [prof.locations[x] for x in s.location_ids]
        if any(_in_ranges(l.address, ranges) for l in locs):
            through += s.values[i]
    check(through >= 16 << 20, "only %d bytes in use are from stacks through the plugin's code (64 MiB kept)\n%s"
          % (through, prof.cum_table("inuse_space")))
    bad = [l for l in prof.locations.values() if _in_ranges(l.address, ranges)
           and (l.mapping != mine[0].id or any(not f.name.startswith("sym_plugin_") for f in l.frames))]
    check(not bad, "locations in the plugin's code with another mapping or a wrong name:\n%s" % indent(
        "\n".join("%#x M=%s %s" % (l.address, l.mapping, l.frames) for l in bad)))


def test_dlclosed_plugin_reloaded_and_kept(ctx):
    """Loaded and unloaded three times, or dlclose()d while another handle
    keeps it: named each time, its mapping in the profile once, and the
    profile valid (no overlapping mappings)."""
    src, so, build_id = _plugin(ctx)
    for args, unloaded in ((["cycles=3"], "unloaded=1"), (["keep"], "unloaded=0")):
        r, d = ctx.profile(["sym_dlclose", so, "seconds=0.6"] + args)
        check(unloaded in r.stdout_text, "%s: want %s:\n%s" % (args, unloaded, r.describe()))
        ranges = _text_ranges(r)
        prof = ctx.read(_cpu_file(d), r)
        ctx.pprof.run(_cpu_file(d), ["-top"])  # pprof accepts it
        in_plugin = _leaf_samples(prof, lambda l: _in_ranges(l.address, ranges))
        named = _leaf_samples(prof, lambda l: _in_ranges(l.address, ranges) and l.frames
                              and l.frames[0].name == "sym_plugin_spin")
        check(in_plugin >= 25 and named >= 0.9 * in_plugin,
              "%s: %d samples in the plugin, %d named sym_plugin_spin:\n%s" % (
                  args, in_plugin, named, indent(_locations_text(prof, lambda l: _in_ranges(l.address, ranges)))))
        mine = [m for m in prof.mappings if m.file == so and m.build_id == build_id]
        addrs = set((m.start, m.limit) for m in mine)
        check(len(mine) == len(addrs) and all(_in_ranges(l.address, [(m.start, m.limit) for m in mine])
                                              for l in prof.locations.values() if l.mapping in
                                              set(m.id for m in mine)),
              "%s: mappings of the plugin:\n%s" % (args, indent(_mappings_text(prof))))


def test_dlclose_on_a_thread_with_a_small_stack(ctx):
    """dlclose from a thread with a 64 KiB stack (legal, and common in
    servers): the shim's hook must neither overflow it nor lose the names
    (reading a line table with libdw takes ~150 KiB of stack)."""
    src, so, build_id = _plugin(ctx)
    r, d = ctx.profile(["sym_dlclose", so, "seconds=0.4", "stack=65536"])
    check("unloaded=1" in r.stdout_text, "the plugin was not unloaded by dlclose:\n%s" % r.describe())
    ranges = _text_ranges(r)
    prof = ctx.read(_cpu_file(d), r)
    in_plugin = _leaf_samples(prof, lambda l: _in_ranges(l.address, ranges))
    named = _leaf_samples(prof, lambda l: _in_ranges(l.address, ranges) and l.frames
                          and l.frames[0].name == "sym_plugin_spin")
    check(in_plugin >= 20 and named >= 0.9 * in_plugin, "%d samples in the plugin, %d named sym_plugin_spin:\n%s" % (
        in_plugin, named, indent(_locations_text(prof, lambda l: _in_ranges(l.address, ranges)))))


def _x86_64():
    return platform.machine() in ("x86_64", "AMD64")


def test_generated_code_over_unloaded_plugin_is_not_named(ctx):
    """After the plugin is unloaded, the program maps anonymous executable
    memory over its old code and runs generated code there: those samples
    show the anonymous mapping and no name (not the plugin's), and the
    plugin's own samples keep the plugin's name."""
    check(_x86_64(), "this test runs x86-64 machine code; machine is %s" % platform.machine())
    src, so, build_id = _plugin(ctx)
    r, d = ctx.profile(["sym_dlclose", so, "seconds=0.4", "jit-over"])
    check("unloaded=1" in r.stdout_text, "the plugin was not unloaded by dlclose:\n%s" % r.describe())
    ranges = _text_ranges(r)
    m = _stdout_field(r, r"^jit=(0x[0-9a-f]+)-(0x[0-9a-f]+)$")
    jit = (int(m.group(1), 16), int(m.group(2), 16))
    prof = ctx.read(_cpu_file(d), r)
    in_jit = [l for l in prof.locations.values() if jit[0] <= l.address < jit[1]]
    n_jit = _leaf_samples(prof, lambda l: jit[0] <= l.address < jit[1])
    check(n_jit >= 20, "only %d samples in the generated code (~0.4 s at 100 Hz)\n%s" % (
        n_jit, prof.cum_table("samples")))
    anon = {mm.id for mm in prof.mappings if mm.file == "" and mm.start <= jit[0] and jit[1] <= mm.limit}
    bad = [l for l in in_jit if l.frames or l.mapping not in anon]
    check(not bad, "generated code must have its anonymous mapping and no name; got:\n%s\nmappings:\n%s" % (
        indent("\n".join("%#x M=%s %s" % (l.address, l.mapping, l.frames) for l in bad)),
        indent(_mappings_text(prof))))
    named = _leaf_samples(prof, lambda l: _in_ranges(l.address, ranges) and not (jit[0] <= l.address < jit[1])
                          and l.frames and l.frames[0].name == "sym_plugin_spin")
    check(named >= 20, "the unloaded plugin's samples lost their name (%d named)\n%s" % (
        named, indent(_locations_text(prof, lambda l: _in_ranges(l.address, ranges)))))


def test_generated_code_has_mapping_and_no_name(ctx):
    """Generated code in anonymous executable memory: its address and its
    mapping, never a function name."""
    check(_x86_64(), "this test runs x86-64 machine code; machine is %s" % platform.machine())
    r, d = ctx.profile(["sym_jit", "0.5"])
    m = _stdout_field(r, r"^jit=(0x[0-9a-f]+)-(0x[0-9a-f]+)$")
    jit = (int(m.group(1), 16), int(m.group(2), 16))
    prof = ctx.read(_cpu_file(d), r)
    n = _leaf_samples(prof, lambda l: jit[0] <= l.address < jit[1])
    check(n >= 25, "only %d samples in the generated code (~0.5 s at 100 Hz)\n%s" % (n, prof.cum_table("samples")))
    anon = {mm.id for mm in prof.mappings if mm.file == "" and mm.start <= jit[0] and jit[1] <= mm.limit}
    check(anon, "no anonymous mapping covers the generated code %#x-%#x:\n%s" % (
        jit[0], jit[1], indent(_mappings_text(prof))))
    bad = [l for l in prof.locations.values() if jit[0] <= l.address < jit[1] and (l.frames or l.mapping not in anon)]
    check(not bad, "generated code must have its anonymous mapping and no name; got:\n%s" % indent(
        "\n".join("%#x M=%s %s" % (l.address, l.mapping, l.frames) for l in bad)))
    check(prof.cum("main", "samples") >= n, "its caller main is not named above it:\n%s" % prof.cum_table("samples"))


# --------------------------------------------------------------------------
# Stripped binaries


def _symbol(nm_text, name):
    for l in nm_text.split("\n"):
        parts = l.split()
        if len(parts) == 4 and parts[3] == name:
            return int(parts[0], 16), int(parts[1], 16)
    fail("nm does not list %s:\n%s" % (name, indent(nm_text[-2000:])))


def _file_to_vaddr(readelf_l):
    """[(offset, vaddr, filesz)] of the PT_LOAD segments."""
    segs = []
    for l in readelf_l.split("\n"):
        parts = l.split()
        if parts and parts[0] == "LOAD":
            segs.append((int(parts[1], 16), int(parts[2], 16), int(parts[4], 16)))
    return segs


def test_stripped_binary_dynsym_names_and_no_wrong_names(ctx):
    """A stripped executable (exported functions in .dynsym): the exported
    hot function is named; the static one right after it is an address with
    the executable's mapping and no name, never its neighbour's."""
    full = _cc(ctx, os.path.join(WORKLOADS, "sym_stripped.c"), os.path.join(ctx.tmp, "sym_stripped.full"),
               ["-O1", "-g", "-fno-omit-frame-pointer", "-fno-inline", "-fno-toplevel-reorder", "-rdynamic"])
    exe = os.path.join(ctx.tmp, "sym_stripped")
    shutil.copyfile(full, exe)
    os.chmod(exe, 0o755)
    _sh(["strip", "--strip-all", exe], "strip")
    nm_full = _sh(["nm", "-S", "--defined-only", full], "nm")
    exported = _symbol(nm_full, "sym_exported_hot")
    static = _symbol(nm_full, "sym_static_hot")
    dynsym = _sh(["nm", "-D", "--defined-only", exe], "nm -D")
    check("sym_exported_hot" in dynsym and "sym_static_hot" not in dynsym,
          "the stripped binary's .dynsym should hold sym_exported_hot and not sym_static_hot:\n%s" % dynsym)
    segs = _file_to_vaddr(_sh(["readelf", "-lW", exe], "readelf -l"))

    r, d = ctx.profile([exe, "0.4"])
    prof = ctx.read(_cpu_file(d), r)
    mine = {m.id: m for m in prof.mappings if m.file == os.path.realpath(exe)}
    check(mine, "no mapping of %s:\n%s" % (exe, indent(_mappings_text(prof))))

    def vaddr(loc):
        m = mine.get(loc.mapping)
        if m is None:
            return None
        off = loc.address - m.start + m.offset
        for o, v, sz in segs:
            if o <= off < o + sz:
                return off - o + v
        return None

    def within(loc, sym):
        v = vaddr(loc)
        return v is not None and sym[0] <= v < sym[0] + sym[1]

    n_static = _leaf_samples(prof, lambda l: within(l, static))
    n_exported = _leaf_samples(prof, lambda l: within(l, exported))
    check(n_static >= 20 and n_exported >= 20,
          "want ~40 samples each in sym_exported_hot and sym_static_hot (by address in the executable's "
          "mapping); got %d and %d. Locations:\n%s\nmappings:\n%s" % (
              n_exported, n_static, indent(_locations_text(prof, lambda l: True, 30)), indent(_mappings_text(prof))))
    wrong = [l for l in prof.locations.values() if within(l, static) and l.frames]
    check(not wrong, "sym_static_hot is not in .dynsym, so its addresses must have no name; got:\n%s" % indent(
        "\n".join("%#x %s" % (l.address, l.frames) for l in wrong)))
    unnamed = [l for l in prof.locations.values() if within(l, exported)
               and not (l.frames and l.frames[0].name == "sym_exported_hot")]
    check(not unnamed, "sym_exported_hot is in .dynsym, so its addresses must be named so; got:\n%s" % indent(
        "\n".join("%#x %s" % (l.address, l.frames) for l in unnamed)))
    check(prof.has_function("main"), "main (exported with -rdynamic) is not named:\n%s" % prof.cum_table("samples"))
    stripped = [m for m in mine.values() if m.build_id != _build_id(exe)]
    check(not stripped, "the executable's mapping lacks its build ID:\n%s" % indent(_mappings_text(prof)))


# --------------------------------------------------------------------------
# libc, with Debian's libc6-dbg


def test_libc_frames_have_file_and_line(ctx):
    """Time spent inside libc's qsort has glibc's file and line, from the
    separate debug file found by build ID (Debian's libc6-dbg)."""
    r, d = ctx.profile(["sym_libc", "0.6"])
    prof = ctx.read(_cpu_file(d), r)
    libc = [m for m in prof.mappings if is_libc(m.file)]
    check(libc, "no libc mapping in the profile:\n%s" % indent(_mappings_text(prof)))
    bid = libc[0].build_id
    debug = "/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])
    check(os.path.isfile(debug), "libc's debug file %s is missing: install Debian's libc6-dbg "
          "(scripts/install-deps does)" % debug)
    ids = {m.id for m in libc}
    in_libc = _leaf_samples(prof, lambda l: l.mapping in ids)
    check(in_libc >= 20, "only %d samples have their leaf in libc (qsort for ~0.6 s)\n%s" % (
        in_libc, prof.cum_table("samples")))
    with_line = _leaf_samples(prof, lambda l: l.mapping in ids and l.frames and l.frames[0].file
                              and l.frames[0].line > 0)
    text = ctx.pprof.run(_cpu_file(d), ["-lines", "-top", "-nodecount=15"])
    check(with_line >= 0.8 * in_libc, "only %d of %d samples in libc have a file and line:\n%s" % (
        with_line, in_libc, indent(text)))
    sorts = [f for l in prof.locations.values() if l.mapping in ids for f in l.frames
             if ("msort" in f.name or "qsort" in f.name) and re.search(r"(msort|qsort)\.c$", f.file) and f.line > 0]
    check(sorts, "no libc frame of qsort's implementation (msort.c / qsort.c) with a line:\n%s" % indent(text))
