"""Helpers for the tests of the profshim command (scripts/profshim and
cli/): running it, its option table, and a small process tree to read."""

import os
import re
import subprocess

from common import KINDS, check, run_program

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFSHIM = os.path.join(REPO, "scripts", "profshim")
CLI = os.path.join(REPO, "cli")


def profshim(ctx, args, cwd=None, exe=PROFSHIM, env=None, timeout=120, **extra):
    """Runs the command (the build's library) and returns a Result."""
    e = ctx.env(preload=False) if env is None else env
    e.setdefault("PROFSHIM_LIB", ctx.lib)
    e.update(extra)
    return run_program([exe] + list(args), e, cwd or ctx.mkdtemp("cwd"), timeout=timeout)


def shim_table():
    """[(VARIABLE, default, help, accepted)] read from shim/config.cc's table
    itself (C string literals joined; each row's strings come before its
    parser), not from the build's dump of it."""
    src = open(os.path.join(REPO, "shim", "config.cc")).read()
    body = src[src.index("const Var kVars[]"):]
    body = body[:body.index("\n};")]
    # The rows of a build without some part (#else: arm64's jemalloc has no
    # profiling) are not this build's.
    body = re.sub(r"\n#else\n.*?\n#endif", "\n", body, flags=re.S)
    rows = []
    for m in re.finditer(r"\{((?:\s*\"(?:[^\"\\]|\\.)*\"\s*,?)+)\s*\[\]", body):
        fields, cur = [], None
        for part in re.finditer(r"\"((?:[^\"\\]|\\.)*)\"|(,)", m.group(1)):
            if part.group(2):
                fields.append(cur)
                cur = None
            else:
                cur = (cur or "") + part.group(1)
        if cur is not None:
            fields.append(cur)
        rows.append(tuple(fields))
    check(len(rows) >= 5 and all(len(r) == 4 for r in rows), "cannot read shim/config.cc's table: %s" % rows)
    return rows


def tree(ctx, name="tree"):
    """A real fork/exec tree under `profshim run`: sh runs fork_exec fork
    (a parent and its forked child, which writes its own files:
    PROFILE_FORKS=own) and fork_exec exec (an image before and after exec).
    Returns (result, dir, {pid: [stem, ...]} from the
    summary lines of the images, which `run` appends to DIR/profshim.log)."""
    d = ctx.mkdtemp("prof")
    fe = ctx.workload("fork_exec")
    r = profshim(ctx, ["run", "-d", d, "-n", name, "--", "/bin/sh", "-c", "%s fork && %s exec" % (fe, fe)],
                 PROFILE_FORKS="own")
    check(r.rc == 0, "the tree failed:\n%s" % r.describe())
    stems = {}
    log = os.path.join(d, "profshim.log")
    check(os.path.isfile(log), "profshim run left no %s:\n%s" % (log, r.describe()))
    for line in open(log).read().splitlines():
        m = re.search(r"\| pid (\d+) \(parent", line)
        files = re.findall(r"(\S+)\.(?:%s)\.pprof" % "|".join(KINDS), line)
        check(m and files, "summary line without pid or files: %s" % line)
        stems.setdefault(int(m.group(1)), []).append(os.path.basename(files[0]))
    return r, d, stems


def ls_rows(text):
    """[(NAME, PROGRAM, PID, line)] for each image row of `profshim ls`."""
    out = []
    for line in text.splitlines():
        if line.startswith("  ") and not line.strip().startswith("NAME "):
            v = line.split()
            out.append((v[0], v[1], v[2], line))
    return out


def subprocess_ok(argv, **kw):
    p = subprocess.run(argv, capture_output=True, **kw)
    check(p.returncode == 0, "%s failed (%d):\n%s%s" % (" ".join(argv), p.returncode,
                                                        p.stdout.decode(errors="replace")[-2000:],
                                                        p.stderr.decode(errors="replace")[-2000:]))
    return p.stdout.decode(errors="replace")


_CELL = re.compile(r"[-+±]?[\d.]+(?:%| (?:s|ms|us|B|KiB|MiB))?")
_VERDICT = re.compile(r"^(.*\S)\s+(CHANGED|noise)\s+(\S.*)$")


def diff_table(text):
    """{kind: {function: (verdict, cells)}} of `profshim diff`'s output:
    verdict CHANGED or noise; cells the 8 figures (flat base, new, change,
    ±3σ, then cum's) as text ("49.5%", "+12 ms", "±1.0 MiB")."""
    out, kind = {}, None
    for line in text.splitlines():
        if line.startswith("== "):
            kind = line[3:].split(":")[0]
            out[kind] = {}
            continue
        m = _VERDICT.match(line)
        if m and kind is not None:
            cells = _CELL.findall(m.group(1))
            check(len(cells) == 8, "a diff row of %d figures, not 8: %r" % (len(cells), line))
            out[kind][m.group(3)] = (m.group(2), cells)
    return out


def figure(cell):
    """A cell's number in its unit's base (%, s, B): "+12 ms" -> 0.012."""
    m = re.match(r"^[+±]?(-?[\d.]+)(?:%| (s|ms|us|B|KiB|MiB))?$", cell.replace("±", "").replace("+", ""))
    check(m, "not a figure: %r" % cell)
    scale = {None: 1, "s": 1, "ms": 1e-3, "us": 1e-6, "B": 1, "KiB": 1024, "MiB": 1 << 20}[m.group(2)]
    return float(m.group(1)) * scale
