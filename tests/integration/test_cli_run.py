"""profshim run: its help is the shim's own option table, every option
reaches the shim, the program's exit, signals and environment are its
own, and each way a run could end without a profile is one clear line."""

import glob
import os
import re
import shutil
import signal
import subprocess

from cli_helpers import REPO, profshim, shim_table
from common import KINDS, check, indent, run_program


def test_help_is_the_shim_table(ctx):
    for args in (["--help"], ["run", "--help"], ["help", "run"]):
        r = profshim(ctx, args)
        check(r.rc == 0 and not r.err, "profshim %s: %s\n%s" % (" ".join(args), r.status_text(), r.describe()))
        text = r.stdout_text
        for var, default, helptext, accepted in shim_table():
            opt = "--" + var[len("PROFILE_"):].lower().replace("_", "-")
            check(var in text and opt in text and helptext in text and accepted in text,
                  "profshim %s lacks %s (%s) or its text %r or %r from shim/config.cc:\n%s" % (
                      " ".join(args), var, opt, helptext, accepted, indent(text)))
            if not default.startswith("("):
                check("(default: %s)" % default in text, "profshim %s: %s's default %s missing:\n%s" % (
                    " ".join(args), var, default, indent(text)))
    for cmd in ("ls", "top", "diff", "report"):
        r = profshim(ctx, [cmd, "--help"])
        check(r.rc == 0 and r.stdout_text.startswith("usage: profshim %s" % cmd),
              "profshim %s --help:\n%s" % (cmd, r.describe()))


def _engines():
    """The shim's engines in the order of engine::all() (shim/engine.cc),
    each as (name, [the kinds of its other files]), read from its
    definition in shim/engine_*.cc."""
    src = open(os.path.join(REPO, "shim", "engine.cc")).read()
    m = re.search(r"kAll\[\] = \{([^}]*)\}", src)
    check(m, "cannot find the list of engines in shim/engine.cc")
    defs = {}
    for path in glob.glob(os.path.join(REPO, "shim", "engine_*.cc")):
        text = open(path).read()
        for var, body in re.findall(r"const Engine (k\w+) = \{(.*?)\n\};", text, re.S):
            defs[var] = (body, text)
    out = []
    for var in re.findall(r"&(k\w+)", m.group(1)):
        check(var in defs, "cannot find %s's definition in shim/engine_*.cc" % var)
        body, text = defs[var]
        name = re.search(r'\.name = "([^"]+)"', body)
        check(name, "%s has no .name" % var)
        also = []
        a = re.search(r"\.also = (\w+)", body)
        if a:
            arr = re.search(r"%s\[\] = \{([^}]*)\}" % a.group(1), text)
            check(arr, "cannot find %s's %s" % (var, a.group(1)))
            also = re.findall(r'"([^"]+)"', arr.group(1))
        out.append((name.group(1), also))
    return out


def _file_kinds():
    """Every kind of file an image writes: each engine's (engine.h's name
    and also) and NAME.mem.tsv, the memory rows (image.cc's too)."""
    check('"mem.tsv"' in open(os.path.join(REPO, "shim", "image.cc")).read(),
          "shim/image.cc no longer names mem.tsv")
    return [k + ".pprof" for name, also in _engines() for k in [name] + also] + ["mem.tsv"]


def test_cli_kinds_are_the_shims_engines(ctx):
    # cli/kinds.py is the one list the CLI and the tests read: a kind the
    # shim writes at every stop must be in it, in the shim's order.
    engines = [name for name, _ in _engines()]
    check(engines == KINDS, "cli/kinds.py lists %s; the shim's engines (shim/engine.cc's all()) are %s" % (
        KINDS, engines))


def test_help_and_quickstart_name_every_file(ctx):
    # What an operator is told to look for is all the shim writes: a listing
    # that stops at cpu and heap sends them looking for the rest nowhere.
    text = profshim(ctx, ["run", "--help"]).stdout_text
    quick = open(os.path.join(REPO, "docs", "QUICKSTART.md")).read()
    for kind in _file_kinds():
        check("NAME.%s" % kind in text, "profshim run --help does not name NAME.%s:\n%s" % (kind, indent(text)))
    for kind in ("%s.pprof" % k for k in KINDS):
        check(re.search(r"\.%s\b" % re.escape(kind), quick),
              "docs/QUICKSTART.md's run does not name its .%s file" % kind)
    docs = set(re.findall(r"(\S+/CONFIG\.md)", text))
    check(docs and all(os.path.isfile(p) for p in docs),
          "profshim run --help should point at a CONFIG.md that is there: %s" % sorted(docs))


# A value each variable refuses: x1, but for those that take a file or a
# program's name (x1 is one).
MALFORMED = {"PROFILE_LOG": "x1/", "PROFILE_ONLY": "x1,"}


def test_every_option_reaches_the_shim(ctx):
    # A malformed value is the shim's to refuse: the option named its
    # variable when the refusal names it.
    for var, _, _, _ in shim_table():
        if var in ("PROFILE_DIR", "PROFILE_NAME"):
            continue  # any name is accepted; -d and -n are test_wrapper's
        opt = "--" + var[len("PROFILE_"):].lower().replace("_", "-")
        bad = MALFORMED.get(var, "x1")
        for form in ([opt, bad], [opt + "=" + bad]):
            r = profshim(ctx, ["run", "-d", ctx.mkdtemp("prof")] + form + ["--", ctx.workload("hello")])
            errs = r.error_lines()
            check(r.rc == 78 and len(errs) == 1 and var in errs[0],
                  "%s should reach the shim as %s=%s and be refused:\n%s" % (" ".join(form), var, bad, r.describe()))


def _status(r):
    return r.rc


def test_run_keeps_exit_status_and_signal(ctx):
    cases = [["exit_code", "3"], ["stop_paths", "sigterm"], ["stop_paths", "segv"], ["stop_paths", "abort"],
             ["stop_paths", "return"]]
    for argv in cases:
        plain = ctx.run_plain(argv)
        d = ctx.mkdtemp("prof")
        r = profshim(ctx, ["run", "-d", d, "--", ctx.workload(argv[0])] + argv[1:])
        check(r.rc == plain.rc, "%s: plain %s, under profshim run %s\n%s" % (
            " ".join(argv), plain.status_text(), r.status_text(), r.describe()))
        check(any(f.endswith(".cpu.pprof") for f in os.listdir(d)), "%s wrote no profile:\n%s" % (
            " ".join(argv), r.describe()))


def test_run_changes_nothing_else_of_the_program(ctx):
    # The ignored signals and the environment the program starts with are
    # what a plain start gives it, SIGPIPE ignored by the caller included.
    grep = shutil.which("grep")
    env_cmd = shutil.which("env")
    for ignored in ((), (signal.SIGPIPE,)):
        base = ctx.env(preload=False)
        base.pop("LC_ALL", None)  # a Python wrapper would coerce LC_CTYPE here
        base.pop("LANG", None)
        plain = run_program([grep, "^SigIgn", "/proc/self/status"], base, ctx.mkdtemp("cwd"), ignore_signals=ignored)
        r = run_program([os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "profshim"), "run", "-d",
                         ctx.mkdtemp("prof"), "--", grep, "^SigIgn", "/proc/self/status"],
                        dict(base, PROFSHIM_LIB=ctx.lib), ctx.mkdtemp("cwd"), ignore_signals=ignored)
        check(r.rc == 0 and r.out == plain.out, "ignored signals differ (caller ignored %s): plain %r, run %r\n%s" % (
            ignored, plain.out, r.out, r.describe()))
        cwd = ctx.mkdtemp("cwd")
        base["PWD"] = cwd  # as a shell that starts either keeps it
        e_plain = run_program([env_cmd], base, cwd).stdout_text.splitlines()
        r = profshim(ctx, ["run", "-d", ctx.mkdtemp("prof"), "--", env_cmd], env=dict(base), cwd=cwd)
        ours = ("LD_PRELOAD=", "PROFILE_", "PROFSHIM_", "_=")
        e_run = [l for l in r.stdout_text.splitlines() if not l.startswith(ours)]
        e_plain = [l for l in e_plain if not l.startswith(ours)]
        check(sorted(e_run) == sorted(e_plain), "the environment differs beyond the shim's variables:\n"
              "only under run: %s\nonly plain: %s" % (sorted(set(e_run) - set(e_plain)),
                                                      sorted(set(e_plain) - set(e_run))))


def _one_error(r, rc, words, what):
    errs = r.error_lines()
    check(r.rc == rc and len(errs) == 1 and all(w in errs[0] for w in words) and r.out == b"",
          "%s: want exit %d and one error line with %s; got\n%s" % (what, rc, words, r.describe()))


def test_run_errors_are_one_clear_line(ctx):
    hello = ctx.workload("hello")
    r = profshim(ctx, ["run", "-d", ctx.mkdtemp("prof"), "--", hello], PROFSHIM_LIB="/nonexistent/libprofshim.so")
    _one_error(r, 69, ["/nonexistent/libprofshim.so", "not found"], "a missing library")
    r = profshim(ctx, ["run", "-d", ctx.mkdtemp("prof"), "--", "no-such-program-here"])
    _one_error(r, 127, ["no-such-program-here", "not found"], "a missing command")
    r = profshim(ctx, ["run", "-d", ctx.mkdtemp("prof"), "--", "./no-such-file"])
    _one_error(r, 127, ["./no-such-file"], "a missing file")
    blocker = os.path.join(ctx.mkdtemp("d"), "a-file")
    open(blocker, "w").close()
    r = profshim(ctx, ["run", "-d", os.path.join(blocker, "prof"), "--", hello])
    _one_error(r, 78, ["PROFILE_DIR", blocker], "a directory that cannot be made")
    r = profshim(ctx, ["run", "--", hello])
    _one_error(r, 64, ["-d DIR"], "run without a directory")


def _premise_no_profile(ctx, exe, what):
    """Run directly with LD_PRELOAD, exe leaves no profile: the refusal is
    about something real."""
    d = ctx.mkdtemp("prof")
    r = ctx.run([exe], PROFILE_DIR=d)
    check(r.rc == 0 and not [f for f in os.listdir(d) if f.endswith(".pprof")] if os.path.isdir(d) else True,
          "%s: expected the loader to skip the shim, but it profiled:\n%s" % (what, r.describe()))


def test_run_refuses_a_set_user_id_program(ctx):
    check(os.geteuid() == 0, "this test makes a set-user-ID copy owned by nobody: run it as root")
    d = ctx.mkdtemp("suid")
    st = os.statvfs(d)
    check(not st.f_flag & os.ST_NOSUID, "%s is on a nosuid mount: set-user-ID cannot be tested here" % d)
    os.chmod(d, 0o755)
    exe = os.path.join(d, "hello")
    shutil.copy(ctx.workload("hello"), exe)
    os.chown(exe, 65534, 65534)
    os.chmod(exe, 0o4755)
    _premise_no_profile(ctx, exe, "set-user-ID")
    r = profshim(ctx, ["run", "-d", ctx.mkdtemp("prof"), "--", exe])
    _one_error(r, 78, [exe, "set-user-ID", "LD_PRELOAD"], "a set-user-ID program")


def _go_build(ctx, src, cgo):
    check(ctx.go, "go is needed to build a Go program (golang-go)")
    d = ctx.mkdtemp("go")
    open(os.path.join(d, "main.go"), "w").write(src)
    exe = os.path.join(d, "prog")
    env = dict(ctx.env(preload=False), CGO_ENABLED="1" if cgo else "0", GOFLAGS="", GOTOOLCHAIN="local",
               GOCACHE=os.environ.get("GOCACHE") or os.path.join(d, "cache"), GO111MODULE="off")
    p = subprocess.run([ctx.go, "build", "-o", exe, "main.go"], cwd=d, env=env, capture_output=True, timeout=300)
    check(p.returncode == 0, "go build failed:\n%s" % p.stderr.decode(errors="replace"))
    return exe


def test_run_refuses_go_without_cgo_and_warns_with_it(ctx):
    exe = _go_build(ctx, 'package main\nimport "os"\nfunc main() { os.Stdout.WriteString("ran\\n") }\n', False)
    _premise_no_profile(ctx, exe, "a Go program without cgo")
    r = profshim(ctx, ["run", "-d", ctx.mkdtemp("prof"), "--", exe])
    _one_error(r, 78, [exe, "Go program", "cgo"], "a Go program without cgo")
    src = ('package main\n// #include <stdlib.h>\nimport "C"\nimport "os"\n'
           'func main() { C.free(C.malloc(16)); os.Stdout.WriteString("ran\\n") }\n')
    exe = _go_build(ctx, src, True)
    r = profshim(ctx, ["run", "-d", ctx.mkdtemp("prof"), "--", exe])
    warns = [l for l in r.stderr_lines if l.startswith("# profshim: warning:")]
    check(r.rc == 0 and r.out == b"ran\n" and len(warns) == 1 and "Go program" in warns[0],
          "a Go program with cgo runs after one warning:\n%s" % r.describe())
