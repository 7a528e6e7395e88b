"""Fatal signals and signal transparency.

CONTRACT.md, stop paths, the fatal-signal row: for every signal
of the list (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT from abort(), SIGSEGV,
SIGBUS, SIGFPE, SIGILL, SIGPIPE, SIGALRM, SIGXCPU, SIGXFSZ, SIGUSR1, SIGUSR2)
whose action is the default: both profiles written, then the process dies of
the same signal with its core-dump behaviour unchanged. Each signal arrives
the way it really does (a fault, abort(), alarm(), an rlimit, a dead pipe, or
kill from another process); the parent checks the raw wait status from
wait4: WIFSIGNALED, WTERMSIG and WCOREDUMP, against the same program run
without the shim, both with RLIMIT_CORE unlimited in a temp cwd.

CONTRACT.md, transparency, signals: a signal ignored at start stays ignored; the
program's own handlers replace the shim's; sigaction(sig, NULL, &old) reports
what the program would see without the shim; SIGPROF and setitimer stay the
program's (DESIGN "Why the CPU profiler is ours": the shim samples with its
own real-time signal SIGRTMAX-4); a program that takes SIGRTMAX-4 gets its
own signals and the summary says the CPU profile stopped.
(raise() of SIGTERM/SIGINT/SIGUSR1, abort() and SIGSEGV through test_stops,
and SIGTERM/SIGPIPE ignored at start through test_signals, are not repeated.)
"""

import os
import re
import shutil
import signal
import time

from common import check, image_files, indent
from st_helpers import prof_env, pprofs, run, start

HELD = 8 << 20

# signal -> how it arrives. "natural": its own cause inside the program
# (st_signal.c says which); "kill": sent by the parent while the program is
# busy (process-directed, as a real sender does).
SIGNALS = [
    ("SIGTERM", "kill"), ("SIGINT", "kill"), ("SIGHUP", "kill"), ("SIGQUIT", "kill"),
    ("SIGABRT", "natural"), ("SIGSEGV", "natural"), ("SIGBUS", "natural"), ("SIGFPE", "natural"),
    ("SIGILL", "natural"), ("SIGPIPE", "natural"), ("SIGALRM", "natural"), ("SIGXCPU", "natural"),
    ("SIGXFSZ", "natural"), ("SIGUSR1", "kill"), ("SIGUSR2", "kill"),
]

# signals whose default action dumps core (signal(7))
CORE_SIGNALS = {"SIGQUIT", "SIGABRT", "SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGXCPU", "SIGXFSZ"}


def _cores(cwd):
    return sorted(n for n in os.listdir(cwd) if n == "core" or n.startswith("core."))


def _die_by(ctx, name, how, env, mode="natural"):
    """One run of st_signal NAME; returns (run, cores found in its cwd).
    RLIMIT_CORE is unlimited, so a core-dumping signal really dumps (the
    core file lands in the run's cwd per /proc/sys/kernel/core_pattern and
    is removed here)."""
    sig = signal.Signals[name]
    cwd = ctx.mkdtemp("cwd")
    if how == "kill":
        r = start(ctx, ["st_signal", name, "wait"], env=env, cwd=cwd, core=True)
        r.wait_for(r"^ready pid=")
        r.kill(sig)
        r.wait(30)
    else:
        r = run(ctx, ["st_signal", name, mode], env=env, cwd=cwd, core=True, timeout=30)
    cores = _cores(cwd)
    for c in cores:
        os.unlink(os.path.join(cwd, c))
    return r, cores


def _fatal(ctx, name, mode="natural"):
    how = dict(SIGNALS)[name]
    if mode != "natural":
        how = mode
    sig = signal.Signals[name]
    plain, plain_cores = _die_by(ctx, name, how, ctx.env(preload=False), mode)
    check(plain.status.is_signal(sig), "st_signal %s without the shim should die of %s; %s\n%s" % (
        name, name, plain.status, plain.describe()))
    if name in CORE_SIGNALS:
        check(plain.status.core, "%s without the shim dumped no core (status %s, core files "
              "%s; core_pattern %r): the core-dump comparison would say nothing" % (
                  name, plain.status, plain_cores, open("/proc/sys/kernel/core_pattern").read().strip()))
    d = ctx.mkdtemp("prof")
    r, cores = _die_by(ctx, name, how, prof_env(ctx, d), mode)
    check(r.status.key() == plain.status.key(),
          "%s (%s): under the shim the process %s; without it, %s (WTERMSIG and WCOREDUMP must be the "
          "same)\n%s" % (name, how, r.status, plain.status, r.describe()))
    check(bool(cores) == bool(plain_cores), "%s: core files without the shim %s, with it %s" % (
        name, plain_cores, cores))
    check(pprofs(d) == image_files("run"), "%s: PROFILE_DIR should hold run.cpu.pprof and "
          "run.heap.pprof, holds %s\n%s" % (name, pprofs(d), r.describe()))
    lines = r.summary_lines()
    check(len(lines) == 1, "%s: want one summary line, got %d\n%s" % (name, len(lines), r.describe()))
    check(not r.error_lines(), "%s: error lines at the stop\n%s" % (name, r.describe()))
    cpu = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    heap = ctx.read(os.path.join(d, "run.heap.pprof"), r)
    check(cpu.cum("sig_work", "samples") > 0, "%s: sig_work (~0.2 s of CPU) is not in the CPU profile\n%s" % (
        name, cpu.cum_table("samples")))
    got = heap.cum("sig_hold", "inuse_space")
    check(0.9 * HELD <= got <= 1.1 * HELD, "%s: sig_hold holds 8 MiB when the signal comes; the heap "
          "profile shows %d\n%s" % (name, got, heap.cum_table("inuse_space")))
    check(any(name in c for c in cpu.comments), "%s: the profile should say it was stopped by %s; "
          "comments: %s" % (name, name, cpu.comments))
    check("survived" not in r.stdout_text, "%s: the program went on after its signal\n%s" % (name, r.describe()))


def test_fatal_SIGTERM(ctx):
    """CONTRACT.md, stop paths, fatal signal SIGTERM (kill from another process)."""
    _fatal(ctx, "SIGTERM")


def test_fatal_SIGINT(ctx):
    """CONTRACT.md, stop paths, fatal signal SIGINT (kill from another process)."""
    _fatal(ctx, "SIGINT")


def test_fatal_SIGHUP(ctx):
    """CONTRACT.md, stop paths, fatal signal SIGHUP (kill from another process)."""
    _fatal(ctx, "SIGHUP")


def test_fatal_SIGQUIT(ctx):
    """CONTRACT.md, stop paths, fatal signal SIGQUIT: core dumped as without the shim."""
    _fatal(ctx, "SIGQUIT")


def test_fatal_SIGABRT(ctx):
    """CONTRACT.md, stop paths, SIGABRT from abort(): core dumped as without the shim."""
    _fatal(ctx, "SIGABRT")


def test_fatal_SIGSEGV(ctx):
    """CONTRACT.md, stop paths, SIGSEGV from a null write: core dumped as without the shim."""
    _fatal(ctx, "SIGSEGV")


def test_fatal_SIGBUS(ctx):
    """CONTRACT.md, stop paths, SIGBUS from a read past the end of a mapped file."""
    _fatal(ctx, "SIGBUS")


def test_fatal_SIGFPE(ctx):
    """CONTRACT.md, stop paths, SIGFPE from an integer division by zero."""
    _fatal(ctx, "SIGFPE")


def test_fatal_SIGILL(ctx):
    """CONTRACT.md, stop paths, SIGILL from ud2."""
    _fatal(ctx, "SIGILL")


def test_fatal_SIGPIPE(ctx):
    """CONTRACT.md, stop paths, SIGPIPE from a write to a pipe without a reader."""
    _fatal(ctx, "SIGPIPE")


def test_fatal_SIGALRM(ctx):
    """CONTRACT.md, stop paths, SIGALRM from alarm()."""
    _fatal(ctx, "SIGALRM")


def test_fatal_SIGXCPU(ctx):
    """CONTRACT.md, stop paths, SIGXCPU from the RLIMIT_CPU soft limit."""
    _fatal(ctx, "SIGXCPU")


def test_fatal_SIGXFSZ(ctx):
    """CONTRACT.md, stop paths, SIGXFSZ from the RLIMIT_FSIZE soft limit (1 MiB; the
    profiles themselves are smaller than that)."""
    _fatal(ctx, "SIGXFSZ")


def test_fatal_SIGUSR1(ctx):
    """CONTRACT.md, stop paths, fatal signal SIGUSR1 (kill from another process)."""
    _fatal(ctx, "SIGUSR1")


def test_fatal_SIGUSR2(ctx):
    """CONTRACT.md, stop paths, fatal signal SIGUSR2 (kill from another process)."""
    _fatal(ctx, "SIGUSR2")


def test_fatal_SIGSEGV_in_a_thread(ctx):
    """CONTRACT.md, stop paths, SIGSEGV from a null write in a second thread while
    main waits in pthread_join."""
    _fatal(ctx, "SIGSEGV", "thread")


def test_fatal_SIGABRT_in_a_thread(ctx):
    """CONTRACT.md, stop paths, abort() in a second thread."""
    _fatal(ctx, "SIGABRT", "thread")


def test_fatal_SIGSEGV_stack_overflow(ctx):
    """CONTRACT.md, stop paths, SIGSEGV from a stack overflow (unbounded recursion),
    a common way to die of SIGSEGV: the handler can only run on an alternate
    signal stack; both files written, the process dies of SIGSEGV with its
    core as without the shim."""
    _fatal(ctx, "SIGSEGV", "overflow")


# --------------------------------------------------------------------------
# Transparency


def _both(ctx, argv, **kw):
    plain = run(ctx, argv, env=ctx.env(preload=False), **kw)
    d = ctx.mkdtemp("prof")
    r = run(ctx, argv, env=prof_env(ctx, d), **kw)
    return plain, r, d


def _files_ok(ctx, d, r, what):
    check(pprofs(d) == image_files("run"), "%s: PROFILE_DIR holds %s\n%s" % (
        what, pprofs(d), r.describe()))
    check(len(r.summary_lines()) == 1, "%s: want one summary line\n%s" % (what, r.describe()))
    return ctx.read(os.path.join(d, "run.cpu.pprof"), r)


def test_sigaction_view_matches_plain(ctx):
    """CONTRACT.md, transparency: sigaction(sig, NULL, &old) reports what the program
    would see without the shim: SIG_DFL at start for SIGTERM (and SIGHUP,
    SIGUSR2, SIGPROF, SIGRTMAX-4), then exactly the handler, flags and mask
    the program set, SIG_DFL after it sets SIG_DFL, SIG_IGN after SIG_IGN;
    signal() returns the previous handler; after a one-shot handler's
    delivery (SA_RESETHAND, sysv_signal) the handler alone is reset and the
    flags stay, without the flags the kernel does not keep, on the shim's
    own signal number too (it reported flags 0, and sysv_signal's
    SA_INTERRUPT). Compared line for line (the SA_RESTORER bit, which libc
    adds itself, is in the next test)."""
    plain, r, d = _both(ctx, ["st_transp", "query"])
    check(plain.status.is_exit(0), "st_transp query without the shim: %s\n%s" % (plain.status, plain.describe()))
    check(r.status.is_exit(0), "st_transp query under the shim: %s\n%s" % (r.status, r.describe()))
    want = [l for l in plain.stdout_text.splitlines() if not l.startswith("restorer ")]
    got = [l for l in r.stdout_text.splitlines() if not l.startswith("restorer ")]
    check("view start SIGTERM: default flags=0 mask=-" in want, "baseline is not what this test assumes:\n%s" %
          indent(plain.stdout_text))
    check(got == want, "the program sees different signal state under the shim\nwithout:\n%s\nwith:\n%s" % (
        indent("\n".join(want)), indent("\n".join(got))))
    _files_ok(ctx, d, r, "st_transp query")


def test_sigaction_view_sa_restorer(ctx):
    """CONTRACT.md, transparency, strictly: libc's sigaction() returns sa_flags with
    SA_RESTORER set for any action it installed (it adds the flag and its
    restorer itself); a view that returns the program's struct as given
    lacks it. Same program as above, the "restorer" lines only."""
    plain, r, d = _both(ctx, ["st_transp", "query"])
    want = [l for l in plain.stdout_text.splitlines() if l.startswith("restorer ")]
    got = [l for l in r.stdout_text.splitlines() if l.startswith("restorer ")]
    check(want and got == want, "SA_RESTORER in old.sa_flags differs under the shim\nwithout:\n%s\nwith:\n%s" % (
        indent("\n".join(want)), indent("\n".join(got))))


def test_ignored_at_start_stays_ignored(ctx):
    """CONTRACT.md, transparency: a signal ignored when the process starts (SIGINT
    and SIGHUP set to SIG_IGN by the parent, as nohup or a shell's background
    job does) stays ignored: the program sees SIG_IGN, survives SIGINT and
    SIGHUP sent by another process and raised by itself, and exits 0 with
    both profiles written at its return from main."""
    ign = (signal.SIGINT, signal.SIGHUP)
    outs = {}
    for label, env in (("plain", ctx.env(preload=False)), ("shim", None)):
        d = ctx.mkdtemp("prof")
        r = start(ctx, ["st_transp", "ignored"], env=env or prof_env(ctx, d), ignore=ign)
        r.wait_for(r"^ready pid=")
        time.sleep(0.2)
        r.kill(signal.SIGINT)
        r.kill(signal.SIGHUP)
        r.wait(30)
        outs[label] = (r, d)
    plain, _ = outs["plain"]
    r, d = outs["shim"]
    check(plain.status.is_exit(0) and "SIGINT ignore, SIGHUP ignore" in plain.stdout_text,
          "baseline: %s\n%s" % (plain.status, plain.describe()))
    check(r.status.is_exit(0), "SIGINT and SIGHUP were ignored at start; under the shim the process %s\n%s" % (
        r.status, r.describe()))
    check("SIGINT ignore, SIGHUP ignore" in r.stdout_text and "survived" in r.stdout_text,
          "under the shim the program does not see SIG_IGN or did not survive\n%s" % r.describe())
    cpu = _files_ok(ctx, d, r, "ignored signals")
    check(cpu.cum("wait_work", "samples") > 0, "wait_work not in the CPU profile\n%s" % cpu.cum_table("samples"))


def _own_handler(ctx, mode, code):
    outs = {}
    for label in ("plain", "shim"):
        d = ctx.mkdtemp("prof")
        env = ctx.env(preload=False) if label == "plain" else prof_env(ctx, d)
        r = start(ctx, ["st_transp", mode], env=env)
        r.wait_for(r"^ready pid=")
        time.sleep(0.3)  # some CPU in wait_work for the profile to show
        r.kill(signal.SIGTERM)
        r.wait(30)
        outs[label] = (r, d)
    plain, _ = outs["plain"]
    r, d = outs["shim"]
    check(plain.status.is_exit(code), "baseline %s: %s\n%s" % (mode, plain.status, plain.describe()))
    check(r.status.is_exit(code), "st_transp %s: its own SIGTERM handler decides (exit %d); under the shim "
          "the process %s\n%s" % (mode, code, r.status, r.describe()))
    check(r.out == plain.out.replace(b"pid=%d" % plain.pid, b"pid=%d" % r.pid),
          "stdout differs\nwithout:\n%s\nwith:\n%s" % (indent(plain.stdout_text), indent(r.stdout_text)))
    cpu = _files_ok(ctx, d, r, "st_transp %s" % mode)
    check(cpu.cum("wait_work", "samples") > 0, "wait_work not in the CPU profile\n%s" % cpu.cum_table("samples"))
    check(not any("SIGTERM" in c for c in cpu.comments), "the program handled SIGTERM itself, yet the "
          "profile says the signal stopped it: %s" % cpu.comments)


def test_own_handler_replaces_shims_returns(ctx):
    """CONTRACT.md, transparency: the program's own SIGTERM handler (sigaction)
    replaces the shim's: it runs, main returns 42, the profiles are written
    at the return from main."""
    _own_handler(ctx, "handler_return", 42)


def test_own_handler_replaces_shims_exits(ctx):
    """CONTRACT.md, transparency: the program's own SIGTERM handler (signal()) calls
    _exit(43) inside the handler: status 43, profiles written at that _exit."""
    _own_handler(ctx, "handler_exit", 43)


def test_sigprof_stays_the_programs(ctx):
    """DESIGN "Why the CPU profiler is ours": SIGPROF and setitimer stay the
    program's. Its own SIGPROF handler with ITIMER_PROF at 100 Hz is called
    (~100 times for 1 s of CPU, as without the shim), sigaction reports
    SIG_DFL for SIGPROF at start, and the shim's CPU profile still has
    prof_burn's second of CPU."""
    plain, r, d = _both(ctx, ["st_transp", "sigprof"])
    calls = {}
    for label, x in (("plain", plain), ("shim", r)):
        check(x.status.is_exit(0), "%s: %s\n%s" % (label, x.status, x.describe()))
        m = re.search(r"sigprof calls=(\d+)", x.stdout_text)
        check(m, "%s: no 'sigprof calls' line\n%s" % (label, x.describe()))
        calls[label] = int(m.group(1))
    check(calls["plain"] >= 50, "baseline: only %d SIGPROF calls for 1 s of CPU" % calls["plain"])
    check(calls["shim"] >= 0.7 * calls["plain"], "under the shim the program's own SIGPROF handler was called "
          "%d times, without it %d times\n%s" % (calls["shim"], calls["plain"], r.describe()))
    cpu = _files_ok(ctx, d, r, "st_transp sigprof")
    got = cpu.cum("prof_burn", "cpu") / 1e9
    check(got >= 0.8, "prof_burn burned 1 s of CPU; the CPU profile shows %.3f s\n%s" % (
        got, cpu.cum_table("cpu")))


def test_program_takes_the_sampling_signal(ctx):
    """CONTRACT.md, transparency: the same signal number sent by someone else
    reaches the program as it would without the shim. A program that installs its
    own handler on the shim's signal (SIGRTMAX-4) gets exactly the signals it
    raises itself (3, si_code SI_TKILL) and none of the shim's timer signals,
    as without the shim; it exits 0, and the shim keeps sampling: the 0.5 s
    it burns after taking the signal are in the CPU profile."""
    plain, r, d = _both(ctx, ["st_transp", "rtsig"])
    check(plain.status.is_exit(0) and "rtsig own=3 foreign=0" in plain.stdout_text,
          "baseline: %s\n%s" % (plain.status, plain.describe()))
    check(r.status.is_exit(0), "under the shim the process %s\n%s" % (r.status, r.describe()))
    check("rtsig own=3 foreign=0" in r.stdout_text, "the program's SIGRTMAX-4 handler should get its own 3 "
          "raises and nothing else (without the shim: %r)\n%s" % (plain.stdout_text.strip(), r.describe()))
    check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))
    check(len(r.summary_lines()) == 1, "want one summary line\n%s" % r.describe())
    cpu = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    got = cpu.cum("rt_burn", "cpu") / 1e9
    check(got >= 0.35, "rt_burn burns 0.5 s of CPU after the program took SIGRTMAX-4; the CPU profile "
          "holds %.2f s of it: sampling must go on\n%s" % (got, cpu.cum_table("cpu")))


def test_reset_every_signal_to_default(ctx):
    """CONTRACT.md, transparency + stop paths (never a clean exit into a crash): a program
    that sets every signal to SIG_DFL (for i in 1..NSIG-1: signal(i,
    SIG_DFL), what many daemons do after fork) also sets SIGRTMAX-4, the
    shim's sampling signal, to SIG_DFL. The shim must keep sampling with its
    own handler (DESIGN: "the program's wish is only recorded"), not die of
    its own timer signal: exit 0, CPU profile with rt_burn's 0.5 s."""
    plain, r, d = _both(ctx, ["st_transp", "reset_all"])
    check(plain.status.is_exit(0), "baseline: %s\n%s" % (plain.status, plain.describe()))
    check(r.status.is_exit(0), "after resetting every signal to SIG_DFL the program %s under the shim (0 "
          "without it)\n%s" % (r.status, r.describe()))
    check("reset_all done" in r.stdout_text, "the program did not finish\n%s" % r.describe())
    cpu = _files_ok(ctx, d, r, "st_transp reset_all")
    got = cpu.cum("rt_burn", "cpu") / 1e9
    check(got >= 0.4, "rt_burn burned 0.5 s of CPU; the CPU profile shows %.3f s\n%s" % (got, cpu.cum_table("cpu")))


def _env_lines(text):
    return sorted(l for l in text.splitlines() if "=" in l)


IMAGE_VAR_RE = re.compile(r"^PROFSHIM_IMAGE=-?\d+:\d+:\d+:[0-9a-f]{16}:\d+:\d+$")


def _env_diff(got, want, what):
    """got may add exactly one line, PROFSHIM_IMAGE=ROOTPID:PID:GEN:SESSION:START:ROOTSID (the one
    variable docs/CONFIG.md says a profiled program can see); nothing else
    may differ."""
    added = sorted(set(got) - set(want))
    missing = sorted(set(want) - set(got))
    extra = [l for l in added if not IMAGE_VAR_RE.match(l)]
    check(not extra and not missing and len(added) <= 1,
          "%s: the program saw a different environment under the shim than it was given\nadded: %s\n"
          "missing: %s" % (what, added, missing))


def test_environment_is_the_one_given(ctx):
    """CONTRACT.md, transparency / CONFIG "Files" (PROFSHIM_IMAGE is "the one
    variable the shim adds that a profiled program can see"): `env`
    (coreutils) under the shim prints the variables it was started with
    (LD_PRELOAD and PROFILE_* included) plus at most PROFSHIM_IMAGE, nothing
    else; the same through `sh -c 'exec env'` (an exec'd image) and
    `sh -c 'env; true'` (a forked and exec'd descendant), compared with the
    same commands run without the shim plus the shim's own variables."""
    envbin = shutil.which("env")
    check(envbin, "env (coreutils) not found")
    d = ctx.mkdtemp("prof")
    given = prof_env(ctx, d)
    r = run(ctx, [envbin], env=given)
    check(r.status.is_exit(0), "env: %s\n%s" % (r.status, r.describe()))
    _env_diff(_env_lines(r.stdout_text), sorted("%s=%s" % kv for kv in given.items()), "env")
    for cmd in ("exec %s" % envbin, "%s; true" % envbin):
        cwd = ctx.mkdtemp("cwd")
        plain = run(ctx, ["/bin/sh", "-c", cmd], env=ctx.env(preload=False), cwd=cwd)
        d2 = ctx.mkdtemp("prof")
        given2 = prof_env(ctx, d2)
        r2 = run(ctx, ["/bin/sh", "-c", cmd], env=given2, cwd=cwd)
        check(r2.status.is_exit(0), "sh -c %r: %s\n%s" % (cmd, r2.status, r2.describe()))
        want2 = sorted(_env_lines(plain.stdout_text) +
                       ["%s=%s" % (k, v) for k, v in given2.items() if k == "LD_PRELOAD" or k.startswith("PROFILE_")])
        _env_diff(_env_lines(r2.stdout_text), want2, "sh -c %r" % cmd)
