"""Helpers for the signal tests (test_signals_*.py): a program run plain
and under the shim, compared."""

import os
import signal

from common import check, image_files, indent
from st_helpers import by_thread, pprofs, prof_env, run, truths

RTSIG = signal.SIGRTMAX - 4


def both(ctx, argv, timeout=60, **vars):
    plain = run(ctx, argv, env=ctx.env(preload=False), timeout=timeout)
    d = ctx.mkdtemp("prof")
    r = run(ctx, argv, env=prof_env(ctx, d, **vars), timeout=timeout)
    return plain, r, d


def program_lines(text):
    """What the program printed, less its CPU truths (they differ run to run),
    in order of content (threads print in any order)."""
    return sorted(l for l in text.splitlines() if not l.startswith("truth "))


def same_as_plain(plain, r, what):
    check(r.status.key() == plain.status.key(), "%s: under the shim the process %s, without it %s\n%s" % (
        what, r.status, plain.status, r.describe()))
    check(program_lines(r.stdout_text) == program_lines(plain.stdout_text), "%s: the program saw something else under the "
          "shim.\nwithout:\n%s\nwith:\n%s\n%s" % (what, indent(plain.stdout_text), indent(r.stdout_text), r.describe()))


def dies_as_plain(ctx, argv, sig, runs):
    """runs pairs of argv plain and profiled: both die of sig, the program
    sees the same, and the profiled run leaves its three files and one line."""
    what = " ".join(argv[1:])
    for i in range(runs):
        plain, r, d = both(ctx, argv)
        check(plain.status.is_signal(sig), "%s: the plain run must die of signal %d: %s" % (what, sig, plain.status))
        same_as_plain(plain, r, "%s run %d" % (what, i))
        check(pprofs(d) == image_files("run") and len(r.summary_lines()) == 1,
              "%s run %d: PROFILE_DIR holds %s\n%s" % (what, i, pprofs(d), r.describe()))


def masked_threads_sampled(ctx, mode, names):
    plain, r, d = both(ctx, ["sig_habits", mode], PROFILE_CPU_HZ=250)
    same_as_plain(plain, r, mode)
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


def both_same(ctx, argv, timeout=60, **vars):
    plain = run(ctx, argv, env=ctx.env(preload=False), timeout=timeout)
    d = ctx.mkdtemp("prof")
    r = run(ctx, argv, env=prof_env(ctx, d, **vars), timeout=timeout)
    check(r.status.key() == plain.status.key(), "%s: under the shim %s, without it %s\n%s" % (
        " ".join(argv), r.status, plain.status, r.describe()))
    check(r.stdout_text == plain.stdout_text, "%s: stdout differs\nplain:\n%s\nshim:\n%s" % (
        " ".join(argv), indent(plain.stdout_text), indent(r.stdout_text)))
    return plain, r, d


def same_outcome(ctx, argv, timeout=30):
    """argv plain and under the shim: the same exit and stdout. (result, PROFILE_DIR)"""
    plain = ctx.run_plain(argv, timeout=timeout)
    d = ctx.mkdtemp("prof")
    r = ctx.run(argv, timeout=timeout, PROFILE_DIR=d)
    check(r.rc == plain.rc and r.out == plain.out,
          "%s under the shim: %s, stdout %r; without it: %s, stdout %r\n%s" % (
              " ".join(argv), r.status_text(), r.out, plain.status_text(), plain.out, r.describe()))
    return r, d
