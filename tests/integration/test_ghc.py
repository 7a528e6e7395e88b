"""Haskell programs compiled by GHC, named as a Haskell developer reads them.

tests/workloads/hs/hot.hs, built here with ghc when there is one (GHC is
large: scripts/install-deps does not install it; `apt-get install ghc`
does): most of its CPU in a strict fib, the rest in base's show and the
text package. GHC's symbols are Z-encoded labels ("Main_zdwfib_info",
"base_GHCziShow_zdwitoszq_info"); the profile must say "Main.$wfib" and
"base:GHC.Show.$witos'", and never a label GHC wrote. The RTS's own
functions (C, and Cmm's stg_*) keep their names.

What is not checked, because it is not there: callers of Haskell code.
GHC's code keeps its stack in a register of its own, with no frame
pointer and no unwind information, so a sample in it has its leaf alone.
"""

import os
import re
import shutil
import subprocess

from common import Skip, check, clip, image_files, indent
from st_helpers import pprofs, prof_env, run, workload_source

FIB_N = "35"

# A label as GHC writes one, past the decoding: a function of the RTS's
# (stg_*) is allowed its own name.
LABEL_RE = re.compile(r"^(?!stg_)\w+_(info|entry|slow|fast|closure|con_info|con_entry)$")
# "base:GHC.Show.$witos'", "text-1.2.5.0:Data.Text.concat".
LIBRARY_RE = re.compile(r"^[A-Za-z][\w-]*:[A-Z][\w'.]*\.\S")


def _build(ctx, *flags):
    ghc = shutil.which("ghc")
    if not ghc:
        raise Skip("ghc not found (GHC is not among scripts/install-deps' packages: apt-get install ghc)")
    d = ctx.mkdtemp("ghc")
    shutil.copy(workload_source(os.path.join("hs", "hot.hs")), os.path.join(d, "hot.hs"))
    exe = os.path.join(d, "hot")
    p = subprocess.run([ghc, "-O2", "-outputdir", os.path.join(d, "o")] + list(flags) + ["-o", exe, "hot.hs"],
                       cwd=d, env=ctx.env(preload=False, HOME=d), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=300)
    if p.returncode != 0 and "-dynamic" in flags:
        raise Skip("ghc -dynamic failed (no shared Haskell libraries?):\n%s" % indent(clip(p.stdout)))
    check(p.returncode == 0, "ghc %s failed:\n%s" % (" ".join(flags), indent(clip(p.stdout))))
    return exe


def _profiled(ctx, exe, d, name):
    plain = run(ctx, [exe, FIB_N], env=ctx.env(preload=False))
    check(plain.status.is_exit(0) and len(plain.stdout_text.split()) == 2,
          "the plain run must print two numbers and exit 0\n%s" % plain.describe())
    r = run(ctx, [exe, FIB_N], env=prof_env(ctx, d, name=name, PROFILE_CPU_HZ=1000))
    check(r.status.is_exit(0) and r.stdout_text == plain.stdout_text,
          "%s: under the shim the program ended otherwise or printed otherwise\n%s" % (name, r.describe()))
    return r, ctx.read(os.path.join(d, name + ".cpu.pprof"), r)


def _check_haskell_names(prof, r, what):
    cpu = prof.total("cpu")
    table = prof.cum_table("cpu")
    fib = prof.flat("Main.$wfib", "cpu") + prof.flat("Main.fib", "cpu")
    check(fib > 0.25 * cpu, "%s: Main.$wfib (or Main.fib) holds %d of %d ns of CPU, less than a quarter\n%s\n%s"
          % (what, fib, cpu, table, r.describe()))
    names = prof.function_names()
    raw = sorted(n for n in names if LABEL_RE.match(n))
    check(not raw, "%s: GHC's labels left as GHC wrote them: %s\n%s" % (what, raw[:10], table))
    library = sorted(n for n in names if LIBRARY_RE.match(n))
    check(library, "%s: no function of a Haskell library named as unit:Module.name among %s\n%s"
          % (what, sorted(names), table))


def test_ghc_program_named_in_haskell(ctx):
    """hot.hs compiled the default way (the RTS and the libraries linked
    into the program), profiled three times into one directory: each
    time Main.$wfib has most of the CPU, a library's code is named
    unit:Module.name, and no frame is a GHC label. The second and third
    runs name from the symbol cache, which holds the Haskell names."""
    exe = _build(ctx)
    d = ctx.mkdtemp("prof")
    cached = []
    for i in range(3):
        name = "run%d" % i
        r, prof = _profiled(ctx, exe, d, name)
        _check_haskell_names(prof, r, name)
        m = re.search(r"\| (\d+) of (\d+) addresses from the symbol cache", "\n".join(r.stderr_lines))
        check(m, "%s: no symbol cache count in the line\n%s" % (name, r.describe()))
        cached.append(int(m.group(1)))
    check(cached[0] == 0 and cached[2] > 0, "addresses from the symbol cache in the three runs: %s" % cached)


def test_ghc_dynamic_program_named_in_haskell(ctx):
    """hot.hs compiled with -dynamic: its own code in the executable, the
    libraries' in libHS*.so, the RTS in libHSrts. Main.$wfib has most of
    the CPU, the libraries' code is named unit:Module.name, and no frame
    is a GHC label."""
    exe = _build(ctx, "-dynamic")
    d = ctx.mkdtemp("prof")
    r, prof = _profiled(ctx, exe, d, "run")
    _check_haskell_names(prof, r, "-dynamic")
    check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s" % pprofs(d))
