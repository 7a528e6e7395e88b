"""Long-running services: the heap's high-water mark on disk
before a SIGKILL or the OOM killer, snapshots by signal, trigger file and
interval while the program runs, memory over time, and the rules that keep
short images and small heaps from paying for any of it.

Truths come from the workloads (tests/workloads/climber.c, snap_burn.c):
what the climbing function held at its top, the CPU the program's thread
used by its own clock.
"""

import os
import re
import signal
import subprocess
import time

from common import KINDS, MiB, Skip, check, fail, indent, truths
from st_helpers import Status, prof_env, start

CLIMB_TOP_MIB = 400


def _wait_file(path, timeout, proc=None):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc is not None and proc.poll() is not None:
            fail("the program ended (status %s) before %s appeared" % (proc.returncode, path))
        if time.monotonic() > deadline:
            fail("%s did not appear within %d s; dir has %s" % (
                path, timeout, sorted(os.listdir(os.path.dirname(path)))))
        time.sleep(0.02)


def _peak(ctx, d, r):
    path = os.path.join(d, "run.heap-peak.pprof")
    check(os.path.isfile(path), "no heap-peak file; dir has %s\n%s" % (sorted(os.listdir(d)), r.describe()))
    return ctx.read(path)


def test_heap_peak_survives_sigkill(ctx):
    """Climbs to 400 MiB in climb_here, frees it, holds 50 MiB in hold_here,
    is SIGKILLed: the heap-peak file, already on disk, shows the climb."""
    d = ctx.mkdtemp("prof")
    r = start(ctx, ["climber", str(CLIMB_TOP_MIB), "50", "20"], env=prof_env(ctx, d, PROFILE_PEAK_AFTER="0"))
    r.wait_for(r"^ready$", timeout=60)
    time.sleep(3)  # the last peak file is rate-limited (one a second at most)
    r.kill(signal.SIGKILL)
    r.wait()
    check(r.status.is_signal(signal.SIGKILL), "want death by SIGKILL, got %s\n%s" % (r.status, r.describe()))
    t = truths(r)["climb_here"]["inuse_space"]
    prof = _peak(ctx, d, r)
    got = prof.cum("climb_here", "inuse_space")
    check(got >= 0.8 * t, "climb_here holds %d bytes in the heap-peak profile, want >= 80%% of the %d it "
          "held at its top\n%s" % (got, t, indent(prof.cum_table("inuse_space"))))
    check(not os.path.exists(os.path.join(d, "run.cpu.pprof")), "a SIGKILLed process wrote a final profile?")
    rows = open(os.path.join(d, "run.mem.tsv")).read().splitlines()
    check(rows[0].split("\t")[:3] == ["time", "seconds", "event"] and any("\tpeak\t" in l for l in rows),
          "run.mem.tsv should have its header and a row per peak:\n%s" % indent("\n".join(rows)))


def _cgroup(limit_bytes):
    root = "/sys/fs/cgroup/memory"
    if not os.path.isfile(os.path.join(root, "memory.limit_in_bytes")):
        raise Skip("no cgroup v1 memory controller at %s: the OOM killer test needs one" % root)
    path = os.path.join(root, "profshim-oom-%d" % os.getpid())
    try:
        os.mkdir(path)
        with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit_bytes))
        if os.path.exists(os.path.join(path, "memory.memsw.limit_in_bytes")):
            with open(os.path.join(path, "memory.memsw.limit_in_bytes"), "w") as f:
                f.write(str(limit_bytes))
    except OSError as e:
        try:
            os.rmdir(path)
        except OSError:
            pass
        raise Skip("cannot make a memory cgroup at %s (%s): the OOM killer test needs one (as root)" % (path, e))
    return path


def test_heap_peak_survives_the_oom_killer(ctx):
    """The climber in a memory cgroup of 300 MiB: the kernel's OOM killer
    ends it (SIGKILL, status 137), and the heap-peak file shows >= 60% of
    the limit in climb_here."""
    limit = 300 * MiB
    cg = _cgroup(limit)
    try:
        d = ctx.mkdtemp("prof")
        env = prof_env(ctx, d, PROFILE_PEAK_AFTER="0")
        argv = [ctx.workload("climber"), "1000", "0", "100"]
        procs = os.path.join(cg, "cgroup.procs")

        def join_cgroup():
            os.setsid()
            with open(procs, "w") as f:
                f.write(str(os.getpid()))

        t0 = time.monotonic()
        p = subprocess.Popen(argv, env=env, cwd=ctx.mkdtemp("cwd"), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, preexec_fn=join_cgroup)
        try:
            out, err = p.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            fail("the climber was not killed within 90 s in a cgroup of %d MiB" % (limit // MiB))
        desc = "status %s after %.1f s\nstdout:\n%s\nstderr:\n%s" % (
            p.returncode, time.monotonic() - t0, indent(out.decode()), indent(err.decode()))
        with open(os.path.join(cg, "memory.oom_control")) as f:
            oom = f.read()
        check(p.returncode == -signal.SIGKILL, "want the OOM killer's SIGKILL (137), got %s\n%s" % (p.returncode, desc))
        kills = [int(l.split()[1]) for l in oom.splitlines() if l.startswith("oom_kill ")]
        check(kills and kills[0] >= 1, "the cgroup saw no OOM kill (memory.oom_control):\n%s" % oom)
        path = os.path.join(d, "run.heap-peak.pprof")
        check(os.path.isfile(path), "no heap-peak file after the OOM kill; dir has %s\n%s" % (
            sorted(os.listdir(d)), desc))
        prof = ctx.read(path)
        got = prof.cum("climb_here", "inuse_space")
        check(got >= 0.6 * limit, "climb_here holds %d MiB in the heap-peak profile, want >= 60%% of the "
              "%d MiB limit\n%s" % (got // MiB, limit // MiB, indent(prof.cum_table("inuse_space"))))
    finally:
        for _ in range(50):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)


def test_no_peak_file_below_the_floor_or_for_a_short_image(ctx):
    """A heap that stays under the floor writes no peak file; nor does an
    image younger than PROFILE_PEAK_AFTER, however big; a heap past the
    floor in an image old enough does (so the first two can fail)."""
    cases = [("under the floor", ["climber", "32", "0", "0"], {"PROFILE_PEAK_AFTER": "0"}, False),
             ("short image", ["climber", "200", "0", "0"], {}, False),
             ("past the floor", ["climber", "200", "0", "0"], {"PROFILE_PEAK_AFTER": "0"}, True)]
    for what, argv, extra, want in cases:
        d = ctx.mkdtemp("prof")
        r = start(ctx, argv, env=prof_env(ctx, d, **extra))
        r.wait_for(r"^ready$", timeout=60)
        time.sleep(1.5)
        r.kill(signal.SIGTERM)
        r.wait()
        have = os.path.exists(os.path.join(d, "run.heap-peak.pprof"))
        check(have == want, "%s: heap-peak file %s; dir has %s\n%s" % (
            what, "written" if have else "missing", sorted(os.listdir(d)), r.describe()))


def test_peak_file_removed_when_the_final_heap_says_the_same_and_memory_rows(ctx):
    """A heap that climbs to 200 MiB in hold_here and stays there: a peak
    file is written while it runs (the summary counts it, mem.tsv has its
    row), and a normal stop removes it (the final heap profile holds as
    much). PROFILE_MEM_HZ=10 gives tick rows whose allocator figures match
    what the program holds."""
    d = ctx.mkdtemp("prof")
    r = start(ctx, ["climber", "0", "200", "0"], env=prof_env(ctx, d, PROFILE_PEAK_AFTER="0", PROFILE_MEM_HZ="10"))
    r.wait_for(r"^ready$", timeout=60)
    t_ready = time.monotonic()
    tsv = os.path.join(d, "run.mem.tsv")
    # The peak file at the top: the first one comes at the floor, the next
    # when due (a second after it, or five times what it took: longer on a
    # loaded machine: up to 90 s, a hang guard). Then at least 2 s of tick
    # rows.
    deadline = t_ready + 90
    at_top = False
    while not at_top and time.monotonic() < deadline:
        rows = [l.split("\t") for l in open(tsv).read().splitlines()[1:]] if os.path.exists(tsv) else []
        at_top = any(row[2] == "peak" and int(row[6]) >= 200 * MiB * 0.8 for row in rows)
        time.sleep(0.1)
    check(at_top, "no peak row near 200 MiB in run.mem.tsv within 90 s of ready:\n%s" % (
        open(tsv).read() if os.path.exists(tsv) else "(no run.mem.tsv)"))
    time.sleep(max(0.0, t_ready + 2 - time.monotonic()))
    r.kill(signal.SIGTERM)
    r.wait()
    check(r.status.is_signal(signal.SIGTERM), "want death by SIGTERM, got %s\n%s" % (r.status, r.describe()))
    held = truths(r)["hold_here"]["inuse_space"]
    wrote = r.wrote_lines()
    check(len(wrote) == 1 and re.search(r" \| \d+ heap peaks? written", wrote[0]),
          "the summary line should count the peak file written while running\n%s" % r.describe())
    check(not os.path.exists(os.path.join(d, "run.heap-peak.pprof")),
          "the final heap profile holds as much as the peak: the peak file should be gone; dir has %s\n%s" % (
              sorted(os.listdir(d)), r.describe()))
    rows = [l.split("\t") for l in open(os.path.join(d, "run.mem.tsv")).read().splitlines()]
    head, rows = rows[0], rows[1:]
    check(head == ["time", "seconds", "event", "rss_bytes", "heap_allocated_bytes", "allocator_mapped_bytes",
                   "heap_peak_bytes"], "run.mem.tsv header: %s" % head)
    events = [row[2] for row in rows]
    ticks = [row for row in rows if row[2] == "tick"]
    check(len(ticks) >= 10 and "peak" in events and events[-1] == "stop",
          "want >= 10 tick rows over 2 s at PROFILE_MEM_HZ=10, a peak row and a stop row last: %s" % events)
    last = ticks[-1]
    rss, alloc, mapped, peak_bytes = (int(x) for x in last[3:7])
    check(held <= alloc <= held * 1.1 and alloc <= mapped and held <= rss,
          "last tick row: heap_allocated %d, mapped %d, rss %d; the program holds %d" % (alloc, mapped, rss, held))
    check(0.8 * held <= peak_bytes <= 1.2 * held, "heap_peak_bytes %d, the program's top %d" % (peak_bytes, held))
    secs = [float(row[1]) for row in rows]
    check(secs == sorted(secs), "rows out of order: %s" % secs)


def _burn(ctx, d, **vars):
    env = prof_env(ctx, d, **vars)
    out = os.path.join(ctx.mkdtemp("io"), "stdout")
    with open(out, "wb") as o:
        p = subprocess.Popen([ctx.workload("snap_burn"), "phases", "700"], env=env, stdin=subprocess.PIPE,
                             stdout=o, stderr=subprocess.PIPE, cwd=ctx.mkdtemp("cwd"), start_new_session=True)
    return p, out


def _wait_out(p, out, line, timeout=60):
    deadline = time.monotonic() + timeout
    while line not in open(out).read():
        if p.poll() is not None or time.monotonic() > deadline:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            fail("snap_burn did not print %r (status %s)\nstdout:\n%s\nstderr:\n%s" % (
                line, p.poll(), indent(open(out).read()), indent(p.stderr.read().decode())))
        time.sleep(0.01)


def test_snapshots_by_signal_and_trigger_file(ctx):
    """USR2 after phase a, the trigger file after phase b: two numbered sets
    while the program runs. Its output and exit status are a plain run's;
    snapshot 1 is burn_a's CPU, snapshot 2 burn_b's, the final profile
    burn_c's, and together they are the program's CPU within 5%."""
    d = ctx.mkdtemp("prof")
    p, out = _burn(ctx, d, PROFILE_SNAPSHOT_SIGNAL="USR2", PROFILE_SNAPSHOT_TRIGGER="1")
    _wait_out(p, out, "phase a done")
    os.kill(p.pid, signal.SIGUSR2)
    _wait_file(os.path.join(d, "run.1.heap.pprof"), 30, p)
    p.stdin.write(b"go\n")
    p.stdin.flush()
    _wait_out(p, out, "phase b done")
    open(os.path.join(d, "run.snapshot"), "w").close()
    _wait_file(os.path.join(d, "run.2.heap.pprof"), 30, p)
    p.stdin.write(b"go\n")
    p.stdin.close()
    try:
        err = p.stderr.read()
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        fail("snap_burn did not end")
    text = open(out).read()
    desc = "status %s\nstdout:\n%s\nstderr:\n%s" % (p.returncode, indent(text), indent(err.decode()))
    plain = subprocess.run([ctx.workload("snap_burn"), "phases", "100"], env=ctx.env(preload=False),
                           input=b"go\ngo\n", stdout=subprocess.PIPE, timeout=60)
    plain_lines = [l for l in plain.stdout.decode().splitlines() if not l.startswith("truth ")]
    check(p.returncode == plain.returncode, "exit status %s, a plain run's %s\n%s" % (
        p.returncode, plain.returncode, desc))
    lines = [l for l in text.splitlines() if not l.startswith("truth ")]
    check(lines == plain_lines, "output differs from a plain run's %s:\n%s" % (plain_lines, desc))
    check(not os.path.exists(os.path.join(d, "run.snapshot")), "the trigger file was not consumed")
    truth = truths_from(text)
    total = 0
    for name, main_fn, others in (("run.1.cpu.pprof", "burn_a", ("burn_b", "burn_c")),
                                  ("run.2.cpu.pprof", "burn_b", ("burn_a", "burn_c")),
                                  ("run.cpu.pprof", "burn_c", ("burn_a", "burn_b"))):
        prof = ctx.read(os.path.join(d, name))
        cpu = prof.total("cpu")
        total += cpu
        check(prof.cum(main_fn, "cpu") >= 0.8 * cpu and all(prof.cum(o, "cpu") == 0 for o in others),
              "%s should hold %s's CPU and nothing of %s\n%s" % (name, main_fn, others,
                                                                 indent(prof.cum_table("cpu"))))
    check(abs(total - truth) <= 0.05 * truth, "snapshots + final profile hold %.3f s of CPU; the program's "
          "thread used %.3f s (want within 5%%)\n%s" % (total / 1e9, truth / 1e9, desc))
    summary = [l for l in err.decode().splitlines() if l.startswith("# profshim: wrote")]
    check(len(summary) == 1 and "2 snapshots" in summary[0], "the summary line should count 2 snapshots:\n%s" % desc)


def truths_from(text):
    for l in text.splitlines():
        if l.startswith("truth run cpu_nanos="):
            return int(l.split("=")[1])
    fail("no truth line in:\n%s" % text)


def _interval_run(ctx, keep):
    d = ctx.mkdtemp("prof")
    extra = {"PROFILE_SNAPSHOT_KEEP": str(keep)} if keep else {}
    r = start(ctx, ["snap_burn", "idle"], env=prof_env(ctx, d, PROFILE_INTERVAL="1s", **extra))
    r.wait_for(r"^ready$")
    time.sleep(3.5)
    r.kill(signal.SIGTERM)
    r.wait()
    check(r.status.is_signal(signal.SIGTERM), "want death by SIGTERM, got %s\n%s" % (r.status, r.describe()))
    return d, r


def _sets(d):
    sets = {}
    for n in os.listdir(d):
        parts = n.split(".")
        if len(parts) == 4 and parts[0] == "run" and parts[1].isdigit() and parts[3] == "pprof":
            sets.setdefault(int(parts[1]), []).append(parts[2])
    return sets


def test_interval_snapshots_and_keep(ctx):
    """PROFILE_INTERVAL=1s over 3.5 s, then SIGTERM: 3 numbered sets and the
    final files; with PROFILE_SNAPSHOT_KEEP=2, the last 2."""
    d, r = _interval_run(ctx, None)
    sets = _sets(d)
    check(sorted(sets) == [1, 2, 3] and all(sorted(v) == sorted(KINDS) for v in sets.values()),
          "want sets 1, 2, 3 (every kind in each); dir has %s\n%s" % (sorted(os.listdir(d)), r.describe()))
    for f in ("run.cpu.pprof", "run.heap.pprof", "run.3.cpu.pprof", "run.1.heap.pprof"):
        ctx.read(os.path.join(d, f))
    d, r = _interval_run(ctx, 2)
    sets = _sets(d)
    check(sorted(sets) == [2, 3], "PROFILE_SNAPSHOT_KEEP=2: want sets 2 and 3 left; dir has %s\n%s" % (
        sorted(os.listdir(d)), r.describe()))
    check(os.path.isfile(os.path.join(d, "run.cpu.pprof")), "no final profile\n%s" % r.describe())


def test_malformed_running_variables_are_setup_errors(ctx):
    bad = [("PROFILE_INTERVAL", "30"), ("PROFILE_INTERVAL", "0.5s"), ("PROFILE_INTERVAL", "5x"),
           ("PROFILE_SNAPSHOT_KEEP", "0"), ("PROFILE_SNAPSHOT_KEEP", "many"),
           ("PROFILE_SNAPSHOT_SIGNAL", "USR3"), ("PROFILE_SNAPSHOT_SIGNAL", "KILL"),
           ("PROFILE_SNAPSHOT_SIGNAL", "SEGV"), ("PROFILE_SNAPSHOT_SIGNAL", "RTMAX-4"),
           ("PROFILE_SNAPSHOT_TRIGGER", "yes"), ("PROFILE_MEM_HZ", "1000"),
           ("PROFILE_PEAK_FLOOR", "64MB"), ("PROFILE_PEAK_AFTER", "-1")]
    for var, value in bad:
        d = ctx.mkdtemp("prof")
        r = ctx.run(["hello"], PROFILE_DIR=d, **{var: value})
        errs = r.error_lines()
        check(r.rc == 78 and len(errs) == 1 and var in errs[0] and r.out == b"",
              "%s=%r: want exit 78 and one error line naming it, got\n%s" % (var, value, r.describe()))
