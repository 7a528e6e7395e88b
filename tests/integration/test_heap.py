"""Heap profile: unsampled estimates per call site, alloc vs inuse, the
shim's own allocations, and frees in atexit handlers / static destructors.

Statistics. jemalloc samples on average one allocation per R bytes
(R = PROFILE_HEAP_SAMPLE): an allocation of s bytes is sampled with
probability p = 1 - exp(-s/R) and the unsampled estimate counts it as s/p.
 - A block much larger than R is sampled with p ~ 1: its estimate is exact
   (site_big's 4 MiB blocks: p = 1 - e^-128 at R = 32 KiB, 1 - e^-8 at the
   512 KiB default).
 - A site of B bytes in blocks much smaller than R gets ~B/R samples, and its
   estimate has relative sd ~ 1/sqrt(B/R). site_small (48 MiB of 64 B) at
   R = 32 KiB: 1536 samples, sd 2.6%, so +-10% is 3.9 sd; at the 512 KiB
   default only 96 samples, sd 10%, so there it gets +-40% (3.9 sd).
 - site_freed (1024 blocks of 64 KiB) at 32 KiB: p = 0.86 per block,
   sd = sqrt((1-p)/(n p)) = 1.2%.
The truths come from the workload's stdout, not from this file.
"""

import os
import re
import time

from common import MiB, check, indent, pct, truths, within
from profile_proto import RawProfile

RATE = 32768


def _heap_file(d, name="run"):
    return os.path.join(d, "%s.heap.pprof" % name)


def _site_report(prof, sites):
    rows = []
    for site in sites:
        rows.append("  %-20s inuse_space %12d  inuse_objects %9d  alloc_space %12d  alloc_objects %9d" % (
            site, prof.cum(site, "inuse_space"), prof.cum(site, "inuse_objects"),
            prof.cum(site, "alloc_space"), prof.cum(site, "alloc_objects")))
    return "\n".join(rows)


def _check_site(ctx, prof, path, site, kind, truth, tol, sites):
    got = prof.cum(site, kind)
    check(within(got, truth, tol),
          "%s %s = %d, truth %d (%s of truth; allowed +-%d%%)\nper site:\n%s\n%s" % (
              site, kind, got, truth, pct(got, truth), round(tol * 100), _site_report(prof, sites),
              indent(ctx.top(path, kind))))


def _heap_accuracy(ctx, mode):
    r, d = ctx.profile(["heap_hold", mode], PROFILE_HEAP_SAMPLE=RATE)
    t = truths(r)
    path = _heap_file(d)
    prof = ctx.read(path, r)
    sites = ["site_big", "site_small", "site_freed"]
    for site in ("site_big", "site_small"):
        for kind in ("inuse_space", "inuse_objects", "alloc_space"):
            _check_site(ctx, prof, path, site, kind, t[site][kind], 0.10, sites)
    _check_site(ctx, prof, path, "site_freed", "alloc_space", t["site_freed"]["alloc_space"], 0.10, sites)
    _check_site(ctx, prof, path, "site_freed", "alloc_objects", t["site_freed"]["alloc_objects"], 0.10, sites)
    freed_inuse = prof.cum("site_freed", "inuse_space")
    check(freed_inuse <= 0.01 * t["site_freed"]["alloc_space"],
          "site_freed freed all its 64 MiB before the stop, but its inuse_space is %d\n%s" % (
              freed_inuse, _site_report(prof, sites)))
    return r, d, prof, t


def test_heap_accuracy_return_from_main(ctx):
    _heap_accuracy(ctx, "return")


def test_heap_accuracy_exit(ctx):
    _heap_accuracy(ctx, "exit")


def test_heap_default_rate(ctx):
    """At the default 512 KiB: big blocks exact, small blocks within +-40%."""
    r, d = ctx.profile(["heap_hold"])
    t = truths(r)
    path = _heap_file(d)
    prof = ctx.read(path, r)
    sites = ["site_big", "site_small", "site_freed"]
    _check_site(ctx, prof, path, "site_big", "inuse_space", t["site_big"]["inuse_space"], 0.10, sites)
    _check_site(ctx, prof, path, "site_small", "inuse_space", t["site_small"]["inuse_space"], 0.40, sites)
    _check_site(ctx, prof, path, "site_freed", "alloc_space", t["site_freed"]["alloc_space"], 0.35, sites)


def test_heap_rate_not_power_of_two(ctx):
    """PROFILE_HEAP_SAMPLE=100000 is accepted and the estimates stay
    unbiased (the unsampling must use the rate jemalloc really used: between
    64 KiB and 128 KiB, i.e. 384..768 samples for site_small, sd <= 5.1%)."""
    r, d = ctx.profile(["heap_hold"], PROFILE_HEAP_SAMPLE=100000)
    t = truths(r)
    path = _heap_file(d)
    prof = ctx.read(path, r)
    sites = ["site_big", "site_small", "site_freed"]
    _check_site(ctx, prof, path, "site_big", "inuse_space", t["site_big"]["inuse_space"], 0.10, sites)
    _check_site(ctx, prof, path, "site_small", "inuse_space", t["site_small"]["inuse_space"], 0.20, sites)


def test_heap_has_only_program_allocations(ctx):
    """The shim's own allocations (setup, and above all writing the
    profiles) must not appear: everything outside the three sites is the
    program's small change (stdio buffers), well under 1 MiB."""
    r, d = ctx.profile(["heap_hold"], PROFILE_HEAP_SAMPLE=RATE)
    prof = ctx.read(_heap_file(d), r)
    sites = ("site_big", "site_small", "site_freed")
    i = prof.index("inuse_space")
    other = [s for s in prof.samples if not any(f.name in sites for f in s.stack)]
    other_bytes = sum(s.values[i] for s in other)
    if other_bytes > MiB:
        other.sort(key=lambda s: -s.values[i])
        lines = ["%12d  %s" % (s.values[i], " <- ".join(f.name for f in s.stack[:12])) for s in other[:12]]
        check(False, "%d bytes in use outside the program's three sites (allowed 1 MiB); largest stacks:\n%s"
              % (other_bytes, indent("\n".join(lines))))


def _held_until_teardown(ctx, argv, site, freed_marker):
    r, d = ctx.profile(argv)
    t = truths(r)[site]["inuse_space"]
    path = _heap_file(d)
    prof = ctx.read(path, r)
    got = prof.cum(site, "inuse_space")
    check(got >= 0.9 * t,
          "%s: %s holds %d bytes that teardown frees; the heap profile must be taken first, "
          "but it shows %d (%s)\n%s" % (" ".join(argv), site, t, got, pct(got, t),
                                       indent(ctx.top(path, "inuse_space"))))
    check(got <= 1.1 * t, "%s: %s inuse_space %d is more than its %d bytes" % (" ".join(argv), site, got, t))
    check(freed_marker in r.stdout_text,
          "the program's own teardown did not run after the profile (no %r on stdout)\n%s" % (
              freed_marker, r.describe()))


def test_atexit_handler_free_after_return(ctx):
    _held_until_teardown(ctx, ["atexit_free", "return"], "hold_for_atexit", "handler: freed")


def test_atexit_handler_free_after_exit(ctx):
    _held_until_teardown(ctx, ["atexit_free", "exit"], "hold_for_atexit", "handler: freed")


def test_at_quick_exit_handler_free(ctx):
    _held_until_teardown(ctx, ["atexit_free", "quick_exit"], "hold_for_atexit", "handler: freed")


def test_static_destructor_free_after_return(ctx):
    _held_until_teardown(ctx, ["atexit_static", "return"], "wl::hold_for_static_dtor", "destructor: freed")


def test_static_destructor_free_after_exit(ctx):
    _held_until_teardown(ctx, ["atexit_static", "exit"], "wl::hold_for_static_dtor", "destructor: freed")


def test_heap_rate_one_samples_every_allocation(ctx):
    """PROFILE_HEAP_SAMPLE=1 samples every allocation, from the very first
    one in main: each estimate is exact (scale 1/(1-e^-size) = 1 to within
    1e-7 for sizes >= 16). A rate that only takes effect after the first
    sample at the old (default 512 KiB) rate loses the first allocations."""
    r, d = ctx.profile(["heap_exact"], PROFILE_HEAP_SAMPLE=1)
    t = truths(r)
    path = _heap_file(d)
    prof = ctx.read(path, r)
    bad = []
    for site, kinds in t.items():
        for kind, want in kinds.items():
            got = prof.cum(site, kind)
            if abs(got - want) > max(1, 0.001 * want):
                bad.append("%-13s %-14s %8d, truth %8d" % (site, kind, got, want))
    check(not bad, "at PROFILE_HEAP_SAMPLE=1 every allocation is sampled and the estimates must be exact; "
          "wrong:\n%s\nper site:\n%s" % (indent("\n".join(bad)), _site_report(prof, list(t))))


def _size_class(n):
    """jemalloc 5.3's size class for a request of n bytes (4 KiB pages), by
    the rule docs/DESIGN.md states under "The heap profile's numbers"."""
    if n <= 8:
        return 8
    if n <= 128:
        return (n + 15) // 16 * 16
    step = 1 << ((n - 1).bit_length() - 3)
    return (n + step - 1) // step * step


def _check_size_classes(ctx, rate, sites):
    r, d = ctx.profile(["heap_sizes"], PROFILE_HEAP_SAMPLE=rate)
    t = truths(r)
    path = _heap_file(d)
    prof = ctx.read(path, r)
    for site in sites:
        want = t[site]
        check(want["usable"] != want["requested"],
              "%s: jemalloc served exactly the %d bytes asked; the test needs a size that is not a class" % (
                  site, want["requested"]))
        check(want["usable"] == _size_class(want["requested"]),
              "%s: jemalloc served %d bytes for a request of %d; the rule in docs/DESIGN.md says %d" % (
                  site, want["usable"], want["requested"], _size_class(want["requested"])))
        got = prof.cum(site, "inuse_space")
        check(got == want["count"] * want["usable"],
              "%s (PROFILE_HEAP_SAMPLE=%d): inuse_space %d, want %d x %d = %d, the size class as documented "
              "(requested: %d x %d)\n%s" % (
                  site, rate, got, want["count"], want["usable"], want["count"] * want["usable"],
                  want["count"], want["requested"], indent(ctx.top(path, "inuse_space"))))
        check(prof.cum(site, "inuse_objects") == want["count"], "%s: inuse_objects %d, want %d" % (
            site, prof.cum(site, "inuse_objects"), want["count"]))


def test_heap_bytes_are_size_classes(ctx):
    """malloc(100 MiB) and 1000 x malloc(100), every allocation sampled: the
    profile gives exactly the documented size classes, 112 MiB and 1000 x
    112 B (jemalloc's malloc_usable_size agrees), not the requests."""
    _check_size_classes(ctx, 1, ["hold_100mib", "hold_100b"])


def test_heap_100mib_at_the_default_rate(ctx):
    """At the default 512 KiB the 100 MiB block is sampled with probability
    1 - e^-224: the estimate is exactly its size class, 112 MiB."""
    _check_size_classes(ctx, 524288, ["hold_100mib"])


def test_heap_profile_time_is_the_dump(ctx):
    """The heap profile describes the moment of its dump, as Go's do: its
    time_nanos is at the stop (after the workload's 1 s sleep) and it has no
    duration. The CPU profile keeps the run: its time is the start, its
    duration the run."""
    t0 = time.time_ns()
    r, d = ctx.profile(["heap_sizes", "1.0"])
    t1 = time.time_ns()
    heap = RawProfile(_heap_file(d))
    check(t0 + 900000000 <= heap.time_nanos <= t1,
          "heap profile time_nanos %d is not the stop's moment: the run began at %d and ended at %d "
          "(%.3f s after the start, want >= 0.9 s)" % (heap.time_nanos, t0, t1, (heap.time_nanos - t0) / 1e9))
    check(heap.duration_nanos == 0, "the heap profile has duration_nanos %d; a heap profile is one "
          "moment (Go's have none)" % heap.duration_nanos)
    cpu = RawProfile(os.path.join(d, "run.cpu.pprof"))
    check(t0 <= cpu.time_nanos <= t0 + 500000000 and cpu.duration_nanos >= 900000000,
          "the CPU profile should start at the run's start (%d) and last the run: time_nanos %d, "
          "duration %.3f s" % (t0, cpu.time_nanos, cpu.duration_nanos / 1e9))


def test_top_of_a_heap_profile_is_the_function_that_allocated(ctx):
    """go tool pprof -top of a heap profile lists the program's function
    that allocated first, flat, not the allocator: fill_cache holds 200 MiB
    through new[], fill_vector 40 MiB through std::vector's allocator
    (its own code is the library's, inlined or not: the program's function
    at least holds it cumulatively), keep_copy 8 MiB through strdup (libc's
    code calls malloc: strdup is what allocated). The frames stay in the
    file (the profile's drop_frames names them for pprof)."""
    r, d = ctx.profile(["heap_top"], PROFILE_HEAP_SAMPLE=RATE)  # 1 MiB blocks: each sampled, p = 1 - e^-32
    check(r.rc == 0 and r.stdout_text.startswith("ready 200 40 1"), "heap_top failed\n%s" % r.describe())
    path = _heap_file(d)
    top = ctx.top(path, "inuse_space", nodecount=5)
    rows = [l.split() for l in top.splitlines() if re.match(r"^\s*[\d.]+[kMG]?B\s", l)]
    check(rows and rows[0][-1].startswith("fill_cache"), "want fill_cache first in -top:\n%s" % top)
    prof = ctx.read(path, r)
    flat = prof.flat("fill_cache", "inuse_space")
    check(within(flat, 200 * MiB, 0.05), "fill_cache holds %d bytes flat, 200 MiB held\n%s" % (flat, top))
    check(prof.cum("fill_vector", "inuse_space") >= 36 * MiB, "fill_vector: %d bytes\n%s" % (
        prof.cum("fill_vector", "inuse_space"), top))
    for name in ("operator new[]", "operator new", "malloc"):
        check(prof.flat(name, "inuse_space") == 0, "%s is still a leaf with %d bytes\n%s" % (
            name, prof.flat(name, "inuse_space"), top))
    drop = RawProfile(path).drop_frames
    check("operator new" in drop and "malloc" in drop, "the file's drop_frames: %r" % drop)

