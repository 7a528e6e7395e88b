"""Whose malloc serves the program (docs/ALLOCATOR.md): the next allocator
in lookup order (glibc's, or the program's own libjemalloc or tcmalloc)
unless the heap is profiled, and then the shim's jemalloc. Each test runs
the same program without the shim, inert, with the heap profile off
(PROFILE_HEAP_SAMPLE=0) and with it on, and checks what only one allocator
would answer."""

import os

from common import check, indent
from st_helpers import compile_c, workload_source

MODES = {
    "inert": {},
    "heap off": {"PROFILE_HEAP_SAMPLE": "0"},
    "heap on": {"PROFILE_HEAP_SAMPLE": "65536"},
}


def _run(ctx, argv, mode, **extra):
    vars = dict(MODES[mode])
    vars.update(extra)
    if mode != "inert":
        vars["PROFILE_DIR"] = ctx.mkdtemp("prof")
    r = ctx.run(argv, **vars)
    check(r.rc == 0, "%s, %s: want exit 0\n%s" % (argv[0], mode, r.describe()))
    return r


def _lines(r):
    return dict(l.split(" ", 1) for l in r.stdout_text.splitlines() if " " in l)


def test_glibc_serves_unless_the_heap_is_profiled(ctx):
    """glibc's malloc_usable_size(malloc(5000)) is 5000 and jemalloc's 5120
    (its size class); glibc fills a new block with the complement of
    mallopt(M_PERTURB)'s byte, jemalloc ignores it. Inert, the whole output
    (glibc's arena size included) is the plain run's."""
    plain = ctx.run_plain(["alloc_whose"])
    check(plain.rc == 0 and _lines(plain).get("usable") == "5000" and _lines(plain).get("perturb") == "yes",
          "without the shim, alloc_whose should see glibc's malloc\n%s" % plain.describe())
    inert = _run(ctx, ["alloc_whose"], "inert")
    check(inert.out == plain.out and inert.err == plain.err,
          "inert: the output differs from the plain run's\nplain:\n%s\ninert:\n%s"
          % (indent(plain.describe()), indent(inert.describe())))
    off = _lines(_run(ctx, ["alloc_whose"], "heap off"))
    check(off.get("usable") == "5000" and off.get("perturb") == "yes",
          "heap off: glibc's malloc should serve (usable 5000, perturb yes), got %s" % off)
    on = _lines(_run(ctx, ["alloc_whose"], "heap on"))
    check(on.get("usable") == "5120" and on.get("perturb") == "no",
          "heap on: the shim's jemalloc should serve (usable 5120, perturb no), got %s" % on)


def test_a_program_linked_with_tcmalloc_keeps_it_unless_the_heap_is_profiled(ctx):
    """tcmalloc counts the 16 MiB the program holds from malloc when its
    malloc serves; with the heap profiled the shim's serves and tcmalloc
    holds none of it."""
    plain = ctx.run_plain(["tc_held"])
    check(plain.rc == 0 and plain.out == b"tcmalloc holds 16 MiB\n", "plain tc_held:\n%s" % plain.describe())
    for mode in ("inert", "heap off"):
        r = _run(ctx, ["tc_held"], mode)
        check(r.out == plain.out, "%s: tcmalloc should serve malloc as without the shim\n%s" % (mode, r.describe()))
    r = _run(ctx, ["tc_held"], "heap on")
    check(r.out == b"tcmalloc holds 0 MiB\n", "heap on: the shim's jemalloc should serve malloc\n%s" % r.describe())


def test_mem_tsv_reads_the_allocator_that_serves(ctx):
    """NAME.mem.tsv's heap_allocated_bytes is the serving allocator's own
    count: tc_held holds 16 MiB from tcmalloc for 600 ms with the heap off
    (rows 10 a second); glibc's mallinfo2, which it used to read, says
    about nothing."""
    d = ctx.mkdtemp("prof")
    r = ctx.run(["tc_held", "600"], PROFILE_DIR=d, PROFILE_HEAP_SAMPLE=0, PROFILE_MEM_HZ=10)
    check(r.rc == 0, "tc_held:\n%s" % r.describe())
    path = os.path.join(d, "run.mem.tsv")
    check(os.path.exists(path), "no run.mem.tsv: %s\n%s" % (sorted(os.listdir(d)), r.describe()))
    rows = [l.split("\t") for l in open(path).read().splitlines()]
    col = rows[0].index("heap_allocated_bytes")
    most = max(int(row[col]) for row in rows[1:]) if len(rows) > 1 else 0
    check(most >= 16 << 20, "run.mem.tsv: at most %d bytes allocated, tcmalloc held 16 MiB:\n%s"
          % (most, indent(open(path).read())))


def test_a_program_linked_with_jemalloc_keeps_its_own_unless_the_heap_is_profiled(ctx):
    """je_api mixes malloc, mallocx, free, dallocx and sdallocx, and reads
    opt.prof and prof.active with mallctl: inert and with the heap off its
    own libjemalloc answers exactly as without the shim."""
    plain = ctx.run_plain(["je_api", "prof"])
    check(plain.rc == 0 and b"je_api: all ok" in plain.out, "plain je_api:\n%s" % plain.describe())
    reads = [l for l in plain.stdout_text.splitlines() if l.startswith(("read ", "rc "))]
    check(reads, "je_api printed no read/rc lines:\n%s" % plain.describe())
    for mode in ("inert", "heap off"):
        r = _run(ctx, ["je_api", "prof"], mode)
        got = [l for l in r.stdout_text.splitlines() if l.startswith(("read ", "rc "))]
        check(b"je_api: all ok" in r.out and got == reads,
              "%s: the program's own jemalloc should answer as without the shim\nwant %s\ngot  %s\n%s"
              % (mode, reads, got, r.describe()))


def test_a_deep_bound_library_frees_what_the_program_allocated(ctx):
    """A library opened with RTLD_DEEPBIND (as PHP opens its extensions)
    frees blocks the program allocated and the program frees the
    library's: in every mode, 1000 times each, without a crash."""
    lib = compile_c(ctx, os.path.join(ctx.mkdtemp("lib"), "libdeep.so"),
                    [workload_source("lib/deepbind_lib.c")], shared=True)
    plain = ctx.run_plain(["deepbind", lib])
    check(plain.rc == 0 and plain.out == b"deepbind: ok\n", "plain deepbind:\n%s" % plain.describe())
    for mode in MODES:
        r = _run(ctx, ["deepbind", lib], mode)
        check(r.out == plain.out, "%s: deepbind\n%s" % (mode, r.describe()))


def test_images_that_choose_differently_never_mix_their_blocks(ctx):
    """A library's constructor allocates before the shim's constructor
    runs; the program reallocs and frees that block, then execs itself
    with the heap profile switched the other way, 6 images in a row, 20
    runs: each image's first malloc decides for the whole image, so no
    block meets the other allocator's free."""
    d = ctx.mkdtemp("early")
    lib = compile_c(ctx, os.path.join(d, "libearly_alloc.so"), [workload_source("lib/early_alloc.c")], shared=True)
    prog = compile_c(ctx, os.path.join(d, "early_main"), [workload_source("lib/early_main.c")],
                     args=["-L" + d, "-learly_alloc", "-Wl,-rpath," + d])
    check(os.path.exists(lib), "no %s" % lib)
    want = "".join("image %d: ok\n" % i for i in range(5, -1, -1)).encode()
    for i in range(20):
        start = "0" if i % 2 else "65536"
        r = ctx.run([prog, "5"], PROFILE_DIR=ctx.mkdtemp("prof"), PROFILE_HEAP_SAMPLE=start, PROFILE_CPU_HZ=0)
        check(r.rc == 0 and r.out == want, "run %d (first image's PROFILE_HEAP_SAMPLE=%s):\n%s"
              % (i + 1, start, r.describe()))


def test_a_crash_beside_a_thread_inside_glibc_malloc_trim_leaves_its_files(ctx):
    """With glibc's malloc serving, a thread loops in malloc_trim (or
    mallinfo2), which hold glibc's arena lock, while main faults. First
    the shim's functions called glibc's with a jump, so no frame told the
    stop that the thread was inside the allocator: it parked the thread
    holding the lock and the stop's own malloc waited for it until the
    stop's timeout, "wrote no profile", 3 of 3. Then, with the frame kept,
    the thread declined every request, being inside almost always, and the
    stop still timed out on a quiet machine (5 of 5 with malloc_trim): a
    thread now parks on its way out of the allocator. Two runs of each:
    SIGSEGV as without the shim, with the CPU and wait profiles."""
    for what in ("trim", "info"):
        for i in range(2):
            d = ctx.mkdtemp("prof")
            r = ctx.run(["crash_beside_trim", what], PROFILE_DIR=d, PROFILE_HEAP_SAMPLE=0, PROFILE_STOP_TIMEOUT=5)
            check(r.rc == -11 or r.rc == 139 or "SIGSEGV" in r.status_text(),
                  "%s run %d: want death by SIGSEGV\n%s" % (what, i, r.describe()))
            got = sorted(n for n in os.listdir(d) if n.endswith(".pprof"))
            check(got == ["run.cpu.pprof", "run.wait.pprof"], "%s run %d: PROFILE_DIR holds %s\n%s"
                  % (what, i, got, r.describe()))


def test_a_first_malloc_inside_newlocale_leaves_the_locale_lock_alone(ctx):
    """A library constructor calls newlocale(), which holds glibc's locale
    lock while it allocates: that malloc was the process's first, and
    deciding the allocator looked up names glibc lacks and cleared the
    error, which dlerror() translates under the same lock. The count went
    wrong and the program's next setlocale() hung, inert and with the heap
    off (curl, wget, gpg). Each mode: as plain, within the hang guard."""
    d = ctx.mkdtemp("locale")
    compile_c(ctx, os.path.join(d, "liblocale_ctor.so"), [workload_source("lib/locale_ctor.c")], shared=True)
    prog = compile_c(ctx, os.path.join(d, "locale_main"), [workload_source("lib/locale_main.c")],
                     args=["-L" + d, "-Wl,--no-as-needed", "-llocale_ctor", "-Wl,-rpath," + d])
    plain = ctx.run_plain([prog])
    check(plain.rc == 0 and plain.out.startswith(b"locales "), "plain:\n%s" % plain.describe())
    for mode in MODES:
        r = _run(ctx, [prog], mode)
        check(r.out == plain.out, "%s: output differs from plain\n%s" % (mode, r.describe()))
