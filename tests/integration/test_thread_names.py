"""A sample's thread_name is the name its thread had when it was taken.

CONTRACT.md, labels: a thread that renames itself (a pool thread given a
task's name) or is renamed by another thread has its CPU and its waits
under each name for the time it had it, not all under its last one.
tests/workloads/renames.c works ~0.4 s of CPU and sleeps 0.3 s under each of
three names, given by its own pthread_setname_np, its own prctl and main's
pthread_setname_np on it (a write to /proc/self/task/TID/comm); the
profile's split by thread_name is held to the worker's own clocks.
"""

import os

from common import check, indent, truths
from st_helpers import by_thread

PHASES = ("phase-a", "phase-b", "phase-c")


def _split(prof, t, truth, key, tolerance, slack):
    got = by_thread(prof, t, key="thread_name")
    rows = ["%-8s %12s %12s" % ("name", "truth", "profile")]
    for name in PHASES:
        rows.append("%-8s %12d %12d" % (name, truth[name][key], got.get(name, 0)))
    table = indent("\n".join(rows) + "\nall names in the profile: %s" % sorted(n for n in got if n))
    for name in PHASES:
        want, have = truth[name][key], got.get(name, 0)
        check(abs(have - want) <= tolerance * want + slack,
              "%s under thread_name=%s: the profile has %.3f s, the thread's own clock %.3f s "
              "(each phase's samples must carry the name it had then)\n%s" % (
                  t, name, have / 1e9, want / 1e9, table))


def test_cpu_and_waits_split_by_the_name_at_the_time(ctx):
    r, d = ctx.profile(["renames"], timeout=120)
    truth = truths(r)
    check(set(PHASES) <= set(truth), "the workload printed no truth for every phase\n%s" % r.describe())
    cpu = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    # Two 10 ms periods of slack: the sample after a rename weighs CPU since
    # the one before it, part of it under the old name.
    _split(cpu, "cpu", truth, "cpu_ns", 0.2, 20e6)
    wait = ctx.read(os.path.join(d, "run.wait.pprof"), r)
    # 150 ms sleeps are above the 100 ms sampling rate: each is recorded whole.
    _split(wait, "delay", truth, "sleep_ns", 0.2, 20e6)
