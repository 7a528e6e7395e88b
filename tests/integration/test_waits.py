"""The wait profile: NAME.wait.pprof, where threads wait, by
stack, as Go's block profile: sample types contentions/count and
delay/nanoseconds, labels call, thread_name and thread_id, each stack's leaf
the blocking call itself. Sampled by duration (PROFILE_WAIT_SAMPLE), taken on
the waiting thread after the call returns: no signal is ever sent.

The truth is measured by the program around its own calls
(tests/workloads/waits.c): two threads contending on one mutex, a reader
blocked in read() on a pipe fed every 20 ms, a poller in poll(), a sleeper in
nanosleep(50 ms). What the wrappers must keep -- errno, cancellation, EINTR --
is compared with a plain run of the same program. The cost targets (an
uncontended mutex loop, 1M one-byte writes, 256 threads in short waits) are
in `make bench` (tests/bench/waits.py), not here.
"""

import os

from common import KINDS, check, indent
from st_helpers import labels, truths

WAIT_TYPES = ["contentions/count", "delay/nanoseconds"]


def _sites(ctx, seconds="2", **vars):
    r, d = ctx.profile(["waits", "sites", seconds], **vars)
    prof = ctx.read(os.path.join(d, "run.wait.pprof"), r)
    sites = truths(r.stdout_text, "wait")
    check(len(sites) == 5, "the workload printed %d truth lines, want 5\n%s" % (len(sites), r.describe()))
    return r, prof, sites


def _at_site(prof, site):
    """The samples of one truth site: its call and thread, its function on the stack."""
    out = []
    for s in prof.samples:
        lb = labels(s)
        if lb.get("call") == site["call"] and lb.get("thread_name") == site["thread"] and \
                any(f.name == site["fn"] for f in s.stack):
            out.append(s)
    return out


def _table(prof, sites):
    delay = prof.index("delay")
    rows = ["thread     call                 truth s   profile s  ratio  calls  contentions"]
    for t in sites:
        got = sum(s.values[delay] for s in _at_site(prof, t))
        cnt = sum(s.values[0] for s in _at_site(prof, t))
        rows.append("%-10s %-20s %7.3f %11.3f %6.3f %6s %12d" % (
            t["thread"], t["call"], int(t["ns"]) / 1e9, got / 1e9, got / max(1, int(t["ns"])), t["n"], cnt))
    return "\n".join(rows)


def _check_sites(prof, sites, which, what):
    delay = prof.index("delay")
    table = _table(prof, sites)
    for t in sites:
        if t["thread"] not in which:
            continue
        want = int(t["ns"])
        got = sum(s.values[delay] for s in _at_site(prof, t))
        check(abs(got - want) <= 0.2 * want, "%s: %s's %s in %s: the profile says %.3f s, the thread measured "
              "%.3f s (want within 20%%)\n%s" % (what, t["thread"], t["call"], t["fn"], got / 1e9, want / 1e9,
                                                  indent(table)))
        for s in _at_site(prof, t):
            check(labels(s).get("thread_id") == t["tid"], "%s: a sample of %s is labelled thread_id=%s, the thread "
                  "is %s" % (what, t["thread"], labels(s).get("thread_id"), t["tid"]))


def test_wait_profile_is_a_block_profile(ctx):
    """Go's block profile's shape (runtime/pprof printCountCycleProfile):
    sample types contentions/count and delay/nanoseconds, period type
    contentions/count, period 1. Every sample carries call, thread_name and
    thread_id; its leaf is a frame named as its call, and the next is the
    program's caller (the stack is the waiting thread's own)."""
    r, prof, sites = _sites(ctx, "1", PROFILE_WAIT_SAMPLE=100000)
    check(prof.sample_types == WAIT_TYPES, "sample types %s, want %s" % (prof.sample_types, WAIT_TYPES))
    check(prof.period_type == "contentions/count" and prof.period == 1,
          "period type %s, period %s; want contentions/count, 1" % (prof.period_type, prof.period))
    check(prof.default_type == "delay/nanoseconds", "default sample type %s, want delay" % prof.default_type)
    check(prof.samples, "no samples\n%s" % r.describe())
    for s in prof.samples:
        lb = labels(s)
        check(lb.get("call") and lb.get("thread_id") and lb.get("thread_name"),
              "a sample lacks call, thread_id or thread_name: %s" % s.labels)
        check(s.stack and s.stack[0].name == lb["call"] and prof.locations[s.location_ids[0]].mapping is None,
              "a sample's leaf should be its call (%s), in no mapping; the stack is %s" % (lb["call"], s.stack[:4]))
        check(len(s.stack) >= 2, "a sample has no caller below its call: %s" % s.stack)
    for t in sites:
        check(_at_site(prof, t), "no sample of %s in %s (call=%s, thread_name=%s)\n%s" % (
            t["thread"], t["fn"], t["call"], t["thread"], prof.cum_table("delay")))


def test_each_site_within_20_percent(ctx):
    """At PROFILE_WAIT_SAMPLE=100000 (100 us: the mutex's 2 ms waits are
    sampled, one in twenty, and scaled): each site's delay within 20% of what
    the thread measured around its own calls, and labelled with its tid."""
    r, prof, sites = _sites(ctx, PROFILE_WAIT_SAMPLE=100000)
    _check_sites(prof, sites, {"locker-a", "locker-b", "reader", "poller", "sleeper"}, "R=100us")


def test_default_rate_is_unbiased(ctx):
    """At the default rate (PROFILE_WAIT_SAMPLE unset: 100 ms) every wait of
    the workload is shorter than R, so each is sampled (probability d/R) and
    scaled (R/d): over 4 s the five sites hold about 15 s of waiting, and the
    profile's sum of them is within 30% of the threads' own (the estimate's
    standard deviation is at most sqrt(R x total), 1.2 s here: 30% is over
    3.5 of them). The profile says the rate it was taken at."""
    r, prof, sites = _sites(ctx, "4")
    check(any("PROFILE_WAIT_SAMPLE=100000000 ns" in c for c in prof.comments),
          "the profile should say the default rate it was taken at: %s" % prof.comments)
    delay = prof.index("delay")
    want = sum(int(t["ns"]) for t in sites)
    got = sum(s.values[delay] for t in sites for s in _at_site(prof, t))
    check(abs(got - want) <= 0.3 * want, "default rate: the five sites hold %.2f s in the profile, the threads "
          "measured %.2f s (want within 30%%)\n%s" % (got / 1e9, want / 1e9, indent(_table(prof, sites))))


def test_summary_gives_the_total_wait(ctx):
    """The summary line's 'waits S s' is the profile's delay total."""
    r, prof, _ = _sites(ctx, "1", PROFILE_WAIT_SAMPLE=100000)
    lines = r.summary_lines()
    check(len(lines) == 1, "want one summary line\n%s" % r.describe())
    import re
    m = re.search(r" \| waits (\d+\.\d\d) s \|", lines[0])
    check(m, "the summary line gives no 'waits S s': %r" % lines[0])
    total = prof.total("delay") / 1e9
    check(abs(float(m.group(1)) - total) <= 0.0051, "the summary says waits %s s, the profile holds %.4f s" % (
        m.group(1), total))


def test_no_signal_no_extra_eintr(ctx):
    """Nothing is sent to a waiting thread: no call of the workload sees an
    EINTR, under the shim as without it (async-profiler's wall mode costs
    EINTRs)."""
    plain = ctx.run_plain(["waits", "sites", "1"])
    r, _ = ctx.profile(["waits", "sites", "1"], PROFILE_WAIT_SAMPLE=100000)
    for name, run in (("plain", plain), ("profiled", r)):
        got = {t["thread"]: int(t["eintr"]) for t in truths(run.stdout_text, "wait")}
        check(len(got) == 5 and not any(got.values()), "%s run: EINTRs seen per thread %s\n%s" % (
            name, got, run.describe()))


def _same_as_plain(ctx, mode, **vars):
    plain = ctx.run_plain(["waits", mode])
    check(plain.rc == 0 and plain.stdout_text, "plain waits %s failed\n%s" % (mode, plain.describe()))
    for rate in ("1", None):
        r, d = ctx.profile(["waits", mode], PROFILE_WAIT_SAMPLE=rate, **vars)
        check(r.stdout_text == plain.stdout_text, "waits %s (PROFILE_WAIT_SAMPLE=%s) differs from a plain run:\n"
              "plain:\n%s\nprofiled:\n%s" % (mode, rate, indent(plain.stdout_text), indent(r.stdout_text)))
        check(os.path.isfile(os.path.join(d, "run.wait.pprof")), "no wait profile\n%s" % r.describe())


def test_errno_and_results_as_plain(ctx):
    """Every wrapped call returns what it returns without the shim and leaves
    errno as it would (failures, successes, timeouts, an errorcheck mutex
    locked twice), with every event recorded (PROFILE_WAIT_SAMPLE=1: the
    record path runs after each) and at the default rate."""
    _same_as_plain(ctx, "errno")


def test_cancellation_as_plain(ctx):
    """Threads blocked in read(), pthread_cond_wait() and nanosleep() are
    cancelled: the cancellation unwinds through the wrapper, cleanup
    handlers run, joins return PTHREAD_CANCELED, the condition variable's
    mutex is released -- as without the shim."""
    _same_as_plain(ctx, "cancel")


def test_eintr_as_plain(ctx):
    """A signal to a thread blocked in read(), poll() and nanosleep(), with
    and without SA_RESTART, whose handler itself calls write(): each call
    returns what it returns without the shim (EINTR, or a restarted read),
    nothing retried by the wrapper."""
    _same_as_plain(ctx, "eintr")


def test_shims_own_waits_are_not_recorded(ctx):
    """dl_cycles: 300 dlopen/work/dlclose cycles; each dlclose makes the
    shim join a helper thread that reads the plugin with libdw (unload.h).
    With every event recorded (PROFILE_WAIT_SAMPLE=1) the wait profile holds
    none of it: no pthread_join (the program never calls it), nothing on a
    stack through libdw or libelf, no location in the shim's own code."""
    from test_cpu_frames import _plugin
    so = _plugin(ctx)
    r, d = ctx.profile(["dl_cycles", so, "300", "200"], PROFILE_WAIT_SAMPLE=1, PROFILE_CPU_HZ=1000)
    prof = ctx.read(os.path.join(d, "run.wait.pprof"), r)
    shim = os.path.basename(os.path.realpath(ctx.lib))
    bad = []
    for s in prof.samples:
        files = [os.path.basename(m.file) for m in prof.mappings
                 if m.id in {prof.locations[i].mapping for i in s.location_ids}]
        if labels(s).get("call") == "pthread_join" or any(f.startswith(("libdw", "libelf")) for f in files) or \
                shim in files:
            bad.append("%s %s: %s" % (labels(s).get("call"), files, [f.name for f in s.stack][:8]))
    check(not bad, "the shim's own waits are in the profile:\n%s" % indent("\n".join(bad[:10])))


def test_sigterm_to_blocked_threads_as_plain(ctx):
    """SIGTERM reaches a process whose threads are blocked in read() and
    nanosleep() (inside the wrappers, where a waiting thread spends its
    life): it dies of SIGTERM as without the shim, with its three profiles
    written. (The wrappers once
    counted as the shim's unsafe code: the stop ended early, wrote nothing,
    and the read returned EINTR, so the program exited 0.)"""
    import signal
    plain = ctx.run_plain(["waits", "sigterm"])
    check(plain.rc == -signal.SIGTERM, "plain: want death by SIGTERM, got %s\n%s" % (plain.status_text(),
                                                                                    plain.describe()))
    r, d = ctx.profile(["waits", "sigterm"], expect_rc=None, PROFILE_WAIT_SAMPLE=1)
    check(r.rc == plain.rc and r.out == plain.out, "under the shim %s, without it %s\n%s" % (
        r.status_text(), plain.status_text(), r.describe()))
    check(not r.error_lines(), "the stop reported an error\n%s" % r.describe())
    for kind in KINDS:
        ctx.read(os.path.join(d, "run.%s.pprof" % kind), r)


def test_snapshots_add_up_to_the_run(ctx):
    """PROFILE_INTERVAL=1s over a 4 s run: numbered NAME.<seq>.wait.pprof
    files, each the waits since the previous snapshot, and the final
    NAME.wait.pprof the waits after the last one. Summed, each site's delay
    is within 20% of what its thread measured over the whole run (as one
    profile at the same rate); a snapshot that held everything so far would
    count the first seconds again."""
    r, d = ctx.profile(["waits", "sites", "4"], PROFILE_WAIT_SAMPLE=100000, PROFILE_INTERVAL="1s")
    sites = truths(r.stdout_text, "wait")
    check(len(sites) == 5, "the workload printed %d truth lines, want 5\n%s" % (len(sites), r.describe()))
    numbered = sorted(n for n in os.listdir(d) if n.startswith("run.") and n.endswith(".wait.pprof")
                      and n.split(".")[1].isdigit())
    check(len(numbered) >= 2, "want at least 2 numbered wait profiles over 4 s at PROFILE_INTERVAL=1s; dir has %s\n%s"
          % (sorted(os.listdir(d)), r.describe()))
    profs = [ctx.read(os.path.join(d, n), r) for n in numbered] + [ctx.read(os.path.join(d, "run.wait.pprof"), r)]
    rows = ["thread     call                 truth s   sum s  " + "  ".join("%6s" % n.split(".")[1] for n in numbered)
            + "   final"]
    bad = []
    for t in sites:
        per = [sum(s.values[p.index("delay")] for s in _at_site(p, t)) for p in profs]
        want, got = int(t["ns"]), sum(per)
        rows.append("%-10s %-20s %7.3f %7.3f  %s" % (t["thread"], t["call"], want / 1e9, got / 1e9,
                                                    "  ".join("%6.3f" % (v / 1e9) for v in per)))
        if abs(got - want) > 0.2 * want:
            bad.append(t["thread"])
    check(not bad, "snapshots + final wait profile: %s off by more than 20%% of what the threads measured\n%s"
          % (bad, indent("\n".join(rows))))
