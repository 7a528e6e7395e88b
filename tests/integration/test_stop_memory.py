"""The stop does not swell the process: the peak RSS (ru_maxrss, from
wait4, as a memory cgroup or a service's accounting sees it) of a profiled
run stays within a bound over an inert run of the same program, on a
program whose library has its Debian debug package installed (libc,
libc6-dbg: the stop reads its DWARF, the largest thing it reads).

Measured from outside, by tests/bench/runner.c (built here): a child
forked from this Python process would carry Python's own peak into its
ru_maxrss (execve folds the pre-exec image's peak in; runner.c says more).
RSS is deterministic to a few hundred KiB from run to run (the same pages
are touched), so each figure is the smaller of two runs and the bound has
3 MiB of slack over what the stop costs now; that is not a timing test.

The bound is inert + 8 MiB, the project's target (docs/DESIGN.md, "The
stop's memory"). What it catches: libdw left to find a unit itself (it
reads every unit's header before it, and with the kernel's fault-around
all of libc6-dbg's .debug_info becomes resident: 13 MiB over in all), the
inflated copy made in memory (+10 MiB), the shim's own DWARF read
(+4 MiB), the modules' DWARF held all at once."""

import os
import re
import subprocess

from common import base_env, check, fail, indent

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER_SRC = os.path.join(os.path.dirname(HERE), "bench", "runner.c")
BOUND_MIB = 8
SUMMARY_RE = re.compile(r"peak rss ([\d.]+) MiB \(([\d.]+) MiB before the stop\)")


def _runner(ctx):
    out = os.path.join(ctx.mkdtemp("runner"), "runner")
    p = subprocess.run(["cc", "-O2", "-o", out, RUNNER_SRC], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check(p.returncode == 0, "cc %s failed:\n%s" % (RUNNER_SRC, indent(p.stdout.decode(errors="replace"))))
    return out


def _peak(ctx, runner, argv, env):
    """(ru_maxrss in MiB, stderr) of argv run by the runner with exactly env."""
    r, w = os.pipe()
    envs = ["%s=%s" % kv for kv in sorted(env.items())]
    p = subprocess.Popen([runner, str(w), str(len(envs))] + envs + argv, cwd=ctx.mkdtemp("cwd"),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(w,))
    os.close(w)
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        fail("%s did not end in 120 s" % argv)
    report = os.read(r, 4096).decode()
    os.close(r)
    m = re.search(r"status (-?\d+) .* maxrss_kib (\d+)", report)
    err = err.decode(errors="replace")
    check(p.returncode == 0 and m and m.group(1) == "0", "%s under the runner: exit %d, report %r\n%s" % (
        argv, p.returncode, report, indent(err)))
    return int(m.group(2)) / 1024.0, err


def _libc_debug_file(ctx):
    exe = ctx.workload("sym_libc")
    out = subprocess.run(["ldd", exe], stdout=subprocess.PIPE, universal_newlines=True).stdout
    m = re.search(r"libc\.so\.6 => (\S+)", out)
    check(m, "ldd %s names no libc:\n%s" % (exe, out))
    notes = subprocess.run(["readelf", "-n", m.group(1)], stdout=subprocess.PIPE, universal_newlines=True).stdout
    bid = re.search(r"Build ID: ([0-9a-f]+)", notes)
    check(bid, "libc has no build ID:\n%s" % notes)
    path = "/usr/lib/debug/.build-id/%s/%s.debug" % (bid.group(1)[:2], bid.group(1)[2:])
    check(os.path.isfile(path), "libc's debug file %s is missing: install Debian's libc6-dbg "
          "(scripts/install-deps does)" % path)


def test_the_stop_keeps_peak_rss_within_bound_of_inert(ctx):
    """sym_libc (0.6 s in libc's qsort, so its CPU profile holds libc
    addresses the stop names with libc6-dbg's file:line): its first image
    in an empty PROFILE_DIR (the symbol cache empty: libc6-dbg's inflated
    copy is made there) and a second image in the same directory each peak
    within BOUND_MIB of an inert run; the summary line's "before the stop"
    is the smaller figure, and the stop's share is said."""
    _libc_debug_file(ctx)
    runner = _runner(ctx)
    argv = [ctx.workload("sym_libc"), "0.6"]
    inert_env = dict(base_env(), LD_PRELOAD=ctx.lib)
    inert = min(_peak(ctx, runner, argv, inert_env)[0] for _ in range(2))
    for what in ("first image, empty symbol cache", "second image, same PROFILE_DIR"):
        peaks = []
        for _ in range(2):
            d = ctx.mkdtemp("prof") if what.startswith("first") else shared
            peak, err = _peak(ctx, runner, argv, dict(inert_env, PROFILE_DIR=d))
            m = SUMMARY_RE.search(err)
            check(m, "%s: no summary line with the peak before the stop:\n%s" % (what, indent(err)))
            before = float(m.group(2))
            check(0 < before <= float(m.group(1)) <= peak + 0.5,
                  "%s: the line's peak %s MiB (%s before the stop) is not what wait4 says, %.1f MiB" % (
                      what, m.group(1), m.group(2), peak))
            peaks.append((peak, before))
            shared = d
        peak, before = min(peaks)
        check(peak <= inert + BOUND_MIB,
              "%s: peak RSS %.1f MiB profiled, %.1f MiB inert: %.1f MiB over, the bound is %d MiB "
              "(%.1f MiB of it the stop's: %.1f MiB before it)" % (
                  what, peak, inert, peak - inert, BOUND_MIB, peak - before, before))
