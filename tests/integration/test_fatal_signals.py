"""Every signal whose default action ends the process is a stop.

Each signal of signal(7) whose action is Term or Core, the real-time ones
included (SIGRTMIN..SIGRTMAX but the shim's own SIGRTMAX-4, whose default
test_transparency covers), raised by st_signal after a little CPU: the
process dies of that signal exactly as it does without the shim (WTERMSIG,
WCOREDUMP, both with RLIMIT_CORE unlimited), with the three profiles
written, one summary line, and the CPU profile saying which signal stopped
it. SIGTRAP and SIGSYS also as the kernel raises them, at an instruction
(int3; a system call seccomp traps), which the program's mask cannot hold
back and a return from a handler does not raise again.
"""

import gzip
import os
import signal

from common import check, image_files
from st_helpers import prof_env, pprofs, run

# signal(7)'s default actions
TERM = ["SIGHUP", "SIGINT", "SIGUSR1", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM", "SIGSTKFLT", "SIGIO",
        "SIGPROF", "SIGVTALRM", "SIGPWR"]
CORE = ["SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE", "SIGSEGV", "SIGXCPU", "SIGXFSZ",
        "SIGSYS"]
OWN = signal.SIGRTMAX - 4


def _rt_name(sig):
    """kill -l's name: up from SIGRTMIN to the middle, down from SIGRTMAX above it."""
    up, down = sig - signal.SIGRTMIN, signal.SIGRTMAX - sig
    if up <= down:
        return "SIGRTMIN" + ("+%d" % up if up else "")
    return "SIGRTMAX" + ("-%d" % down if down else "")


def _number(name):
    """The signal's number; SIGSTKFLT's (16 on x86-64 and aarch64) is known
    to Python's signal module only from 3.11 (Debian 11 has 3.9)."""
    return int(getattr(signal, name, 0)) or {"SIGSTKFLT": 16}[name]


def _all():
    """(name, number, dumps core) for every signal that ends a process by default."""
    out = [(n, _number(n), False) for n in TERM] + [(n, _number(n), True) for n in CORE]
    out += [(_rt_name(s), s, False) for s in range(signal.SIGRTMIN, signal.SIGRTMAX + 1) if s != OWN]
    return out


def _stopped_by(path):
    """The signal the CPU profile's "stopped by" comment names, or None."""
    with gzip.open(path) as f:
        data = f.read()
    key = b"profshim: stopped by signal "
    i = data.find(key)
    if i <= 0:
        return None
    s = data[i:i + data[i - 1]]  # a string of the table: its length byte before it
    return s[len(key):].decode("ascii", "replace")


def _cores(cwd):
    found = [n for n in os.listdir(cwd) if n == "core" or n.startswith("core.")]
    for n in found:
        os.unlink(os.path.join(cwd, n))
    return found


def _one(ctx, d, name, sig, core, mode):
    """Returns the problems of one signal, plain against profiled ("" if none)."""
    argv = ["st_signal", name, mode, "quick"]
    cwd = ctx.mkdtemp("cwd")
    plain = run(ctx, argv, env=ctx.env(preload=False), cwd=cwd, core=True, timeout=30)
    plain_cores = _cores(cwd)
    if not plain.status.is_signal(sig, core=core):
        return "%s (%s) without the shim: %s, want death by signal %d%s (its default action)" % (
            name, mode, plain.status, sig, " with a core" if core else "")
    stem = "s%d%s" % (sig, mode[0])
    r = run(ctx, argv, env=prof_env(ctx, d, name=stem), cwd=cwd, core=True, timeout=30)
    cores = _cores(cwd)
    problems = []
    if r.status.key() != plain.status.key() or bool(cores) != bool(plain_cores):
        problems.append("the process %s (core files %s); without the shim %s (%s)" % (
            r.status, cores, plain.status, plain_cores))
    want = image_files(stem)
    got = [p for p in pprofs(d) if p.startswith(stem + ".")]
    if got != want:
        problems.append("files %s, want %s" % (got, want))
    if len(r.summary_lines()) != 1 or r.error_lines():
        problems.append("%d summary lines, %d error lines" % (len(r.summary_lines()), len(r.error_lines())))
    if got == want and _stopped_by(os.path.join(d, want[0])) != name:
        problems.append("the CPU profile says stopped by %r" % _stopped_by(os.path.join(d, want[0])))
    if "survived" in r.stdout_text:
        problems.append("the program went on after its signal")
    if not problems:
        return ""
    return "%s (%s): %s\n%s" % (name, mode, "; ".join(problems), r.describe())


def test_every_default_fatal_signal_is_a_stop(ctx):
    """All of them raised (raise(), after ~0.02 s of CPU), one shared
    PROFILE_DIR (one symbol cache: the runs are short), each against its
    plain run; every failure reported at once."""
    sigs = _all()
    check(len(sigs) >= 45, "only %d default-fatal signals found: %s" % (len(sigs), sigs))
    d = ctx.mkdtemp("prof")
    failures = [f for f in (_one(ctx, d, n, s, c, "raise") for n, s, c in sigs) if f]
    check(not failures, "%d of %d signals:\n%s" % (len(failures), len(sigs), "\n\n".join(failures)))


def test_traps_from_the_kernel_are_stops(ctx):
    """SIGTRAP from int3 and SIGSYS from seccomp's SECCOMP_RET_TRAP: the
    handler's return would go on past the instruction, so the signal must
    come again as the kernel gave it."""
    d = ctx.mkdtemp("prof")
    failures = [f for f in (_one(ctx, d, n, _number(n), True, "natural") for n in ("SIGTRAP", "SIGSYS"))
                if f]
    check(not failures, "\n\n".join(failures))
