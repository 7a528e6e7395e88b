"""A program built for jemalloc (linked with -ljemalloc) under the shim:
its mallocx/sdallocx/dallocx/mallctl reach the jemalloc that serves its
malloc (its own inert, the shim's while the heap is profiled); what it allocates through mallocx is
in the heap profile at its own call site; its mallctl writes cannot take
the heap profiler from the shim; a libjemalloc of another API generation
is refused at setup when profiling. Workload: tests/workloads/je_api.c.
"""

import os
import re
import subprocess

from common import check, indent, pct, truths, within

EPERM = 1


def _stats(r):
    m = re.search(r"^stats allocated=(\d+) held=(\d+)$", r.stdout_text, re.M)
    check(m, "je_api printed no stats line:\n%s" % r.describe())
    return int(m.group(1)), int(m.group(2))


def _rcs(r):
    return {k: int(v) for k, v in re.findall(r"^rc (\S+)=(-?\d+)$", r.stdout_text, re.M)}


def _reads(r):
    return dict(re.findall(r"^read (\S+)=(\S+)$", r.stdout_text, re.M))


def _ok(r, what):
    check(r.rc == 0 and "je_api: all ok" in r.stdout_text,
          "je_api %s: want exit 0 and 'all ok'\n%s" % (what, r.describe()))
    allocated, held = _stats(r)
    check(within(allocated, held, 0.10),
          "je_api %s: mallctl(\"stats.allocated\") says %d bytes while the program holds %d (%s): "
          "its mallctl does not see the heap its mallocx allocates from\n%s"
          % (what, allocated, held, pct(allocated, held), r.describe()))


def test_mallocx_and_malloc_share_one_heap(ctx):
    """Plain, inert and active: free/dallocx/sdallocx cross each other's
    pointers without a crash, and stats.allocated counts what mallocx holds."""
    plain = ctx.run_plain(["je_api"])
    _ok(plain, "without the shim")
    inert = ctx.run(["je_api"])
    _ok(inert, "under the inert shim")
    check(inert.err == plain.err, "inert shim: stderr differs from the plain run\n%s" % inert.describe())
    r, _ = ctx.profile(["je_api"])
    _ok(r, "profiled")


def test_mallocx_site_in_heap_profile(ctx):
    """64 MiB held through mallocx (of 128 MiB allocated; a quarter freed
    with sdallocx, a quarter with free) is in the profile at hold_mallocx,
    the stack cut at the call (hold_mallocx is the top frame). At a 64 KiB
    sampling rate the relative error of 64 MiB is about 3%."""
    r, d = ctx.profile(["je_api"], PROFILE_HEAP_SAMPLE=65536)
    _ok(r, "profiled")
    want = truths(r)["hold_mallocx"]["inuse_space"]
    prof = ctx.read(os.path.join(d, "run.heap.pprof"), r)
    cum = prof.cum("hold_mallocx", "inuse_space")
    flat = prof.flat("hold_mallocx", "inuse_space")
    table = indent(prof.cum_table("inuse_space"))
    check(within(cum, want, 0.12), "hold_mallocx: inuse_space %d in the profile, %d held (%s)\n%s"
          % (cum, want, pct(cum, want), table))
    check(within(flat, cum, 0.01), "hold_mallocx is not the top frame of its samples (flat %d, cum %d): "
          "the stack is not cut at the mallocx call\n%s" % (flat, cum, table))
    alloc = prof.cum("hold_mallocx", "alloc_space")
    check(within(alloc, 2 * want, 0.12), "hold_mallocx: alloc_space %d, allocated %d (%s)\n%s"
          % (alloc, 2 * want, pct(alloc, 2 * want), table))


def test_program_cannot_switch_the_heap_profile_off(ctx):
    """The program writes prof.active=false (by name and by MIB),
    thread.prof.active=false, prof.thread_active_init=false, prof.reset and
    prof.dump: each is refused with EPERM while the shim profiles, reads
    answer truthfully, and what it allocates afterwards is in the profile.
    Inert, the program's own libjemalloc answers them, as without the shim."""
    writes = ["prof.active", "prof.active(mib)", "thread.prof.active", "prof.thread_active_init",
              "prof.reset", "prof.dump"]
    plain = ctx.run_plain(["je_api", "prof"])
    _ok(plain, "prof, without the shim")
    inert = ctx.run(["je_api", "prof"])
    _ok(inert, "prof, under the inert shim")
    got = _rcs(inert)
    check(got == _rcs(plain),
          "inert shim: the program's prof.* writes should get its own jemalloc's answers %s, got %s"
          % (_rcs(plain), got))
    r, d = ctx.profile(["je_api", "prof"], PROFILE_HEAP_SAMPLE=65536)
    _ok(r, "prof, profiled")
    got = _rcs(r)
    bad = {w: got.get(w) for w in writes if got.get(w) != EPERM}
    check(not bad, "profiled: these writes were not refused with EPERM: %s\n%s" % (bad, r.describe()))
    check(got.get("opt.prof") == _rcs(plain).get("opt.prof"),
          "opt.prof write: %s under the shim, %s without" % (got.get("opt.prof"), _rcs(plain).get("opt.prof")))
    reads = _reads(r)
    check(reads == {"opt.prof": "true", "prof.active": "true", "thread.prof.active": "true"},
          "profiled: reads should say profiling is on, got %s" % reads)
    check(not os.path.exists(os.path.join(r.cwd, "dumped.heap")),
          "the program's prof.dump wrote %s while the shim profiles" % os.path.join(r.cwd, "dumped.heap"))
    want = truths(r)["hold_mallocx"]["inuse_space"]
    prof = ctx.read(os.path.join(d, "run.heap.pprof"), r)
    cum = prof.cum("hold_mallocx", "inuse_space")
    check(within(cum, want, 0.12), "after the program's prof.active=false: hold_mallocx inuse_space %d, "
          "held %d (%s)\n%s" % (cum, want, pct(cum, want), indent(prof.cum_table("inuse_space"))))
    check(prof.period == 65536, "the program's prof.reset changed the rate: period %s" % prof.period)


STUB = r"""
#include <stddef.h>
#include <string.h>
int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen) {
  if (strcmp(name, "version") == 0 && oldp) { *(const char**)oldp = VERSION; return 0; }
  return 2;
}
"""

MAIN = r"""
#include <stdio.h>
int main(void) { puts("hello"); return 0; }
"""


def _program_with_jemalloc(ctx, soname, version):
    d = ctx.mkdtemp("lib")
    with open(os.path.join(d, "stub.c"), "w") as f:
        f.write(STUB)
    with open(os.path.join(d, "main.c"), "w") as f:
        f.write(MAIN)
    lib = os.path.join(d, soname)
    prog = os.path.join(d, "prog")
    for argv in (["gcc", "-shared", "-fPIC", "-DVERSION=\"%s\"" % version, "-Wl,-soname," + soname,
                  "-o", lib, os.path.join(d, "stub.c")],
                 ["gcc", "-o", prog, os.path.join(d, "main.c"), "-Wl,--no-as-needed", lib,
                  "-Wl,-rpath," + d]):
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        check(p.returncode == 0, "%s failed:\n%s" % (" ".join(argv), p.stdout.decode()))
    return prog


def test_program_jemalloc_of_another_generation(ctx):
    """A program whose libjemalloc says 3.6.0 (mallocx flags encoded
    differently): profiling it fails at setup (exit 78, one error line
    naming the version); inert it runs as without the shim. One that says
    5.2.1 is profiled."""
    old = _program_with_jemalloc(ctx, "libjemalloc.so.1", "3.6.0-0-gstub")
    plain = ctx.run_plain([old])
    check(plain.rc == 0 and plain.stdout_text == "hello\n", "stub program fails plain:\n%s" % plain.describe())
    inert = ctx.run([old])
    check(inert.rc == 0 and inert.out == plain.out and inert.err == b"",
          "inert: want the plain run's behaviour\n%s" % inert.describe())
    r, d = ctx.profile([old], expect_rc=78)
    errs = r.error_lines()
    check(len(errs) == 1 and "3.6.0" in errs[0] and r.out == b"",
          "profiled: want one error line naming jemalloc 3.6.0 and main never run\n%s" % r.describe())
    new = _program_with_jemalloc(ctx, "libjemalloc.so.2", "5.2.1-0-gstub")
    r, d = ctx.profile([new])
    check(r.stdout_text == "hello\n" and not r.error_lines() and os.path.isfile(os.path.join(d, "run.heap.pprof")),
          "a libjemalloc 5.2.1 should be accepted:\n%s" % r.describe())
