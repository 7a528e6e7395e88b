"""The symbol cache the images of a session share (docs/DESIGN.md, "The
symbol cache"), through whole programs: an image that names its addresses
from entries another image wrote gives exactly the frames a fresh lookup
gives, although ASLR put its modules elsewhere; damaged entries are not
used; images writing the same entries at once leave them whole.
(tests/unit/symbolize_cache_test.cc checks the format, staleness and the
directory's ownership in detail.)
"""

import os
import re
import subprocess

from common import SYMBOL_CACHE, check, indent, is_libc

CACHE_RE = re.compile(r"\| (\d+) of (\d+) addresses from the symbol cache")


def _cache_counts(r):
    """(cached, addresses) summed over the run's summary lines."""
    k = a = 0
    for line in r.summary_lines():
        m = CACHE_RE.search(line)
        if m:
            k, a = k + int(m.group(1)), a + int(m.group(2))
    return k, a


def _frames_by_offset(prof):
    """{(module file, address as an offset in it): ((name, file, line), ...)}
    of every location in a mapped file: the same code gets the same key in
    every image, wherever the loader put it."""
    maps = {m.id: m for m in prof.mappings}
    out = {}
    for loc in prof.locations.values():
        m = maps.get(loc.mapping)
        if not m or not m.file or loc.address < m.start:
            continue
        out[(os.path.basename(m.file), loc.address - m.start + m.offset)] = tuple(
            (f.name, f.file, f.line) for f in loc.frames)
    return out


class Image:
    """One profiled run: its result, and the frames of every address of its
    two profiles by module and offset."""

    def __init__(self, ctx, d, argv):
        self.r, _ = ctx.profile(argv, dir=d, PROFILE_CPU_HZ="1000")
        check(not self.r.error_lines(), "error line:\n%s" % self.r.describe())
        self.frames = {}
        for kind in ("cpu", "heap"):
            path = os.path.join(d, "run.%s.pprof" % kind)
            self.frames.update(_frames_by_offset(ctx.read(path, self.r)))
            os.unlink(path)
        self.cached, self.addresses = _cache_counts(self.r)

    def check_reused(self, what, earlier):
        """Every address an earlier image of this PROFILE_DIR had named came
        from the cache (sampled addresses differ between runs: the others
        are looked up, and added)."""
        known = len(set(self.frames) & set(earlier.frames))
        check(known >= 5 and self.cached >= known,
              "%s: %d of %d addresses from the cache, %d of them named by an earlier image\n%s" % (
                  what, self.cached, self.addresses, known, self.r.describe()))


def _same_frames(what, fresh, reused, want_line_in=None, want_inline=False):
    a, b = fresh.frames, reused.frames
    common = sorted(set(a) & set(b))
    check(len(common) >= 5, "%s: only %d addresses in both profiles to compare" % (what, len(common)))
    differ = [(k, a[k], b[k]) for k in common if a[k] != b[k]]
    check(not differ, "%s: %d of %d addresses have other frames when named from the cache:\n%s" % (
        what, len(differ), len(common), indent("\n".join("%s+%#x\n  fresh:  %s\n  cached: %s" % (
            k[0], k[1], f, c) for k, f, c in differ[:8]))))
    # What was compared is what a cache could get wrong.
    if want_line_in:
        named = is_libc if want_line_in == "libc.so" else (lambda f: f.startswith(want_line_in))
        check(any(named(k[0]) and a[k] and a[k][0][2] > 0 for k in common),
              "%s: no compared address in %s has a file and line" % (what, want_line_in))
    if want_inline:
        check(any(len(a[k]) >= 2 for k in common), "%s: no compared address has inlined frames" % what)


def test_reused_symbols_equal_fresh_ones_across_images(ctx):
    """A second image of the same program, its modules placed elsewhere by
    ASLR, names from the first one's entries every address the first had,
    and each has the frames a fresh lookup in a third, empty PROFILE_DIR
    gives: libc's file:line from libc6-dbg, and an always-inlined
    function's frame."""
    for argv, lib, inline in ((["sym_libc", "0.6"], "libc.so", False), (["sym_inline", "0.6"], None, True)):
        shared, alone = ctx.mkdtemp("shared"), ctx.mkdtemp("alone")
        first = Image(ctx, shared, argv)
        check(first.addresses > 0 and first.cached == 0, "%s: the first image should look every address up: "
              "%d of %d cached\n%s" % (argv[0], first.cached, first.addresses, first.r.describe()))
        check(os.listdir(os.path.join(shared, SYMBOL_CACHE)), "%s: no cache entry written" % argv[0])
        second = Image(ctx, shared, argv)
        second.check_reused(argv[0], first)
        fresh = Image(ctx, alone, argv)
        check(fresh.cached == 0, "%s: an empty PROFILE_DIR has no cache to read\n%s" % (argv[0], fresh.r.describe()))
        _same_frames(argv[0], fresh, second, want_line_in=lib, want_inline=inline)


def test_kept_symbol_tables_name_as_libdw_does(ctx):
    """With the entries gone and the modules' kept symbol tables there
    (BUILDID.tab), an image names its addresses in a library without DWARF
    (zlib: Debian ships no debug file for it) and in the interpreter from the
    tables, and every frame is a fresh lookup's."""
    py = "/usr/bin/python3"
    if not os.path.exists(py):
        return
    argv = [py, "-c", "import zlib\nd = bytes(range(256)) * 4096\nfor _ in range(600): zlib.crc32(d)"]
    shared, alone = ctx.mkdtemp("shared"), ctx.mkdtemp("alone")
    Image(ctx, shared, argv)
    cache = os.path.join(shared, SYMBOL_CACHE)
    tabs = [n for n in os.listdir(cache) if n.endswith(".tab")]
    check(len(tabs) >= 2, "want kept tables for python3 and libz at least: %s" % sorted(os.listdir(cache)))
    for n in os.listdir(cache):
        if n.endswith(".sym"):
            os.unlink(os.path.join(cache, n))
    from_tables = Image(ctx, shared, argv)
    fresh = Image(ctx, alone, argv)
    _same_frames("named from kept tables", fresh, from_tables)
    check(any(k[0].startswith("libz.so") and fresh.frames[k] for k in set(fresh.frames) & set(from_tables.frames)),
          "no compared address in libz has a name")


def test_damaged_entries_are_never_used(ctx):
    """Every entry damaged (a byte flipped in one, another cut short, a third
    replaced by another module's whole entry): the next image uses none of
    them, its frames are a fresh lookup's, and it writes them whole again."""
    argv = ["sym_libc", "0.6"]
    d = ctx.mkdtemp("prof")
    Image(ctx, d, argv)
    cache = os.path.join(d, SYMBOL_CACHE)
    # (The inflated copy of libc6-dbg's file is not checksummed, and is no
    # entry: tests/unit/symbolize_cache_test.cc damages it apart.)
    names = sorted(n for n in os.listdir(cache) if not n.endswith((".debug", ".elf")))
    check(len(names) >= 2, "want entries for the executable and libc at least: %s" % names)
    for i, n in enumerate(names):
        p = os.path.join(cache, n)
        with open(p, "rb") as f:
            b = bytearray(f.read())
        if i % 3 == 0:
            b[len(b) // 2] ^= 1
        elif i % 3 == 1:
            del b[-9:]
        else:
            with open(os.path.join(cache, names[0]), "rb") as f:
                b = bytearray(f.read())
        with open(p, "wb") as f:
            f.write(bytes(b))
    damaged = Image(ctx, d, argv)
    check(damaged.addresses > 0 and damaged.cached == 0, "no damaged entry may be used: %d of %d addresses "
          "from the cache\n%s" % (damaged.cached, damaged.addresses, damaged.r.describe()))
    fresh = Image(ctx, ctx.mkdtemp("alone"), argv)
    _same_frames("damaged cache", fresh, damaged, want_line_in="libc.so")
    Image(ctx, d, argv).check_reused("the entries written again", damaged)


def test_images_writing_the_cache_at_once(ctx):
    """Four images stop at the same moment into one empty PROFILE_DIR, each
    writing the same modules' entries: every one writes its profiles with no
    error, and a fifth finds whole entries and fresh frames in them. (Four
    stops rarely meet inside one write: that writes are whole is what the
    unit test's eight writers of twenty rounds each catch.)"""
    d = ctx.mkdtemp("prof")
    env = ctx.env(PROFILE_DIR=d, PROFILE_NAME="run", PROFILE_CPU_HZ="1000")
    ps = [subprocess.Popen([ctx.workload("sym_libc"), "0.4"], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE) for _ in range(4)]
    errs = [p.communicate(timeout=60)[1].decode(errors="replace") for p in ps]
    for p, e in zip(ps, errs):
        check(p.returncode == 0 and "# profshim: wrote" in e and "error" not in e,
              "an image writing the cache with others: status %d\n%s" % (p.returncode, indent(e)))
    names = os.listdir(os.path.join(d, SYMBOL_CACHE))
    check(names and not [n for n in names if n.startswith(".")], "temporaries left: %s" % names)
    for n in os.listdir(d):
        if n != SYMBOL_CACHE:
            os.unlink(os.path.join(d, n))
    reused = Image(ctx, d, ["sym_libc", "0.6"])
    check(reused.cached >= 5, "after four writers, %d of %d addresses from the cache\n%s" % (
        reused.cached, reused.addresses, reused.r.describe()))
    fresh = Image(ctx, ctx.mkdtemp("alone"), ["sym_libc", "0.6"])
    _same_frames("after concurrent writers", fresh, reused, want_line_in="libc.so")
