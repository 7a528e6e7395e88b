"""Programs a review of the signal and stop redesign broke the shim with
(tests/workloads/review_habits.c, unwinds_itself.c), each compared with a
plain run: a hang, a small thread stack overflowed, a parent kept waiting
on a daemon's pipe. The signal tests that were here are in
test_signals_fatal.py and test_signals_masks.py."""

import errno
import os
import subprocess

from common import check, image_files
from sig_helpers import both_same
from st_helpers import pprofs, prof_env, run


def test_program_that_unwinds_itself_with_libunwind(ctx):
    """A program looping on unw_step: the sampler, unwinding with the same
    libunwind, deadlocked on its mutex (3 runs of 4 hung). The shim's walks
    use its own copy of libgcc's unwinder. Three runs at 1000 Hz."""
    for _ in range(3):
        _, r, d = both_same(ctx, ["unwinds_itself"], timeout=30, PROFILE_CPU_HZ=1000)
        check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s" % pprofs(d))


def test_threads_with_small_stacks_are_sampled_safely(ctx):
    """16 KiB thread stacks with 3000 and 7000 bytes in use (a plain run
    takes 8000), sampled at 1000 Hz. The shim's static TLS (2.7 KiB) comes
    out of each thread's stack and the sampling signal's frame needs room
    there: thread stacks of a size the program chose get that much more
    (with 4000 in use they overflowed: SIGSEGV, no profile)."""
    for used in ("3000", "7000"):
        _, r, d = both_same(ctx, ["review_habits", "smallstack", used], PROFILE_CPU_HZ=1000)
        check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s" % pprofs(d))


def test_a_thread_whose_attributes_leave_the_stack_size_unset(ctx):
    """Attributes from pthread_attr_init with no size set: the thread gets
    the default stack, as plain, and puts 256 KiB of it to use at 1000 Hz.
    The room added to small stacks read such a size as 0 and gave the
    thread the room alone, where that passed glibc's minimum (with AMX
    the signal frame is 11,952 bytes): ~16 KiB stacks, and Chromium
    died of SIGSEGV on its thread pool's."""
    _, r, d = both_same(ctx, ["review_habits", "defaultattr"], PROFILE_CPU_HZ=1000)
    check("stack " in r.stdout_text, "the thread did not say its stack's size\n%s" % r.describe())
    check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s" % pprofs(d))


def test_a_wait_on_a_small_fiber_stack(ctx):
    """A coroutine on a 16 KiB makecontext stack with 14 KiB in use sleeps
    150 ms (a wait the profile records at any rate): the record's stack
    walk needs ~5 KiB and the fiber's bounds are the program's, unknown to
    the shim, so it records the caller alone (it overflowed into the guard
    page: SIGSEGV). Status, output and files as ever."""
    _, r, d = both_same(ctx, ["review_habits", "fiber"])
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
        _, r, d = both_same(ctx, argv, PROFILE_CPU_HZ=1000)
        check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s" % pprofs(d))
        if i < 2:
            prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
            check(prof.flat("fiber_spin", "cpu") > 0.5 * prof.total("cpu"), "%s: the burn is not in the profile\n%s" % (
                " ".join(argv[1:]), prof.cum_table("cpu")))


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


def test_a_fork_that_succeeds_keeps_errno(ctx):
    """fork succeeding leaves errno as it was in parent and child; the
    shim's fork handlers left ENOENT behind in the parent (the unlink of a
    hand-over file that was not there), profiled."""
    argv = ["review_habits", "fork_errno"]
    plain = run(ctx, argv, env=ctx.env(preload=False))
    want = "child errno %d\nparent errno %d\n" % (errno.EXDEV, errno.EXDEV)
    check(plain.stdout_text == want, "plain: %r" % plain.stdout_text)
    for env in (ctx.env(), prof_env(ctx, ctx.mkdtemp("prof")), prof_env(ctx, ctx.mkdtemp("prof"), PROFILE_HEAP_SAMPLE="0")):
        r = run(ctx, argv, env=env)
        check(r.status.key() == plain.status.key() and r.stdout_text == plain.stdout_text,
              "under the shim: %s %r, plain %s %r" % (r.status, r.stdout_text, plain.status, plain.stdout_text))


def test_forks_while_the_snapshot_worker_loads_libdw(ctx):
    """A program that forks at once, while the snapshot worker (started at
    setup by PROFILE_INTERVAL) loads libdw: a child forked in the middle of
    that load waited 2 s at its stop for a loader thread it does not have,
    and named nothing ("still being loaded ... after 2 s"): 1 to 8 runs in
    15 hit it. The fork now waits for the load, and none starts during it."""
    for spin in (0, 50, 100, 200, 400) * 3:
        argv = ["review_habits", "fork_at_start", str(spin)]
        r = run(ctx, argv, env=prof_env(ctx, ctx.mkdtemp("prof"), PROFILE_INTERVAL="1s"))
        check(r.status.is_exit(0) and r.stdout_text == "forked 5\n", "spin %d us:\n%s" % (spin, r.describe()))
        check("being loaded" not in r.err.decode(), "spin %d us: a child met libdw half-loaded\n%s" % (
            spin, r.describe()))


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

