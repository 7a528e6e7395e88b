"""Environment contract: inert when PROFILE_DIR is unset or empty, fail-fast
setup errors (exit 78 before main, one error line), mkdir -p, slugging, and
turning each profile off with 0."""

import os
import re

from common import (ERROR_PREFIX, check, files_in, image_files, indent, run_program, walk_all)

EX_CONFIG = 78

# Workloads whose complete output is compared with and without the shim.
INERT_PROGRAMS = [["hello", "7"], ["cpu_split", "20"], ["heap_hold"], ["alloc_api"], ["alloc_api_cc"],
                  ["exit_code", "4"]]


def _inert_run(ctx, argv, **vars):
    """Runs argv plain and with LD_PRELOAD (plus vars), each in an empty cwd
    with an empty TMPDIR and HOME; compares everything."""
    runs = []
    for preload in (False, True):
        cwd = ctx.mkdtemp("cwd")
        tmpdir = ctx.mkdtemp("tmpdir")
        home = ctx.mkdtemp("home")
        env = ctx.env(preload=preload, **(vars if preload else {}))
        env["TMPDIR"], env["HOME"] = tmpdir, home
        argv_abs = [ctx.workload(argv[0])] + argv[1:]
        r = run_program(argv_abs, env, cwd)
        runs.append(r)
        for what, d in (("cwd", cwd), ("TMPDIR", tmpdir), ("HOME", home)):
            check(not walk_all(d), "%s: %s run left files in its %s: %s\n%s" % (
                " ".join(argv), "inert" if preload else "plain", what, walk_all(d), r.describe()))
    plain, inert = runs
    what = " ".join(argv) + " with " + inert.env_desc
    check(inert.rc == plain.rc, "%s: %s, without the shim %s\n%s" % (
        what, inert.status_text(), plain.status_text(), inert.describe()))
    check(inert.out == plain.out, "%s: stdout differs from the run without the shim\nwithout:\n%s\nwith:\n%s" % (
        what, indent(plain.out.decode(errors="replace")), indent(inert.out.decode(errors="replace"))))
    check(inert.err == plain.err, "%s: stderr differs from the run without the shim (an inert shim writes "
          "nothing)\nwithout:\n%s\nwith:\n%s" % (what, indent(plain.err.decode(errors="replace")),
                                               indent(inert.err.decode(errors="replace"))))


def test_inert_when_profile_dir_unset(ctx):
    for argv in INERT_PROGRAMS:
        _inert_run(ctx, argv)


def test_inert_when_profile_dir_empty(ctx):
    for argv in INERT_PROGRAMS:
        _inert_run(ctx, argv, PROFILE_DIR="")


def test_inert_ignores_other_variables(ctx):
    """With PROFILE_DIR unset nothing is asked for, so even malformed values
    of the other variables change nothing."""
    _inert_run(ctx, ["hello"], PROFILE_NAME="x y", PROFILE_CPU_HZ="abc", PROFILE_HEAP_SAMPLE="-1")
    _inert_run(ctx, ["hello"], PROFILE_DIR="", PROFILE_CPU_HZ="10x")


def _mapped_files(r):
    return set(l for l in r.out.decode(errors="replace").splitlines() if l)


# glibc's own libraries the shim names as needed, for glibc before 2.34
# (where they hold functions it calls; empty stubs since): docs/DESIGN.md
# "Which glibc".
GLIBC_STUBS = {"libpthread.so.0", "libdl.so.2", "librt.so.1"}


def _glibc_stub(path):
    """One of GLIBC_STUBS, by its soname or (before glibc 2.34, where they
    are whole libraries, not stubs) its file name: libdl-2.31.so."""
    base = os.path.basename(path)
    return base in GLIBC_STUBS or re.match(r"(libpthread|libdl|librt)-2\.\d+\.so$", base) is not None


def test_inert_maps_nothing_beyond_the_shim(ctx):
    """An inert process maps the files a plain run maps, plus the shim (and
    glibc's libpthread, libdl, librt): no libz, libm, libgcc_s or libdw
    (docs/DESIGN.md), even after threads allocated across size classes."""
    plain = ctx.run_plain(["maps_after_threads"])
    inert = ctx.run(["maps_after_threads"])
    for r in (plain, inert):
        check(r.rc == 0, "maps_after_threads failed\n%s" % r.describe())
    p, i = _mapped_files(plain), _mapped_files(inert)
    shim = os.path.realpath(ctx.lib)
    check(shim in i, "the shim %s is not among the inert run's mappings: %s" % (shim, sorted(i)))
    extra = set(f for f in i - p - {shim} if not _glibc_stub(f))
    check(not extra and p - i == set(),
          "inert maps %s beyond a plain run and lacks %s (want exactly the shim extra, and glibc's %s)" % (
              sorted(extra), sorted(p - i), " ".join(sorted(GLIBC_STUBS))))
    # The same program profiled does load them: the comparison can tell.
    active = ctx.run(["maps_after_threads"], PROFILE_DIR=ctx.mkdtemp("prof"))
    a = _mapped_files(active)
    check(any("libz.so" in f for f in a) and any("libdw" in f for f in a),
          "profiled, the process should map libz and libdw: %s\n%s" % (sorted(a), active.describe()))


def test_libdw_loaded_only_where_a_stop_may_need_it_among_threads(ctx):
    """libdw is loaded at the stop of a single-threaded image (and only when
    the symbol cache lacks an address), but before the first thread of one
    that starts threads (docs/DESIGN.md): while main runs, the one maps zlib
    and not libdw, the other both. Either way the profiles are named."""
    for argv, want_libdw in ((["maps_after_threads", "nothreads"], False), (["maps_after_threads"], True)):
        d = ctx.mkdtemp("prof")
        r = ctx.run(argv, PROFILE_DIR=d)
        check(r.rc == 0, "%s failed\n%s" % (argv, r.describe()))
        m = _mapped_files(r)
        has_dw = any("libdw" in f for f in m)
        check(any("libz.so" in f for f in m), "%s: active, zlib should be mapped at setup: %s" % (argv, sorted(m)))
        check(has_dw == want_libdw, "%s: libdw %s while main ran, want %s:\n%s" % (
            argv, "mapped" if has_dw else "not mapped", "mapped" if want_libdw else "not mapped", sorted(m)))
        top = ctx.top(os.path.join(d, "run.heap.pprof"), "alloc_space")
        check("churn" in top, "%s: the heap profile does not name churn:\n%s" % (argv, top))


def _expect_setup_error(ctx, what, mentions=None, **vars):
    cwd = ctx.mkdtemp("cwd")
    r = ctx.run(["hello"], cwd=cwd, **vars)
    lines = r.stderr_lines
    check(r.rc == EX_CONFIG and r.out == b"" and len(lines) == 1 and lines[0].startswith(ERROR_PREFIX),
          "%s: want exit status 78 before main runs (stdout empty: hello writes to stdout first thing) "
          "and exactly one stderr line starting %r\n%s" % (what, ERROR_PREFIX, r.describe()))
    if mentions:
        check(mentions in lines[0], "%s: the error line should say what is wrong (mention %r): %r" % (
            what, mentions, lines[0]))
    check(not walk_all(cwd), "%s: files left in cwd: %s" % (what, walk_all(cwd)))
    return r


def _running_as():
    """What a directory's error says of the user: the name from /etc/passwd
    itself (the shim does not ask NSS from inside the program), or the uid."""
    uid = os.geteuid()
    for line in open("/etc/passwd"):
        f = line.split(":")
        if len(f) > 2 and f[2] == str(uid):
            return "(running as user %s, uid %d)" % (f[0], uid)
    return "(running as uid %d)" % uid


def test_unwritable_profile_dir(ctx):
    base = ctx.mkdtemp("unwritable")
    afile = os.path.join(base, "regular-file")
    with open(afile, "w") as f:
        f.write("not a directory\n")
    cases = [
        (os.path.join(afile, "sub"), "parent is a regular file"),
        (os.path.join(afile, "a", "b"), "an ancestor is a regular file"),
        (afile, "PROFILE_DIR is a regular file"),
        ("/proc/self", "an existing directory nobody can create files in (even root)"),
        ("/proc/profshim-test/sub", "cannot be created under /proc"),
    ]
    for d, why in cases:
        _expect_setup_error(ctx, "PROFILE_DIR=%s (%s)" % (d, why), mentions=_running_as(), PROFILE_DIR=d)
    with open(afile) as f:
        check(f.read() == "not a directory\n", "%s was modified" % afile)
    check(files_in(base) == ["regular-file"], "files appeared in %s: %s" % (base, files_in(base)))


BAD_NUMBERS = ["abc", "-5", "10x", "1.5", "0x", "99999999999999999999999999", " ", "5 5"]


def test_malformed_cpu_hz(ctx):
    for v in BAD_NUMBERS:
        d = os.path.join(ctx.mkdtemp("prof"), "out")
        _expect_setup_error(ctx, "PROFILE_CPU_HZ=%r" % v, mentions="PROFILE_CPU_HZ",
                            PROFILE_DIR=d, PROFILE_CPU_HZ=v)


def test_malformed_heap_sample(ctx):
    for v in BAD_NUMBERS:
        d = os.path.join(ctx.mkdtemp("prof"), "out")
        _expect_setup_error(ctx, "PROFILE_HEAP_SAMPLE=%r" % v, mentions="PROFILE_HEAP_SAMPLE",
                            PROFILE_DIR=d, PROFILE_HEAP_SAMPLE=v)


def test_malformed_wait_sample(ctx):
    """PROFILE_WAIT_SAMPLE is whole nanoseconds up to 60 s: anything else is
    a setup error (one line, exit 78), never a default."""
    for v in BAD_NUMBERS + ["60000000001", "10ms"]:
        d = os.path.join(ctx.mkdtemp("prof"), "out")
        _expect_setup_error(ctx, "PROFILE_WAIT_SAMPLE=%r" % v, mentions="PROFILE_WAIT_SAMPLE",
                            PROFILE_DIR=d, PROFILE_WAIT_SAMPLE=v)


def test_profile_dir_created_like_mkdir_p(ctx):
    base = ctx.mkdtemp("mkdirp")
    d = os.path.join(base, "a", "b", "c")
    r, _ = ctx.profile(["hello"], dir=d)
    check(files_in(d) == image_files("run"),
          "PROFILE_DIR=%s (missing, nested): want %s in it, it has %s\n%s" % (
              d, image_files("run"), files_in(d), r.describe()))
    ctx.read(os.path.join(d, "run.cpu.pprof"))
    ctx.read(os.path.join(d, "run.heap.pprof"))
    # An existing directory works too, and a relative one is relative to cwd.
    cwd = ctx.mkdtemp("cwd")
    r = ctx.run(["hello"], cwd=cwd, PROFILE_DIR="rel/dir", PROFILE_NAME="x")
    check(r.rc == 0 and files_in(os.path.join(cwd, "rel", "dir")) == image_files("x"),
          "PROFILE_DIR=rel/dir: want cwd/rel/dir/%s, cwd has %s\n%s" % (image_files("x"), walk_all(cwd), r.describe()))


def test_relative_profile_dir_summary_has_full_paths(ctx):
    """The summary line names the files by full path, so that a reader of a
    log (who does not know the process's cwd) can find them."""
    cwd = ctx.mkdtemp("cwd")
    r = ctx.run(["hello"], cwd=cwd, PROFILE_DIR="rel/dir", PROFILE_NAME="x")
    check(r.rc == 0, "PROFILE_DIR=rel/dir failed\n%s" % r.describe())
    printed = [p for line in r.summary_lines() for p in re.findall(r"(\S+\.pprof)", line)]
    want = [os.path.join(cwd, "rel", "dir", f) for f in image_files("x")]
    check(sorted(printed) == want, "PROFILE_DIR=rel/dir (cwd %s): the summary line should name %s; it says %s"
          % (cwd, want, r.summary_lines()))


# (PROFILE_NAME value, expected file base name)
SLUGS = [
    ("288w-6writers", "288w-6writers"),
    ("a b/c", "a-b-c"),
    ("../../etc", "etc"),
    ("..", "run"),
    ("", "run"),
    (None, "run"),
    ("_.-x", "x"),
    ("a   b", "a-b"),
    ("a/../b", "a-..-b"),
    ("caf\u00e9", "caf-"),
    ("a\udcffb", "a-b"),  # the byte 0xff, not UTF-8
    ("///", "run"),
    ("x" * 200, "x" * 128),
    ("Run_1.2-OK", "Run_1.2-OK"),
]


def test_profile_name_slug(ctx):
    base = ctx.mkdtemp("slug")
    for i, (name, want) in enumerate(SLUGS):
        top = os.path.join(base, str(i))
        d = os.path.join(top, "p", "q", "r")
        os.makedirs(d)
        r = ctx.run(["hello"], PROFILE_DIR=d, PROFILE_NAME=name)
        expect = image_files(want)
        everything = walk_all(top, skip_symbol_cache=True)
        check(r.rc == 0 and everything == ["p", "p/q", "p/q/r"] + ["p/q/r/" + e for e in expect],
              "PROFILE_NAME=%r: want exactly %s in PROFILE_DIR and nothing elsewhere; found %s\n%s" % (
                  name, expect, everything, r.describe()))
        named = sorted(os.path.basename(p) for p in r.named_files())
        check(named == expect, "PROFILE_NAME=%r: the summary line names %s, want %s\n%s" % (
            name, named, expect, r.describe()))


def test_cpu_hz_zero_means_no_cpu_profile(ctx):
    r, d = ctx.profile(["cpu_split", "30"], PROFILE_CPU_HZ=0)
    check(files_in(d) == ["run.heap.pprof", "run.wait.pprof"],
          "PROFILE_CPU_HZ=0: want run.heap.pprof and run.wait.pprof, got %s\n%s" % (files_in(d), r.describe()))
    ctx.read(os.path.join(d, "run.heap.pprof"))
    named = [os.path.basename(p) for p in r.named_files()]
    check(named == ["run.heap.pprof", "run.wait.pprof"], "PROFILE_CPU_HZ=0: summary names %s\n%s" % (
        named, r.describe()))


def test_heap_sample_zero_means_no_heap_profile(ctx):
    r, d = ctx.profile(["heap_hold"], PROFILE_HEAP_SAMPLE=0)
    check(files_in(d) == ["run.cpu.pprof", "run.wait.pprof"],
          "PROFILE_HEAP_SAMPLE=0: want run.cpu.pprof and run.wait.pprof, got %s\n%s" % (files_in(d), r.describe()))
    ctx.read(os.path.join(d, "run.cpu.pprof"))
    named = [os.path.basename(p) for p in r.named_files()]
    check(named == ["run.cpu.pprof", "run.wait.pprof"], "PROFILE_HEAP_SAMPLE=0: summary names %s\n%s" % (
        named, r.describe()))


def test_wait_sample_zero_means_no_wait_profile(ctx):
    """PROFILE_WAIT_SAMPLE=0: no wait profile, and the summary says no waits."""
    r, d = ctx.profile(["cpu_split", "30"], PROFILE_WAIT_SAMPLE=0)
    check(files_in(d) == ["run.cpu.pprof", "run.heap.pprof"],
          "PROFILE_WAIT_SAMPLE=0: want run.cpu.pprof and run.heap.pprof, got %s\n%s" % (files_in(d), r.describe()))
    check(len(r.summary_lines()) == 1 and "| waits" not in r.summary_lines()[0],
          "PROFILE_WAIT_SAMPLE=0: the summary line must give no wait total\n%s" % r.describe())


def test_relative_profile_dir_survives_chdir(ctx):
    """A relative PROFILE_DIR means the directory as of the start (where it
    was created and checked), even if the program changes directory before
    it stops."""
    cwd = ctx.mkdtemp("cwd")
    elsewhere = ctx.mkdtemp("elsewhere")
    r = ctx.run(["hello", "chdir=" + elsewhere], cwd=cwd, PROFILE_DIR="rel/dir", PROFILE_NAME="x")
    check(r.rc == 0 and files_in(os.path.join(cwd, "rel", "dir")) == image_files("x")
          and not walk_all(elsewhere),
          "PROFILE_DIR=rel/dir, program chdir()s to %s before exit: want the files in the start cwd's rel/dir; "
          "start cwd has %s, the other dir has %s\n%s" % (elsewhere, walk_all(cwd), walk_all(elsewhere), r.describe()))
