"""Memory limits: the shim never makes a thread's start fail or crash.

limited_threads starts 8 threads that only compute and prints how many
pthread_create calls succeeded. Under RLIMIT_DATA (ulimit -d) and RLIMIT_AS (ulimit -v),
set by the parent before exec, the profiled run's status and output are the
plain run's, and its profiles are written. The shim's work at a thread's
start allocated (pthread_getattr_np), which made jemalloc create an arena
for the new thread; under the limit that failed and jemalloc dereferenced
the missing arena: SIGSEGV in every run.
"""

import resource

from common import check
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
    check(pprofs(d) == ["run.cpu.pprof", "run.heap.pprof", "run.wait.pprof"] and len(r.summary_lines()) == 1,
          "%s: PROFILE_DIR holds %s\n%s" % (what, pprofs(d), r.describe()))


def test_threads_start_under_a_data_limit(ctx):
    _same_as_plain(ctx, resource.RLIMIT_DATA, 150000)


def test_threads_start_under_an_address_space_limit(ctx):
    _same_as_plain(ctx, resource.RLIMIT_AS, 150000)
