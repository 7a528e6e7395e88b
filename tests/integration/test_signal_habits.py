"""Threads and stacks under the shim as real programs use them, each run
compared with a plain run of the same program (tests/workloads/sig_habits.c):
a handler on the program's small alternate stack, a single-threaded
operation (unshare), and thread names after many threads. The signal tests
that were here are in test_signals_fatal.py, test_signals_masks.py and
test_signals_api.py.
"""

import os
import shutil

from common import Skip, check, func_matches
from sig_helpers import both, same_as_plain
from st_helpers import by_thread, labels, prof_env, run, truths


def test_sampling_on_a_programs_small_alternate_stack(ctx):
    """An 8 KiB sigaltstack and a SIGALRM handler (SA_ONSTACK) that burns
    0.3 ms per call under a 1 ms timer, sampled at 1000 Hz: the shim's
    handler never overflows the program's stack (it died of SIGSEGV about
    one run in four). Its handler runs there now for every sample of that
    thread (SA_ONSTACK: a walk there overflowed in every run), and walks
    the thread's own stack below the interrupted frame: the profile has
    main's whole stack. Twenty runs of 0.3 s."""
    argv = ["sig_habits", "altstack", "0.3"]
    plain = run(ctx, argv, env=ctx.env(preload=False))
    for i in range(20):
        d = ctx.mkdtemp("prof")
        r = run(ctx, argv, env=prof_env(ctx, d, PROFILE_CPU_HZ=1000))
        same_as_plain(plain, r, "altstack run %d" % i)
    prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    check(prof.cum("main", "cpu") > 0.8 * prof.total("cpu"), "main's stack is not walked\n%s" % prof.cum_table("cpu"))


def test_single_threaded_program_can_unshare_a_user_namespace(ctx):
    """unshare(CLONE_NEWUSER) needs a single-threaded process: the shim
    starts no thread of its own while the program runs (its stop thread made
    this fail with EINVAL). The thread count at main is the plain one."""
    plain, r, d = both(ctx, ["sig_habits", "unshare"])
    same_as_plain(plain, r, "unshare")
    check("Threads:\t1" in r.stdout_text, "one thread at main\n%s" % r.describe())
    unshare = shutil.which("unshare")
    if unshare and "unshare(CLONE_NEWUSER): 0" in plain.stdout_text:
        p0 = run(ctx, [unshare, "-U", "true"], env=ctx.env(preload=False))
        p1 = run(ctx, [unshare, "-U", "true"], env=prof_env(ctx, ctx.mkdtemp("prof")))
        check(p1.status.key() == p0.status.key(), "`unshare -U true` under the shim %s, without %s\n%s" % (
            p1.status, p0.status, p1.describe()))


def test_unshare_with_the_snapshot_worker_running(ctx):
    """PROFILE_INTERVAL keeps the shim's worker thread from setup (Threads: 2
    at main, as documented): unshare(CLONE_NEWUSER) failed with EINVAL. The
    worker now ends for the call and starts again after it; `unshare -U`
    runs as without the shim."""
    plain = run(ctx, ["sig_habits", "unshare"], env=ctx.env(preload=False))
    if "unshare(CLONE_NEWUSER): 0" not in plain.stdout_text:
        raise Skip("unshare(CLONE_NEWUSER) fails here without the shim too (a chroot refuses it): %s" %
                   plain.stdout_text.strip().splitlines()[-1])
    for i in range(3):
        r = run(ctx, ["sig_habits", "unshare"], env=prof_env(ctx, ctx.mkdtemp("prof"), PROFILE_INTERVAL="1s"))
        check(r.status.key() == plain.status.key() and "unshare(CLONE_NEWUSER): 0" in r.stdout_text,
              "run %d: under the shim with the worker\n%s" % (i, r.describe()))
    unshare = shutil.which("unshare")
    if unshare:
        p0 = run(ctx, [unshare, "-U", "true"], env=ctx.env(preload=False))
        p1 = run(ctx, [unshare, "-U", "true"], env=prof_env(ctx, ctx.mkdtemp("prof"), PROFILE_INTERVAL="1s"))
        check(p1.status.key() == p0.status.key(), "`unshare -U true` with the worker %s, without the shim %s\n%s" % (
            p1.status, p0.status, p1.describe()))


def test_thread_names_after_many_threads(ctx):
    """33,000 short threads, then one named "worker" burns 0.3 s: its
    samples carry thread_name=worker (the names table was capped and keyed by
    tid, so a late or reused tid got an old name or none). The worker's tid
    can be an earlier short thread's too (the kernel reuses them: that is
    the point), and that thread, or the worker before its
    pthread_setname_np, may have a sample under the process's name: true,
    and never in habit_burn, the worker's work."""
    d = ctx.mkdtemp("prof")
    r = run(ctx, ["sig_habits", "tidreuse", "33000"], env=prof_env(ctx, d), timeout=120)
    check(r.status.is_exit(0), "%s\n%s" % (r.status, r.describe()))
    prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    tid = truths(r.stdout_text, "thread")[0]["tid"]
    names = by_thread(prof, "samples", key="thread_name")
    ids = by_thread(prof, "samples", key="thread_id")
    check(ids.get(tid, 0) > 0, "the worker's samples are missing\n%s" % prof.cum_table("samples"))
    i = prof.index("samples")
    work = [s for s in prof.samples if any(func_matches(f.name, "habit_burn") for f in s.stack)]
    named = sum(s.values[i] for s in work if labels(s).get("thread_name") == "worker")
    check(work and named == sum(s.values[i] for s in work),
          "the worker's samples in habit_burn must all be named worker: %d of %d are; by name %s, its tid %s "
          "has %d" % (named, sum(s.values[i] for s in work), names, tid, ids.get(tid, 0)))
    check(names.get("worker", 0) >= ids.get(tid, 0) - 3,
          "the worker's samples must be named worker: by name %s, its tid %s has %d" % (
              names, tid, ids.get(tid, 0)))




def test_the_shims_signal_ignored_stays_ignored_across_exec(ctx):
    """A shell that ignores SIGRTMAX-4 (the shim's number) and execs: the
    exec'd program finds it ignored and survives it, as plain. The kernel's
    disposition was the shim's handler, which an exec resets to the default:
    the exec'd program saw SIG_DFL and died of the signal it sent itself."""
    argv = ["/bin/bash", "-c", "trap '' RTMAX-4; exec /bin/bash -c 'kill -s RTMAX-4 $$; echo alive'"]
    plain = run(ctx, argv, env=ctx.env(preload=False))
    check(plain.status.is_exit(0) and plain.stdout_text == "alive\n", "plain:\n%s" % plain.describe())
    for extra in ({}, {"PROFILE_HEAP_SAMPLE": "0"}):
        r = run(ctx, argv, env=prof_env(ctx, ctx.mkdtemp("prof"), **extra))
        check(r.status.key() == plain.status.key() and r.out == plain.out,
              "under the shim %s, plain %s\n%s" % (r.status, plain.status, r.describe()))
