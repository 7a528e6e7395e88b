"""A program that puts a seccomp filter in force: the shim never makes a
call the filter kills, and the program lives and dies as without the shim.

seccomp_filter burns CPU in before_filter(), installs a filter that kills
(or traps, or fails with EPERM) one system call, then runs 4 threads and
exits or raises SIGTERM. Without the shim each of these runs exits 0 (or
dies of SIGTERM). The shim made those calls after the filter was in -- a
CPU timer in every new thread (timer_create), its files at the stop
(openat, rename...) -- and the program died of SIGSYS: 159 where plain
exits 0. It now runs the filter on its own calls when the program hands it
over, and gives up what the filter would kill, saying so.
"""

import os
import re
import shutil
import signal
import tempfile

from common import Skip, check, image_files
from st_helpers import pprofs, prof_env, run

SYS = {"timer_create": 222, "openat": 257, "rename": 82, "ptrace": 101, "rt_sigreturn": 15, "prctl": 157, "kill": 62, "getpid": 39}
ALL = image_files("run")


def _pair(ctx, name, action="kill", how="prctl", end="exit"):
    argv = ["seccomp_filter", str(SYS[name]), action, how, end]
    plain = run(ctx, argv, env=ctx.env(preload=False))
    if plain.status.is_exit(2) and b"seccomp" in plain.err:
        raise Skip("this kernel refuses seccomp filters: %s" % plain.err.decode().strip())
    want = "filtered %d, started 4 threads\n" % SYS[name]
    if end == "exec":
        want += "exec'd image started 4 threads\n"
    ok = plain.status.is_signal(signal.SIGTERM) if end == "term" else plain.status.is_exit(0)
    check(ok and plain.stdout_text == want, "%s without the shim:\n%s" % (" ".join(argv), plain.describe()))
    d = ctx.mkdtemp("prof")
    r = run(ctx, argv, env=prof_env(ctx, d))
    check(r.status.key() == plain.status.key() and r.out == plain.out,
          "%s: under the shim %s, without it %s\n%s" % (" ".join(argv), r.status, plain.status, r.describe()))
    return r, d


def _top(ctx, path):
    return ctx.pprof.top(path, nodecount=40)


def test_a_filter_that_kills_the_timers_ends_sampling_not_the_program(ctx):
    for how in ("prctl", "syscall"):
        r, d = _pair(ctx, "timer_create", how=how)
        check(pprofs(d) == ALL, "%s: PROFILE_DIR holds %s\n%s" % (how, pprofs(d), r.describe()))
        check(re.search(r"seccomp filter forbids timer_create, which sampling needs", r.err.decode()),
              "%s: no line says why sampling ended\n%s" % (how, r.describe()))
        top = _top(ctx, "%s/run.cpu.pprof" % d)
        check("before_filter" in top and "after_filter" not in top,
              "%s: the CPU before the filter should be in the profile, none after:\n%s" % (how, top))


def test_a_filter_that_kills_the_stops_calls_means_no_files_and_a_line(ctx):
    for name in ("openat", "rename"):
        for end in ("exit", "term"):
            r, d = _pair(ctx, name, end=end)
            check(pprofs(d) == [], "%s %s: PROFILE_DIR holds %s\n%s" % (name, end, pprofs(d), r.describe()))
            check(re.search(r"seccomp filter forbids %s, which the stop needs: this process writes no profile"
                            % name, r.err.decode()), "%s %s: no line says why\n%s" % (name, end, r.describe()))


def test_a_filter_that_kills_kill_leaves_the_stop_alone(ctx):
    """kill is the fork hand-over's alone (its owner looked for): forbidden,
    forked children write their own files; the stop still writes this
    image's (it wrote none when kill was one of the stop's calls)."""
    r, d = _pair(ctx, "kill")
    check(pprofs(d) == ALL, "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))


def test_a_trap_is_a_kill_and_an_errno_is_a_failure(ctx):
    r, d = _pair(ctx, "timer_create", action="trap")
    check(pprofs(d) == ALL, "trap: PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))
    # A call that fails is the shim's to cope with: the threads go
    # unsampled, the stop writes as usual.
    r, d = _pair(ctx, "openat", action="errno")
    check("forbids" not in r.err.decode(), "errno: a failing call is not a forbidden one\n%s" % r.describe())
    # But rt_sigreturn must run: answered EPERM, the shim's handlers would
    # return into the restorer's next bytes (SIGSEGV, 139). The program has
    # no handler of its own and never makes the call.
    r, d = _pair(ctx, "rt_sigreturn", action="errno")
    check("forbids rt_sigreturn" in r.err.decode(), "no line says why\n%s" % r.describe())
    # rt_sigreturn killed: the shim's stand-ins for SIG_DFL step aside, and
    # SIGTERM kills as without the shim (it died of SIGSYS).
    _pair(ctx, "rt_sigreturn", end="term")


def test_a_filter_that_kills_getpid(ctx):
    """getpid is how the shim tells a vfork child (which must not stop)
    from its parent; every stop path asked it first, even after the filter
    had made the shim give the stop up: a normal exit died of SIGSYS. A
    filter's error (getpid answering -1) read as "a vfork child", and the
    stop was skipped without a word."""
    # Not "term": glibc's raise asks getpid too.
    for end in ("exit", "exec"):
        r, d = _pair(ctx, "getpid", end=end)
        check(pprofs(d) == [], "%s: PROFILE_DIR holds %s\n%s" % (end, pprofs(d), r.describe()))
        check("forbids getpid, which the stop needs" in r.err.decode(), "%s: no line says why\n%s" % (end, r.describe()))
    # An error tells nothing either (a vfork child ran its parent's stop):
    # given up the same way, and said.
    r, d = _pair(ctx, "getpid", action="errno")
    check(pprofs(d) == [] and "forbids getpid, which the stop needs" in r.err.decode(),
          "errno: PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))


def test_a_filter_on_calls_the_shim_never_makes_changes_nothing(ctx):
    r, d = _pair(ctx, "ptrace")
    check(pprofs(d) == ALL and "forbids" not in r.err.decode(),
          "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))
    top = _top(ctx, "%s/run.cpu.pprof" % d)
    check("before_filter" in top and "after_filter" in top, "both phases should be sampled:\n%s" % top)


def test_an_image_execd_under_the_filter_stays_inert(ctx):
    """The exec'd image inherits the filter but cannot see it: the image
    before the exec, which saw it go in, tells it through its marker, and
    is the last to write (NAME.*). The exec'd image was killed at its
    first thread's timer (SIGSYS)."""
    r, d = _pair(ctx, "timer_create", end="exec")
    check(pprofs(d) == ALL and len(r.wrote_lines()) == 1,
          "want the image before the exec's files alone: PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))
    r, d = _pair(ctx, "rename", end="exec")
    check(pprofs(d) == [], "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))


def test_a_filter_put_in_with_the_programs_own_system_call_traps_nothing_of_the_shims(ctx):
    """A filter the shim does not see go in (a system call instruction of
    the program's own, as Chromium's sandbox does), trapping timer_create,
    with a SIGSYS handler set through syscall(SYS_rt_sigaction) that
    reports a crash: the shim's timer for each new thread was trapped and
    the program "crashed" (exit 99). The shim's own call is answered ENOSYS
    and the threads go unsampled, said in a line."""
    r, d = _pair(ctx, "timer_create", action="trap", how="raw")
    check(pprofs(d) == ALL, "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))
    check("traps system call 222" in r.err.decode(), "no line says the threads went unsampled\n%s" % r.describe())


def test_headless_chromium_with_its_sandbox(ctx):
    """Chromium's renderers put in a filter with their own system call and
    trap (SIGSYS) what their policy forbids, timer_create and clocks named
    by a thread id among them; the sandbox's handler reports a crash. Under
    the shim each renderer crashed on the shim's timer and the browser hung.
    The sandbox runs only for a user other than root: the test runs it as
    nobody, and skips where Chromium or its sandbox cannot run."""
    exe = shutil.which("chromium")
    setpriv = shutil.which("setpriv")
    if not exe or not setpriv or os.geteuid() != 0:
        raise Skip("needs chromium, setpriv and root (to run Chromium's sandbox as nobody)")
    # nobody must reach them: the test's own directories are root's alone.
    base = tempfile.mkdtemp(prefix="profshim-chromium-", dir="/tmp")
    try:
        _chromium_as_nobody(ctx, exe, setpriv, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _chromium_as_nobody(ctx, exe, setpriv, base):
    home, d = os.path.join(base, "home"), os.path.join(base, "prof")
    lib = os.path.join(base, "libprofshim.so")
    shutil.copy(ctx.lib, lib)
    for p in (home, d):
        os.mkdir(p)
        os.chmod(p, 0o777)
    os.chmod(base, 0o755)
    os.chmod(lib, 0o755)
    argv = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", exe, "--headless", "--disable-gpu",
            "--user-data-dir=" + home, "--dump-dom", "data:text/html,<p>sandboxed</p>"]
    env = {"HOME": home, "PATH": "/usr/bin:/bin"}
    plain = run(ctx, argv, env=dict(env), cwd=home, timeout=90)
    if not plain.status.is_exit(0) or b"<p>sandboxed</p>" not in plain.out:
        raise Skip("Chromium with its sandbox does not run here as nobody:\n%s" % plain.describe())
    r = run(ctx, argv, env=dict(env, LD_PRELOAD=lib, PROFILE_DIR=d, PROFILE_NAME="run"), cwd=home, timeout=90)
    check(r.status.is_exit(0) and b"<p>sandboxed</p>" in r.out,
          "Chromium under the shim: %s, without it %s\n%s" % (r.status, plain.status, r.describe()))
    check("run.cpu.pprof" in pprofs(d), "the browser's own profile is missing: %s\n%s" % (pprofs(d), r.describe()))


def test_a_trap_inside_the_shims_own_signal_handler(ctx):
    """The sampling handler names a thread it did not start with
    prctl(PR_GET_NAME); a filter the shim did not see traps prctl. The
    handler blocked SIGSYS, so the kernel killed the process with it (159);
    the trap is now answered as any other of the shim's own calls."""
    r, d = _pair(ctx, "prctl", action="trap", how="raw")
    check(pprofs(d) == ALL, "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))


def _madvise_pair(ctx, mode):
    argv = ["seccomp_madvise", mode]
    plain = run(ctx, argv, env=ctx.env(preload=False))
    if plain.status.is_exit(2) and b"seccomp" in plain.err:
        raise Skip("this kernel refuses seccomp filters: %s" % plain.err.decode().strip())
    check(plain.status.is_exit(4), "%s without the shim:\n%s" % (" ".join(argv), plain.describe()))
    return argv, plain


def test_a_filter_that_kills_madvise_leaves_the_heap_profiled_program_alone(ctx):
    """seccomp_madvise kills madvise, then mallocs, fills and frees 1 MiB
    for 0.4 s (2000 times at least); glibc's malloc never calls madvise
    there. With the heap profiled the shim's jemalloc serves malloc, and its
    decay purged freed pages with madvise from inside free(): most runs died
    of SIGSYS (159) where plain exits 4 (one in three at 2000 blocks and no
    more). jemalloc now keeps what is freed once such a filter goes in. 20
    runs, each as plain; the stop, which needs madvise (its thread's exit),
    is given up with a line."""
    argv, plain = _madvise_pair(ctx, "free")
    for i in range(20):
        d = ctx.mkdtemp("prof")
        r = run(ctx, argv, env=prof_env(ctx, d))
        check(r.status.key() == plain.status.key() and r.out == plain.out,
              "run %d: under the shim %s, without it %s\n%s" % (i + 1, r.status, plain.status, r.describe()))
        check("seccomp filter forbids madvise" in r.err.decode(),
              "run %d: no line says why\n%s" % (i + 1, r.describe()))


def test_a_filter_that_kills_madvise_and_calloc_of_freed_memory(ctx):
    """calloc of a block jemalloc just freed: it zeroed the reused pages
    with madvise(MADV_DONTNEED) whatever its decay, and died of SIGSYS every
    time. Its madvise now fails without reaching the kernel under such a
    filter, and jemalloc zeroes with memset instead: the pages read zero."""
    argv, plain = _madvise_pair(ctx, "calloc")
    check(plain.stdout_text == "calloc: 0 pages not zero\n", "plain:\n%s" % plain.describe())
    for i in range(3):
        r = run(ctx, argv, env=prof_env(ctx, ctx.mkdtemp("prof")))
        check(r.status.key() == plain.status.key() and r.out == plain.out,
              "run %d: under the shim %s, without it %s\n%s" % (i + 1, r.status, plain.status, r.describe()))
