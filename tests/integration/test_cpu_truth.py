"""What the CPU profile and the summary line say is true: short-lived
threads keep their CPU, the summary's figures are the profile's own, and the
CPU the profile does not cover is said.

Short threads: cpu_short_threads starts N threads one after another, each
burning MS ms of its own CPU (CLOCK_THREAD_CPUTIME_ID) in short_task and
ending; most end before the kernel's tick (250 Hz here) delivers one timer
signal to them. The profile must still hold their CPU: a thread's end
credits what it used since its last sample (or since its timer was armed),
to its last stack or to its start routine. Before the fix the profile held
7-13% of 200 x 3 ms at 100 Hz; with CPU counted in whole periods it held
their CPU on average but 0.6-0.75 s of 0.6 s from run to run (a 3 ms thread
reaches its one random 10 ms expiry three times in ten).

The summary line (docs/CONFIG.md, "The summary line"):
  cpu X s in N samples at H Hz   X, N: the profile's cpu and samples totals
  process cpu C s to the stop, G s of it not in the profile (nor is any cpu
  after the stop)                C: the image's CPU from the shim's load to
                                 the moment the CPU profiler stopped; G = C - X
"""

import os
import re

from common import check, indent

SUMMARY_CPU_RE = re.compile(r" \| cpu (\d+\.\d\d) s in (\d+) samples at (\d+) Hz[ ,|]")
SUMMARY_COVER_RE = re.compile(r" \| process cpu (\d+\.\d\d) s to the stop, (\d+\.\d\d) s of it not in the "
                              r"profile \(nor is any cpu after the stop\) \|")


def _cpu_file(d):
    return os.path.join(d, "run.cpu.pprof")


def _truth_lines(r, kind):
    out = []
    for line in r.stdout_text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "truth" and parts[1] == kind:
            out.append({k: int(v) for k, v in (p.split("=", 1) for p in parts[2:])})
    check(out, "the workload printed no 'truth %s' line\n%s" % (kind, r.describe()))
    return out


def _summary(r):
    """(X, N, H, C, G) from the one summary line."""
    lines = r.summary_lines()
    check(len(lines) == 1, "want one summary line\n%s" % r.describe())
    line = lines[0]
    check("achieved" not in line, "the summary reports an 'achieved' rate: %r" % line)
    m = SUMMARY_CPU_RE.search(line)
    c = SUMMARY_COVER_RE.search(line)
    check(m and c, "the summary line lacks 'cpu X s in N samples at H Hz' or 'process cpu C s to the stop, G s "
          "of it not in the profile (nor is any cpu after the stop)' (docs/CONFIG.md):\n  %s" % line)
    return float(m.group(1)), int(m.group(2)), int(m.group(3)), float(c.group(1)), float(c.group(2)), line


def _thread_cpu(prof):
    """cpu/nanoseconds per thread_id label."""
    i = prof.index("cpu")
    out = {}
    for s in prof.samples:
        for line in s.labels:
            m = re.search(r"thread_id:\[(\d+)", line)
            if m:
                out[m.group(1)] = out.get(m.group(1), 0) + s.values[i]
    return out


EXIT_ROOM_NS = 2.5e6


def _short_threads(ctx, n, ms, hz):
    r, d = ctx.profile(["cpu_short_threads", str(n), str(ms)], PROFILE_CPU_HZ=hz)
    prof = ctx.read(_cpu_file(d), r)
    threads = _truth_lines(r, "thread")
    truth = _truth_lines(r, "threads")[0]["cpu_ns"]
    process = _truth_lines(r, "process")[0]["cpu_ns"]
    check(len(threads) == n and all(t["cpu_ns"] >= ms * 1e6 for t in threads),
          "the workload did not run %d threads of %d ms each\n%s" % (n, ms, r.describe()))
    what = "%d threads x %d ms at %d Hz" % (n, ms, hz)
    got = prof.cum("short_task", "cpu")
    table = prof.cum_table("cpu", 8) + "\n" + "\n".join(r.summary_lines())
    check(0.9 * truth <= got <= 1.1 * truth,
          "%s: the threads used %.3f s of CPU (their own clocks); the profile holds %.3f s under short_task "
          "(%.0f%%; want 90%%..110%%)\n%s" % (what, truth / 1e9, got / 1e9, 100.0 * got / truth, indent(table)))
    # Each thread its own CPU, under its thread_id label (what -tagfocus
    # shows): whole periods would give most 3 ms threads 0 or 10 ms. The
    # profile holds the thread's clock up to its end, the truth stops at
    # the end of short_task: the exit between (glibc's, the allocator's and
    # the shim's thread-end work; on a virtual machine, a vCPU taken away
    # there counts as the thread's) is in the one only, 2.2 ms once in 200
    # threads on a loaded machine, so the upper bound has room for it.
    per = _thread_cpu(prof)
    bad = [(t["tid"], t["cpu_ns"], per.get(str(t["tid"]), 0)) for t in threads
           if not 0.8 * t["cpu_ns"] <= per.get(str(t["tid"]), 0) <= 1.25 * t["cpu_ns"] + EXIT_ROOM_NS]
    check(not bad, "%s: %d of %d threads do not have their own CPU (+-20%%) under their thread_id; first: %s\n%s"
          % (what, len(bad), n, ", ".join("tid %d used %.2f ms, profile %.2f ms" % (t, c / 1e6, p / 1e6)
                                          for t, c, p in bad[:5]), indent(table)))

    # The summary's figures are the profile's, and add up.
    x, nsamples, h, c, g, line = _summary(r)
    total, count = prof.total("cpu"), prof.total("samples")
    check(h == hz and abs(x - total / 1e9) <= 0.0051 and nsamples == count,
          "%s: the summary says cpu %.2f s in %d samples at %d Hz; the profile holds %.4f s in %d samples at "
          "%d Hz:\n  %s" % (what, x, nsamples, h, total / 1e9, count, hz, line))
    # samples/count counts periods of 1/hz of CPU: about cpu x hz, within
    # the chance of each short thread reaching its random expiry.
    want = total / 1e9 * hz
    check(abs(count - want) <= 4 * want ** 0.5 + 5,
          "%s: %d samples for %.3f s of CPU at %d Hz (want about %.0f)\n  %s" % (what, count, total / 1e9, hz, want,
                                                                                 line))
    # The process's CPU to the stop: the workload's own clock at the end of
    # main less the loader's few ms before the shim loaded; it holds the
    # profile, and what is not in the profile is the difference.
    check(process / 1e9 - 0.03 <= c <= process / 1e9 + 0.02,
          "%s: the summary says process cpu %.2f s to the stop; the workload's CPU at the end of main was "
          "%.3f s:\n  %s" % (what, c, process / 1e9, line))
    check(x <= c and abs(g - (c - x)) <= 0.0051 and g <= 0.05 + 0.05 * c,
          "%s: process cpu %.2f s, profile %.2f s, 'not in the profile' %.2f s: the profile must lie within "
          "the process's CPU, the gap be their difference, and small (setup before sampling)\n  %s" % (
              what, c, x, g, line))


def test_short_threads_3ms_100hz(ctx):
    """200 threads x 3 ms, one after another, at 100 Hz (each thread lives
    under a third of a period): >= 90% (and <= 110%) of their CPU under
    short_task, each thread its own CPU, summary figures the profile's."""
    _short_threads(ctx, 200, 3, 100)


def test_short_threads_3ms_1000hz(ctx):
    """200 x 3 ms at 1000 Hz (above the kernel's 250 Hz tick: one signal
    carries several periods, and most threads end before one arrives)."""
    _short_threads(ctx, 200, 3, 1000)


def test_short_threads_20ms_100hz(ctx):
    """100 threads x 20 ms at 100 Hz (1.51 s of 2.0 s before the fix)."""
    _short_threads(ctx, 100, 20, 100)


def test_short_threads_20ms_1000hz(ctx):
    """100 threads x 20 ms at 1000 Hz."""
    _short_threads(ctx, 100, 20, 1000)


def test_cpu_after_the_stop_is_said_not_covered(ctx):
    """Item 5: an atexit handler burns 0.5 s after the stop (main burned
    0.5 s before it). The summary, printed at the stop, says the process's
    CPU to the stop -- the workload's own clock as main returned, not the
    handler's CPU, which the process's total (wait4) holds on top -- what of
    it the profile lacks (their difference), and that CPU after the stop is
    not in the profile; the profile has no teardown_burn."""
    r, d = ctx.profile(["atexit_burn", "0.5", "0.5"])
    prof = ctx.read(_cpu_file(d), r)
    main_ns = _truth_lines(r, "main")[0]["cpu_ns"]
    exit_ns = _truth_lines(r, "atexit")[0]["cpu_ns"]
    x, _, _, c, g, line = _summary(r)
    detail = "main's CPU %.3f s, the atexit handler's %.3f s, the process's total (wait4) %.3f s:\n  %s" % (
        main_ns / 1e9, exit_ns / 1e9, r.cpu, line)
    check(main_ns / 1e9 - 0.03 <= c <= main_ns / 1e9 + 0.02,
          "'process cpu C s to the stop' must be the CPU used until main returned: %s" % detail)
    check(r.cpu - c >= exit_ns / 1e9 - 0.02,
          "the CPU after the stop (the atexit handler's %.2f s) must be outside 'process cpu %.2f s to the stop': %s"
          % (exit_ns / 1e9, c, detail))
    check(abs(g - (c - x)) <= 0.0051 and g <= 0.05, "'not in the profile' must be process cpu to the stop less "
          "the profile's cpu, small here: %s" % detail)
    check(abs(x - prof.total("cpu") / 1e9) <= 0.0051 and prof.cum("main_burn", "cpu") >= 0.4e9,
          "the profile should hold main_burn's 0.5 s and the summary its total:\n%s\n  %s" % (
              prof.cum_table("cpu", 8), line))
    check(not prof.has_function("teardown_burn"), "the atexit handler ran after the stop; the profile has it:\n%s"
          % prof.cum_table("cpu", 8))


def _shape(line):
    """A summary line with its paths and numbers masked: its fields."""
    line = re.sub(r"/\S+\.pprof", "PATH", line)
    line = re.sub(r"(\(parent \d+\): ).*$", r"\1ARGV", line)
    return re.sub(r"\d+(\.\d+)?", "N", line)


def test_docs_show_a_real_summary_line(ctx):
    """README.md and docs/CONFIG.md show a summary line; a real one (the demo
    workload, named as in their example) has the same fields in the same
    order, field for field, numbers and paths aside."""
    r, d = ctx.profile(["demo"], name="288w-6writers")
    real = r.summary_lines()
    check(len(real) == 1, "want one summary line\n%s" % r.describe())
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for doc in ("README.md", os.path.join("docs", "CONFIG.md")):
        shown = [l.strip() for l in open(os.path.join(repo, doc)) if l.strip().startswith("# profshim: wrote ")]
        check(len(shown) == 1, "%s should show one summary line, shows %d" % (doc, len(shown)))
        check(_shape(shown[0]) == _shape(real[0]), "%s shows a summary line whose fields differ from a real "
              "one's:\n  shown: %s\n  real:  %s" % (doc, shown[0], real[0]))


def test_each_image_counts_its_own_cpu(ctx):
    """An exec does not reset the process's CPU clock and a fork starts the
    child's from zero: each image's 'process cpu to the stop' is its own,
    so what its profile lacks stays small. fork_exec exec: the image before
    the exec and the one after (each ~0.3 s of work); fork_exec fork: the
    parent and the child (PROFILE_FORKS=own: its own line). Counted from the
    process's start, the image after the exec would lack the first image's
    whole CPU."""
    for mode in ("exec", "fork"):
        r, d = ctx.profile(["fork_exec", mode], PROFILE_FORKS="own")
        lines = r.summary_lines()
        check(len(lines) == 2, "fork_exec %s: want two summary lines (two images)\n%s" % (mode, r.describe()))
        for line in lines:
            m, c = SUMMARY_CPU_RE.search(line), SUMMARY_COVER_RE.search(line)
            check(m and c, "fork_exec %s: a summary line lacks its cpu fields:\n  %s" % (mode, line))
            x, cpu, gap = float(m.group(1)), float(c.group(1)), float(c.group(2))
            check(x >= 0.1 and x <= cpu and gap <= 0.05,
                  "fork_exec %s: an image's profile holds %.2f s; its 'process cpu to the stop' is %.2f s, %.2f s "
                  "of it not in the profile: an image must count its own CPU only\n%s" % (
                      mode, x, cpu, gap, "\n".join("  " + l for l in lines)))


def test_fork_time_is_under_fork(ctx):
    """A forking server's parent (64 MiB touched, 100 children 4 at a time,
    each ending at once), then parent_work for 0.1 s of CPU. Samples that
    came during a fork were dropped and their CPU -- the kernel copying the
    page tables, the allocator's fork handlers -- went to the next sample:
    0.65 s on parent_work. Now parent_work holds about its 0.1 s (at most
    0.15 s: ten 10 ms samples, each weighed by the thread's own clock), and
    at least half of the fork phase's CPU (the main thread's clock over the
    loop, waits included) is under fork."""
    r, d = ctx.profile(["fork_burst", "100", "4", "64"])
    prof = ctx.read(_cpu_file(d), r)
    forks = _truth_lines(r, "forks")[0]["cpu_ns"]
    work = _truth_lines(r, "parent_work")[0]["cpu_ns"]
    table = indent(prof.cum_table("cpu", 12))
    got = prof.cum("parent_work", "cpu")
    check(got <= 0.15e9, "parent_work ran %.3f s; the profile holds %.3f s under it\n%s" % (work / 1e9, got / 1e9, table))
    under = prof.cum("fork", "cpu")
    check(under >= 0.5 * forks, "the fork phase used %.3f s of the main thread's CPU; %.3f s of it is under fork\n%s"
          % (forks / 1e9, under / 1e9, table))


def test_cpu_held_from_the_sampler_stays_where_it_was_spent(ctx):
    """f burns 0.5 s; held blocks every signal with the raw system call
    (Go's way: no libc wrapper for the shim to filter), burns 0.5 s and
    unblocks; g burns 0.1 s. The expirations of the held span come as one
    signal when held unblocks, at held's own stack: held has its 0.5 s, and
    g no more than its own (at most 0.15 s)."""
    r, d = ctx.profile(["held_burn"])
    prof = ctx.read(_cpu_file(d), r)
    table = indent(prof.cum_table("cpu", 12))
    truth = {k: _truth_lines(r, k)[0]["cpu_ns"] for k in ("f", "held", "g")}
    got = {k: prof.cum(k, "cpu") for k in truth}
    check(got["g"] <= 0.15e9 and got["held"] >= 0.4e9 and 0.4e9 <= got["f"] <= 0.6e9,
          "used %s; the profile holds %s\n%s" % (
              ", ".join("%s %.3f s" % (k, v / 1e9) for k, v in sorted(truth.items())),
              ", ".join("%s %.3f s" % (k, v / 1e9) for k, v in sorted(got.items())), table))

