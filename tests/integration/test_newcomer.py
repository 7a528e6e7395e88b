"""A newcomer's path (issue 17): relative paths that stay put through a child
that changes directory, one line for what would otherwise be silent (an exec
into a statically linked program, a misspelt variable)."""

import os
import subprocess

from common import check, files_in
from st_helpers import compile_c, run


def _sh(ctx):
    return "/bin/sh"


def test_relative_dir_and_preload_through_a_child_that_cds(ctx):
    """PROFILE_DIR=out and LD_PRELOAD=<relative path to the shim>, then
    `sh -c 'cd sub && exec prog'`: every image is profiled (no ld.so
    "cannot be preloaded") and every file lands in the one directory out/
    (not sub/out/)."""
    cwd = ctx.mkdtemp("cwd")
    os.makedirs(os.path.join(cwd, "sub"))
    env = ctx.env(preload=False, PROFILE_DIR="out")
    env["LD_PRELOAD"] = os.path.relpath(ctx.lib, cwd)
    hello = ctx.workload("hello")
    r = run(ctx, [_sh(ctx), "-c", "cd sub && %s && true" % hello], env=env, cwd=cwd)
    check(r.status.is_exit(0), "%s\n%s" % (r.status, r.describe()))
    check("cannot be preloaded" not in "\n".join(r.stderr_lines), "a child lost the shim\n%s" % r.describe())
    check(not os.path.exists(os.path.join(cwd, "sub", "out")), "files landed in sub/out: %s" % (
        files_in(os.path.join(cwd, "sub", "out"))))
    got = files_in(os.path.join(cwd, "out"))
    check(any(".hello." in f for f in got) and "run.cpu.pprof" in got,
          "out/ should hold the shell's and hello's profiles, holds %s\n%s" % (got, r.describe()))


def test_exec_into_a_static_binary_says_so(ctx):
    """A wrapper script that execs a statically linked program: one line
    names it (the shim cannot enter it), instead of leaving only the
    wrapper's empty profile in silence."""
    tmp = ctx.mkdtemp("static")
    src = os.path.join(tmp, "s.c")
    with open(src, "w") as f:
        f.write("int main(void) { return 5; }\n")
    exe = os.path.join(tmp, "static_prog")
    c = subprocess.run(["gcc", "-static", "-o", exe, src], capture_output=True)
    check(c.returncode == 0, "cannot build a static test program: %s" % c.stderr.decode())
    d = ctx.mkdtemp("prof")
    r = run(ctx, [_sh(ctx), "-c", "exec %s" % exe], env=ctx.env(PROFILE_DIR=d))
    check(r.status.is_exit(5), "%s\n%s" % (r.status, r.describe()))
    lines = [l for l in r.stderr_lines if "statically linked" in l]
    check(len(lines) == 1 and exe in lines[0] and lines[0].startswith("# profshim: "),
          "want one line naming %s\n%s" % (exe, r.describe()))


def test_unknown_profile_variable_is_named_once(ctx):
    """PROFILE_CPU_HERTZ=1000 (a misspelling): one line names it, from the
    root image only (a build's hundreds of images do not repeat it); the run
    goes on with the defaults."""
    d = ctx.mkdtemp("prof")
    r = run(ctx, [_sh(ctx), "-c", "%s; %s" % (ctx.workload("hello"), ctx.workload("hello"))],
            env=ctx.env(PROFILE_DIR=d, PROFILE_CPU_HERTZ="1000"))
    check(r.status.is_exit(0), "%s\n%s" % (r.status, r.describe()))
    lines = [l for l in r.stderr_lines if "PROFILE_CPU_HERTZ" in l]
    check(len(lines) == 1 and lines[0].startswith("# profshim: "), "want one line naming the variable\n%s" % (
        r.describe()))
