#!/usr/bin/env python3
"""profshim built for aarch64 (make ARCH=arm64), run under qemu-user here.

`make ARCH=arm64 test-arm64` builds the arm64 shim, its unit tests and the
workloads below, then runs this. Not part of `make test`: it needs
`scripts/install-deps --arm64`, and qemu makes it slow.

Runs, each binary under the emulator (EMU, default qemu-aarch64-static):
  - every unit binary BUILD/tests/unit/*_test, as tests/run.py does;
  - a few workloads plain and under the arm64 shim, their files read with
    this machine's `go tool pprof`: a CPU burner, a heap holder (its heap
    profile), a SIGTERM stop, a fork; an exec where the kernel can run an arm64 image itself
    (binfmt_misc), else SKIP (qemu-user's execve asks the kernel).
Prints PASS/FAIL/SKIP lines and "N passed, N failed" last, as tests/run.py.

usage: tests/arm64/run.py [--build DIR] [-k SUBSTRING] [--emu CMD] [--keep]
"""

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, TESTS)
sys.path.insert(0, os.path.join(TESTS, "integration"))
import run as harness  # noqa: E402  (tests/run.py: the tally, the unit runner)
from common import Ctx, Skip, TestFailure, check, find_go, indent  # noqa: E402
import test_heap as test_heap_x86  # noqa: E402  (its accuracy check, reused as it is)

# Hang guards only: qemu runs these programs several times slower than the
# machine would, on a machine that may be busy.
RUN_TIMEOUT = 600


class EmuCtx(Ctx):
    """tests/integration's Ctx, every program started under the emulator
    (the environment, LD_PRELOAD included, passes through to the guest)."""

    def __init__(self, build, tmp, go, emu):
        super().__init__(build, tmp, go)
        self.launcher = tuple(emu)
        self.run_timeout = RUN_TIMEOUT


def program_lines(r):
    """A run's stderr without the shim's lines."""
    return [l for l in r.stderr_lines if not l.startswith("# profshim: ")]


def masked(text):
    """stdout with what differs run to run (measured truths, pids) left out."""
    lines = [l for l in text.splitlines() if not l.startswith("truth ")]
    return [re.sub(r"pid=\d+", "pid=N", l) for l in lines]


def same_as_plain(ctx, argv, r):
    """What the program shows (status, stdout, its own stderr) is as without the shim."""
    plain = ctx.run_plain(argv)
    check(r.rc == plain.rc, "status %s under the shim, %s plain\n%s" % (r.status_text(), plain.status_text(),
                                                                         r.describe()))
    out, pout = masked(r.stdout_text), masked(plain.stdout_text)
    check(out == pout, "stdout differs from the plain run's:\n%s\nplain:\n%s" % (
        indent("\n".join(out)), indent("\n".join(pout))))
    err, perr = program_lines(r), program_lines(plain)
    check(err == perr, "the program's stderr differs from the plain run's:\n%s\nplain:\n%s" % (
        indent("\n".join(err)), indent("\n".join(perr))))
    return plain


def top_flat(prof, t):
    """The function with the most flat value of type t."""
    return max(prof.function_names(), key=lambda f: prof.flat(f, t), default=None)


# --- the tests ---------------------------------------------------------------

CPU_CYCLES = "120"  # cpu_split: ~2 s of CPU under qemu


def test_cpu(ctx):
    """A CPU burner: its CPU in the profile (>= 0.9 of what it measured),
    hot_a on top, hot_a:hot_b near its exact 3:1."""
    argv = ["cpu_split", CPU_CYCLES, "report"]
    r, d = ctx.profile(argv)
    same_as_plain(ctx, argv, r)
    cpu_s = _cpu_seconds(r)
    prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    total = prof.total("cpu") / 1e9
    top = ctx.top(os.path.join(d, "run.cpu.pprof"), "cpu")
    check(0.9 * cpu_s <= total <= 1.2 * cpu_s, "the profile has %.2f s of CPU; the program measured %.2f s "
          "(want 0.9x..1.2x)\n%s" % (total, cpu_s, indent(top)))
    best = top_flat(prof, "cpu")
    check(best == "hot_a", "%s is on top, not hot_a\n%s" % (best, indent(top)))
    a, b = prof.cum("hot_a", "cpu"), prof.cum("hot_b", "cpu")
    share = a / (a + b) if a + b else 0
    # ~200 samples: 3 sd of the share is ~9 points.
    check(0.63 <= share <= 0.87, "hot_a has %.0f%% of hot_a+hot_b (exactly 75%% of the work)\n%s" % (
        100 * share, indent(top)))
    check(prof.cum("main", "cpu") >= 0.9 * prof.total("cpu"), "stacks do not reach main:\n%s" % indent(
        prof.cum_table("cpu")))


def _cpu_seconds(r):
    for line in r.stdout_text.splitlines():
        if line.startswith("truth ") and "cpu_seconds=" in line:
            return float(line.split("cpu_seconds=")[1].split()[0])
    raise TestFailure("cpu_split printed no cpu_seconds truth line\n" + r.describe())


def test_heap(ctx):
    """A heap holder: the program runs as without the shim, and its heap
    profile holds what it holds, site by site, within the sampling error
    (tests/integration/test_heap.py's check, on this build's jemalloc: 64
    KiB pages, profiling built in by install-deps --arm64)."""
    r, d, prof, t = test_heap_x86._heap_accuracy(ctx, "return")
    same_as_plain(ctx, ["heap_hold", "return"], r)
    check(prof.cum("main", "inuse_space") >= 0.9 * (t["site_big"]["inuse_space"] + t["site_small"]["inuse_space"]),
          "heap stacks do not reach main:\n%s" % indent(prof.cum_table("inuse_space")))


def test_sigterm(ctx):
    """A SIGTERM stop: the program dies of it as without the shim, with its
    CPU profile written."""
    argv = ["stop_paths", "sigterm"]
    r, d = ctx.profile(argv, expect_rc=None)
    same_as_plain(ctx, argv, r)
    prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    check(prof.cum("spin", "cpu") >= 0.5 * prof.total("cpu"), "spin is not most of the CPU profile\n%s" % indent(
        prof.cum_table("cpu")))


def test_fork(ctx):
    """A fork: the parent's and the child's profiles, each with its work
    (PROFILE_FORKS=own: the child's own files)."""
    argv = ["fork_exec", "fork"]
    r, d = ctx.profile(argv, PROFILE_FORKS="own")
    same_as_plain(ctx, argv, r)
    child = [n for n in os.listdir(d) if n.startswith("run.fork_exec.") and n.endswith(".cpu.pprof")]
    check(len(child) == 1, "want one child CPU profile, got %s\n%s" % (sorted(os.listdir(d)), r.describe()))
    parent = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    kid = ctx.read(os.path.join(d, child[0]), r)
    check(parent.cum("parent_work", "cpu") > 0 and parent.cum("child_work", "cpu") == 0,
          "the parent's profile:\n%s" % indent(parent.cum_table("cpu")))
    check(kid.cum("child_work", "cpu") > 0 and kid.cum("parent_work", "cpu") == 0,
          "the child's profile:\n%s" % indent(kid.cum_table("cpu")))


def test_exec(ctx):
    """An exec: the image before it and the one after each write theirs."""
    if not os.path.exists("/proc/sys/fs/binfmt_misc/qemu-aarch64"):
        raise Skip("no binfmt_misc entry for aarch64: qemu-user's execve of an arm64 image fails "
                   "(ENOEXEC) without the shim too")
    argv = ["fork_exec", "exec"]
    r, d = ctx.profile(argv)
    same_as_plain(ctx, argv, r)
    names = sorted(os.listdir(d))
    check(len([n for n in names if n.endswith(".cpu.pprof")]) == 2, "want two CPU profiles, got %s" % names)


# Unit tests whose reference is the kernel itself, which qemu-user stands
# between: not run here.
UNIT_SKIPS = {
    "seccomp_bpf_test": "its reference is the kernel's verdict on a filter in force, and qemu-user "
                        "refuses PR_SET_SECCOMP (its own calls are the host's)",
}

TESTS_LIST = [test_cpu, test_heap, test_sigterm, test_fork, test_exec]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(TESTS), "build-arm64"))
    ap.add_argument("-k", dest="filter", default="")
    ap.add_argument("--emu", default=os.environ.get("EMU") or "qemu-aarch64-static")
    ap.add_argument("--timeout", type=int, default=RUN_TIMEOUT)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    emu = args.emu.split()
    t0 = time.monotonic()
    tally = harness.Tally()
    if not shutil.which(emu[0]):
        tally.bad("harness.emu", "%s not found: scripts/install-deps --arm64" % emu[0])
        print("%d passed, %d failed" % (tally.passed, tally.failed))
        return 1
    tmp = tempfile.mkdtemp(prefix="profshim-arm64-")
    os.environ.setdefault("GOCACHE", os.path.join(tmp, "gocache"))
    if not os.environ.get("HOME") or not os.access(os.environ["HOME"], os.W_OK):
        os.environ["HOME"] = tmp
    go = find_go()
    if not go:
        tally.bad("harness.go_tool_pprof", "go not found: every profile check needs `go tool pprof`")
    try:
        os.environ["PROFSHIM_TEST_CROSS"] = "aarch64-linux-gnu-"  # the fixtures' compiler (tests/fixtures/runtime_so.h)
        os.environ["PROFSHIM_TEST_CPU_SCALE"] = "10"  # qemu's slowdown, for the units' CPU bounds
        harness.run_units(build, args.filter, args.timeout, tally, tmp, emu=emu, skip=UNIT_SKIPS)
        ctx = EmuCtx(build, tmp, go, emu)
        for fn in TESTS_LIST:
            name = "arm64." + fn.__name__[len("test_"):]
            if args.filter and args.filter not in name:
                continue
            t = time.monotonic()
            try:
                fn(ctx)
                tally.ok(name, " (%.0f s)" % (time.monotonic() - t))
            except Skip as e:
                tally.skip(name, str(e))
            except TestFailure as e:
                tally.bad(name, str(e))
            except Exception:
                tally.bad(name, traceback.format_exc())
    finally:
        harness.release_tmp(tmp, args.keep)
    return harness.close_tally(tally, args.filter, took=time.monotonic() - t0)


if __name__ == "__main__":
    sys.exit(main())
