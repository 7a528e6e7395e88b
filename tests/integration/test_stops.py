"""Stop paths: every way a process ends writes both profiles, taken before
teardown, and ends with exactly the status (or signal) it would have had
without the shim."""

import os

from common import check, indent, pct

HELD = 16 << 20  # stop_paths holds 16 MiB at hold_at_stop


def test_exit_status_3(ctx):
    plain = ctx.run_plain(["exit_code"])
    check(plain.rc == 3, "exit_code without the shim: %s" % plain.status_text())
    r, d = ctx.profile(["exit_code"], expect_rc=3)
    cpu = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    heap = ctx.read(os.path.join(d, "run.heap.pprof"), r)
    check(cpu.cum("spin", "samples") > 0, "spin (~0.3 s of CPU) is not in the CPU profile\n%s" % cpu.cum_table("samples"))
    got = heap.cum("hold_some", "inuse_space")
    check(got >= 0.9 * (8 << 20), "hold_some holds 8 MiB at exit(3); heap profile shows %d\n%s" % (
        got, heap.cum_table("inuse_space")))
    check(r.out == plain.out, "stdout differs from the run without the shim")


def _stop(ctx, mode):
    plain = ctx.run_plain(["stop_paths", mode])
    r, d = ctx.profile(["stop_paths", mode], expect_rc=None)
    check(r.rc == plain.rc, "stop_paths %s: %s under the shim, %s without it\n%s" % (
        mode, r.status_text(), plain.status_text(), r.describe()))
    check(r.out == plain.out, "stop_paths %s: stdout differs (teardown handlers must still run, exactly as "
          "without the shim)\nwithout:\n%s\nwith:\n%s" % (mode, indent(plain.stdout_text), indent(r.stdout_text)))
    cpu = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    heap = ctx.read(os.path.join(d, "run.heap.pprof"), r)
    check(cpu.cum("spin", "samples") > 0, "stop_paths %s: spin not in the CPU profile\n%s" % (
        mode, cpu.cum_table("samples")))
    got = heap.cum("hold_at_stop", "inuse_space")
    check(0.9 * HELD <= got <= 1.1 * HELD, "stop_paths %s: hold_at_stop holds %d at the stop, heap profile "
          "shows %d (%s)\n%s" % (mode, HELD, got, pct(got, HELD), heap.cum_table("inuse_space")))
    summary = r.summary_lines()
    check(len(summary) == 1, "stop_paths %s: want one summary line, got %d\n%s" % (mode, len(summary), r.describe()))


def test_stop_return(ctx):
    _stop(ctx, "return")


def test_stop_exit(ctx):
    _stop(ctx, "exit")


def test_stop_quick_exit(ctx):
    _stop(ctx, "quick_exit")


def test_stop__exit(ctx):
    _stop(ctx, "_exit")


def test_stop__Exit(ctx):
    _stop(ctx, "_Exit")


def test_stop_exit_group_through_syscall(ctx):
    """syscall(SYS_exit_group): neither exit nor _exit runs (no files before)."""
    _stop(ctx, "exit_group")


def test_stop_sigterm(ctx):
    _stop(ctx, "sigterm")


def test_stop_sigint(ctx):
    _stop(ctx, "sigint")


def test_stop_sigusr1(ctx):
    _stop(ctx, "sigusr1")


def test_stop_abort(ctx):
    _stop(ctx, "abort")


def test_stop_segv(ctx):
    _stop(ctx, "segv")
