"""Fatal signals as programs meet them, each run compared with a plain run
of the same program (tests/workloads/sig_habits.c, review_habits.c): the
process dies of the signal it would have died of, with its profiles and one
line, and no program thread runs on after it.
"""

import shutil
import signal
import subprocess

from common import CpuHog, check, image_files
from sig_helpers import RTSIG, both, both_same, dies_as_plain
from st_helpers import pprofs, prof_env, run, start


def test_external_sampling_signal_kills_as_without_the_shim(ctx):
    """kill -s RTMAX-4 on a plain `sleep` ends it (the default action); under
    the shim it must too, with its profiles written first."""
    sleep = shutil.which("sleep")
    out = {}
    for label, env in (("plain", ctx.env(preload=False)), ("shim", None)):
        d = ctx.mkdtemp("prof")
        p = start(ctx, [sleep, "30"], env=env or prof_env(ctx, d))
        # The shim is set up before main: wait until sleep is in its nanosleep.
        for _ in range(200):
            try:
                with open("/proc/%d/wchan" % p.pid) as f:
                    if f.read().strip() not in ("", "0"):
                        break
            except OSError:
                break
            subprocess.run(["sleep", "0.02"])
        p.kill(RTSIG)
        out[label] = (p.wait(30), d)
    (plain, _), (r, d) = out["plain"], out["shim"]
    check(plain.status.is_signal(RTSIG), "baseline: sleep should die of SIGRTMAX-4: %s" % plain.status)
    check(r.status.key() == plain.status.key(), "under the shim sleep %s; without it %s\n%s" % (
        r.status, plain.status, r.describe()))
    check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))


def test_no_thread_runs_on_after_a_crash(ctx):
    """A worker commits every millisecond; main writes "crash" and faults.
    Without the shim the process is gone at once; under the shim its stop
    takes tens of ms, during which no program thread may commit again (it
    used to commit 12 more times, and up to 5 on a loaded machine: the
    freezer's thread, preempted, reached the worker late and asked again
    only every 2 ms). A commit already on its way when the fault came is
    allowed, as without the shim. Ten runs of each shape beside busy loops
    (two per core): a worker that sleeps between commits and one that spends
    them inside malloc and free, where the freeze must decline.
    The machine decides part of it: main may be preempted between its
    "crash" line and the fault (without the shim too) or before its handler
    reaches the freeze, for as long as the scheduler likes (4 commits once,
    beside two test suites and a CPU hog). So each shape's ten runs may have
    one commit a run on average more than the ten plain runs beside them
    had in all, and no run more than 5: the freezer reaching the worker
    late made 12 in every run."""
    with CpuHog():
        for shape in (["crash_commits"], ["crash_commits", "alloc"]):
            seen = {"plain": 0, "shim": 0}
            for i in range(10):
                plain, r, d = both(ctx, ["sig_habits"] + shape)
                what = "%s, run %d" % (" ".join(shape), i)
                check(plain.status.is_signal(signal.SIGSEGV) and r.status.key() == plain.status.key(),
                      "%s: both must die of SIGSEGV: plain %s, shim %s\n%s" % (what, plain.status, r.status,
                                                                              r.describe()))
                for key, run in (("plain", plain), ("shim", r)):
                    after = run.stdout_text.split("crash\n", 1)
                    check(len(after) == 2, "%s (%s): no crash line\n%s" % (what, key, run.describe()))
                    seen[key] += after[1].count("commit")
                commits = r.stdout_text.split("crash\n", 1)[1].count("commit")
                check(commits <= 5, "%s: %d commits after the crash under the shim\n%s" % (what, commits,
                                                                                         r.describe()))
                check(pprofs(d) == image_files("run"),
                      "%s: PROFILE_DIR holds %s\n%s" % (what, pprofs(d), r.describe()))
            check(seen["shim"] <= seen["plain"] + 10,
                  "%s: %d commits after the crash in 10 runs under the shim, %d in 10 plain runs"
                  % (" ".join(shape), seen["shim"], seen["plain"]))


def test_sigterm_in_malloc_then_every_signal_blocked(ctx):
    """SIGTERM sent to a worker inside malloc, which then blocks every
    signal and waits: the shim defers a signal that comes inside the
    allocator and sends it again 1 ms later; that retry met the worker's new
    mask and stayed pending, and the process, gone at once without the
    shim, hung for good (the stress run's "outside" hang in CI). The worker
    waits in pause, in sigwait (the retry is the shim's own signal taken
    there: the stop runs there, it used to be deferred until it gave up and
    wrote nothing), and in sigsuspend and ppoll whose own mask blocks every
    signal, the shim's too (its retry waited as long as they did). Each run
    dies of SIGTERM as the plain one does, with the profiles written."""
    for wait in ["pause", "sigwait", "sigsuspend", "ppoll", "pause"]:
        dies_as_plain(ctx, ["sig_habits", "termblock", wait], signal.SIGTERM, 1)


def test_sigterm_to_a_process_in_sigsuspend(ctx):
    """The classic wait for a signal, sigsuspend(empty set), on the only
    thread; SIGTERM from outside. The shim's sigsuspend counted as code
    that may hold its locks, so the signal was deferred until it gave up:
    "the signal came while the program was inside the allocator", no
    profile. Three runs: SIGTERM's death, the three profiles."""
    for i in range(3):
        d = ctx.mkdtemp("prof")
        p = start(ctx, ["sig_habits", "suspend"], env=prof_env(ctx, d))
        p.wait_for("^ready$")
        p.kill(signal.SIGTERM)
        r = p.wait(30)
        check(r.status.is_signal(signal.SIGTERM), "run %d: %s, want death by SIGTERM\n%s" % (i, r.status, r.describe()))
        check(pprofs(d) == image_files("run") and len(r.summary_lines()) == 1,
              "run %d: PROFILE_DIR holds %s\n%s" % (i, pprofs(d), r.describe()))


def test_pending_sigint_unblocked_ends_the_process_there(ctx):
    """A SIGINT pending while blocked, its disposition SIG_DFL, then
    unblocked (coreutils timeout dies of the signal it got this way): the
    kernel delivers it as sigprocmask returns, inside the shim's wrapper,
    which the shim took for code holding its locks: it deferred the signal,
    the program ran on (printed "after the unblock") and sent a second
    SIGINT, whose stop the first one's retry then killed halfway (no files,
    no line). Five runs: as plain, with the profiles and one line."""
    dies_as_plain(ctx, ["sig_habits", "pending"], signal.SIGINT, 5)


def test_one_shot_handler_that_raises_again_leaves_profiles(ctx):
    """node's exit on SIGTERM and SIGINT: a handler installed with
    SA_RESETHAND raises the signal again. The kernel reset the action to
    SIG_DFL itself, where no handler of the shim's stood in, so the process
    died with no profile. As plain (death by SIGTERM, "handler" printed
    once), with the profiles and one line; three runs."""
    dies_as_plain(ctx, ["sig_habits", "resethand"], signal.SIGTERM, 3)


def test_sigterm_in_malloc_then_another_thread_exits(ctx):
    """SIGTERM to main inside malloc (deferred by the shim), main then
    blocks it, and another thread calls exit(0) 0.3 ms later: without the
    shim the process died of SIGTERM before the exit; under it, the exit's
    stop ran and the process often exited 0 (5 of 8). Eight runs: death by
    SIGTERM, the profiles written and one line."""
    dies_as_plain(ctx, ["sig_habits", "termexit"], signal.SIGTERM, 8)


def test_sigterm_taken_by_a_worker_inside_malloc_still_kills(ctx):
    """SIGTERM lands on short-lived workers, often inside malloc; the shim
    takes it again 1 ms later, and the worker may end before that: the
    signal must still end the process (it survived 2 runs in 10)."""
    for _ in range(6):
        plain, r, d = both_same(ctx, ["review_habits", "lostterm"], timeout=30)
        check(plain.status.is_signal(signal.SIGTERM), "baseline: %s" % plain.status)


def test_crash_in_a_thread_that_blocks_every_signal_is_profiled(ctx):
    """A worker that blocks every signal faults: the kernel kills a thread
    that faults with SIGSEGV blocked without running any handler, so the
    shim keeps the faults out of the kernel's mask too; the profiles are
    written and the process dies of SIGSEGV as without the shim."""
    _, r, d = both_same(ctx, ["review_habits", "blocked_fault"])
    check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))


def test_sigterm_while_the_exit_stop_runs_does_not_wait_for_the_timeout(ctx):
    """A forked, single-threaded child returns from main and its parent
    sends it SIGTERM at once, as a worker pool tells its exiting workers to
    go: the stop ran on the child's own thread with signals held, and the
    SIGTERM taken as they were unblocked waited for that very stop to be
    marked done, for the whole PROFILE_STOP_TIMEOUT (5 s here; Python's
    multiprocessing pools took 10 s longer to close in half the runs).
    A SIGTERM between the stop's claim and its start waited the same way
    (6 of 180 runs beside a CPU hog, all at delay 0): fifteen runs at once,
    then three delays; the parent must not wait near the timeout (a bound of
    4 s, far above the tens of milliseconds the stop takes). The child
    writes its own files (PROFILE_FORKS=own): a stop long enough to be hit."""
    for delay in ["0"] * 15 + ["1000", "5000", "20000"]:
        d = ctx.mkdtemp("prof")
        r = run(ctx, ["term_at_exit", delay], env=prof_env(ctx, d, PROFILE_STOP_TIMEOUT=5, PROFILE_FORKS="own"),
                timeout=60)
        check(r.status.is_exit(0) and r.stdout_text.startswith("waited "), "delay %s: %s\n%s" % (
            delay, r.status, r.describe()))
        waited = float(r.stdout_text.split()[1])
        check(waited < 4.0, "delay %s: the parent waited %.2f s for its child (PROFILE_STOP_TIMEOUT 5)\n%s" % (
            delay, waited, r.describe()))
        child = [n for n in pprofs(d) if ".term_at_exit." in n]
        check(len(child) == 3, "delay %s: the child's files: %s" % (delay, pprofs(d)))
