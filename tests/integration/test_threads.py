"""Stops in threads and while threads run.

CONTRACT.md, stop paths: writing is once and race-free: two threads
calling exit, or a signal that arrives while a stop is being written, still
give one complete set; profiles are taken before any atexit
handler of the program runs; the status is exactly what it would have been.
DESIGN "The stop": a second thread calling exit, or a signal during the stop,
waits for the same stop; `pthread_exit` from main: the stop is made when the
last thread ends, before libc runs atexit handlers.

Every st_threads mode holds 16 MiB at main_hold that the program's atexit
handler frees, so the heap profile shows whether the stop came before the
program's teardown.
"""

import os
import signal

from common import check, image_files
from st_helpers import gzip_ok, prof_env, pprofs, run

HELD = 16 << 20


def _one_set(ctx, d, r, what, read=True):
    """Exactly one summary line, naming run.cpu.pprof and run.heap.pprof,
    the only files; both complete; returns (cpu, heap) when read."""
    check(pprofs(d) == image_files("run"), "%s: PROFILE_DIR should hold one complete set "
          "(run.cpu.pprof, run.heap.pprof); holds %s\n%s" % (what, pprofs(d), r.describe()))
    lines = r.summary_lines()
    check(len(lines) == 1 and lines[0].startswith("# profshim: wrote "),
          "%s: want exactly one '# profshim: wrote' line, got %d\n%s" % (what, len(lines), r.describe()))
    check(not r.error_lines(), "%s: error lines\n%s" % (what, r.describe()))
    for n in pprofs(d):
        gzip_ok(os.path.join(d, n))
    if not read:
        return None, None
    cpu = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    heap = ctx.read(os.path.join(d, "run.heap.pprof"), r)
    got = heap.cum("main_hold", "inuse_space")
    check(0.9 * HELD <= got <= 1.1 * HELD, "%s: main_hold's 16 MiB (freed by the program's atexit handler) "
          "should be in use in the heap profile; it shows %d\n%s" % (what, got, heap.cum_table("inuse_space")))
    return cpu, heap


def test_exit_from_a_worker_thread(ctx):
    """CONTRACT.md, stop paths, exit() called by a non-main thread while main waits in
    pthread_join: status 6, one set of files, taken before the atexit handler."""
    d = ctx.mkdtemp("prof")
    r = run(ctx, ["st_threads", "thread_exit"], env=prof_env(ctx, d))
    check(r.status.is_exit(6), "exit(6) from a worker: %s\n%s" % (r.status, r.describe()))
    check("atexit ran" in r.stdout_text, "the program's atexit handler did not run\n%s" % r.describe())
    cpu, _ = _one_set(ctx, d, r, "exit from a worker")
    check(cpu.cum("thread_burn", "samples") > 0, "the worker's thread_burn is not in the CPU profile\n%s" %
          cpu.cum_table("samples"))


def _race(ctx, n, runs):
    for i in range(runs):
        d = ctx.mkdtemp("prof")
        # A stop that waits for its bound (60 s here) runs into the run's
        # hang guard; none takes seconds, loaded or not.
        r = run(ctx, ["st_threads", "race", str(n)], env=prof_env(ctx, d, PROFILE_STOP_TIMEOUT="60"), timeout=40)
        what = "%d threads calling exit(7) at once, run %d" % (n, i + 1)
        check(r.status.is_exit(7), "%s: %s\n%s" % (what, r.status, r.describe()))
        check(r.wall < 30, "%s: took %.1f s (a stop waited for its bound?)\n%s" % (what, r.wall, r.describe()))
        cpu, _ = _one_set(ctx, d, r, what, read=(i == 0))
        if cpu:
            check(cpu.cum("race_burn", "samples") > 0, "%s: race_burn not in the CPU profile\n%s" % (
                what, cpu.cum_table("samples")))


def test_two_threads_race_into_exit(ctx):
    """CONTRACT.md, stop paths: two threads calling exit still give one complete set.
    Two workers released together from a spin barrier both call exit(7); 5
    runs: status 7, one summary line, one complete set each time."""
    _race(ctx, 2, 5)


def test_three_threads_race_into_exit(ctx):
    """As above with three threads (more threads than cores)."""
    _race(ctx, 3, 5)


def _exit_vs_term(ctx, how, runs):
    seen = {}
    for i in range(runs):
        d = ctx.mkdtemp("prof")
        argv = ["st_threads", "exit_vs_term"] + (["raise"] if how == "raise" else [])
        r = run(ctx, argv, env=prof_env(ctx, d, PROFILE_STOP_TIMEOUT="60"), timeout=40)
        what = "exit(7) in one thread, %s(SIGTERM) in another, run %d" % (how, i + 1)
        check(r.status.is_exit(7) or r.status.is_signal(signal.SIGTERM, core=False),
              "%s: the process must end with exit 7 or die of SIGTERM; %s\n%s" % (what, r.status, r.describe()))
        check(r.wall < 30, "%s: took %.1f s (a stop waited for its bound?)\n%s" % (what, r.wall, r.describe()))
        _one_set(ctx, d, r, what, read=(i % 3 == 0))
        seen[str(r.status)] = seen.get(str(r.status), 0) + 1
    return seen


def test_sigterm_while_exit_writes_kill(ctx):
    """CONTRACT.md, stop paths: a signal that arrives while a stop is being
    written still gives one complete set. One thread calls exit(7) while another sends
    kill(getpid(), SIGTERM) at the same moment; 6 runs: each ends exit 7 or
    SIGTERM (either is what the program does without the shim), one summary
    line, one complete set, no wait for the stop's bound."""
    _exit_vs_term(ctx, "kill", 6)


def test_sigterm_while_exit_writes_raise(ctx):
    """As above with raise(SIGTERM) (thread-directed)."""
    _exit_vs_term(ctx, "raise", 6)


def test_main_returns_while_workers_burn(ctx):
    """CONTRACT.md, stop paths, return from main while three workers still burn CPU:
    status 9, one set of files, the workers' CPU in the profile, written
    before the atexit handler ran."""
    d = ctx.mkdtemp("prof")
    r = run(ctx, ["st_threads", "main_returns"], env=prof_env(ctx, d), timeout=30)
    check(r.status.is_exit(9), "main returned 9: %s\n%s" % (r.status, r.describe()))
    cpu, _ = _one_set(ctx, d, r, "main returns while workers burn")
    for f in ("forever_burn", "main_burn"):
        check(cpu.cum(f, "samples") > 0, "%s is not in the CPU profile\n%s" % (f, cpu.cum_table("samples")))


def test_pthread_exit_from_main(ctx):
    """DESIGN "The stop", pthread_exit from main: the process lives on until
    its last thread ends; the profiles are written then, with the workers'
    CPU (2 x 0.6 s in worker_burn), before the program's atexit handler
    (main_hold still in use), status 0."""
    d = ctx.mkdtemp("prof")
    r = run(ctx, ["st_threads", "pthread_exit"], env=prof_env(ctx, d), timeout=30)
    check(r.status.is_exit(0), "pthread_exit from main, workers return: %s\n%s" % (r.status, r.describe()))
    check("atexit ran" in r.stdout_text, "the program's atexit handler did not run\n%s" % r.describe())
    cpu, _ = _one_set(ctx, d, r, "pthread_exit from main")
    got = cpu.cum("worker_burn", "cpu") / 1e9
    check(got >= 1.0, "the workers burned 1.2 s of CPU in worker_burn after main's pthread_exit; the profile "
          "shows %.3f s\n%s" % (got, cpu.cum_table("cpu")))
    check(not any("atexit" in c for c in cpu.comments), "the stop was only seen at atexit (after the "
          "program's own atexit handlers): %s" % cpu.comments)
