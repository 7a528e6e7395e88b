"""A program that puts itself in a Landlock sandbox (landlock_restrict_self,
as xz 5.8 does when it writes to its standard output): the sandbox denies
the stop's files (EACCES, not a kill), so the shim, which does not widen the
program's sandbox, gives the stop up at once with one line that says why,
and the program runs and ends as without the shim. A sandbox that leaves
files alone leaves the stop alone.

landlock_self burns CPU, restricts itself (strict: every file access of
Landlock's first ABI handled, no rule; open: only executing files handled;
nodirs: only making directories handled, as xz 5.8 does),
burns again and tries to make a file in its working directory, printing the
kernel's answer. Before the shim saw the restriction go in, it tried its
files at the stop and said three 'cannot create a temporary ... Permission
denied' for them.
"""

import os
import re

from common import Skip, check, image_files
from st_helpers import pprofs, prof_env, run

LINE = (r"the program's Landlock sandbox \(landlock_restrict_self\) forbids (reading /proc/self/maps|new files in "
        r"PROFILE_DIR), which the stop needs: this process writes no profile")


def _pair(ctx, how):
    argv = ["landlock_self", how]
    plain = run(ctx, argv, env=ctx.env(preload=False), cwd=ctx.mkdtemp("cwd"))
    if plain.status.is_exit(0) and plain.stdout_text.startswith("no landlock"):
        raise Skip("this kernel has no Landlock: %s" % plain.stdout_text.strip())
    check(plain.status.is_exit(0) and plain.stdout_text.startswith("sandboxed; "),
          "landlock_self %s without the shim:\n%s" % (how, plain.describe()))
    d = ctx.mkdtemp("prof")
    r = run(ctx, argv, env=prof_env(ctx, d), cwd=ctx.mkdtemp("cwd"))
    check(r.status.key() == plain.status.key() and r.out == plain.out,
          "landlock_self %s: under the shim %s, without it %s\n%s" % (how, r.status, plain.status, r.describe()))
    return r, d


def test_a_sandbox_that_forbids_the_files_means_no_files_and_one_line(ctx):
    r, d = _pair(ctx, "strict")
    check(r.stdout_text == "sandboxed; a new file: Permission denied\n", "the sandbox let the program make a "
          "file:\n%s" % r.describe())
    lines = [l for l in r.err.decode("utf-8", "replace").splitlines() if l.startswith("# profshim: ")]
    check(len(lines) == 1 and re.search(LINE, lines[0]), "want one line that names the sandbox, got %s\n%s" % (
        lines, r.describe()))
    check(pprofs(d) == [], "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))

    left = [n for n in os.listdir(d) if n.startswith(".profshim-landlock")]
    check(not left, "the shim's probe was left in PROFILE_DIR: %s" % left)


def test_a_sandbox_that_leaves_files_alone_leaves_the_stop_alone(ctx):
    r, d = _pair(ctx, "open")
    check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))
    check("Landlock" not in r.err.decode("utf-8", "replace"), "a line about a sandbox that forbids nothing of the "
          "shim's:\n%s" % r.describe())
    top = ctx.pprof.top(d + "/run.cpu.pprof", nodecount=40)
    check("before_sandbox" in top and "in_sandbox" in top, "the CPU before and in the sandbox should both be in "
          "the profile:\n%s" % top)


def test_a_sandbox_that_forbids_new_directories_keeps_no_symbol_cache_and_says_no_error(ctx):
    """xz 5.8 forbids itself new directories but not new files: the profiles
    are written whole, and the symbol cache, whose directory cannot be made,
    is only not kept (on Debian 13 the stop said 'error: symbols: cannot
    create .../.profshim-symbols: Permission denied')."""
    r, d = _pair(ctx, "nodirs")
    check(r.stdout_text == "sandboxed; a new file: made\n", "the sandbox forbade a new file:\n%s" % r.describe())
    check(pprofs(d) == image_files("run"), "PROFILE_DIR holds %s\n%s" % (pprofs(d), r.describe()))
    err = r.err.decode("utf-8", "replace")
    check("# profshim: error" not in err and "Landlock" not in err, "the stop reported a sandbox that forbids only what "
          "the cache needs:\n%s" % r.describe())
    check(not os.path.exists(os.path.join(d, ".profshim-symbols")), "the cache's directory was made in the sandbox")
    top = ctx.pprof.top(d + "/run.cpu.pprof", nodecount=40)
    check("before_sandbox" in top and "in_sandbox" in top, "the CPU before and in the sandbox should both be in "
          "the profile:\n%s" % top)
