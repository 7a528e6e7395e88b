"""CPU accuracy at any thread count, and thread labels.

CONTRACT.md, transparency, threads: every thread is sampled, including
threads that a library creates; N busy threads on N cores are each sampled at
PROFILE_CPU_HZ. DESIGN "Why the CPU profiler is ours": one timer per thread
on that thread's CPU clock, each sample weighted by the CPU time its thread
really used since its previous sample, so the profile's cpu/nanoseconds total
is the true CPU time even when the kernel tick (250 Hz here) caps how often a
timer can fire (the 8-threads-on-2-cores table: 0.98-0.99 of true CPU at 100
and 1000 Hz). Samples carry thread_id and thread_name labels.

What is fair to compare the profile's total with. The profile can only see
CPU used while the sampler runs: from each thread's timer being armed to the
stop, which stops the sampler first. The process's rusage (user+sys from
wait4) also holds the shim's setup before main and the stop's own work
(symbolize, compress, write) on the shim's unsampled stop thread: tens of ms.
So the profile total is compared (a) with the workload's own CPU clock at
the end of main (CLOCK_PROCESS_CPUTIME_ID: all the program's work, plus the
shim's small setup), within +-5%, and (b) with rusage, within +-5%: with 16 s
of work the stop's cost is far inside that, so (b) also catches a stop that
burns CPU or a profile that counts the stop.
"""

import os

from common import check, func_matches, image_files, indent
from st_helpers import by_thread, compile_c, labels, prof_env, pprofs, run, truths, workload_source

N = 8
SECONDS = 2.0


def _profile(ctx, argv, hz=None, env=None, timeout=60):
    d = ctx.mkdtemp("prof")
    if env is None:
        env = prof_env(ctx, d, **({"PROFILE_CPU_HZ": hz} if hz else {}))
    else:
        env["PROFILE_DIR"] = d
        env["PROFILE_NAME"] = "run"
        if hz:
            env["PROFILE_CPU_HZ"] = str(hz)
    r = run(ctx, argv, env=env, timeout=timeout)
    check(r.status.is_exit(0), "%s: %s\n%s" % (" ".join(argv), r.status, r.describe()))
    check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))
    prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    threads = {t["name"]: (int(t["tid"]), int(t["cpu_ns"])) for t in truths(r.stdout_text, "thread")}
    proc = truths(r.stdout_text, "process")
    check(threads and proc, "the workload printed no truth lines\n%s" % r.describe())
    return r, prof, threads, int(proc[0]["cpu_ns"])


def _thread_table(prof, threads):
    cpu = by_thread(prof, "cpu")
    cnt = by_thread(prof, "samples")
    names = {}
    for s in prof.samples:
        lb = labels(s)
        names.setdefault(lb.get("thread_id"), set()).add(lb.get("thread_name"))
    out = ["thread            tid   true cpu s   profile cpu s  samples  thread_name labels"]
    for name, (tid, ns) in sorted(threads.items()):
        k = str(tid)
        out.append("%-12s %8d %12.3f %15.3f %8d  %s" % (name, tid, ns / 1e9, cpu.get(k, 0) / 1e9, cnt.get(k, 0),
                                                      sorted(x for x in names.get(k, ()) if x) or "-"))
    others = sorted(k for k in cpu if k not in {str(t) for t, _ in threads.values()})
    for k in others:
        out.append("(other)      %8s %12s %15.3f %8d  %s" % (k, "", cpu[k] / 1e9, cnt.get(k, 0),
                                                            sorted(x for x in names.get(k, ()) if x)))
    return "\n".join(out)


def _misnamed(prof, threads, process_name, work_fns):
    """The samples of the named threads that carry another thread_name
    than their thread's, as messages. A thread is named by itself right
    after it starts, so one sample may be of the instant before: its
    timer's first expiry is a random part of a period after its arming (at
    1000 Hz CI saw one). Such a sample is true, and allowed, only if it is
    of that instant: under the process's name, with none of work_fns in its
    stack and little CPU."""
    ci = prof.index("cpu")
    bad = []
    for s in prof.samples:
        lb = labels(s)
        for name, (tid, _) in threads.items():
            if lb.get("thread_id") != str(tid) or lb.get("thread_name") == name:
                continue
            if lb.get("thread_name") == process_name and s.values[ci] <= 20e6 and \
                    not any(func_matches(f.name, w) for f in s.stack for w in work_fns):
                continue
            bad.append("a sample of thread %s (tid %d) is labelled thread_name=%r (%.1f ms, stack %s)" % (
                name, tid, lb.get("thread_name"), s.values[ci] / 1e6, [f.name for f in s.stack]))
    return bad


def _accuracy(ctx, hz):
    r, prof, threads, work_ns = _profile(ctx, ["st_cpu_threads", str(N), str(SECONDS)], hz=hz)
    table = _thread_table(prof, threads) + "\n" + "\n".join(r.summary_lines())
    total = prof.total("cpu")
    ru_ns = r.cpu * 1e9
    detail = "profile %.3f s, program's own CPU clock %.3f s, rusage user+sys %.3f s\n%s" % (
        total / 1e9, work_ns / 1e9, ru_ns / 1e9, indent(table))
    check(abs(total - work_ns) <= 0.05 * work_ns,
          "%d Hz: the CPU profile's total must be within 5%% of the CPU the program used: %s" % (hz, detail))
    check(abs(total - ru_ns) <= 0.05 * ru_ns,
          "%d Hz: the CPU profile's total must be within 5%% of the process's user+sys time: %s" % (hz, detail))
    cpu = by_thread(prof, "cpu")
    cnt = by_thread(prof, "samples")
    for name, (tid, ns) in sorted(threads.items()):
        got = cpu.get(str(tid), 0)
        share = got / total
        check(abs(share - 1.0 / N) <= 0.03, "%d Hz: thread %s (tid %d) has %.1f%% of the profile's CPU; each "
              "of %d equal threads must have 12.5%% +- 3 points\n%s" % (hz, name, tid, 100 * share, N, indent(table)))
        # A thread's samples add up to its CPU from its timer's arming to
        # its end (which credits what it used after its last sample).
        # Before that credit the gap after the last sample grew on a
        # loaded machine, where the kernel's ticks find the thread running
        # less often (4% with four CPU hogs beside the test, 9% under the
        # whole suite run by several sessions at once): +-10% per thread
        # stays as the bound.
        check(abs(got - ns) <= 0.10 * ns, "%d Hz: thread %s used %.3f s of CPU, its samples add up to %.3f s\n%s"
              % (hz, name, ns / 1e9, got / 1e9, indent(table)))
        if hz <= 250:
            # Below the kernel tick a thread's timer fires about hz times per
            # second of its CPU when it has a core to itself; with 8 threads
            # on 2 cores, and more so on a loaded machine, the kernel
            # delivers fewer (ticks must find the thread running: measured
            # 108-195 for 200 expected, while the weighted totals stayed
            # within 0.5%). So counts get a floor only, which a sampler
            # sharing one timer among the threads (1/8 each) would miss.
            want = hz * ns / 1e9
            check(0.3 * want <= cnt.get(str(tid), 0) <= 1.15 * want,
                  "%d Hz: thread %s has %d samples for %.3f s of its CPU; want about %.0f (30%%..115%%)\n%s" % (
                      hz, name, cnt.get(str(tid), 0), ns / 1e9, want, indent(table)))
    for bad in _misnamed(prof, threads, "st_cpu_threads", ("st_burn",)):
        check(False, "%d Hz: %s\n%s" % (hz, bad, indent(table)))
    fn = prof.cum("st_burn", "cpu")
    check(fn >= 0.95 * sum(ns for _, ns in threads.values()),
          "%d Hz: st_burn has %.3f s of the threads' %.3f s\n%s" % (
              hz, fn / 1e9, sum(ns for _, ns in threads.values()) / 1e9, prof.cum_table("cpu")))


def test_eight_threads_on_two_cores_100hz(ctx):
    """CONTRACT.md, transparency + DESIGN table: 8 threads x 2 s of CPU on
    this 2-core machine at the default 100 Hz: profile total within 5% of
    the true CPU; each thread 12.5% +- 3 points (thread_id labels), its own
    CPU within 10%, a sane sample count; thread_name labels right."""
    _accuracy(ctx, 100)


def test_eight_threads_on_two_cores_1000hz(ctx):
    """As above at PROFILE_CPU_HZ=1000, four times the kernel's 250 Hz tick:
    the weighted totals must still be true (sample counts are not checked:
    the tick caps them)."""
    _accuracy(ctx, 1000)


def test_sleeping_thread_gets_no_samples(ctx):
    """CONTRACT.md, files: samples are CPU time, per thread. A thread that only sleeps
    (blocked in read() for the whole run, named "sleeper") next to two
    burners: at most one sample (its few microseconds of CPU at thread start
    may, with a chance of about one in a few hundred, cross its timer's
    random first expiry), and never more CPU than the thread really used; a
    wall-clock sampler would give it ~100 samples. The burners are sampled."""
    r, prof, threads, _ = _profile(ctx, ["st_cpu_threads", "2", "1.0", "sleeper"])
    table = _thread_table(prof, threads)
    tid, ns = threads["sleeper"]
    cpu = by_thread(prof, "cpu").get(str(tid), 0)
    cnt = by_thread(prof, "samples").get(str(tid), 0)
    named = sum(s.values[prof.index("samples")] for s in prof.samples if labels(s).get("thread_name") == "sleeper")
    check(cnt <= 1 and named <= 1 and cpu <= ns + 1000000,
          "the sleeping thread (%.6f s of CPU) has %d samples (%d labelled sleeper) worth %.6f s\n%s" % (
              ns / 1e9, cnt, named, cpu / 1e9, indent(table)))
    for name in ("burn-0", "burn-1"):
        btid, bns = threads[name]
        got = by_thread(prof, "cpu").get(str(btid), 0)
        check(got >= 0.9 * bns, "burner %s: %.3f s of CPU, profile %.3f s\n%s" % (name, bns / 1e9, got / 1e9,
                                                                                  indent(table)))


# --------------------------------------------------------------------------
# Threads that libraries start


def _build_pool(ctx, linked):
    d = ctx.mkdtemp("build")
    src = workload_source(os.path.join("st_libs", "st_poollib.c"))
    lib = compile_c(ctx, os.path.join(d, "libst_pool.so"), [src], shared=True)
    main_src = workload_source(os.path.join("st_libs", "st_poolmain.c"))
    args = ["-ldl"]
    if linked:
        args += ["-Wl,--no-as-needed", "-L" + d, "-lst_pool", "-Wl,-rpath," + d]
    exe = compile_c(ctx, os.path.join(d, "st_poolmain"), [main_src], args)
    return lib, exe


def _library_threads(ctx, linked):
    lib, exe = _build_pool(ctx, linked)
    env = ctx.env()
    if not linked:
        env["LD_PRELOAD"] = ctx.lib + " " + lib
    r, prof, threads, work_ns = _profile(ctx, [exe, "2", "0.8"], env=env)
    table = _thread_table(prof, threads)
    cpu = by_thread(prof, "cpu")
    for name, (tid, ns) in sorted(threads.items()):
        got = cpu.get(str(tid), 0)
        check(got >= 0.8 * ns, "thread %s (tid %d, started by the library%s) used %.3f s of CPU; its samples "
              "add up to %.3f s\n%s" % (name, tid, " in its constructor, before main" if name == "ctor-burn" else "",
                                        ns / 1e9, got / 1e9, indent(table)))
    ctor_ns = threads["ctor-burn"][1]
    pool_ns = sum(ns for n, (_, ns) in threads.items() if n.startswith("pool-"))
    for fn, want in (("ctor_thread_burn", ctor_ns), ("pool_worker_burn", pool_ns)):
        got = prof.cum(fn, "cpu")
        check(got >= 0.8 * want, "%s: %.3f s of CPU, the profile shows %.3f s\n%s" % (
            fn, want / 1e9, got / 1e9, prof.cum_table("cpu")))
    total = prof.total("cpu")
    check(abs(total - work_ns) <= 0.05 * work_ns, "profile total %.3f s, the program's CPU %.3f s\n%s" % (
        total / 1e9, work_ns / 1e9, indent(table)))
    return prof, threads, table


def test_library_constructor_thread_linked(ctx):
    """CONTRACT.md, transparency: every thread is sampled, including threads
    that a library creates: a library linked into the program (DT_NEEDED) starts a
    burning thread in its constructor, before main (and before or after the
    shim's own constructor: either way DESIGN says threads that exist when
    the shim loads are found in /proc/self/task), and a pool of 2 threads
    when main asks. All three are sampled with their true CPU, and their
    functions (ctor_thread_burn, pool_worker_burn) carry it."""
    _library_threads(ctx, linked=True)


def test_library_constructor_thread_preloaded(ctx):
    """As above, the library preloaded after the shim (LD_PRELOAD="shim lib")."""
    _library_threads(ctx, linked=False)


def test_library_threads_are_named(ctx):
    """Thread labels: the threads a library starts carry their
    thread_name label (pthread_setname_np: ctor-burn, pool-0, pool-1),
    including the constructor's thread, which exits before the stop."""
    prof, threads, table = _library_threads(ctx, linked=True)
    for name, (tid, _) in sorted(threads.items()):
        got = set(labels(s).get("thread_name") for s in prof.samples if labels(s).get("thread_id") == str(tid))
        check(name in got, "thread %s (tid %d): its samples are labelled thread_name=%s\n%s" % (
            name, tid, sorted(str(x) for x in got), indent(table)))
    for bad in _misnamed(prof, threads, "st_poolmain", ("ctor_thread_burn", "pool_worker_burn")):
        check(False, "%s\n%s" % (bad, indent(table)))


def test_openmp_pool_threads_sampled(ctx):
    """CONTRACT.md, transparency, threads that a library creates, a real one: libgomp's OpenMP
    thread pool (4 threads, each 0.5 s of CPU in omp_burn): every pool
    thread is sampled with its true CPU."""
    d = ctx.mkdtemp("build")
    exe = compile_c(ctx, os.path.join(d, "st_omp"), [workload_source(os.path.join("st_libs", "st_omp.c"))],
                    ["-fopenmp"])
    env = ctx.env()
    env["OMP_WAIT_POLICY"] = "passive"  # idle pool threads sleep instead of spinning
    r, prof, threads, _ = _profile(ctx, [exe, "0.5"], env=env)
    table = _thread_table(prof, threads)
    cpu = by_thread(prof, "cpu")
    check(len(set(t for t, _ in threads.values())) == 4, "want 4 distinct OpenMP threads\n%s" % r.describe())
    for name, (tid, ns) in sorted(threads.items()):
        got = cpu.get(str(tid), 0)
        check(got >= 0.8 * ns, "OpenMP thread %s (tid %d) used %.3f s of CPU; its samples add up to %.3f s\n%s" % (
            name, tid, ns / 1e9, got / 1e9, indent(table)))
    want = sum(ns for _, ns in threads.values())
    got = prof.cum("omp_burn", "cpu")
    check(got >= 0.8 * want, "omp_burn: %.3f s of CPU in 4 threads, profile %.3f s\n%s" % (
        want / 1e9, got / 1e9, prof.cum_table("cpu")))
