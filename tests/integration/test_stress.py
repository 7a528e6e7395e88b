"""Stress: many stops under allocation churn, racing signals (issue 3).

SPEC "When it writes: the stop paths": "Writing is idempotent and race-free:
two threads calling exit, or a signal that arrives while a stop is being
written, still give one complete set"; "The shim never hangs a process";
"The process's exit status, or the signal it died of, is exactly what it
would have been"; SPEC "Files": written atomically, a reader never sees a
partial file. "The summary line": exactly one per image.

200 runs of st_stress (4 threads malloc/calloc/realloc/free at random while
main, after a random 0-30 ms, calls exit(7), raises SIGTERM, or lets a
thread call exit(7) while it sends kill(getpid(), SIGTERM)), two at a time,
each bounded at 20 s, the whole under 100 s. Every run: its expected status,
exactly one '# profshim: wrote' line and no error line, both files present
and complete (every 10th read with go tool pprof -raw, the others checked as
whole gzip streams of a profile.proto), no run hangs.
"""

import os
import random
import signal
import subprocess
import threading
import time

from common import check, clip, communicate_bounded, indent
from st_helpers import gzip_ok, prof_env, pprofs

RUNS = 200
CONCURRENCY = 2
RUN_TIMEOUT = 20
BUDGET = 100
MODES = ("exit", "term", "race")
EXPECT = {"exit": {7}, "term": {-signal.SIGTERM}, "race": {7, -signal.SIGTERM}}


def test_stress_200_stops(ctx):
    exe = ctx.workload("st_stress")
    rng = random.Random(20261130)
    plan = [(i, MODES[i % 3], rng.randint(0, 30000), rng.randint(1, 1 << 30)) for i in range(RUNS)]
    results = [None] * RUNS
    lock = threading.Lock()
    todo = list(plan)
    t0 = time.monotonic()

    def one(i, mode, delay, seed):
        d = ctx.mkdtemp("prof")
        cwd = ctx.mkdtemp("cwd")
        argv = [exe, mode, str(delay), str(seed)]
        p = subprocess.Popen(argv, env=prof_env(ctx, d), cwd=cwd, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        start = time.monotonic()
        out, err, hung = communicate_bounded(p, RUN_TIMEOUT)
        return dict(i=i, mode=mode, delay=delay, seed=seed, argv=argv, dir=d, rc=p.returncode, out=out,
                    err=err.decode("utf-8", "replace"), hung=hung, wall=time.monotonic() - start)

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                job = todo.pop(0)
            if time.monotonic() - t0 > BUDGET:
                return
            results[job[0]] = one(*job)

    threads = [threading.Thread(target=worker) for _ in range(CONCURRENCY)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0

    def describe(res):
        return "run %d: %s (delay %d us): %s, %.2f s\nPROFILE_DIR: %s\nstderr:\n%s" % (
            res["i"], " ".join(res["argv"][1:]), res["delay"], "hung" if res["hung"] else "rc %d" % res["rc"],
            res["wall"], pprofs(res["dir"]), indent(clip(res["err"]) or "(empty)"))

    done = [r for r in results if r is not None]
    check(len(done) == RUNS and elapsed < BUDGET, "only %d of %d runs finished within the %d s budget (%.1f s)" % (
        len(done), RUNS, BUDGET, elapsed))
    problems = []
    for res in done:
        why = []
        if res["hung"]:
            why.append("did not finish within %d s" % RUN_TIMEOUT)
        elif res["rc"] not in EXPECT[res["mode"]]:
            why.append("status %d, want %s" % (res["rc"], sorted(EXPECT[res["mode"]])))
        lines = [l for l in res["err"].splitlines() if l.startswith("# profshim: ")]
        wrote = [l for l in lines if l.startswith("# profshim: wrote ")]
        if len(wrote) != 1 or len(lines) != 1:
            why.append("%d '# profshim: wrote' lines and %d other profshim lines" % (len(wrote), len(lines) - len(wrote)))
        if pprofs(res["dir"]) != ["run.cpu.pprof", "run.heap.pprof"]:
            why.append("PROFILE_DIR holds %s" % pprofs(res["dir"]))
        else:
            for n in ("run.cpu.pprof", "run.heap.pprof"):
                path = os.path.join(res["dir"], n)
                try:
                    if res["i"] % 10 == 0:
                        ctx.pprof.read(path)
                    else:
                        gzip_ok(path)
                except AssertionError as e:
                    why.append("%s unreadable: %s" % (n, str(e).split("\n")[0]))
        if why:
            problems.append("%s\n  %s" % (describe(res), "; ".join(why)))
    check(not problems, "%d of %d runs went wrong (%.1f s in all):\n%s" % (
        len(problems), RUNS, elapsed, "\n".join(problems[:5])))
