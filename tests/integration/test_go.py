"""Go programs (linked with cgo, so that LD_PRELOAD loads the shim) as a Go
developer expects them profiled.

tests/workloads/go/httphash/main.go, built here with the Go toolchain
(golang-go; standard library only, no module downloads): 8 goroutines
fetch from an in-process HTTP server and hash what they get, 64 MiB stay
held through C.malloc, and the program reports its own CPU time on stderr
("httphash: cpu_us N"), the truth the CPU profile is judged by. Then it
ends one of six ways.

What can fail here: a normal Go end is an exit_group system call of Go's
own (no libc exit), which the shim catches by a jump it writes into
runtime.exit: without it PROFILE_DIR stays empty. Goroutines run on
stacks of Go's heap with no unwind information, walked by Go's pc tables:
without that every stack stops at its leaf (sha256's block function, no
caller). The sampling signal itself, on a goroutine's few KiB, killed the
program before the shim ran its handlers on Go's signal stacks.
"""

import os
import re
import shutil
import signal
import subprocess

from common import Skip, check, clip, image_files, indent
from st_helpers import pprofs, prof_env, run, workload_source

def _build_go(ctx, name, *flags):
    if not ctx.go:
        raise Skip("go not found: scripts/install-deps installs golang-go")
    d = ctx.mkdtemp("go-" + name)
    shutil.copy(workload_source(os.path.join("go", name, "main.go")), os.path.join(d, "main.go"))
    exe = os.path.join(d, name)
    env = dict(ctx.env(preload=False), CGO_ENABLED="1", GOFLAGS="", GOTOOLCHAIN="local", GO111MODULE="off",
               GOPROXY="off", GOCACHE=os.path.join(d, "cache"), GOPATH=os.path.join(d, "gopath"), HOME=d)
    p = subprocess.run([ctx.go, "build"] + list(flags) + ["-o", exe, "main.go"], cwd=d, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=300)
    check(p.returncode == 0, "go build of %s failed:\n%s" % (name, indent(clip(p.stdout))))
    return exe




def _own_cpu_ns(r, what):
    m = re.search(r"httphash: cpu_us (\d+)", "\n".join(r.stderr_lines))
    check(m, "%s: the program did not report its CPU time\n%s" % (what, r.describe()))
    return int(m.group(1)) * 1000


def _lines(r):
    return [l for l in r.stderr_lines if l.startswith("# profshim: ")]


def _same_as_plain(plain, r, what):
    check(r.status.key() == plain.status.key(), "%s: under the shim the process %s, without it %s\n%s" % (
        what, r.status, plain.status, r.describe()))
    check(r.out == plain.out, "%s: the program printed something else under the shim.\nwithout:\n%s\nwith:\n%s\n%s" % (
        what, indent(plain.stdout_text), indent(r.stdout_text), r.describe()))


def _profiled(ctx, plain, argv, what, **vars):
    """A profiled run: as the plain one, with its three files. Returns it
    and its PROFILE_DIR."""
    d = ctx.mkdtemp("prof")
    r = run(ctx, argv, env=prof_env(ctx, d, **vars))
    _same_as_plain(plain, r, what)
    check(pprofs(d) == image_files("run"), "%s: PROFILE_DIR holds %s\n%s" % (
        what, pprofs(d), r.describe()))
    return r, d


def _share_in_main(prof):
    """The share of the CPU in samples whose stack reaches a main. frame."""
    i = prof.index("cpu")
    cpu = prof.total("cpu")
    in_main = sum(s.values[i] for s in prof.samples if any(f.name.startswith("main.") for f in s.stack))
    return in_main / max(cpu, 1)


# Where a whole stack of a Go program ends: a goroutine's bottom, a thread's
# start (Go's, cgo's, libc's), or a switch to Go's scheduler stack made for
# no goroutine (the scheduler's own work), where Go's own traceback stops
# too. A walk that gives up early ends anywhere else.
_GO_BOTTOMS = ("runtime.goexit", "runtime.rt0_go", "runtime.mstart", "runtime.mstart0", "runtime.mstart1",
               "runtime.mcall", "runtime.morestack", "threadentry", "crosscall1",
               "crosscall_amd64", "start_thread", "clone", "clone3", "__libc_start_main", "__libc_start_call_main",
               "_start")


def _share_whole(prof):
    """The share of the CPU in samples whose outermost frame is a bottom."""
    i = prof.index("cpu")
    whole = sum(s.values[i] for s in prof.samples if s.stack and s.stack[-1].name in _GO_BOTTOMS)
    return whole / max(prof.total("cpu"), 1)


def _through(prof, fn, bottom):
    """The CPU in stacks through function fn, and the part of it whose
    stacks end at bottom."""
    i = prof.index("cpu")
    through = [s for s in prof.samples if any(f.name == fn for f in s.stack)]
    return (sum(s.values[i] for s in through),
            sum(s.values[i] for s in through if s.stack and s.stack[-1].name == bottom))


# Go 1.24 moved sha256's code into crypto/internal/fips140/sha256 (and named
# its digest type Digest): the hashing is whichever of the two names the
# toolchain's package has.
_HASH_BLOCK = ("crypto/sha256.block", "crypto/internal/fips140/sha256.block")
_HASH_WRITE = ("crypto/sha256.(*digest).Write", "crypto/internal/fips140/sha256.(*Digest).Write")


# The hashing's share of the CPU depends on the processor and the machine's
# load: with SHA-NI (Go 1.24 on Debian 13 picks it) 16-18% of the run on a
# quiet machine, 9.9% at load 17, without it above 30%. A walk that loses
# the goroutines' stacks leaves it near zero; one that stops at the leaf
# leaves the hashing without its caller, whatever its share.
_HASH_SHARE = 0.03


def _cum_any(prof, names, kind):
    return max(prof.cum(n, kind) for n in names)


def _share_of_in_main(prof, leaf):
    """Of the CPU in stacks through function leaf, the share that reaches
    main. (the hashing is called from main's goroutines only)."""
    i = prof.index("cpu")
    leaves = (leaf,) if isinstance(leaf, str) else leaf
    through = [s for s in prof.samples if any(f.name in leaves for f in s.stack)]
    total = sum(s.values[i] for s in through)
    in_main = sum(s.values[i] for s in through if any(f.name.startswith("main.") for f in s.stack))
    return in_main / max(total, 1)


def test_go_program_that_returns_from_main(ctx):
    """main.main returns: Go ends the process with exit_group(0). Ten runs,
    each as the plain run (status, output), with three files and one line
    (which says Go's own heap is not seen). In each CPU profile:
    - at least 0.9 of the CPU the program measured itself;
    - at least 60% of it in stacks that reach main. (the workers' hashing,
      their C code through cgo, the GC assists they pay for; the rest is
      the HTTP server's and the collector's background workers', whose share
      grows with the machine's load: 78-87% measured at load 10-18, so this
      bound only catches walks that lose main; the walk's own accuracy is
      judged by the whole-stack, hashing and cgo shares below, which the
      load does not move);
    - at least 90% in whole stacks: they end where a goroutine or a thread
      begins, not at the leaf;
    - 95% of the hashing, and 90% of the C function the workers call through
      cgo (past runtime.asmcgocall), in stacks that reach main.;
    and over the ten runs, 90% of the work Go runs on its scheduler stack
    for a goroutine (runtime.systemstack: a GC assist, a goroutine's
    creation) in stacks that go on to that goroutine's bottom, as Go's own
    traceback does. Each heap profile holds the 64 MiB held through
    C.malloc, in stacks that reach main.main."""
    exe = _build_go(ctx, "httphash")
    argv = [exe, "60", "return"]
    plain = run(ctx, argv, env=ctx.env(preload=False))
    check(plain.status.is_exit(0) and plain.stdout_text.endswith("cgo 42\n"), "the plain run:\n%s" % plain.describe())
    switched = [0, 0]
    for i in range(10):
        what = "run %d" % i
        r, d = _profiled(ctx, plain, argv, what, PROFILE_CPU_HZ=1000)
        lines = _lines(r)
        check(len(lines) == 1 and "Go's own heap is not seen" in lines[0],
              "%s: want one line that names Go's heap as unseen, got %s" % (what, lines))
        own = _own_cpu_ns(r, what)
        prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
        cpu = prof.total("cpu")
        check(cpu >= 0.9 * own, "%s: the program measured %.3f s of its own CPU, the profile holds %.3f s\n%s" % (
            what, own / 1e9, cpu / 1e9, prof.cum_table("cpu")))
        share = _share_in_main(prof)
        check(share >= 0.6, "%s: only %.0f%% of the CPU in stacks that reach main.\n%s" % (
            what, 100.0 * share, prof.cum_table("cpu")))
        whole = _share_whole(prof)
        check(whole >= 0.9, "%s: only %.0f%% of the CPU in stacks that end where a goroutine or thread begins\n%s" % (
            what, 100.0 * whole, prof.cum_table("cpu")))
        hashing = _share_of_in_main(prof, _HASH_BLOCK)
        check(hashing >= 0.95, "%s: only %.0f%% of the hashing in stacks that reach main.\n%s" % (
            what, 100.0 * hashing, prof.cum_table("cpu")))
        in_c = _share_of_in_main(prof, "mix")
        check(in_c >= 0.9, "%s: only %.0f%% of the C function called through cgo in stacks that reach main.\n%s" % (
            what, 100.0 * in_c, prof.cum_table("cpu")))
        cpu_through, ending = _through(prof, "runtime.systemstack", "runtime.goexit")
        switched[0] += cpu_through
        switched[1] += ending
        block = _cum_any(prof, _HASH_BLOCK, "cpu")
        check(block > _HASH_SHARE * cpu and _cum_any(prof, _HASH_WRITE, "cpu") >= 0.9 * block,
              "%s: the hashing is not in the profile, or has no caller there\n%s" % (what, prof.cum_table("cpu")))
        heap = ctx.read(os.path.join(d, "run.heap.pprof"), r)
        check(heap.total("inuse_space") >= 64 << 20, "%s: the heap profile holds %d bytes in use, not the 64 MiB\n%s" % (
            what, heap.total("inuse_space"), heap.cum_table("inuse_space")))
        check(heap.cum("main.main", "inuse_space") >= 64 << 20, "%s: the 64 MiB from C.malloc do not reach main.main\n%s" % (
            what, heap.cum_table("inuse_space")))
    check(switched[0] > 0 and switched[1] >= 0.9 * switched[0],
          "of %.3f s of CPU through runtime.systemstack in ten runs, %.3f s in stacks that end at runtime.goexit" % (
              switched[0] / 1e9, switched[1] / 1e9))


def test_go_program_every_way_it_ends(ctx):
    """os.Exit(3), a panic, log.Fatal, SIGTERM with Go's own handling, and a
    SIGTERM taken by signal.Notify before main returns: each ends with the
    plain run's status and standard output, with its three files, and the
    profile says how it stopped."""
    exe = _build_go(ctx, "httphash")
    how_stopped = {"exit3": "Go's exit (status 3)", "panic": "Go's exit (status 2)",
                   "fatal": "Go's exit (status 1)", "term": "signal SIGTERM", "notify": "Go's exit (status 0)"}
    for how, stopped in sorted(how_stopped.items()):
        argv = [exe, "20", how]
        plain = run(ctx, argv, env=ctx.env(preload=False))
        r, d = _profiled(ctx, plain, argv, how)
        prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
        check(any(("stopped by " + stopped) in c for c in prof.comments), "%s: want 'stopped by %s' in %s" % (
            how, stopped, prof.comments))


def test_go_recovers_from_nil_dereferences(ctx):
    """Goroutines fault on nil pointers and recover, as Go programs do (an
    HTTP server recovers a handler's panic). The runtime starts its threads
    with every signal blocked and unblocks them with its own system call,
    which the shim's view of the mask never saw: it took each fault for one
    the program had blocked and gave it the default action, and the program
    died of SIGSEGV (8 runs in 8)."""
    exe = _build_go(ctx, "httphash")
    argv = [exe, "20", "nil"]
    plain = run(ctx, argv, env=ctx.env(preload=False))
    check(plain.status.is_exit(0) and "recovered 400\n" in plain.stdout_text, "plain:\n%s" % plain.describe())
    for i in range(3):
        _profiled(ctx, plain, argv, "run %d" % i)


def test_children_of_a_go_program_are_not_the_root(ctx):
    """os/exec starts /bin/sh five times. Go builds a child's environment
    from its own copy, made before the shim added its marker, so each
    child took itself for the root: NAME.* was the last sh's, and the Go
    program's own profile went to NAME.httphash.PID. The Go program keeps
    NAME.*; each sh writes files of its own; nothing is left behind."""
    exe = _build_go(ctx, "httphash")
    argv = [exe, "20", "spawn"]
    plain = run(ctx, argv, env=ctx.env(preload=False))
    check(plain.status.is_exit(0) and "spawned 5\n" in plain.stdout_text, "plain:\n%s" % plain.describe())
    d = ctx.mkdtemp("prof")
    r = run(ctx, argv, env=prof_env(ctx, d))
    _same_as_plain(plain, r, "spawn")
    mine = [l for l in r.wrote_lines() if "/run.cpu.pprof " in l]
    check(len(mine) == 1 and "httphash" in mine[0].rsplit("): ", 1)[-1], "run.cpu.pprof should be the Go program's:\n%s" %
          "\n".join(r.wrote_lines()))
    children = [n for n in os.listdir(d) if n.startswith("run.") and n.endswith(".cpu.pprof") and n != "run.cpu.pprof"]
    check(len(children) == 5, "want the five shells' own files, PROFILE_DIR holds %s" % sorted(os.listdir(d)))
    check(not [n for n in os.listdir(d) if n.startswith(".profshim-image")], "left: %s" % sorted(os.listdir(d)))


def test_cgo_go_program_with_busy_goroutines(ctx):
    """Then the program sends itself SIGTERM: the stop runs from Go's signal
    handler on its signal stack, with the other threads frozen wherever
    their goroutines are, at 1000 Hz. Five runs: each dies of SIGTERM as the
    plain run does, with the same output, and its CPU profile holds the
    hashing."""
    exe = _build_go(ctx, "httphash")
    argv = [exe, "80", "term"]
    plain = run(ctx, argv, env=ctx.env(preload=False))
    check(plain.status.is_signal(signal.SIGTERM) and plain.stdout_text.endswith("cgo 42\n"),
          "the plain run must print its digests and die of SIGTERM\n%s" % plain.describe())
    for i in range(5):
        what = "run %d" % i
        r, d = _profiled(ctx, plain, argv, what, PROFILE_CPU_HZ=1000)
        prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
        cpu = prof.total("cpu")
        check(cpu >= 0.9 * _own_cpu_ns(r, what), "%s: the profile holds %.2f s of CPU\n%s" % (
            what, cpu / 1e9, prof.cum_table("cpu")))
        check(_cum_any(prof, _HASH_BLOCK, "cpu") > _HASH_SHARE * cpu, "%s: the hashing is not in the profile\n%s" % (
            what, prof.cum_table("cpu")))


def test_stripped_go_program(ctx):
    """Built with -ldflags='-s -w' (no symbol table, no DWARF): runtime.exit
    is found by name in Go's own tables, which stripping keeps, and the
    goroutine's place is Go's one TLS word. os.Exit(3): status 3, three
    files, no warning, and most of the CPU in stacks that reach main."""
    exe = _build_go(ctx, "httphash", "-ldflags=-s -w")
    argv = [exe, "60", "exit3"]
    plain = run(ctx, argv, env=ctx.env(preload=False))
    r, d = _profiled(ctx, plain, argv, "stripped", PROFILE_CPU_HZ=1000)
    lines = _lines(r)
    check(len(lines) == 1 and "wrote" in lines[0], "want the one summary line, got %s" % lines)
    prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    share = _share_in_main(prof)
    check(share >= 0.5, "only %.0f%% of the CPU in stacks that reach main.\n%s" % (
        100.0 * share, prof.cum_table("cpu")))
    # As a user reads it, with the binary where the profile says: pprof's
    # own lookup in a stripped Go binary names runtime.goexit's entry
    # runtime.gcWriteBarrier, so it must leave the names the shim wrote.
    top = ctx.pprof.top(os.path.join(d, "run.cpu.pprof"), cum=True, nodecount=15, symbolize_none=False)
    check("runtime.goexit" in top and "gcWriteBarrier" not in top,
          "read with the binary at hand, the stacks do not end at runtime.goexit:\n%s" % indent(top))


def test_go_ends_itself_from_a_signal_handler_over_malloc(ctx):
    """SIGQUIT to a C thread that mallocs and frees without pause: Go's
    handler, on that thread, prints the goroutines and calls runtime.exit(2)
    there, over code that may hold malloc's lock. A stop started there
    (its thread's creation allocates) waited on that lock for ever: hung in
    2 of 6 runs. Five runs with the heap profile off (glibc's malloc):
    status 2 as without the shim, and the line says why there is no
    profile."""
    exe = _build_go(ctx, "httphash")
    argv = [exe, "5", "quit"]
    plain = run(ctx, argv, env=ctx.env(preload=False))
    check(plain.status.is_exit(2), "the plain run:\n%s" % plain.describe())
    for i in range(5):
        d = ctx.mkdtemp("prof")
        r = run(ctx, argv, env=prof_env(ctx, d, PROFILE_HEAP_SAMPLE=0), timeout=60)
        check(r.status.key() == plain.status.key(), "run %d: %s, plain %s\n%s" % (i, r.status, plain.status, r.describe()))
        lines = _lines(r)
        check(len(lines) == 1 and ("signal handler" in lines[0] or "wrote" in lines[0]),
              "run %d: want one line, got %s" % (i, lines))
