"""Programs a review of the signal and stop redesign broke the shim with
(tests/workloads/review_habits.c, unwinds_itself.c), each compared with a
plain run: a hang, a process that survived SIGTERM, a crash with no
profile, a small thread stack overflowed, a program's own use of the
shim's signal number, a parent kept waiting on a daemon's pipe."""

import os
import signal
import subprocess

from common import check, image_files, indent
from st_helpers import pprofs, prof_env, run


def _both(ctx, argv, timeout=60, **vars):
    plain = run(ctx, argv, env=ctx.env(preload=False), timeout=timeout)
    d = ctx.mkdtemp("prof")
    r = run(ctx, argv, env=prof_env(ctx, d, **vars), timeout=timeout)
    check(r.status.key() == plain.status.key(), "%s: under the shim %s, without it %s\n%s" % (
        " ".join(argv), r.status, plain.status, r.describe()))
    check(r.stdout_text == plain.stdout_text, "%s: stdout differs\nplain:\n%s\nshim:\n%s" % (
        " ".join(argv), indent(plain.stdout_text), indent(r.stdout_text)))
    return plain, r, d


def test_program_that_unwinds_itself_with_libunwind(ctx):
    """A program looping on unw_step: the sampler, unwinding with the same
    libunwind, deadlocked on its mutex (3 runs of 4 hung). The shim's walks
    use its own copy of libgcc's unwinder. Three runs at 1000 Hz."""
    for _ in range(3):
        _, r, d = _both(ctx, ["unwinds_itself"], timeout=30, PROFILE_CPU_HZ=1000)
        check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s" % pprofs(d))


def test_sigterm_taken_by_a_worker_inside_malloc_still_kills(ctx):
    """SIGTERM lands on short-lived workers, often inside malloc; the shim
    takes it again 1 ms later, and the worker may end before that: the
    signal must still end the process (it survived 2 runs in 10)."""
    for _ in range(6):
        plain, r, d = _both(ctx, ["review_habits", "lostterm"], timeout=30)
        check(plain.status.is_signal(signal.SIGTERM), "baseline: %s" % plain.status)


def test_crash_in_a_thread_that_blocks_every_signal_is_profiled(ctx):
    """A worker that blocks every signal faults: the kernel kills a thread
    that faults with SIGSEGV blocked without running any handler, so the
    shim keeps the faults out of the kernel's mask too; the profiles are
    written and the process dies of SIGSEGV as without the shim."""
    _, r, d = _both(ctx, ["review_habits", "blocked_fault"])
    check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))


def test_threads_with_small_stacks_are_sampled_safely(ctx):
    """16 KiB thread stacks with 3000 and 7000 bytes in use (a plain run
    takes 8000), sampled at 1000 Hz. The shim's static TLS (2.7 KiB) comes
    out of each thread's stack and the sampling signal's frame needs room
    there: thread stacks of a size the program chose get that much more
    (with 4000 in use they overflowed: SIGSEGV, no profile)."""
    for used in ("3000", "7000"):
        _, r, d = _both(ctx, ["review_habits", "smallstack", used], PROFILE_CPU_HZ=1000)
        check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s" % pprofs(d))


def test_a_wait_on_a_small_fiber_stack(ctx):
    """A coroutine on a 16 KiB makecontext stack with 14 KiB in use sleeps
    150 ms (a wait the profile records at any rate): the record's stack
    walk needs ~5 KiB and the fiber's bounds are the program's, unknown to
    the shim, so it records the caller alone (it overflowed into the guard
    page: SIGSEGV). Status, output and files as ever."""
    _, r, d = _both(ctx, ["review_habits", "fiber"])
    check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s" % pprofs(d))


def test_cpu_on_a_small_fiber_stack(ctx):
    """A coroutine on a 16 KiB makecontext stack with 11 KiB in use burns
    0.2 s, sampled at 1000 Hz: the shim's handler runs on the thread's
    alternate stack and walks from there; with none ("noalt": the program
    disabled it) the signal lands on the coroutine's stack, whose bounds
    the shim does not know, and the handler takes the interrupted
    instruction alone. (Its walk on the coroutine's stack overflowed into
    the guard page from 11 KiB in use: SIGSEGV, every run, either way.)
    Twenty runs, ten of each."""
    for i in range(20):
        argv = ["review_habits", "fiber_burn", "11264"] + (["noalt"] if i % 2 else [])
        _, r, d = _both(ctx, argv, PROFILE_CPU_HZ=1000)
        check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s" % pprofs(d))
        if i < 2:
            prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
            check(prof.flat("fiber_spin", "cpu") > 0.5 * prof.total("cpu"), "%s: the burn is not in the profile\n%s" % (
                " ".join(argv[1:]), prof.cum_table("cpu")))


def test_program_waits_for_the_shims_signal_number_in_sigsuspend(ctx):
    """The program blocks SIGRTMAX-4, sends it to itself, and waits in
    sigsuspend with its old mask: its handler runs once (it livelocked:
    100,000 sigsuspend returns, the handler never ran)."""
    _both(ctx, ["review_habits", "sigsuspend_own"], timeout=30)


def test_sighold_and_sigrelse_of_the_shims_signal_number(ctx):
    """sighold, raise, sigrelse: the handler runs after the release."""
    _both(ctx, ["review_habits", "sigrelse_own"])


def test_a_daemons_parent_pipe_is_not_held_open(ctx):
    """out=$(prog) where prog forks a child that points its stdio at
    /dev/null, calls setsid and lives 6 s: the reader of the pipe is done
    when the parent exits, as without the shim (the shim's stderr duplicate
    kept it waiting for the daemon's end). The daemon creates a file as it
    ends: the shell must be done while that file is not there yet, however
    slow the machine."""
    prog = ctx.workload("review_habits")
    for label, env in (("plain", ctx.env(preload=False)), ("shim", prof_env(ctx, ctx.mkdtemp("prof")))):
        gone = os.path.join(ctx.mkdtemp("daemon"), "gone")
        p = subprocess.run(["/bin/sh", "-c", 'out=$("$0" daemon_pipe "$1" 2>&1); echo "$out"', prog, gone], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        check(b"parent exits" in p.stdout, "%s: %r" % (label, p.stdout))
        check(not os.path.exists(gone), "%s: the shell waited for the daemon's end to read the pipe" % label)


def test_a_program_that_closes_its_stdio_and_runs_on_does_not_hold_the_pipe(ctx):
    """x=$( { prog & } 2>&1 | cat ) where prog closes fds 1 and 2 and lives
    6 s more: the reader has its end of the pipe when prog closes them, as
    without the shim (the shim kept a duplicate of stderr, for its line,
    until prog's end: 6 s). The shim lets a pipe's duplicate go 200 ms
    after the close. prog creates a file as it ends: the shell must be done
    while that file is not there yet, however slow the machine."""
    prog = ctx.workload("review_habits")
    for label, env in (("plain", ctx.env(preload=False)), ("shim", prof_env(ctx, ctx.mkdtemp("prof")))):
        gone = os.path.join(ctx.mkdtemp("closer"), "gone")
        p = subprocess.run(["/bin/sh", "-c", 'out=$( { "$0" closes_stdio "$1" & } 2>&1 | cat ); echo "$out"', prog, gone],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        check(b"closing stdio" in p.stdout, "%s: %r" % (label, p.stdout))
        check(not os.path.exists(gone), "%s: the reader waited for the program's end to have the pipe's" % label)


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
    4 s, far above the tens of milliseconds the stop takes)."""
    for delay in ["0"] * 15 + ["1000", "5000", "20000"]:
        d = ctx.mkdtemp("prof")
        r = run(ctx, ["term_at_exit", delay], env=prof_env(ctx, d, PROFILE_STOP_TIMEOUT=5), timeout=60)
        check(r.status.is_exit(0) and r.stdout_text.startswith("waited "), "delay %s: %s\n%s" % (
            delay, r.status, r.describe()))
        waited = float(r.stdout_text.split()[1])
        check(waited < 4.0, "delay %s: the parent waited %.2f s for its child (PROFILE_STOP_TIMEOUT 5)\n%s" % (
            delay, waited, r.describe()))
        child = [n for n in pprofs(d) if ".term_at_exit." in n]
        check(len(child) == 3, "delay %s: the child's files: %s" % (delay, pprofs(d)))


def test_a_close_that_succeeds_keeps_errno(ctx):
    """close(2) succeeding leaves errno as it was (the shim's look at its
    duplicate of stderr left EBADF behind), inert and profiled."""
    argv = ["review_habits", "close_errno"]
    plain = run(ctx, argv, env=ctx.env(preload=False))
    check(plain.stdout_text == "close(2) = 0, errno 0\n", "plain: %r" % plain.stdout_text)
    for env in (ctx.env(), prof_env(ctx, ctx.mkdtemp("prof"))):
        r = run(ctx, argv, env=env)
        check(r.status.key() == plain.status.key() and r.stdout_text == plain.stdout_text,
              "under the shim: %s %r, plain %s %r" % (r.status, r.stdout_text, plain.status, plain.stdout_text))

