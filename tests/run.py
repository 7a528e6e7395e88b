#!/usr/bin/env python3
"""profshim test runner (plain python3, no pytest).

Runs
  (a) every unit binary BUILD/tests/unit/*_test: each prints "PASS case" /
      "FAIL case" lines and a final "N passed, N failed"; each case counts;
  (b) every integration test: each function test_* in
      tests/integration/test_*.py, called in a process of its own with a Ctx
      (see tests/integration/common.py: the build dir, a fresh temp dir, and
      helpers), under a hard timeout.
Prints "PASS name" or "FAIL name: reason" per test and, as the very last line,
"N passed, N failed". Exit status 1 if anything failed (or nothing ran).

usage: tests/run.py [--build DIR] [-k SUBSTRING] [--timeout SECONDS] [--keep] [--list]
"""

import argparse
import importlib.util
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
INTEGRATION = os.path.join(HERE, "integration")
UNIT_SRC = os.path.join(HERE, "unit")

DEFAULT_TIMEOUT = 120


sys.path.insert(0, INTEGRATION)
from common import Skip, communicate_bounded, find_go  # noqa: E402  (one place for each)


def indent_reason(reason):
    lines = reason.rstrip().split("\n") or [""]
    return "\n".join([lines[0]] + ["    " + l for l in lines[1:]])


class Tally:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.failures = []
        self.skipped = []

    def ok(self, name, extra=""):
        self.passed += 1
        print("PASS %s%s" % (name, extra), flush=True)

    def skip(self, name, reason):
        # Neither passed nor failed: said, with why, never counted as a pass.
        self.skipped.append(name)
        print("SKIP %s: %s" % (name, indent_reason(reason)), flush=True)

    def bad(self, name, reason):
        self.failed += 1
        self.failures.append(name)
        print("FAIL %s: %s" % (name, indent_reason(reason)), flush=True)


# --------------------------------------------------------------------------
# Unit tests

FINAL_RE = re.compile(r"^(\d+) passed, (\d+) failed$")
CASE_RE = re.compile(r"^(PASS|FAIL) (\S+)")


def run_units(build, filt, timeout, tally, tmp, emu=(), skip=None):
    """emu: the command that runs a binary of another machine (tests/arm64/run.py);
    skip: {binary: why} not run there."""
    unit_dir = os.path.join(build, "tests", "unit")
    sources = sorted(f[:-3] for f in os.listdir(UNIT_SRC) if f.endswith("_test.cc")) \
        if os.path.isdir(UNIT_SRC) else []
    bins = sorted(f for f in os.listdir(unit_dir)
                  if f.endswith("_test") and os.access(os.path.join(unit_dir, f), os.X_OK)) \
        if os.path.isdir(unit_dir) else []
    for name in sources:
        if name not in bins and (not filt or filt in "unit/" + name):
            tally.bad("unit/" + name, "tests/unit/%s.cc has no binary %s/%s (run `make test`)"
                      % (name, unit_dir, name))
    for name in bins:
        prefix = "unit/" + name
        if skip and name in skip:
            if not filt or filt in prefix:
                tally.skip(prefix, skip[name])
            continue
        path = os.path.join(unit_dir, name)
        cwd = tempfile.mkdtemp(prefix="unit-", dir=tmp)
        try:
            p = subprocess.run(list(emu) + [path], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired as e:
            if not filt or filt in prefix:
                tally.bad(prefix, "timed out after %d s\n%s" % (timeout, (e.stdout or b"").decode(errors="replace")[-2000:]))
            continue
        out = p.stdout.decode("utf-8", "replace").splitlines()
        err = p.stderr.decode("utf-8", "replace")
        final = FINAL_RE.match(out[-1].strip()) if out else None
        cases = [CASE_RE.match(l) for l in out]
        cases = [m for m in cases if m]
        selected = [m for m in cases if not filt or filt in "%s.%s" % (prefix, m.group(2))]
        if final is None:
            if not filt or filt in prefix:
                tally.bad(prefix, "no final 'N passed, N failed' line (status %d)\nstdout:\n%s\nstderr:\n%s"
                          % (p.returncode, "\n".join(out[-30:]), err[-3000:]))
            continue
        npass, nfail = int(final.group(1)), int(final.group(2))
        if not filt and (npass + nfail != len(cases)):
            tally.bad(prefix, "final line says %d passed, %d failed but %d PASS/FAIL lines were printed"
                      % (npass, nfail, len(cases)))
        for m in selected:
            name = "%s.%s" % (prefix, m.group(2))
            if m.group(1) == "PASS":
                tally.ok(name)
            else:
                tally.bad(name, "unit test failed:\n" + err[-3000:])
        if not filt and p.returncode != (1 if nfail else 0):
            tally.bad(prefix, "exit status %d does not match '%d passed, %d failed' (crash?)\nstderr:\n%s"
                      % (p.returncode, npass, nfail, err[-3000:]))


# --------------------------------------------------------------------------
# Integration tests


def load_module(path):
    name = "itest_" + os.path.splitext(os.path.basename(path))[0]
    if INTEGRATION not in sys.path:
        sys.path.insert(0, INTEGRATION)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def discover():
    tests = []
    if not os.path.isdir(INTEGRATION):
        return tests, []
    errors = []
    for fn in sorted(os.listdir(INTEGRATION)):
        if not (fn.startswith("test_") and fn.endswith(".py")):
            continue
        path = os.path.join(INTEGRATION, fn)
        try:
            mod = load_module(path)
        except Exception:
            errors.append((fn, traceback.format_exc()))
            continue
        funcs = [(n, f) for n, f in vars(mod).items()
                 if n.startswith("test_") and inspect.isfunction(f) and f.__module__ == mod.__name__]
        funcs.sort(key=lambda nf: nf[1].__code__.co_firstlineno)
        for n, f in funcs:
            tests.append((fn, n, getattr(f, "hang_guard", None)))
    return tests, errors


def child_main(args):
    """Runs one integration test in this (child) process; writes a JSON result."""
    fn, func = args.child.split("::")
    result = {"ok": False, "reason": ""}
    try:
        mod = load_module(os.path.join(INTEGRATION, fn))
        import common  # noqa: E402 (on sys.path after load_module)
        ctx = common.Ctx(args.build, args.tmp, os.environ.get("PROFSHIM_GO") or None)
        getattr(mod, func)(ctx)
        result["ok"] = True
    except Skip as e:
        result["skip"] = str(e)
    except AssertionError as e:
        result["reason"] = str(e) or "assertion failed:\n" + traceback.format_exc()
    except Exception:
        result["reason"] = "error:\n" + traceback.format_exc()
    with open(args.result, "w") as f:
        json.dump(result, f)
    return 0


def mounts_under(path):
    out = []
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                mp = line.split()[1].replace("\\040", " ")
                if mp == path or mp.startswith(path.rstrip("/") + "/"):
                    out.append(mp)
    except OSError:
        pass
    return sorted(out, key=len, reverse=True)


def cleanup_mounts(path):
    for mp in mounts_under(path):
        subprocess.run(["umount", "-l", mp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_integration(build, filt, timeout, tally, tmp):
    tests, errors = discover()
    for fn, tb in errors:
        if not filt or filt in fn:
            tally.bad("integration/" + fn, "cannot import:\n" + tb)
    for fn, func, guard in tests:
        name = "%s::%s" % (fn[:-3], func)
        if filt and filt not in name:
            continue
        # A test may need a longer hang guard than the default (one that
        # counts many runs, each bounded itself): its function's hang_guard.
        limit = max(timeout, guard or 0)
        started = time.monotonic()
        ttmp = tempfile.mkdtemp(prefix="%s-" % func, dir=tmp)
        result_file = os.path.join(ttmp, ".result.json")
        argv = [sys.executable, os.path.abspath(__file__), "--build", build, "--child",
                "%s::%s" % (fn, func), "--tmp", ttmp, "--result", result_file]
        p = subprocess.Popen(argv, cwd=ttmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        out, _, timed_out = communicate_bounded(p, limit)
        cleanup_mounts(ttmp)
        res = None
        if os.path.exists(result_file):
            try:
                with open(result_file) as f:
                    res = json.load(f)
            except ValueError:
                res = None
        extra_out = out.decode("utf-8", "replace").strip()
        took = " (%.1f s)" % (time.monotonic() - started)
        if timed_out:
            tally.bad(name, "timed out after %d s (hard limit)%s" % (
                limit, ("\noutput:\n" + extra_out[-2000:]) if extra_out else ""))
        elif res is None:
            tally.bad(name, "test process died (status %d) without a result:\n%s" % (p.returncode, extra_out[-3000:]))
        elif res.get("skip"):
            tally.skip(name, res["skip"])
        elif res["ok"]:
            tally.ok(name, took)
        else:
            tally.bad(name, res["reason"] + took)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("-k", dest="filter", default="", help="run only tests whose name contains this")
    ap.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, help="hard limit per test (s)")
    ap.add_argument("--only", choices=("unit", "integration"), help="run only the unit or the integration tests")
    ap.add_argument("--keep", action="store_true", help="keep the temp dirs")
    ap.add_argument("--list", action="store_true", help="list the integration tests and exit")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    # Started in the background by a non-interactive shell (`make test &`,
    # nohup), the run inherits SIGINT and SIGQUIT ignored, and so would every
    # program it starts, plain runs included: the fatal-signal tests compare
    # with a plain run that must die of them. A handler here becomes the
    # default in each program (exec resets handled signals, not ignored ones).
    for sig in (signal.SIGINT, signal.SIGQUIT):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, lambda *_: sys.exit(130))

    if args.child:
        return child_main(args)

    if args.list:
        tests, errors = discover()
        for fn, func, _ in tests:
            print("%s::%s" % (fn[:-3], func))
        for fn, tb in errors:
            print("cannot import %s:\n%s" % (fn, tb))
        return 0

    tally = Tally()
    tmp = tempfile.mkdtemp(prefix="profshim-tests-")
    # go tool pprof reads the profiles; it needs a writable HOME and GOCACHE.
    if not os.environ.get("HOME") or not os.access(os.environ["HOME"], os.W_OK):
        os.environ["HOME"] = os.path.join(tmp, "home")
        os.makedirs(os.environ["HOME"], exist_ok=True)
    if not os.environ.get("GOCACHE"):
        os.environ["GOCACHE"] = os.path.join(tmp, "gocache")
    go = find_go()
    if go:
        os.environ["PROFSHIM_GO"] = go
    else:
        os.environ.pop("PROFSHIM_GO", None)
        tally.bad("harness.go_tool_pprof", "go not found (`go` on PATH or /usr/lib/go/bin/go): "
                  "install golang-go; every profile check needs `go tool pprof`")
    try:
        if args.only != "integration":
            run_units(args.build, args.filter, args.timeout, tally, tmp)
        if args.only != "unit":
            run_integration(args.build, args.filter, args.timeout, tally, tmp)
    finally:
        cleanup_mounts(tmp)
        release_tmp(tmp, args.keep)
    return close_tally(tally, args.filter)


def release_tmp(tmp, keep):
    """The run's temporary directories: removed, or kept and named (--keep)."""
    if keep:
        print("# temp dirs kept in %s" % tmp, file=sys.stderr)
    else:
        shutil.rmtree(tmp, ignore_errors=True)


def close_tally(tally, filter_text, took=None):
    """The run's last lines, closing with "N passed, N failed"; the exit
    status. A run in which nothing ran is a failure."""
    if tally.passed + tally.failed == 0:
        tally.bad("harness", "no tests ran (filter %r?)" % filter_text)
    if tally.failures:
        print("# failed: %s" % " ".join(tally.failures), file=sys.stderr, flush=True)
    if tally.skipped:
        print("# skipped (not run here, see SKIP lines): %s" % " ".join(tally.skipped), flush=True)
    if took is not None:
        print("# took %.0f s" % took, flush=True)
    print("%d passed, %d failed" % (tally.passed, tally.failed), flush=True)
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())
