#!/usr/bin/env python3
"""stopmem: what profiling adds to a process's peak RSS, and how much of it
the stop adds (a few minutes; `make bench` is the full benchmark).

For each workload, runs plain, inert (LD_PRELOAD, no PROFILE_DIR), active
(PROFILE_DIR) and cpu-only (active with PROFILE_HEAP_SAMPLE=0), each through
tests/bench/runner.c so that ru_maxrss is the program's own (runner.c says
why not from Python). For the profiled runs the summary line's "peak rss
P MiB (R MiB before the stop)" splits the total: R - inert is what the run
adds (the heap profile's jemalloc, the engines' tables), P - R what the stop
adds (symbolization, encoding). Every run is done ROUNDS times; the median
is printed, in MiB.

usage: tests/bench/stopmem.py [--build DIR] [--rounds N] [--only NAME,...] [--all] [--keep-cache]
  Workloads: xz (xz -6 -T1 on 2 MB of text), probe (tests/bench/probe.c),
  python (python3 -c 'import json'), go-cgo (tests/workloads/go/httphash;
  skipped without go); with --all or named in --only, the rest of `make
  bench`'s, as it runs them: xz-cpu (to stdout), sqlite-alloc,
  python-alloc, xz-threads (a few minutes more). Each profiled run gets a fresh PROFILE_DIR (no
  symbol cache) unless --keep-cache: then the rounds after the first reuse
  the first one's cache, as the images of a build do.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SUMMARY_RE = re.compile(r"peak rss ([\d.]+) MiB \(([\d.]+) MiB before the stop\)")


def cc(src, out):
    subprocess.run(["cc", "-O2", "-o", out, os.path.join(HERE, src)], check=True)
    return out


def run(runner, argv, env, cwd, stdin=None):
    """(maxrss MiB, stderr) of argv run through runner.c with exactly env."""
    r, w = os.pipe()
    envs = ["%s=%s" % kv for kv in sorted(env.items())]
    with open(os.devnull, "wb") as null, open(stdin or os.devnull, "rb") as inp:
        p = subprocess.Popen([runner, str(w), str(len(envs))] + envs + argv, cwd=cwd, stdout=null,
                             stderr=subprocess.PIPE, stdin=inp, pass_fds=(w,))
    os.close(w)
    _, err = p.communicate(timeout=600)
    report = os.read(r, 4096).decode()
    os.close(r)
    m = re.search(r"maxrss_kib (\d+)", report)
    if p.returncode != 0 or not m:
        raise SystemExit("runner failed for %s: %r %s" % (argv, report, err.decode(errors="replace")[-800:]))
    return int(m.group(1)) / 1024.0, err.decode(errors="replace")


def made_up_text(path, size):
    with open(path, "w") as f:  # made-up words: xz works for it
        import random
        rnd = random.Random(7)
        words = ["".join(rnd.choice("abcdefghijklmnop") for _ in range(rnd.randint(2, 9))) for _ in range(5000)]
        while f.tell() < size:
            f.write(" ".join(rnd.choice(words) for _ in range(12)) + " %d\n" % rnd.randint(0, 99999))
    return path


EXTRA = {"xz-cpu", "sqlite-alloc", "python-alloc", "xz-threads"}


# The rest of make bench's workloads (tests/bench/bench.py), with its
# commands: (name, argv, extra environment, stdin). Not run by default.
def bench_workloads(tmp):
    return [("xz-cpu", ["/usr/bin/xz", "-9", "-T1", "-c", made_up_text(os.path.join(tmp, "text-5M"), 5_000_000)],
             {}, None),
            ("sqlite-alloc", ["/usr/bin/sqlite3", ":memory:"], {}, os.path.join(HERE, "sqlite_rows.sql")),
            ("python-alloc", ["/usr/bin/python3", os.path.join(HERE, "py_dicts.py"), "600000"],
             {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}, None),
            ("xz-threads", ["/usr/bin/xz", "-6", "-T2", "--block-size=1MiB", "-c",
                            made_up_text(os.path.join(tmp, "text-14M"), 14_000_000)], {}, None)]


def workloads(tmp, only, every):
    text = made_up_text(os.path.join(tmp, "text"), 2 << 20)
    wls = [("xz", ["/usr/bin/xz", "-6", "-T1", "-c", text]),
           ("probe", [cc("probe.c", os.path.join(tmp, "probe")), "2", "300", "20000"]),
           ("python", ["/usr/bin/python3", "-c",
                       "import json; print(sum(len(json.dumps(list(range(i)))) for i in range(3000)))"])]
    wls = [(n, argv, {}, None) for n, argv in wls]
    go = shutil.which("go")
    if go and (not only or "go-cgo" in only):
        d = os.path.join(tmp, "go")
        os.makedirs(d)
        shutil.copy(os.path.join(REPO, "tests", "workloads", "go", "httphash", "main.go"), d)
        env = dict(os.environ, CGO_ENABLED="1", GOFLAGS="", GOTOOLCHAIN="local", GO111MODULE="off",
                   GOPROXY="off", GOCACHE=os.path.join(d, "cache"), GOPATH=os.path.join(d, "gopath"), HOME=d)
        subprocess.run([go, "build", "-o", "httphash", "main.go"], cwd=d, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        wls.append(("go-cgo", [os.path.join(d, "httphash"), "200", "return"], {}, None))
    if every or only & EXTRA:
        wls += bench_workloads(tmp)
    return [w for w in wls if w[0] in only] if only else wls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--keep-cache", action="store_true")
    ap.add_argument("--all", action="store_true", help="make bench's other workloads too")
    a = ap.parse_args()
    shim = os.path.join(os.path.abspath(a.build), "libprofshim.so")
    if not os.path.exists(shim):
        raise SystemExit("no %s: build first" % shim)
    tmp = tempfile.mkdtemp(prefix="stopmem.")
    try:
        runner = cc("runner.c", os.path.join(tmp, "runner"))
        only = set(x for x in a.only.split(",") if x)
        base = {"PATH": "/usr/bin:/bin", "HOME": tmp, "LANG": "C"}
        configs = [("plain", {}), ("inert", {"LD_PRELOAD": shim}),
                   ("active", {"LD_PRELOAD": shim, "PROFILE_DIR": None}),
                   ("cpu-only", {"LD_PRELOAD": shim, "PROFILE_DIR": None, "PROFILE_HEAP_SAMPLE": "0"})]
        print("%-12s %-8s %8s %12s %10s %10s" % ("workload", "config", "peak", "before stop", "run adds", "stop adds"))
        for name, argv, wl_env, stdin in workloads(tmp, only, a.all):
            inert = None
            for cname, extra in configs:
                peaks, befores = [], []
                for i in range(a.rounds):
                    env = dict(base, **wl_env)
                    for k, v in extra.items():
                        if k == "PROFILE_DIR":
                            v = os.path.join(tmp, "p-%s-%s" % (name, cname), "" if a.keep_cache else str(i))
                        env[k] = v
                    peak, err = run(runner, argv, env, tmp, stdin)
                    peaks.append(peak)
                    m = SUMMARY_RE.search(err)
                    if "PROFILE_DIR" in env and m:
                        befores.append(float(m.group(2)))
                    elif "PROFILE_DIR" in env:
                        print("  (no summary line with 'before the stop': %s)" % err.strip()[-300:], file=sys.stderr)
                peak = statistics.median(peaks)
                if cname == "inert":
                    inert = peak
                before = statistics.median(befores) if befores else None
                print("%-12s %-8s %8.1f %12s %10s %10s" % (
                    name, cname, peak, "%.1f" % before if before else "",
                    "%+.1f" % (before - inert) if before and inert else "",
                    "%+.1f" % (peak - before) if before else ""), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
