"""A run that is a chain of programs says and keeps what the operator meant.

docs/CONFIG.md, "Process trees": `profshim run` appends every image's
summary line to DIR/profshim.log (PROFILE_LOG) and leaves one on stderr, the
line of the image that writes NAME.*; PROFILE_ONLY profiles only the images
of the programs it names, the others stay inert. The chain here is
`sh -c 'exec env python3 -c pass'`: sh execs env, env execs python3 (on a
machine where python3 is pyenv's shim, a bash script, the chain is longer).
"""

import os

from cli_helpers import profshim
from common import check, files_in, image_files, indent

CHAIN = ["sh", "-c", "exec env python3 -c pass"]
ERROR_PREFIX = "# profshim: error: "


def _profiles(d):
    return sorted(f for f in files_in(d) if f.endswith(".pprof"))


def _stems(d):
    """The stems of the images that wrote into d (what precedes .KIND.pprof)."""
    return sorted({f.rsplit(".", 2)[0] for f in _profiles(d)})


def test_run_prints_one_summary_line(ctx):
    d = ctx.mkdtemp("prof")
    r = profshim(ctx, ["run", "-d", d, "--"] + CHAIN)
    check(r.rc == 0, "profshim run %s: %s\n%s" % (CHAIN, r.status_text(), r.describe()))
    lines = r.shim_lines()
    check(len(lines) == 1 and lines[0].startswith("# profshim: wrote %s/run.cpu.pprof " % d),
          "want exactly one '# profshim:' line on stderr, the one of the image that wrote run.*; got %d\n%s" % (
              len(lines), r.describe()))
    check(lines[0].endswith("python3 -c pass"), "the line on stderr should be python3's: %r" % lines[0])
    log = os.path.join(d, "profshim.log")
    check(os.path.isfile(log), "no %s: the other images' lines go there\n%s" % (log, r.describe()))
    logged = open(log).read().splitlines()
    # sh, env and python3 at least, each a whole line, the stderr one among them.
    check(len(logged) >= 3 and all(l.startswith("# profshim: wrote ") for l in logged) and lines[0] in logged,
          "%s should hold every image's summary line (sh, env, python3, ...):\n%s" % (log, "\n".join(logged)))
    named = set()
    for l in logged:
        named.update(p for p in l.split(" | ")[0].split()[3:])
    check(named == {os.path.join(d, f) for f in _profiles(d)},
          "the log's lines should name every profile written, and only those")


def test_only_profiles_the_named_program(ctx):
    d = ctx.mkdtemp("prof")
    r = profshim(ctx, ["run", "-d", d, "--only", "python3", "--"] + CHAIN)
    check(r.rc == 0, "profshim run --only python3: %s\n%s" % (r.status_text(), r.describe()))
    stems = _stems(d)
    check(len(stems) == 1 and "python3" in stems[0] and _profiles(d) == image_files(stems[0]),
          "PROFILE_ONLY=python3: only python3's image should write, under its own stem (no image takes "
          "NAME under PROFILE_ONLY); dir holds %s\n%s" % (_profiles(d), r.describe()))
    lines = r.shim_lines()
    check(len(lines) == 1 and lines[0].endswith("python3 -c pass"), "one line, python3's:\n%s" % r.describe())


def test_only_leaves_other_programs_inert(ctx):
    d = ctx.mkdtemp("prof")
    r = ctx.run(["hello"], PROFILE_DIR=d, PROFILE_ONLY="python3,cc1plus")
    check(r.rc == 0 and not r.shim_lines(), "hello under PROFILE_ONLY=python3,cc1plus: inert, silent\n%s" %
          r.describe())
    check(os.listdir(d) == [], "an image PROFILE_ONLY does not name wrote %s" % os.listdir(d))
    r = ctx.run(["hello"], PROFILE_DIR=d, PROFILE_ONLY="cc1plus,hello")
    check(r.rc == 0 and any(f.startswith("run.hello.") for f in _profiles(d)),
          "PROFILE_ONLY=cc1plus,hello: hello is profiled\n%s" % r.describe())


def test_picked_images_of_one_tree_keep_their_own_files(ctx):
    """Three runs of the picked program under an inert shell, then one that
    a picked image reaches through an inert exec (same pid): every picked
    image's files are there, none replaced by the next one's. Before, each
    took the run's NAME, as no inert image between passed the tree's marker
    on: one set of files was left of three."""
    hello = ctx.workload("hello")
    d = ctx.mkdtemp("prof")
    r = ctx.run(["/bin/sh", "-c", "%s; %s; %s" % (hello, hello, hello)], PROFILE_DIR=d, PROFILE_ONLY="hello")
    check(r.rc == 0 and len(_stems(d)) == 3 and len(r.shim_lines()) == 3,
          "three images of hello under an inert sh: want three stems, got %s\n%s" % (_stems(d), r.describe()))
    # A picked shell execs env (inert), which execs a picked shell, under one pid.
    d = ctx.mkdtemp("prof")
    r = ctx.run(["/bin/sh", "-c", "exec env sh -c 'exec env sh -c :'"], PROFILE_DIR=d, PROFILE_ONLY="sh,dash")
    check(r.rc == 0 and len(_stems(d)) == 3 and len(r.shim_lines()) == 3,
          "three picked shells of one pid, an inert env between each: want three stems, got %s\n%s" % (
              _stems(d), r.describe()))


def test_malformed_only_and_log_are_setup_errors(ctx):
    cases = [("PROFILE_ONLY", v) for v in (",", "python3,", "a,,b", "/usr/bin/python3", "py thon")]
    cases += [("PROFILE_LOG", v) for v in ("logs/", ".")]
    for var, v in cases:
        d = ctx.mkdtemp("prof")
        r = ctx.run(["hello"], **{"PROFILE_DIR": d, var: v})
        lines = r.stderr_lines
        check(r.rc == 78 and r.out == b"" and len(lines) == 1 and lines[0].startswith(ERROR_PREFIX) and
              ("%s='%s'" % (var, v)) in lines[0],
              "%s=%r: want exit status 78 before main and one error line naming it\n%s" % (var, v, r.describe()))


def test_an_image_only_skips_keeps_its_own_malloc(ctx):
    """The choice is made before the image's first malloc (docs/DESIGN.md,
    "Fork and exec"): an image PROFILE_ONLY skips is served by glibc, its
    output the plain run's to the byte (alloc_whose tells glibc's malloc from
    jemalloc's); one it picks by jemalloc, as with the heap profiled."""
    plain = ctx.run_plain(["alloc_whose"])
    skipped = ctx.run(["alloc_whose"], PROFILE_DIR=ctx.mkdtemp("prof"), PROFILE_ONLY="python3")
    check(skipped.out == plain.out and skipped.err == plain.err,
          "PROFILE_ONLY=python3: alloc_whose should run as without the shim\nplain:\n%s\nunder the shim:\n%s" % (
              indent(plain.describe()), indent(skipped.describe())))
    picked = ctx.run(["alloc_whose"], PROFILE_DIR=ctx.mkdtemp("prof"), PROFILE_ONLY="alloc_whose")
    check("usable 5120" in picked.stdout_text, "PROFILE_ONLY=alloc_whose: jemalloc should serve its malloc\n%s" %
          picked.describe())
