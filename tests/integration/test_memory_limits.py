"""Memory limits: the shim never makes a thread's start fail or crash, and a
program that used all it was allowed still leaves its files.

limited_threads starts 8 threads that only compute and prints how many
pthread_create calls succeeded. Under RLIMIT_DATA (ulimit -d) and RLIMIT_AS (ulimit -v),
set by the parent before exec, the profiled run's status and output are the
plain run's, and its profiles are written. The shim's work at a thread's
start allocated (pthread_getattr_np), which made jemalloc create an arena
for the new thread; under the limit that failed and jemalloc dereferenced
the missing arena: SIGSEGV in every run.
"""

import re
import resource

from common import check, image_files
from st_helpers import prof_env, pprofs, run

KIB = 1024


def _same_as_plain(ctx, which, kib):
    argv = ["limited_threads", "8"]
    lim = [(which, kib * KIB)]
    what = "%s=%d KiB %s" % ("RLIMIT_DATA" if which == resource.RLIMIT_DATA else "RLIMIT_AS", kib,
                             " ".join(argv))
    plain = run(ctx, argv, env=ctx.env(preload=False), rlimits=lim)
    check(plain.status.is_exit(0) and "started 8 of 8" in plain.stdout_text,
          "%s without the shim: %s\n%s" % (what, plain.status, plain.describe()))
    d = ctx.mkdtemp("prof")
    r = run(ctx, argv, env=prof_env(ctx, d), rlimits=lim)
    check(r.status.key() == plain.status.key() and r.out == plain.out,
          "%s: under the shim %s, stdout %r; without it %s, stdout %r\n%s" % (
              what, r.status, r.stdout_text, plain.status, plain.stdout_text, r.describe()))
    check(pprofs(d) == image_files("run") and len(r.summary_lines()) == 1,
          "%s: PROFILE_DIR holds %s\n%s" % (what, pprofs(d), r.describe()))


def test_threads_start_under_a_data_limit(ctx):
    _same_as_plain(ctx, resource.RLIMIT_DATA, 150000)


def test_threads_start_under_an_address_space_limit(ctx):
    _same_as_plain(ctx, resource.RLIMIT_AS, 150000)


def _held_mib(r):
    m = re.search(r"^held (\d+) MiB$", r.stdout_text, re.M)
    check(m, "fill_limit printed no 'held' line\n%s" % r.describe())
    return int(m.group(1))


def _fills_then_stops(ctx, which):
    """fill_limit allocates until malloc fails under a 400 MB limit, frees
    it all and exits 1. Under the shim it exits 1 with its profiles: its
    stop used to find no room for its stack (jemalloc kept what was freed
    mapped, and the sample tables reserved 50 MiB), "wrote no profile".
    What the program could hold falls by what the shim maps (its tables,
    its libraries, jemalloc's metadata): at least 80% of the plain run's,
    with the heap profiled or not (77% with the heap profiled before)."""
    name = "RLIMIT_DATA" if which == resource.RLIMIT_DATA else "RLIMIT_AS"
    lim = [(which, 400000 * KIB)]
    plain = run(ctx, ["fill_limit"], env=ctx.env(preload=False), rlimits=lim)
    check(plain.status.is_exit(1), "%s without the shim: %s\n%s" % (name, plain.status, plain.describe()))
    for heap in ("65536", "0"):
        d = ctx.mkdtemp("prof")
        r = run(ctx, ["fill_limit"], env=prof_env(ctx, d, PROFILE_HEAP_SAMPLE=heap), rlimits=lim)
        what = "%s, PROFILE_HEAP_SAMPLE=%s" % (name, heap)
        check(r.status.is_exit(1), "%s: %s, want exit 1 as without the shim\n%s" % (what, r.status, r.describe()))
        want = ["run.cpu.pprof", "run.wait.pprof"] + (["run.heap.pprof"] if heap != "0" else [])
        check(pprofs(d) == sorted(want) and len(r.summary_lines()) == 1,
              "%s: PROFILE_DIR holds %s\n%s" % (what, pprofs(d), r.describe()))
        check(_held_mib(r) >= 0.8 * _held_mib(plain), "%s: the program held %d MiB, %d without the shim" % (
            what, _held_mib(r), _held_mib(plain)))


def test_a_program_that_fills_its_address_space_leaves_its_files(ctx):
    _fills_then_stops(ctx, resource.RLIMIT_AS)


def test_a_program_that_fills_its_data_limit_leaves_its_files(ctx):
    _fills_then_stops(ctx, resource.RLIMIT_DATA)
