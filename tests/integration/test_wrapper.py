"""scripts/profshim, the operator's wrapper, and the documentation of every
variable (CONTRACT.md, variables: every one is documented in docs/ and in
scripts/profshim --help)."""

import os
import re
import subprocess

from cli_helpers import shim_table
from common import check, indent, profile_dir_names

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WRAPPER = os.path.join(REPO, "scripts", "profshim")


def _wrap(ctx, args, **env):
    e = ctx.env(preload=False)
    e["PROFSHIM_LIB"] = ctx.lib
    e.update(env)
    return subprocess.run([WRAPPER] + args, env=e, cwd=ctx.mkdtemp("cwd"), capture_output=True, timeout=60)


def test_every_variable_in_help_and_docs(ctx):
    r = _wrap(ctx, ["--help"])
    check(r.returncode == 0, "profshim --help exited %d: %s" % (r.returncode, r.stderr.decode()))
    help_text = r.stdout.decode()
    docs = open(os.path.join(REPO, "docs", "CONFIG.md")).read()
    table = shim_table()
    for name, _, _, _ in table:
        check(name in help_text, "%s is read by the shim but missing from profshim --help:\n%s" % (
            name, indent(help_text)))
        check(name in docs, "%s is read by the shim but missing from docs/CONFIG.md" % name)


def test_docs_defaults_are_the_table_s(ctx):
    # docs/CONFIG.md's table of variables gives each default in its last
    # column; shim/config.cc's table is where the default lives.
    docs = open(os.path.join(REPO, "docs", "CONFIG.md")).read()
    for name, default, _, _ in shim_table():
        if default.startswith("("):
            continue  # no value: described, not parsed
        row = re.search(r"^\| `%s` \|.*\| ([^|]*) \|$" % name, docs, re.M)
        check(row, "docs/CONFIG.md has no table row for %s" % name)
        check(row.group(1).startswith("`%s`" % default),
              "docs/CONFIG.md gives %s the default %r; shim/config.cc's table says %r" % (
                  name, row.group(1), default))


def test_options_become_variables(ctx):
    d = os.path.join(ctx.mkdtemp("prof"), "nested")
    r = _wrap(ctx, ["-d", d, "-n", "a b", "--hz", "0", "--heap-sample", "65536", "--wait-sample", "0", "--",
                    ctx.workload("heap_hold")])
    check(r.returncode == 0, "profshim exited %d: %s" % (r.returncode, r.stderr.decode()))
    # --hz 0, --wait-sample 0: no CPU or wait profile; -n is slugged; -d is created.
    check(profile_dir_names(d) == ["a-b.heap.pprof"], "want only a-b.heap.pprof in %s, got %s" % (
        d, profile_dir_names(d)))
    prof = ctx.read(os.path.join(d, "a-b.heap.pprof"))
    check(prof.period == 65536, "--heap-sample 65536 should give period 65536, got %s" % prof.period)


def test_malformed_option_value_exits_78(ctx):
    r = _wrap(ctx, ["-d", ctx.mkdtemp("prof"), "--hz", "fast", "--", ctx.workload("hello")])
    errs = [l for l in r.stderr.decode().splitlines() if l.startswith("# profshim: error:")]
    check(r.returncode == 78 and len(errs) == 1 and r.stdout == b"",
          "want exit 78, one error line, empty stdout; got %d, %r, %r" % (r.returncode, r.stderr, r.stdout))


def test_statically_linked_program_is_refused(ctx):
    tmp = ctx.mkdtemp("static")
    src, exe = os.path.join(tmp, "s.c"), os.path.join(tmp, "s")
    open(src, "w").write('#include <stdio.h>\nint main(void){puts("ran");return 0;}\n')
    c = subprocess.run(["gcc", "-static", "-o", exe, src], capture_output=True)
    check(c.returncode == 0, "cannot build a static test program: %s" % c.stderr.decode())
    d = ctx.mkdtemp("prof")
    r = _wrap(ctx, ["-d", d, "--", exe])
    errs = [l for l in r.stderr.decode().splitlines() if l.startswith("# profshim: error:")]
    check(r.returncode == 78 and len(errs) == 1 and "statically linked" in errs[0] and r.stdout == b"",
          "a static binary must be refused with 78 and one line; got %d %r %r" % (r.returncode, r.stderr, r.stdout))
    # Without -d the wrapper is inert and runs it as it is.
    r = _wrap(ctx, ["--", exe])
    check(r.returncode == 0 and r.stdout == b"ran\n" and r.stderr == b"",
          "inert wrapper must just run the program; got %d %r %r" % (r.returncode, r.stdout, r.stderr))
