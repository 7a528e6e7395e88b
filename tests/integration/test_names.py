"""What the profile calls things: one name per function whether it was
inlined or not, distinct functions (lambdas) never sharing a name, and
source files by absolute path. Every profile is read with go tool pprof from
a copy in an empty directory with no binaries reachable (common.PprofReader).
"""

import os
import re
import shutil
import subprocess

from common import check, fail, indent

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(os.path.dirname(HERE), "workloads")


def _sh(argv, what, cwd=None):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
    if p.returncode != 0:
        fail("%s failed (status %d): %s\n%s" % (what, p.returncode, " ".join(argv),
                                                indent(p.stderr.decode("utf-8", "replace"))))
    return p.stdout.decode("utf-8", "replace")


def _markers(source, prefix):
    """{marker: line} for every line of code ending in a // PREFIX* comment."""
    out = {}
    for i, l in enumerate(open(source).read().split("\n"), 1):
        m = re.search(r"\S.*//\s*(%s\w*)\s*$" % re.escape(prefix), l)
        if m and not l.lstrip().startswith("//"):
            check(m.group(1) not in out, "marker %s twice in %s" % (m.group(1), source))
            out[m.group(1)] = i
    check(out, "no %s markers in %s" % (prefix, source))
    return out


def _symbol_names_by_line(exe, source):
    """[(line, demangled name)] of the functions `nm -C -l` places in source:
    the symbol table's names, with the line each function starts at."""
    out = []
    for l in _sh(["nm", "-C", "-l", "--defined-only", exe], "nm -C -l").split("\n"):
        m = re.match(r"^[0-9a-f]+ [tTwW] (.*)\t(.*):(\d+)$", l)
        if m and os.path.basename(m.group(2)) == os.path.basename(source):
            out.append((int(m.group(3)), m.group(1)))
    check(out, "nm -C -l finds no function of %s in %s" % (os.path.basename(source), exe))
    return sorted(out)


def _truth_for(line, symbols):
    """The symbol of the function whose definition starts last at or before line."""
    best = [name for start, name in symbols if start <= line]
    return best[-1] if best else None


def test_cxx_statics_and_lambdas_have_one_name_each(ctx):
    """sym_cxx_names (-O2): a static function inlined at one call and out of
    line at another, statics only ever inlined (one a template, one taking a
    function pointer, a typedef'd unnamed struct and an array reference), a
    method of a class in an anonymous namespace, a local class's method,
    three lambdas (two of one signature) and a lambda in a lambda, all
    without a DWARF linkage name. Every frame at a function's body line
    must carry exactly the name the symbol table of the same source built
    -O0 (nothing inlined, every function a symbol) gives it: so one name
    whether inlined or not, and the lambdas distinct."""
    src = os.path.join(WORKLOADS, "sym_cxx_names.cc")
    markers = _markers(src, "SYM_CXX_")
    cxx = shutil.which("g++") or shutil.which("c++")
    check(cxx, "no C++ compiler (g++) to build the -O0 twin of %s" % src)
    o0 = os.path.join(ctx.tmp, "sym_cxx_names_O0")
    _sh([cxx, "-O0", "-g", "-o", o0, src], "compiling sym_cxx_names.cc -O0")
    symbols = _symbol_names_by_line(o0, src)

    r, d = ctx.profile(["sym_cxx_names", "1.5"])
    prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
    seen = {}  # marker -> (truth, names, inlined, out-of-line)
    for marker, line in sorted(markers.items()):
        truth = _truth_for(line, symbols)
        check(truth, "no function of the -O0 build starts before %s (line %d)" % (marker, line))
        names, inlined, outline = set(), 0, 0
        for loc in prof.locations.values():
            for i, f in enumerate(loc.frames):
                if os.path.basename(f.file) == "sym_cxx_names.cc" and f.line == line:
                    names.add(f.name)
                    if i + 1 < len(loc.frames):
                        inlined += 1
                    else:
                        outline += 1
        seen[marker] = (truth, names, inlined, outline)
    text = "\n".join("%-16s line %3d: want %r\n%22s got %s (%d inlined, %d out-of-line locations)" % (
        m, markers[m], t, "", sorted(n), i, o) for m, (t, n, i, o) in sorted(seen.items()))
    for marker, (truth, names, inlined, outline) in sorted(seen.items()):
        check(names, "no frame at %s (line %d): the workload did not run there?\n%s" % (
            marker, markers[marker], indent(text)))
        check(names == {truth}, "the frames at %s do not all carry the symbol table's name:\n%s" % (
            marker, indent(text)))
        if marker == "SYM_CXX_PARTLY":
            check(inlined and outline, "wl::partly should be sampled both inlined and out of line:\n%s"
                  % indent(text))
        else:
            check(inlined, "%s was not inlined in the -O2 build (the test needs it inlined):\n%s" % (
                marker, indent(text)))
    lambdas = set(seen[m][0] for m in seen if m.startswith("SYM_CXX_LAMBDA"))
    check(len(lambdas) == 3, "the -O0 build should name the three lambdas apart: %s" % sorted(lambdas))


def test_relative_source_names_are_made_absolute(ctx):
    """sym_header.c compiled from its own directory as ./sym_header.c: DWARF
    names the header ./sym_header.h, relative to the compilation directory.
    The profile must name it by its absolute path (comp_dir joined, "./"
    gone), and `go tool pprof -list` run elsewhere must find and show it."""
    src = ctx.mkdtemp("src")
    for name in ("sym_header.c", "sym_header.h"):
        shutil.copyfile(os.path.join(WORKLOADS, name), os.path.join(src, name))
    cc = shutil.which("gcc") or shutil.which("cc")
    check(cc, "no C compiler (gcc) to build sym_header.c")
    _sh([cc, "-O1", "-g", "-fno-inline", "-fno-omit-frame-pointer", "-o", "sym_header", "./sym_header.c"],
        "compiling ./sym_header.c", cwd=src)
    line = _markers(os.path.join(src, "sym_header.h"), "SYM_HEADER_")["SYM_HEADER_LOOP"]
    header = os.path.join(os.path.realpath(src), "sym_header.h")

    r, d = ctx.profile([os.path.join(src, "sym_header"), "0.5"])
    path = os.path.join(d, "run.cpu.pprof")
    prof = ctx.read(path, r)
    frames = prof.frames_of("header_spin")
    check(frames, "no header_spin frame in the profile:\n%s" % prof.cum_table("samples"))
    files = sorted(set(f.file for f in frames))
    check(files == [header], "header_spin's file should be %s (the compilation directory joined with "
          "./sym_header.h); the profile says %s" % (header, files))
    main_files = sorted(set(f.file for f in prof.frames_of("main")))
    check(main_files == [os.path.join(os.path.realpath(src), "sym_header.c")],
          "main's file should be absolute too; the profile says %s" % main_files)
    listing = ctx.pprof.run(path, ["-list", "header_spin"])
    check("SYM_HEADER_LOOP" in listing and re.search(r"^\s*\S+\s+\S+\s+%d:" % line, listing, re.M),
          "go tool pprof -list header_spin, run in an empty directory, does not show the source of "
          "%s:%d:\n%s" % (header, line, indent(listing)))
