"""Signals and threads as real programs use them, each run compared
with a plain run of the same program (tests/workloads/sig_habits.c).

CONTRACT.md, transparency: every thread is sampled whatever its mask (worker pools
that block every signal, sigwait threads); the sampling signal is the shim's
alone -- the program can neither block nor wait for it, its mask queries
answer as without the shim, and the same number sent by someone else
reaches the program as it would; the signal API behaves as without the shim
(siginterrupt, sysv_signal, sigset, SA_RESETHAND); nothing of the shim's
makes a single-threaded operation fail; after a fatal signal no program
thread runs on.
"""

import os
import shutil
import signal
import subprocess

from common import CpuHog, check, image_files, indent
from st_helpers import by_thread, prof_env, pprofs, run, start, truths

RTSIG = signal.SIGRTMAX - 4


def _both(ctx, argv, timeout=60, **vars):
    plain = run(ctx, argv, env=ctx.env(preload=False), timeout=timeout)
    d = ctx.mkdtemp("prof")
    r = run(ctx, argv, env=prof_env(ctx, d, **vars), timeout=timeout)
    return plain, r, d


def _lines(text):
    """What the program printed, less its CPU truths (they differ run to run),
    in order of content (threads print in any order)."""
    return sorted(l for l in text.splitlines() if not l.startswith("truth "))


def _same_as_plain(plain, r, what):
    check(r.status.key() == plain.status.key(), "%s: under the shim the process %s, without it %s\n%s" % (
        what, r.status, plain.status, r.describe()))
    check(_lines(r.stdout_text) == _lines(plain.stdout_text), "%s: the program saw something else under the "
          "shim.\nwithout:\n%s\nwith:\n%s\n%s" % (what, indent(plain.stdout_text), indent(r.stdout_text), r.describe()))


def _dies_as_plain(ctx, argv, sig, runs):
    """runs pairs of argv plain and profiled: both die of sig, the program
    sees the same, and the profiled run leaves its three files and one line."""
    what = " ".join(argv[1:])
    for i in range(runs):
        plain, r, d = _both(ctx, argv)
        check(plain.status.is_signal(sig), "%s: the plain run must die of signal %d: %s" % (what, sig, plain.status))
        _same_as_plain(plain, r, "%s run %d" % (what, i))
        check(pprofs(d) == image_files("run") and len(r.summary_lines()) == 1,
              "%s run %d: PROFILE_DIR holds %s\n%s" % (what, i, pprofs(d), r.describe()))


def _masked_threads_sampled(ctx, mode, names):
    plain, r, d = _both(ctx, ["sig_habits", mode], PROFILE_CPU_HZ=250)
    _same_as_plain(plain, r, mode)
    check(len(r.summary_lines()) == 1, "%s: want one summary line\n%s" % (mode, r.describe()))
    prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    cpu = by_thread(prof, "cpu")
    got = {t["name"]: (t["tid"], int(t["cpu_ns"])) for t in truths(r.stdout_text, "thread")}
    for name in names:
        check(name in got, "%s: no truth line for %s\n%s" % (mode, name, r.describe()))
        tid, ns = got[name]
        seen = cpu.get(tid, 0)
        check(seen >= 0.9 * ns, "%s: thread %s (every signal blocked) used %.3f s of CPU; the profile holds "
              "%.3f s of it\n%s" % (mode, name, ns / 1e9, seen / 1e9, prof.cum_table("cpu")))


def test_workers_created_with_every_signal_blocked_are_sampled(ctx):
    """liblzma's habit: pthread_sigmask(SIG_SETMASK, all) around
    pthread_create, so the workers start with a full mask; each still asks
    its mask and sees SIGRTMAX-4 blocked, as without the shim."""
    _masked_threads_sampled(ctx, "lzma", ["lzma-0", "lzma-1"])


def test_signal_thread_program_is_sampled_and_gets_its_signal(ctx):
    """The "signal thread" idiom: main blocks everything, one thread loops on
    sigwaitinfo(full set), workers burn. The workers are sampled, and the
    signal thread gets SIGUSR1 (10), never one of the shim's."""
    _masked_threads_sampled(ctx, "sigthread", ["sigthr-0", "sigthr-1"])


def test_threads_started_with_attr_sigmask_are_sampled(ctx):
    """pthread_attr_setsigmask_np(full set)."""
    _masked_threads_sampled(ctx, "attrmask", ["attr-0", "attr-1"])


def test_threads_that_block_everything_later_are_sampled(ctx):
    """pthread_sigmask(SIG_BLOCK, all) later in the thread's life."""
    _masked_threads_sampled(ctx, "later", ["later-0", "later-1"])


def test_sigwait_on_a_full_set_gets_the_programs_signal(ctx):
    """Every signal blocked, alarm(1), sigwait(full set): SIGALRM (14), as
    without the shim -- not the shim's SIGRTMAX-4 (the profile of its 0.3 s
    burn is taken meanwhile at 1000 Hz)."""
    plain, r, d = _both(ctx, ["sig_habits", "sigwait_alarm"], PROFILE_CPU_HZ=1000)
    _same_as_plain(plain, r, "sigwait_alarm")
    check("sigwait got 14" in r.stdout_text, "sigwait should get SIGALRM\n%s" % r.describe())


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


def test_siginterrupt_makes_read_fail_with_eintr(ctx):
    """siginterrupt(SIGALRM, 1): alarm(1) interrupts a read of an empty pipe
    with EINTR, both times (the shim's signal() used to restart it)."""
    plain, r, _ = _both(ctx, ["sig_habits", "siginterrupt"], timeout=20)
    _same_as_plain(plain, r, "siginterrupt")
    check(r.stdout_text.count("Interrupted system call") == 2, "both reads must fail with EINTR\n%s" % r.describe())


def test_views_after_sysv_signal_sigset_and_resethand(ctx):
    """What sigaction() reports after sysv_signal, sigset (and SIG_HOLD), a
    one-shot handler's delivery, signal() and sigignore, line for line as
    without the shim."""
    plain, r, _ = _both(ctx, ["sig_habits", "views"])
    _same_as_plain(plain, r, "views")


def test_fork_while_another_thread_calls_signal(ctx):
    """One thread loops signal(SIGUSR1, h) while another forks 40 children
    that call signal(SIGUSR1, SIG_DFL): every child exits (the shim's lock
    used to be inherited held, and children spun forever)."""
    plain, r, _ = _both(ctx, ["sig_habits", "forksig"], timeout=60)
    _same_as_plain(plain, r, "forksig")
    check("children ok: 40" in r.stdout_text, "every child must exit 0\n%s" % r.describe())


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
        _same_as_plain(plain, r, "altstack run %d" % i)
    prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    check(prof.cum("main", "cpu") > 0.8 * prof.total("cpu"), "main's stack is not walked\n%s" % prof.cum_table("cpu"))


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
                plain, r, d = _both(ctx, ["sig_habits"] + shape)
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
        _dies_as_plain(ctx, ["sig_habits", "termblock", wait], signal.SIGTERM, 1)


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
    _dies_as_plain(ctx, ["sig_habits", "pending"], signal.SIGINT, 5)


def test_one_shot_handler_that_raises_again_leaves_profiles(ctx):
    """node's exit on SIGTERM and SIGINT: a handler installed with
    SA_RESETHAND raises the signal again. The kernel reset the action to
    SIG_DFL itself, where no handler of the shim's stood in, so the process
    died with no profile. As plain (death by SIGTERM, "handler" printed
    once), with the profiles and one line; three runs."""
    _dies_as_plain(ctx, ["sig_habits", "resethand"], signal.SIGTERM, 3)


def test_sigterm_in_malloc_then_another_thread_exits(ctx):
    """SIGTERM to main inside malloc (deferred by the shim), main then
    blocks it, and another thread calls exit(0) 0.3 ms later: without the
    shim the process died of SIGTERM before the exit; under it, the exit's
    stop ran and the process often exited 0 (5 of 8). Eight runs: death by
    SIGTERM, the profiles written and one line."""
    _dies_as_plain(ctx, ["sig_habits", "termexit"], signal.SIGTERM, 8)


def test_single_threaded_program_can_unshare_a_user_namespace(ctx):
    """unshare(CLONE_NEWUSER) needs a single-threaded process: the shim
    starts no thread of its own while the program runs (its stop thread made
    this fail with EINVAL). The thread count at main is the plain one."""
    plain, r, d = _both(ctx, ["sig_habits", "unshare"])
    _same_as_plain(plain, r, "unshare")
    check("Threads:\t1" in r.stdout_text, "one thread at main\n%s" % r.describe())
    unshare = shutil.which("unshare")
    if unshare and "unshare(CLONE_NEWUSER): 0" in plain.stdout_text:
        p0 = run(ctx, [unshare, "-U", "true"], env=ctx.env(preload=False))
        p1 = run(ctx, [unshare, "-U", "true"], env=prof_env(ctx, ctx.mkdtemp("prof")))
        check(p1.status.key() == p0.status.key(), "`unshare -U true` under the shim %s, without %s\n%s" % (
            p1.status, p0.status, p1.describe()))


def test_thread_names_after_many_threads(ctx):
    """33,000 short threads, then one named "worker" burns 0.3 s: its
    samples carry thread_name=worker (the names table was capped and keyed by
    tid, so a late or reused tid got an old name or none)."""
    d = ctx.mkdtemp("prof")
    r = run(ctx, ["sig_habits", "tidreuse", "33000"], env=prof_env(ctx, d), timeout=120)
    check(r.status.is_exit(0), "%s\n%s" % (r.status, r.describe()))
    prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    tid = truths(r.stdout_text, "thread")[0]["tid"]
    names = by_thread(prof, "samples", key="thread_name")
    ids = by_thread(prof, "samples", key="thread_id")
    check(ids.get(tid, 0) > 0, "the worker's samples are missing\n%s" % prof.cum_table("samples"))
    check(names.get("worker", 0) == ids.get(tid, 0), "the worker's samples must all be named worker: "
          "by name %s, its tid %s has %d" % (names, tid, ids.get(tid, 0)))


def test_xz_threads_are_sampled(ctx):
    """xz -T2 (liblzma blocks every signal around pthread_create): the CPU
    profile holds nearly all of xz's CPU, as its rusage says (it held 0.4%)."""
    xz = shutil.which("xz")
    check(xz, "xz not found (install-deps installs xz-utils)")
    cwd = ctx.mkdtemp("cwd")
    data = os.path.join(cwd, "data")
    with open(data, "wb") as f:
        seed = 12345
        chunk = bytearray()
        for i in range(1 << 20):
            seed = (seed * 1103515245 + 12345) & 0x7fffffff
            chunk.append(97 + (seed >> 16) % 16)
        for _ in range(6):
            f.write(chunk)
    d = ctx.mkdtemp("prof")
    r = run(ctx, [xz, "-T2", "-6", "-k", "-f", data], env=prof_env(ctx, d), cwd=cwd, timeout=120)
    check(r.status.is_exit(0), "%s\n%s" % (r.status, r.describe()))
    prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    total = prof.total("cpu") / 1e9
    check(total >= 0.8 * r.cpu, "xz used %.2f s of CPU (rusage); its profile holds %.2f s\n%s" % (
        r.cpu, total, prof.cum_table("cpu")))
