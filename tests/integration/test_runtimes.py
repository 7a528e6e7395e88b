"""Language runtimes that run their code on stacks of their own, profiled
at 1000 Hz and compared with plain runs of the same program.

(Go programs: test_go.py.) BEAM's JIT runs Erlang code with the machine's stack
pointer in the Erlang process's stack, next to its heap, and gives its
threads alternate stacks too. A sampling signal whose frame the kernel
pushed on the interrupted stack corrupted it: BEAM died with SIGSEGV in its garbage
collector or "size_object: bad tag". Each run here must end as the plain
run does, with the same output, and leave a readable CPU profile.

The programs are built here: tests/workloads/erl/spin.erl with erlc
(erlang-base).
"""

import os
import re
import shutil
import subprocess

from common import Skip, check, clip, image_files, indent
from st_helpers import pprofs, prof_env, run, workload_source

RUNS = 5


def _same_as_plain(plain, r, what):
    check(r.status.key() == plain.status.key(), "%s: under the shim the process %s, without it %s\n%s" % (
        what, r.status, plain.status, r.describe()))
    check(r.out == plain.out, "%s: the program printed something else under the shim.\nwithout:\n%s\nwith:\n%s\n%s" % (
        what, indent(plain.stdout_text), indent(r.stdout_text), r.describe()))


def _cpu_profile_read(ctx, d, r, what, program):
    """The run's CPU profile: written, read by go tool pprof, its program
    the one asked for, and most of the process's CPU in it."""
    check(pprofs(d) == image_files("run"), "%s: PROFILE_DIR holds %s\n%s" % (
        what, pprofs(d), r.describe()))
    prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    check(any(("program " + program) in c for c in prof.comments), "%s: the profile is not %s's: %s" % (
        what, program, prof.comments))
    return prof


def _spin_module(ctx):
    """erl, and a directory holding spin.beam (erlc of tests/workloads/erl/spin.erl)."""
    erl, erlc = shutil.which("erl"), shutil.which("erlc")
    if not erl or not erlc:
        raise Skip("erl or erlc not found: scripts/install-deps installs erlang-base")
    d = ctx.mkdtemp("erl")
    p = subprocess.run([erlc, "-o", d, workload_source(os.path.join("erl", "spin.erl"))], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=120)
    check(p.returncode == 0, "erlc failed:\n%s" % indent(clip(p.stdout)))
    return erl, d


def test_beam_with_spinning_processes(ctx):
    """erl with 4 Erlang processes that build and fold lists (garbage for
    the collector), ~1 s of CPU. Five runs: each exits 0 with the same
    output as the plain run, and beam.smp's CPU profile is readable."""
    erl, d = _spin_module(ctx)
    argv = [erl, "-noshell", "-pa", d, "-run", "spin", "main", "3000"]
    plain = run(ctx, argv, env=ctx.env(preload=False, HOME=d))
    check(plain.status.is_exit(0) and plain.stdout_text.count("process ") == 4,
          "the plain run must print 4 results and exit 0\n%s" % plain.describe())
    for i in range(RUNS):
        what = "run %d" % i
        pd = ctx.mkdtemp("prof")
        r = run(ctx, argv, env=prof_env(ctx, pd, PROFILE_CPU_HZ=1000, HOME=d))
        _same_as_plain(plain, r, what)
        # erl is a shell script that execs erlexec, which execs beam.smp:
        # run.* is the last image's, the others are named by program and pid.
        names = sorted(n for n in os.listdir(pd) if n.startswith("run.") and n.count(".") == 2)
        check(names == image_files("run"), "%s: PROFILE_DIR holds %s\n%s" % (
            what, sorted(os.listdir(pd)), r.describe()))
        prof = ctx.read(os.path.join(pd, "run.cpu.pprof"), r)
        check(any("beam.smp" in c for c in prof.comments) and prof.total("cpu") > 0,
              "%s: run.cpu.pprof is not beam.smp's, or holds no CPU: %s\n%s" % (
                  what, prof.comments, prof.cum_table("cpu")))


def test_beam_jit_code_is_named_from_its_perf_map(ctx):
    """erl +JPperf true writes /tmp/perf-PID.map for the code its JIT emits:
    the spinning Erlang functions are named in beam.smp's CPU profile
    ($spin:..., $lists:...), with a share of its CPU (about 20% at 1000 Hz
    here; the rest is the emulator's own C). Without the map they are
    unnamed beam.smp code."""
    erl, d = _spin_module(ctx)
    # BEAM's JIT, and its perf map, came with OTP 24 (Debian 12); Debian 11 has 23.
    p = subprocess.run([erl, "-noshell", "-eval", "io:format(\"~s\", [erlang:system_info(otp_release)]), halt()."],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ctx.env(preload=False, HOME=d),
                       timeout=120)
    otp = p.stdout.decode(errors="replace").strip()
    if otp.isdigit() and int(otp) < 24:
        raise Skip("Erlang/OTP %s has no JIT (OTP 24 and later have it), so no perf map to read" % otp)
    pd = ctx.mkdtemp("prof")
    argv = [erl, "+JPperf", "true", "-noshell", "-pa", d, "-run", "spin", "main", "3000"]
    r = run(ctx, argv, env=prof_env(ctx, pd, PROFILE_CPU_HZ=1000, PROFILE_HEAP_SAMPLE=0, HOME=d))
    check(r.status.is_exit(0) and r.stdout_text.count("process ") == 4, "erl +JPperf true:\n%s" % r.describe())
    prof = ctx.read(os.path.join(pd, "run.cpu.pprof"), r)
    # BEAM leaves its map behind: removed here, once read.
    for c in prof.comments:
        m = re.search(r"\bpid (\d+)", c)
        if m and os.path.exists("/tmp/perf-%s.map" % m.group(1)):
            os.unlink("/tmp/perf-%s.map" % m.group(1))
    named = sum(prof.flat(f, "cpu") for f in prof.function_names() if f.startswith("$spin:"))
    check(named > 0.05 * prof.total("cpu"), "the JIT code of module spin has %d of %d ns of beam.smp's CPU\n%s"
          % (named, prof.total("cpu"), prof.cum_table("cpu")))


def test_node_javascript_is_named_from_its_perf_map(ctx):
    """node --perf-basic-prof writes /tmp/perf-PID.map for V8's generated
    code: the hot JavaScript function (tests/workloads/node/fib.js) is named
    as V8 names it (JS:*fib or LazyCompile:*fib .../fib.js:3) and holds most of the CPU
    (80% here at 1000 Hz), where without the map it is code of no file."""
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        raise Skip("node not found: scripts/install-deps installs nodejs")
    pd = ctx.mkdtemp("prof")
    argv = [node, "--perf-basic-prof", workload_source(os.path.join("node", "fib.js")), "1500"]
    r = run(ctx, argv, env=prof_env(ctx, pd, PROFILE_CPU_HZ=1000, PROFILE_HEAP_SAMPLE=0))
    if r.pid and os.path.exists("/tmp/perf-%d.map" % r.pid):
        os.unlink("/tmp/perf-%d.map" % r.pid)  # V8 leaves it behind
    check(r.status.is_exit(0) and "fib: done true" in r.stdout_text, "node --perf-basic-prof:\n%s" % r.describe())
    prof = ctx.read(os.path.join(pd, "run.cpu.pprof"), r)
    # V8 names it JS:*fib (node 20) or LazyCompile:*fib (node 18, Debian 12's).
    named = sum(prof.flat(f, "cpu") for f in prof.function_names() if re.match(r"\w+:\W?fib .*fib\.js:", f))
    check(named > 0.4 * prof.total("cpu"), "JS:*fib has %d of %d ns of node's CPU\n%s"
          % (named, prof.total("cpu"), prof.cum_table("cpu")))


def test_php_with_its_extensions(ctx):
    """php-cli opens its extensions (pdo, sockets...) with RTLD_DEEPBIND,
    so their malloc and free bind to glibc's ahead of any preload. A script
    that builds 200,000 strings in an array runs inert, with the heap
    profile off and with it on, each as without the shim; profiled, the
    CPU and heap profiles are php's and hold its allocations."""
    php = shutil.which("php")
    if not php:
        raise Skip("php not found: scripts/install-deps installs php-cli")
    argv = [php, "-r", '$a = []; for ($i = 0; $i < 200000; $i++) { $a[] = str_repeat("x", $i % 100); } '
                       'echo count($a), "\\n";']
    plain = run(ctx, argv, env=ctx.env(preload=False))
    check(plain.status.is_exit(0) and plain.stdout_text == "200000\n", "the plain run:\n%s" % plain.describe())
    _same_as_plain(plain, run(ctx, argv, env=ctx.env()), "inert")
    pd = ctx.mkdtemp("prof")
    _same_as_plain(plain, run(ctx, argv, env=prof_env(ctx, pd, PROFILE_HEAP_SAMPLE=0)), "heap off")
    pd = ctx.mkdtemp("prof")
    r = run(ctx, argv, env=prof_env(ctx, pd, PROFILE_HEAP_SAMPLE=65536))
    _same_as_plain(plain, r, "heap on")
    prof = ctx.read(os.path.join(pd, "run.heap.pprof"), r)
    check(any("php" in c for c in prof.comments) and prof.total("alloc_space") > (1 << 20),
          "heap on: run.heap.pprof should be php's and hold its allocations (>1 MiB): %s\n%s"
          % (prof.comments, prof.cum_table("alloc_space")))


def test_generated_code_is_named_from_the_perf_map(ctx):
    """jit_perfmap runs a loop it generated into anonymous memory and names
    it in /tmp/perf-PID.map, as Node (--perf-basic-prof), LuaJIT and BEAM
    (+JPperf true) do: the CPU profile names that code JIT:counted_loop,
    with most of the CPU; it was code of no file, unnamed, before. The map
    is kept until the stop has read it, then removed here."""
    d = ctx.mkdtemp("prof")
    r = run(ctx, [ctx.workload("jit_perfmap"), "400", "keep"], env=prof_env(ctx, d, PROFILE_HEAP_SAMPLE=0))
    try:
        check(r.status.is_exit(0) and "jit_perfmap: done" in r.stdout_text, "jit_perfmap:\n%s" % r.describe())
        prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
        flat = prof.flat("JIT:counted_loop", "cpu")
        check(flat > 0.5 * prof.total("cpu"), "JIT:counted_loop has %d of %d ns of CPU\n%s"
              % (flat, prof.total("cpu"), prof.cum_table("cpu")))
    finally:
        if r.pid:
            try:
                os.unlink("/tmp/perf-%d.map" % r.pid)
            except OSError:
                pass
