"""Stress: the stop paths at random, under allocation churn and racing each
other (a randomized stop-path stress run).

CONTRACT.md, stop paths: writing is once and race-free (two threads
calling exit, or a signal that arrives while a stop is being written, still
give one complete set); the shim never hangs a process; the process's exit
status, or the signal it died of, is exactly what it would have been;
CONTRACT.md, files: written atomically, a reader never sees a partial file, no two
images overwrite each other; "The summary line": exactly one per image;
CONTRACT.md, errors: every run leaves readable files or one line saying why
not, and no temporary file.

tests/workloads/st_stress.c: three allocating threads and one that blocks
every signal and allocates, while main ends the process after a random delay
by exit, _exit, return, raise(SIGTERM), SIGSEGV, abort, SIGTERM sent by the
test, exec, fork (the child ending by exit, _exit, SIGTERM or SIGSEGV), or
two of these racing (exit/SIGTERM, exit/exit, exit/SIGSEGV, exec/exit,
fork/exit, exit/SIGTERM from outside). Two tests of 120 runs each, two runs
at a time, each run bounded at 20 s (a hang guard). Every run must finish,
however long the machine takes (they count runs, not runs per second; a
loaded machine took 95 s for 133 of them); a run that hangs ends the test
at once, and the test's own hang guard is 10 minutes. Every
mode runs once without the shim first: its status must be one the test
expects, so the expectations are the plain program's. Each run under the
shim: a status of that set; one line per image, every line the shim's; each
named file a whole profile (every 10th read with go tool pprof, the others
checked as complete gzip streams of a profile.proto); no two images naming
the same file; PROFILE_DIR holding exactly the named files (no temporary).
"""

import os
import random
import select
import signal
import subprocess
import threading
import time

from common import check, clip, communicate_bounded, indent, profile_dir_names
from st_helpers import gzip_ok, prof_env, written

RUNS = 120
CONCURRENCY = 2
RUN_TIMEOUT = 20
HANG_GUARD = 600  # the whole test's, for tests/run.py

TERM, SEGV, ABRT = -signal.SIGTERM, -signal.SIGSEGV, -signal.SIGABRT
# mode: (statuses the run may end with, image counts it may leave)
SINGLE = {
    "exit": ({7}, {1}),
    "_exit": ({9}, {1}),
    "return": ({11}, {1}),
    "term": ({TERM}, {1}),
    "segv": ({SEGV}, {1}),
    "abort": ({ABRT}, {1}),
    "outside": ({TERM}, {1}),
    "outrace": ({7, TERM}, {1}),
}
IMAGES = {
    "exec": ({13}, {2}),
    "fork": (None, {2}),  # the status follows from the seed: fork_status()
    "race_exit_term": ({7, TERM}, {1}),
    "race_exit_exit": ({7, 8}, {1}),
    "race_exit_segv": ({7, SEGV}, {1}),
    "race_exec_exit": ({7, 13}, {1, 2}),
    "race_fork_exit": ({7}, {1, 2}),
}


def fork_status(seed):
    """The fork mode's parent exits 20+code or 40+signal of its child, whose
    end the seed picks: exit(3), _exit(4), SIGTERM, SIGSEGV."""
    return {0: 23, 1: 24, 2: 40 + signal.SIGTERM, 3: 40 + signal.SIGSEGV}[seed % 4]


def _expected(modes, mode, seed):
    statuses, images = modes[mode]
    return ({fork_status(seed)} if statuses is None else statuses), images


def _one(ctx, exe, i, mode, delay, seed, shim, rng_kill):
    d = ctx.mkdtemp("prof") if shim else None
    # The images counted are own's: a forked child writes its own files.
    env = prof_env(ctx, d, PROFILE_FORKS="own") if shim else ctx.env(preload=False)
    argv = [exe, mode, str(delay), str(seed)]

    def preexec():
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    p = subprocess.Popen(argv, env=env, cwd=ctx.mkdtemp("cwd"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec)
    start = time.monotonic()
    early = b""
    if mode in ("outside", "outrace"):
        # SIGTERM from outside: after "ready", at a random moment (for
        # outrace, around the program's own exit(7) DELAY_US later).
        r, _, _ = select.select([p.stdout], [], [], RUN_TIMEOUT)
        if r:
            early = os.read(p.stdout.fileno(), 64)
            time.sleep(rng_kill / 1e6)
            try:
                os.kill(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    out, err, hung = communicate_bounded(p, RUN_TIMEOUT)
    return dict(i=i, mode=mode, delay=delay, seed=seed, argv=argv, dir=d, rc=p.returncode, out=early + out,
                err=err.decode("utf-8", "replace"), hung=hung, wall=time.monotonic() - start)


def _check_run(ctx, res, modes):
    statuses, images = _expected(modes, res["mode"], res["seed"])
    why = []
    if res["hung"]:
        return ["did not finish within %d s" % RUN_TIMEOUT]
    if res["rc"] not in statuses:
        why.append("status %d, want one of %s" % (res["rc"], sorted(statuses)))
    lines = res["err"].splitlines()
    stray = [l for l in lines if not l.startswith("# profshim: ")]
    if stray:
        why.append("stderr lines not the shim's: %s" % stray[:3])
    ours = [l for l in lines if l.startswith("# profshim: ")]
    if len(ours) not in images:
        why.append("%d '# profshim: ' lines, want one per image (%s)" % (len(ours), sorted(images)))
    named = []
    for line in ours:
        files = written(line)
        if not files and "wrote no profile" not in line:
            why.append("a line that names no file and says no why: %r" % line[:200])
        named += files
    if len(set(named)) != len(named):
        why.append("two lines name the same file (one image replaced another's): %s" % sorted(named))
    have = sorted(os.path.join(res["dir"], n) for n in profile_dir_names(res["dir"]))
    if sorted(set(named)) != have:
        why.append("PROFILE_DIR holds %s, the lines name %s" % (
            [os.path.basename(p) for p in have], sorted(os.path.basename(p) for p in named)))
    for k, path in enumerate(sorted(set(named) & set(have))):
        try:
            if res["i"] % 10 == 0 and k == res["i"] // 10 % 2:
                ctx.pprof.read(path)
            else:
                gzip_ok(path)
        except AssertionError as e:
            why.append("%s unreadable: %s" % (os.path.basename(path), str(e).split("\n")[0]))
    return why


def _stress(ctx, modes, seed):
    exe = ctx.workload("st_stress")
    rng = random.Random(seed)
    names = sorted(modes)
    # The plain program first: every mode's status must be one expected.
    base = {}
    for mode in names:
        s = rng.randint(1, 1 << 30)
        base[mode] = _one(ctx, exe, -1, mode, 2000, s, False, 3000)
        statuses, _ = _expected(modes, mode, s)
        check(not base[mode]["hung"] and base[mode]["rc"] in statuses,
              "baseline %s without the shim: %s, expected %s\nstderr:\n%s" % (
                  mode, "hung" if base[mode]["hung"] else "status %d" % base[mode]["rc"], sorted(statuses),
                  indent(clip(base[mode]["err"]) or "(empty)")))
    plan = [(i, names[i % len(names)], rng.randint(0, 30000), rng.randint(1, 1 << 30), rng.randint(0, 40000))
            for i in range(RUNS)]
    results = [None] * RUNS
    lock = threading.Lock()
    todo = list(plan)
    t0 = time.monotonic()

    hung = []

    def worker():
        while True:
            with lock:
                if not todo or hung:
                    return
                job = todo.pop(0)
            i, mode, delay, s, kill_us = job
            results[i] = _one(ctx, exe, i, mode, delay, s, True, kill_us)
            if results[i]["hung"]:
                hung.append(i)

    threads = [threading.Thread(target=worker) for _ in range(CONCURRENCY)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    done = [r for r in results if r is not None]
    check(len(done) == RUNS or hung, "only %d of %d runs were made" % (len(done), RUNS))
    problems = []
    errors = 0
    for res in done:
        why = _check_run(ctx, res, modes)
        errors += sum(1 for l in res["err"].splitlines() if l.startswith("# profshim: error:"))
        if why:
            problems.append("run %d: %s (delay %d us): %s, %.2f s\nPROFILE_DIR: %s\nstderr:\n%s\n  %s" % (
                res["i"], " ".join(res["argv"][1:]), res["delay"], "hung" if res["hung"] else "status %d" % res["rc"],
                res["wall"], sorted(os.listdir(res["dir"])), indent(clip(res["err"]) or "(empty)"), "; ".join(why)))
    check(not problems, "%d of %d runs went wrong (%.1f s in all, %d error lines):\n%s" % (
        len(problems), RUNS, elapsed, errors, "\n".join(problems[:5])))


def _guarded(test):
    test.hang_guard = HANG_GUARD
    return test


@_guarded
def test_stress_stop_paths(ctx):
    """120 runs: exit, _exit, return, SIGTERM raised, SIGSEGV, abort, SIGTERM
    from outside while the program runs, and SIGTERM from outside around
    its own exit(7)."""
    _stress(ctx, SINGLE, 20261130)


@_guarded
def test_stress_images_and_races(ctx):
    """120 runs: exec, fork (the child ending four ways), and two stop paths
    racing: exit/SIGTERM, exit/exit, exit/SIGSEGV, exec/exit, fork/exit."""
    _stress(ctx, IMAGES, 20261201)
