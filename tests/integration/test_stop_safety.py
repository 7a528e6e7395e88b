"""The stop never changes what the program does, and the files are safe where
services write them (issue 10, one test per item).

SPEC "When it writes": "A stop that cannot finish writing within a bound
gives up, says so on stderr, and lets the process end as it would have. The
shim never hangs a process, and never turns a clean exit into a crash. The
process's exit status, or the signal it died of, is exactly what it would have
been without the shim." SPEC "Errors": "Teardown is subordinate". SPEC
"Files": "Files and directories the shim creates are never group- or
world-writable, whatever the umask; running as root, a directory owned by
another non-root user is refused", "no two images ever overwrite each other".

Where an item is about behaviour, the same program runs without the shim
first and the run under it must match: status (the raw wait status), stdout,
the program's own stderr, its descriptors. The workload is
tests/workloads/stop_safety.c.
"""

import os
import re
import resource
import signal
import subprocess
import tempfile
import time

from common import ERROR_PREFIX, SUMMARY_PREFIX, check, clip, fail, indent
from st_helpers import Status, gzip_ok, pprofs, prof_env, run, start

SHIM = "# profshim: "


def _shim_lines(r):
    return [l for l in r.stderr_lines if l.startswith(SHIM)]


def _own_stderr(r):
    return [l for l in r.stderr_lines if not l.startswith(SHIM)]


def _temporaries(d):
    """What the shim may leave only while writing: hidden .NAME.tmp.* files
    (and its setup probe)."""
    return sorted(n for n in os.listdir(d) if ".tmp." in n) if os.path.isdir(d) else []


def _same_as_plain(plain, r, what, stdout=True, stderr=True):
    """The run under the shim ended as the plain one did: raw wait status,
    stdout, and the program's own stderr lines."""
    check(r.status.key() == plain.status.key(), "%s: %s under the shim, %s without it\n%s" % (
        what, r.status, plain.status, r.describe()))
    if stdout:
        check(r.out == plain.out, "%s: stdout differs from the plain run\nplain:\n%s\nshim:\n%s" % (
            what, indent(clip(plain.out) or "(empty)"), indent(clip(r.out) or "(empty)")))
    if stderr:
        check(_own_stderr(r) == plain.stderr_lines, "%s: the program's own stderr differs from the plain "
              "run\nplain:\n%s\nshim (its lines removed):\n%s" % (
                  what, indent("\n".join(plain.stderr_lines) or "(empty)"),
                  indent("\n".join(_own_stderr(r)) or "(empty)")))


def _written(line):
    """The files a line says were written: the paths after its "wrote"
    (an error's text may mention a name it did not write)."""
    out = []
    toks = line.split()
    for i, t in enumerate(toks):
        if t == "wrote" and (i == 0 or toks[i - 1] in ("profshim:", "|") or toks[i - 1].endswith(";")):
            for p in toks[i + 1:]:
                if not p.endswith(".pprof"):
                    break
                out.append(os.path.normpath(p))
    return out


def _files_as_said(r, d, what):
    """Every file a line names exists and is a whole profile; PROFILE_DIR
    holds nothing else (no temporary, no file left unnamed)."""
    named = []
    for line in _shim_lines(r):
        named += _written(line)
    for p in named:
        check(os.path.isfile(p), "%s: the line names %s, which does not exist\n%s" % (what, p, r.describe()))
        gzip_ok(p)
    have = sorted(os.path.join(d, n) for n in os.listdir(d)) if os.path.isdir(d) else []
    check(sorted(set(named)) == have, "%s: PROFILE_DIR holds %s but the lines name %s\n%s" % (
        what, [os.path.basename(p) for p in have], [os.path.basename(p) for p in named], r.describe()))
    return named


# --------------------------------------------------------------------------
# 1. Out of memory in the stop


def test_out_of_memory_in_the_stop(ctx):
    """Item 1: under RLIMIT_AS a program allocates until malloc returns NULL,
    then exits 0 (exit() and return from main). The stop meets the exhausted
    heap at every point (no stack for it, a thread whose allocator state
    cannot be made, a failed allocation in the dump, the symbolizer, gzip):
    the program's 0 and stdout stay, one '# profshim: ' line says what was
    written or why not, no libstdc++ 'terminate called', no temporary. At
    least one run must have met the out-of-memory path in the stop."""
    limit = 400000 * 1024
    # KiB of address space the program hands back just before its end: how
    # far the stop gets before it runs out.
    reserves = [0, 2500, 3000, 4000, 6000, 12000, 32000]
    oom_lines = 0
    for how in ("exit", "return"):
        argv = ["stop_safety", "oom", how]
        plain = run(ctx, argv + ["0"], rlimits=[(resource.RLIMIT_AS, limit)])
        check(plain.status.is_exit(0) and plain.stdout_text == "oom: exhausted\n",
              "baseline: %s" % plain.describe())
        for kb in reserves:
            d = ctx.mkdtemp("prof")
            r = run(ctx, argv + [str(kb)], env=prof_env(ctx, d), rlimits=[(resource.RLIMIT_AS, limit)])
            what = "oom %s, %d KiB handed back" % (how, kb)
            _same_as_plain(plain, r, what)
            lines = _shim_lines(r)
            check(len(lines) == 1, "%s: want one '# profshim: ' line, got %d\n%s" % (what, len(lines), r.describe()))
            check("terminate called" not in r.err.decode(errors="replace"), "%s: libstdc++ terminate\n%s" % (
                what, r.describe()))
            _files_as_said(r, d, what)
            if "out of memory" in lines[0] or "insufficient memory" in lines[0] or "crashed" in lines[0]:
                check(lines[0].startswith(ERROR_PREFIX), "%s: a failure must be an error line: %r" % (what, lines[0]))
                oom_lines += 1
    check(oom_lines >= 2, "only %d runs met a failure in the stop: the test no longer exercises it "
          "(the stop needs less memory now? lower the reserves)" % oom_lines)


# --------------------------------------------------------------------------
# 3. The symbolizer opens only regular files, never blocking


def _sh(argv, what):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    check(p.returncode == 0, "%s failed: %s\n%s" % (what, " ".join(argv), indent(clip(p.stdout))))
    return p.stdout.decode(errors="replace")


def _fifo_debuglink_case(ctx, where):
    d = ctx.mkdtemp("bin")
    exe = os.path.join(d, "prog")
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "workloads", "sym_stripped.c")
    _sh(["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-fno-inline", "-o", exe, src], "gcc")
    # Debug info moved out, the binary pointing at it by .gnu_debuglink (its
    # CRC taken from the real file), then the file replaced by a FIFO that
    # nobody ever writes: open(O_RDONLY) of it blocks forever.
    debug = os.path.join(d, "prog.debug")
    _sh(["objcopy", "--only-keep-debug", exe, debug], "objcopy --only-keep-debug")
    _sh(["strip", "--strip-debug", exe], "strip --strip-debug")
    _sh(["objcopy", "--add-gnu-debuglink=" + debug, exe], "objcopy --add-gnu-debuglink")
    os.unlink(debug)
    fifo = os.path.join(d, where, "prog.debug")
    os.makedirs(os.path.dirname(fifo), exist_ok=True)
    os.mkfifo(fifo)
    plain = run(ctx, [exe, "0.3"])
    pd = ctx.mkdtemp("prof")
    r = run(ctx, [exe, "0.3"], env=prof_env(ctx, pd, PROFILE_STOP_TIMEOUT="8"))
    what = "debuglink FIFO at %s" % os.path.join(where, "prog.debug")
    _same_as_plain(plain, r, what, stdout=False)
    lines = _shim_lines(r)
    check(len(lines) == 1 and not lines[0].startswith(ERROR_PREFIX),
          "%s: want one summary line (the FIFO skipped, not waited on until the bound)\n%s" % (what, r.describe()))
    m = re.search(r"\| stop (\d+) ms", lines[0])
    check(m and int(m.group(1)) < 4000, "%s: the stop took %s ms\n%s" % (what, m and m.group(1), r.describe()))
    files = _files_as_said(r, pd, what)
    check(sorted(os.path.basename(p) for p in files) == ["run.cpu.pprof", "run.heap.pprof"],
          "%s: want both profiles, got %s" % (what, files))
    prof = ctx.read(os.path.join(pd, "run.cpu.pprof"), r)
    # The symbol table stayed in the binary: names without the debug file.
    check(prof.has_function("sym_exported_hot"), "%s: sym_exported_hot not named\n%s" % (
        what, prof.cum_table("samples")))


def test_debuglink_fifo_beside_the_binary(ctx):
    """Item 3: a stripped binary whose .gnu_debuglink names a FIFO planted
    beside it (DIR/LINK, the first place searched): the symbolizer skips it
    at once; both profiles are written, named from the symbol table."""
    _fifo_debuglink_case(ctx, ".")


def test_debuglink_fifo_in_dot_debug(ctx):
    """Item 3: the same FIFO in DIR/.debug/LINK, the second place searched."""
    _fifo_debuglink_case(ctx, ".debug")
