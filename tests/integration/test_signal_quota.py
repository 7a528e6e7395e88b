"""RLIMIT_SIGPENDING (ulimit -i): each of the shim's per-thread CPU timers
holds one of the user's queued-signal slots for its life. sigq_quota starts
120 threads, queues 100 signals to itself and creates a timer, under a limit
200 above what the user has queued already (SigQ in /proc/self/status).
Plain, all succeed. The shim took a slot for every thread (121), and the
program's sigqueue failed from its 80th call on, its timer_create too; it
now takes at most a quarter of what is free and leaves the other threads
unsampled, said in the summary line."""

import re
import resource

from common import check, image_files
from st_helpers import pprofs, prof_env, run


def _queued_now():
    m = re.search(r"^SigQ:\s+(\d+)/", open("/proc/self/status").read(), re.M)
    return int(m.group(1)) if m else 0


def test_the_program_keeps_its_share_of_queued_signals(ctx):
    argv = ["sigq_quota", "120", "100"]
    lim = [(resource.RLIMIT_SIGPENDING, _queued_now() + 200)]
    plain = run(ctx, argv, env=ctx.env(preload=False), rlimits=lim)
    want = "threads 120 of 120, queued 100 of 100, timer ok\n"
    check(plain.status.is_exit(0) and plain.stdout_text == want, "without the shim:\n%s" % plain.describe())
    d = ctx.mkdtemp("prof")
    r = run(ctx, argv, env=prof_env(ctx, d), rlimits=lim)
    check(r.status.is_exit(0) and r.stdout_text == want, "under the shim:\n%s" % r.describe())
    check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s\n%s"
          % (pprofs(d), r.describe()))
    lines = r.summary_lines()
    check(len(lines) == 1 and re.search(r"\d+ threads unsampled \(no timer\)", lines[0]),
          "the summary should say how many threads went unsampled:\n%s" % r.describe())


def test_no_slot_left_at_all_means_unsampled_not_refused(ctx):
    """Under ulimit -i 1 (no queued-signal slot free for the user) the main
    thread's own timer cannot be made either: the program runs as plain,
    unsampled and said so; it used to be refused as a setup error (exit
    78)."""
    argv = ["hello"]
    lim = [(resource.RLIMIT_SIGPENDING, 1)]
    plain = run(ctx, argv, env=ctx.env(preload=False), rlimits=lim)
    check(plain.status.is_exit(0), "without the shim:\n%s" % plain.describe())
    d = ctx.mkdtemp("prof")
    r = run(ctx, argv, env=prof_env(ctx, d, PROFILE_HEAP_SAMPLE=0), rlimits=lim)
    check(r.status.key() == plain.status.key() and r.out == plain.out, "under the shim:\n%s" % r.describe())
    check(pprofs(d) == ["run.cpu.pprof", "run.wait.pprof"], "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))
