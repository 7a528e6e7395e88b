"""The "Process trees" section of `make bench` (bench.py calls run(),
targets() and render(); `python3 tests/bench/tree.py --build build` runs it
alone and prints it): what profiling a whole tree of short-lived images
costs.

- true-pair: `env /bin/true`, two images (env execs true). Target: an
  active image costs ≤ 2 ms more than an inert one; the stop of such an
  image (no separate debug file of its own) ≤ 10 ms.
- cc1plus: `g++ -O2 -c shim/symbolize.cc`, one compiler image of ~3 s.
  Target: its stop ≤ 30 ms.
- make-j2: `make -j2` of the shim's own objects (~100 images: make, sh,
  g++, cc1plus, as, mkdir). Target: ≤ 1.10× plain, wall and user+sys.
- mp-pool: a Python multiprocessing pool (fork, 4 workers, ~4 s of CPU).
  Target: the parent's CPU profile holds ≥ 0.9 of the tree's CPU (the
  program's own os.times), each worker under its pid label.
- pgbench-C: PostgreSQL 15 (Debian's), a throwaway cluster in a temp dir,
  unix socket only, `pgbench -C -c 4 -T 6`: a new forked backend per
  transaction. Target: ≥ 0.9× plain throughput.

Each is run plain, inert and active, interleaved (every workload under every
configuration, then again, each round starting one configuration later),
one warm-up round not counted; a ratio is the
median of the per-round ratios to the plain run of the same round. Active
runs of one workload share one PROFILE_DIR across rounds, as the images of
one build or one server do, so the symbol cache (docs/DESIGN.md) is warm
after the warm-up round; the first active run of each workload, with an
empty cache, is reported apart ("cold"). Every active run's files are
checked: each file a summary line names exists and is a whole gzip stream,
PROFILE_DIR holds nothing else, no line is an error, and a few are read by
`go tool pprof`.
"""

import gzip
import os
import pwd
import re
import shutil
import statistics
import subprocess
import sys
import time

CONFIGS = [("plain", "plain"), ("inert", "profshim inert"), ("active", "profshim active")]
# pgbench-C's target is for CPU and wait profiles (no heap sampling): a
# backend's few allocations tell little, its time is what one profiles.
CPUONLY = ("cpuonly", "profshim CPU and waits (PROFILE_HEAP_SAMPLE=0)")


def configs_of(key):
    return CONFIGS + [CPUONLY] if key == "pgbench-C" else CONFIGS
LINE_RE = re.compile(r"^# profshim: (?:error: .*?; )?wrote ((?:\S+\.pprof ?)+)\|.*$", re.M)
STOP_RE = re.compile(r"\| stop (\d+(?:\.\d+)?) ms \(symbols (\d+(?:\.\d+)?) ms")
CACHE_RE = re.compile(r"\| (\d+) of (\d+) addresses from the symbol cache")
PG_BIN = "/usr/lib/postgresql/15/bin"
TPS_RE = re.compile(r"^tps = ([\d.]+)", re.M)
SYMBOL_CACHE = ".profshim-symbols"


def rotated(items, rnd):
    """items, started at round rnd's place: each round starts one later (A B
    C, B C A, ...); in a fixed order the first was the slow one, a bias in
    every ratio to plain (bench.py's rounds use it too)."""
    k = rnd % len(items)
    return items[k:] + items[:k]


def summarize(values):
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def shim_lines(text):
    """(stop ms, symbols ms, cached, addresses, line) of each summary line."""
    out = []
    for line in text.splitlines():
        if not line.startswith("# profshim: "):
            continue
        m, c = STOP_RE.search(line), CACHE_RE.search(line)
        out.append((float(m.group(1)) if m else None, float(m.group(2)) if m else None,
                    int(c.group(1)) if c else 0, int(c.group(2)) if c else 0, line))
    return out


def check_files(bench, text, out, name, seen, read_some=2):
    """Why the files of an active run are not as its summary lines say, or
    None. They stay until the bench ends, added to `seen` (the earlier runs'
    files): on an ext4 without a journal (this VM's) every file created
    within a minute or five of thousands being deleted scans the inode table
    past each of them (recently_deleted), which made the next active
    pgbench round spend ~2.8 ms of its ~12 ms per connection creating its
    files."""
    named, why = [], []
    for line in text.splitlines():
        if line.startswith("# profshim: error"):
            why.append("error line: " + line[:300])
    for m in LINE_RE.finditer(text):
        named += m.group(1).split()
    # An earlier run's file is this run's if a line names it (the root's
    # NAME.*, written again by each run).
    named_set = set(named)
    # A server's hand-over file (.STEM.PID.spool, CONFIG.md "Forked
    # children") is there until its image has written its files: pg_ctl
    # stop returns once the postmaster removed its pid file, before its
    # stop is over.
    have = sorted(p for p in (os.path.join(out, n) for n in os.listdir(out)
                              if n != SYMBOL_CACHE and not (n.startswith(".") and n.endswith(".spool")))
                  if p not in seen or p in named_set)
    # More files than lines is an image whose stderr was not ours (make's
    # $(shell gcc ... 2>/dev/null)). A line may name NAME.* that a later
    # image took, renaming them to the earlier image's own name (image.h):
    # then the file is elsewhere, but there are as many.
    taken = [p for p in named if os.path.basename(p).startswith(name + ".") and
             os.path.basename(p).count(".") == 2]
    if not set(named) - set(taken) <= set(have):
        why.append("%d files named by the lines are missing" % len(set(named) - set(taken) - set(have)))
    if len(have) < len(named):
        why.append("%d files for %d named: %d images' files lost (two images taking NAME at once, "
                   "image::final_stem)" % (len(have), len(named), (len(named) - len(have)) // 2))
    if not named:
        why.append("no summary line names a file")
    for p in have:
        try:
            with gzip.open(p) as f:
                if not f.read():
                    why.append("%s is empty" % p)
        except (OSError, EOFError) as e:
            why.append("%s is not a whole gzip stream: %s" % (p, e))
    for p in have[:read_some]:
        try:
            env = bench.base_env()
            env.update(HOME=bench.home, GOCACHE=os.environ.get("GOCACHE") or os.path.join(bench.home, "gocache"),
                       GOTOOLCHAIN="local", GOFLAGS="", PPROF_TMPDIR=bench.home)
            r = subprocess.run([bench.go, "tool", "pprof", "-raw", "-symbolize=none", p], env=env, cwd=bench.home,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
            if r.returncode != 0:
                why.append("go tool pprof cannot read %s: %s" % (p, r.stderr.decode(errors="replace")[-300:]))
        except (OSError, subprocess.SubprocessError) as e:
            why.append("go tool pprof on %s: %s" % (p, e))
    seen.update(have)
    return "; ".join(why) or None


class Tree:
    def __init__(self, bench, run_program):
        self.b, self.run_program = bench, run_program
        self.root = os.path.join(bench.tmp, "tree")
        os.makedirs(self.root)
        self.outs = {}  # workload -> its active runs' PROFILE_DIR
        self.seen = {}  # workload -> the files its earlier runs left there, checked
        self.repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.cold = {}  # workload -> the first active run's stop lines

    def out_dir(self, wl, owner=None):
        if wl not in self.outs:
            d = os.path.join(self.root, "prof-" + wl)
            os.makedirs(d)
            if owner:
                os.chown(d, owner.pw_uid, owner.pw_gid)
            self.outs[wl] = d
        return self.outs[wl]

    def env(self, cfg, wl, out):
        env = self.b.base_env()
        if cfg != "plain":
            env["LD_PRELOAD"] = self.shim
        if cfg in ("active", "cpuonly"):
            env.update(PROFILE_DIR=out, PROFILE_NAME=wl)
        if cfg == "cpuonly":
            env["PROFILE_HEAP_SAMPLE"] = "0"
        return env

    def setup(self):
        # A copy every user can read: the PostgreSQL server runs as postgres.
        pub = os.path.join(self.root, "pub")
        os.makedirs(pub)
        os.chmod(self.b.tmp, 0o755)
        os.chmod(self.root, 0o755)
        os.chmod(pub, 0o755)
        self.shim = os.path.join(pub, "libprofshim.so")
        shutil.copyfile(self.b.shim, self.shim)
        os.chmod(self.shim, 0o755)
        flags = subprocess.run(["make", "-s", "--no-print-directory", "-C", self.repo,
                                "--eval=print-flags: ; @echo $(CXX) $(CPPFLAGS) $(CXXFLAGS)", "print-flags"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout.decode().split()
        self.cxx = flags
        self.objs = sorted(os.path.splitext(n)[0] + ".o" for n in os.listdir(os.path.join(self.repo, "shim"))
                           if n.endswith(".cc"))
        self.pg = self.pg_setup()

    # -- one measured run of a program that ends
    def measure(self, wl, cfg, rnd, argv, cwd):
        out = self.out_dir(wl)
        rc, wall, ru, err, _ = self.run_program(self.b.runner, argv, self.env(cfg, wl, out), cwd, None, 600)
        r = {"round": rnd, "ok": rc == 0, "rc": rc, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime}
        return r, err, out

    def judge(self, wl, cfg, r, err, out, expect_images=None):
        """A run that failed is left out of the figures; files not as the
        lines say are a problem reported, the run's figures kept."""
        why = None if r["rc"] == 0 else "exit status %d" % r["rc"]
        lines = shim_lines(err)
        files = None
        if cfg in ("active", "cpuonly"):
            files = check_files(self.b, err, out, wl, self.seen.setdefault(wl, set()))
            if expect_images is not None and len(lines) != expect_images:
                files = files or "%d summary lines, want %d" % (len(lines), expect_images)
            r["stops"] = [(x[0], x[1], x[2], x[3], x[4][-120:]) for x in lines]
            # What an operator finds in PROFILE_DIR after this run (a build,
            # a pgbench round): the files its images' lines name.
            r["files"] = sum(len(m.group(1).split()) for m in LINE_RE.finditer(err))
        elif lines:
            why = why or "unexpected profshim line: " + lines[0][4][:200]
        for what in (why, files):
            if what:
                self.b.problems.append("%s / %s / round %d: %s" % (wl, cfg, r["round"], what))
                self.b.log("PROBLEM %s / %s / round %d: %s\n%s" % (wl, cfg, r["round"], what, err[-600:]))
        if files:
            r["files_error"] = files
        if why:
            r.update(ok=False, error=why, stderr_tail=err[-1500:])
        return r

    def true_pair(self, cfg, rnd, n=15):
        """n runs in a row of `env /bin/true`: each a median's worth."""
        cwd = os.path.join(self.root, "cwd")
        os.makedirs(cwd, exist_ok=True)
        walls, cpus, stops, bad, files = [], [], [], None, None
        for _ in range(n):
            r, err, out = self.measure("true-pair", cfg, rnd, ["/usr/bin/env", "/bin/true"], cwd)
            r = self.judge("true-pair", cfg, r, err, out, expect_images=2 if cfg == "active" else None)
            walls.append(r["wall_s"])
            cpus.append(r["cpu_s"])
            stops += r.get("stops", [])
            bad = bad or r.get("error")
            files = files or r.get("files_error")
        r = {"round": rnd, "ok": bad is None, "wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus),
             "runs": n, "stops": stops}
        if bad:
            r["error"] = bad
        if files:
            r["files_error"] = files
        return r

    def cc1plus(self, cfg, rnd):
        cwd = os.path.join(self.root, "cwd")
        os.makedirs(cwd, exist_ok=True)
        argv = self.cxx + ["-c", os.path.join(self.repo, "shim", "symbolize.cc"), "-o", os.path.join(cwd, "s.o")]
        argv[0] = shutil.which(argv[0]) or argv[0]
        r, err, out = self.measure("cc1plus", cfg, rnd, argv, self.repo)
        r = self.judge("cc1plus", cfg, r, err, out)
        r["stops"] = [s for s in r.get("stops", []) if "cc1plus" in s[4]]
        return r

    def make_j2(self, cfg, rnd):
        build = os.path.join(self.root, "b-%s-%d" % (cfg, rnd))
        os.makedirs(build)
        # The recipe's prerequisite that would run scripts/install-deps: done.
        open(os.path.join(build, ".deps-ok"), "w").close()
        argv = ["/usr/bin/make", "-s", "-j2", "-C", self.repo, "BUILD=" + build] + [
            os.path.join(build, "shim", o) for o in self.objs]
        r, err, out = self.measure("make-j2", cfg, rnd, argv, self.root)
        r = self.judge("make-j2", cfg, r, err, out)
        r["images"] = len(r.get("stops", []))
        shutil.rmtree(build, ignore_errors=True)
        return r

    def mp_pool(self, cfg, rnd):
        """tests/bench/mp_pool.py with Debian's python3: active, the share of
        the tree's CPU (its own clocks) the parent's CPU profile holds, and
        how many workers its line says were merged."""
        cwd = os.path.join(self.root, "cwd")
        os.makedirs(cwd, exist_ok=True)
        truth = os.path.join(cwd, "mp-pool.truth")
        argv = ["/usr/bin/python3", os.path.join(self.repo, "tests", "bench", "mp_pool.py"), truth]
        r, err, out = self.measure("mp-pool", cfg, rnd, argv, cwd)
        r = self.judge("mp-pool", cfg, r, err, out, expect_images=1 if cfg == "active" else None)
        m = re.search(r"^tree_cpu_s=([\d.]+) workers=(\d+)", open(truth).read() if os.path.isfile(truth) else "",
                      re.M)
        path = os.path.join(out, "mp-pool.cpu.pprof")
        if cfg == "active" and r["ok"] and m and os.path.isfile(path):
            sys.path.insert(0, os.path.join(self.repo, "cli"))
            import stacks
            p = stacks.read(path)
            i = [t.split("/")[0] for t in p.types].index("cpu")
            held = sum(smp.values[i] for smp in p.samples) / 1e9
            merged = re.search(r" \| forks (\d+) merged", err)
            r.update(tree_cpu_s=float(m.group(1)), held_s=held, held=held / float(m.group(1)),
                     merged=int(merged.group(1)) if merged else 0)
        return r

    # -- PostgreSQL
    def pg_setup(self):
        if not os.path.isfile(os.path.join(PG_BIN, "postgres")) or not shutil.which("pgbench"):
            return {"skipped": "PostgreSQL 15 (postgresql-15) or pgbench is not installed"}
        try:
            user = pwd.getpwnam("postgres") if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
        except KeyError:
            return {"skipped": "running as root and there is no postgres user to run the server as"}
        d = os.path.join(self.root, "pg")
        os.makedirs(d)
        os.chown(d, user.pw_uid, user.pw_gid)
        pg = {"user": user, "data": os.path.join(d, "data"), "sock": d, "log": os.path.join(d, "log")}
        self.as_user(pg, [os.path.join(PG_BIN, "initdb"), "-A", "trust", "-U", "postgres", "-D", pg["data"]],
                     self.b.base_env(), check=True)
        self.pg_start(pg, self.b.base_env())
        subprocess.run(["pgbench", "-h", d, "-U", "postgres", "-i", "-s", "1", "postgres"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.pg_stop(pg)
        return pg

    def as_user(self, pg, argv, env, check=False, **kw):
        u = pg["user"]
        extra = dict(user=u.pw_uid, group=u.pw_gid, extra_groups=[]) if os.geteuid() == 0 else {}
        return subprocess.run(argv, env=env, cwd=pg["sock"], check=check, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=120, **extra, **kw)

    def pg_start(self, pg, env):
        if os.path.exists(pg["log"]):
            os.unlink(pg["log"])
        return self.as_user(pg, [os.path.join(PG_BIN, "pg_ctl"), "-D", pg["data"], "-l", pg["log"], "-w", "-o",
                                 "-c listen_addresses='' -c unix_socket_directories=%s -c max_connections=20"
                                 % pg["sock"], "start"], env, check=True).stderr.decode(errors="replace")

    def pg_stop(self, pg):
        self.as_user(pg, [os.path.join(PG_BIN, "pg_ctl"), "-D", pg["data"], "-m", "fast", "-w", "stop"],
                     self.b.base_env(), check=True)

    def pgbench(self, cfg, rnd):
        pg = self.pg
        out = self.out_dir("pgbench-C", pg["user"])
        # pg_ctl and its shell are images too: their lines are on pg_ctl's
        # stderr, the server's in its log.
        started = self.pg_start(pg, self.env(cfg, "pgbench-C", out))
        try:
            p = subprocess.run(["pgbench", "-h", pg["sock"], "-U", "postgres", "-n", "-C", "-c", "4", "-T", "6",
                                "postgres"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                               env=self.b.base_env())
        finally:
            self.pg_stop(pg)
        with open(pg["log"], errors="replace") as f:
            log = started + f.read()
        m = TPS_RE.search(p.stdout.decode())
        r = {"round": rnd, "ok": True, "rc": p.returncode, "tps": float(m.group(1)) if m else None}
        if not m:
            r["rc"] = r["rc"] or 1
        r = self.judge("pgbench-C", cfg, r, log, out)
        # The backends: the postmaster's own line and its helpers' are not
        # what a connection waits for.
        r["stops"] = [s for s in r.get("stops", []) if "postgres: postgres postgres" in s[4]]
        return r


WORKLOADS = [
    ("true-pair", "`env /bin/true`: two images, 15 runs in a row per round (the median of them)", "true_pair"),
    ("cc1plus", "`g++ -O2 -c shim/symbolize.cc` (the project's flags): one cc1plus of ~3 s", "cc1plus"),
    ("make-j2", "`make -j2` of the shim's own objects, a fresh build directory each run", "make_j2"),
    ("mp-pool", "a Python `multiprocessing` pool, fork start method, 4 workers, ~4 s of CPU "
     "(tests/bench/mp_pool.py)", "mp_pool"),
    ("pgbench-C", "PostgreSQL 15 in a throwaway cluster (unix socket only), `pgbench -n -C -c 4 -T 6`: a "
     "forked backend per transaction", "pgbench"),
]


def run(bench, run_program, rounds, only=None):
    t = Tree(bench, run_program)
    t.setup()
    wls = [w for w in WORKLOADS if not only or w[0] in only]
    skipped = {}
    if "skipped" in t.pg:
        skipped["pgbench-C"] = t.pg["skipped"]
        wls = [w for w in wls if w[0] != "pgbench-C"]
    runs = {(w[0], c): [] for w in wls for c, _ in configs_of(w[0])}
    for rnd in range(0, rounds + 1):
        for key, _, fn in wls:
            for cfg, _ in rotated(configs_of(key), rnd):
                runs[(key, cfg)].append(getattr(t, fn)(cfg, rnd))
        bench.log("tree round %d%s done" % (rnd, " (warm-up)" if rnd < 1 else ""))
    out = []
    for key, label, _ in wls:
        metric = "tps" if key == "pgbench-C" else "wall_s"
        plain = {r["round"]: r for r in runs[(key, "plain")] if r["round"] >= 1 and r["ok"]}
        cfgs = []
        for cfg, clabel in configs_of(key):
            all_runs = runs[(key, cfg)]
            good = [r for r in all_runs if r["round"] >= 1 and r["ok"]]
            ratio = {}
            for k in (metric, "cpu_s"):
                ratio[k] = summarize([r[k] / plain[r["round"]][k] for r in good
                                      if r["round"] in plain and r.get(k) and plain[r["round"]].get(k)])
            warm = [s for r in good for s in r.get("stops", [])]
            cold = [s for s in all_runs[0].get("stops", [])] if all_runs else []
            cfgs.append({"key": cfg, "label": clabel,
                         "summary": {k: summarize([r.get(k) for r in good]) for k in (metric, "cpu_s")},
                         "ratio_to_plain": ratio,
                         "stop_ms": summarize([s[0] for s in warm]), "symbols_ms": summarize([s[1] for s in warm]),
                         "cold_stop_ms": summarize([s[0] for s in cold]),
                         "cached": sum(s[2] for s in warm), "addresses": sum(s[3] for s in warm),
                         "images": summarize([len(r.get("stops", [])) for r in good]) if cfg in ("active", "cpuonly") else None,
                         "files": summarize([r["files"] for r in good if "files" in r]) if cfg in ("active", "cpuonly") else None,
                         "files_errors": [r["files_error"] for r in all_runs if r.get("files_error")],
                         "slowest": max(warm, key=lambda s: s[0] or 0)[4] if warm else None,
                         "runs": [{k: v for k, v in r.items() if k != "stops"} for r in all_runs]})
        out.append({"key": key, "label": label, "metric": metric, "configs": cfgs})
    return {"rounds": rounds, "warmup": 1, "benchmarks": out, "skipped": skipped}


def _cfg(b, key):
    return next((c for c in b["configs"] if c["key"] == key), None)


CAUSES = {
    "fixed": "what an active image does that an inert one does not, before and at its stop (setup: zlib, "
             "the sampler's timers, heap sampling; the stop: gathering, the symbol cache's reads, three gzip "
             "files written and renamed)",
    "stop": "the stop's own work (see `stop_ms` and `symbols_ms` of the slowest image in benchmarks.json)",
    "make": "each compiler image's stop (mostly cc1plus: its new addresses looked up with libdw in a 30 MB "
            "binary's symbol table) and the sampler's signals",
    "pg": "CPU, not waiting: the 2 cores are shared by the 4 clients, their backends and other jobs, and a "
          "plain backend's whole life is ~50 ms of CPU on this VM (each copy-on-write fault and unmap flushes "
          "the TLB through the hypervisor). Merged (the default), a backend writes no file; profiled it adds "
          "~4 ms of CPU (perf record of the postmaster and its backends, 2026-12-02): the stack walk at the "
          "fork that credits the child's first CPU to its caller and the unwinder's first reads of each "
          "module's unwind tables in the fresh child (page faults) ~1.5 ms, the rest of the after-fork reset "
          "~0.7 ms, the stop on a fresh stack with the hand-over ~0.6 ms, /proc/self/stat at the stop 0.2 ms, "
          "and the CPU and wait samples while it runs"
}


def targets(data):
    """Target rows in bench.py's format, with the cause of a miss."""
    out = []

    def add(name, wl, value, limit, met, detail):
        out.append({"target": name, "workload": wl, "value": value, "limit": limit, "met": met, "detail": detail})

    for b in data["benchmarks"]:
        p, i, a = _cfg(b, "plain"), _cfg(b, "inert"), _cfg(b, "active")
        if not a or not a["summary"][b["metric"]]:
            continue
        if b["key"] == "true-pair" and i["summary"]["wall_s"]:
            extra = (a["summary"]["wall_s"]["median"] - i["summary"]["wall_s"]["median"]) / 2 * 1000
            add("active image ≤ 2 ms over inert (fixed cost)", b["key"], extra, 2.0, extra <= 2.0,
                "(active − inert) / 2 images: %.2f ms (medians: plain %.1f, inert %.1f, active %.1f ms)%s" % (
                    extra, p["summary"]["wall_s"]["median"] * 1000, i["summary"]["wall_s"]["median"] * 1000,
                    a["summary"]["wall_s"]["median"] * 1000, "" if extra <= 2.0 else ". Missed: " + CAUSES["fixed"]))
        if b["key"] in ("true-pair", "cc1plus") and a["stop_ms"]:
            lim = 10.0 if b["key"] == "true-pair" else 30.0
            s = a["stop_ms"]
            add("stop ≤ %d ms (warm symbol cache)" % lim, b["key"], s["median"], lim, s["median"] <= lim,
                "median %.1f ms (%.1f–%.1f) over %d stops, symbols %.1f ms; cold (empty cache): %s ms%s" % (
                    s["median"], s["min"], s["max"], s["n"], a["symbols_ms"]["median"],
                    "%.0f" % a["cold_stop_ms"]["median"] if a["cold_stop_ms"] else "?",
                    "" if s["median"] <= lim else ". Missed: " + CAUSES["stop"]))
        if b["key"] == "make-j2":
            for k, what in (("wall_s", "wall"), ("cpu_s", "user+sys")):
                r = a["ratio_to_plain"][k]
                if r:
                    add("active ≤ 1.10× plain (%s)" % what, b["key"], r["median"], 1.10, r["median"] <= 1.10,
                        "per-round active/plain: median %.3f (%.3f–%.3f); %s images a build, their stops median "
                        "%.0f ms%s" % (r["median"], r["min"], r["max"],
                                       "%.0f" % a["images"]["median"] if a["images"] else "?",
                                       a["stop_ms"]["median"] if a["stop_ms"] else 0,
                                       "" if r["median"] <= 1.10 else ". Missed: " + CAUSES["make"]))
        if b["key"] == "mp-pool":
            held = summarize([r.get("held") for r in a["runs"] if r["round"] >= 1 and r.get("ok")])
            merged = summarize([r.get("merged") for r in a["runs"] if r["round"] >= 1 and r.get("ok")])
            if held:
                add("the parent's CPU profile ≥ 0.9 of the tree's CPU", b["key"], held["median"], 0.9,
                    held["median"] >= 0.9,
                    "profile / the tree's own clocks (os.times, children reaped): median %.3f (%.3f–%.3f) over %d "
                    "rounds; workers merged (each under its pid label) median %s of 4%s" % (
                        held["median"], held["min"], held["max"], held["n"],
                        "%.0f" % merged["median"] if merged else "?",
                        "" if held["median"] >= 0.9 else ". Missed: CPU a worker uses after its stop (its "
                        "teardown) is in no profile"))
        if b["key"] == "pgbench-C":
            c = _cfg(b, "cpuonly")
            r = c["ratio_to_plain"]["tps"] if c else None
            ri = i["ratio_to_plain"]["tps"] if i else None
            ra = a["ratio_to_plain"]["tps"]
            if r:
                add("CPU and waits (PROFILE_HEAP_SAMPLE=0) ≥ 0.9× plain (throughput)", b["key"], r["median"], 0.9,
                    r["median"] >= 0.9,
                    "per-round cpuonly/plain tps: median %.3f (%.3f–%.3f); inert/plain %s; active (heap too)/plain "
                    "%s; backends' stops median %.0f ms%s" % (
                        r["median"], r["min"], r["max"],
                        "%.3f (%.3f–%.3f)" % (ri["median"], ri["min"], ri["max"]) if ri else "?",
                        "%.3f (%.3f–%.3f)" % (ra["median"], ra["min"], ra["max"]) if ra else "?",
                        c["stop_ms"]["median"] if c["stop_ms"] else 0,
                        "" if r["median"] >= 0.9 else ". Missed: " + CAUSES["pg"]))
    return out


def render(data, fmt_range, md_table):
    """The markdown section (a list of lines)."""
    L = ["## Process trees", "",
         "Workloads of many short-lived images, %d warm-up + %d counted rounds, interleaved. A "
         "`×plain` cell is the median (min–max) of the per-round ratios to the plain run of the same round. "
         "Active runs of a workload share one `PROFILE_DIR` (and so the symbol cache, warm after the warm-up "
         "round); `stop ms` is over every image's summary line of the counted rounds, `cold` the first active "
         "run's, with an empty cache. `from cache` is the share of addresses named from the symbol cache; "
         "`files a run`, the files a run's lines name (a build, a pgbench round)." % (
             data["warmup"], data["rounds"]), ""]
    rows = []
    for b in data["benchmarks"]:
        m = b["metric"]
        for c in b["configs"]:
            s, r = c["summary"], c["ratio_to_plain"]
            rows.append(["`%s`" % b["key"], c["label"], fmt_range(s[m], "%.3f" if m == "wall_s" else "%.1f"),
                         fmt_range(r[m], "%.3f"), fmt_range(s["cpu_s"], "%.2f"), fmt_range(r["cpu_s"], "%.3f"),
                         fmt_range(c["stop_ms"], "%.0f") if c["stop_ms"] else "",
                         fmt_range(c["cold_stop_ms"], "%.0f") if c["cold_stop_ms"] else "",
                         "%.0f%%" % (100.0 * c["cached"] / c["addresses"]) if c["addresses"] else "",
                         fmt_range(c["files"], "%.0f") if c.get("files") else ""])
    L.append(md_table(["workload", "configuration", "wall s / tps", "×plain", "user+sys s", "cpu ×plain",
                       "stop ms", "cold stop ms", "from cache", "files a run"], rows))
    L.append("")
    for key, label, _ in WORKLOADS:
        L.append("- `%s`: %s.%s" % (key, label, (" Not run: " + data["skipped"][key]) if key in data["skipped"]
                                    else ""))
        b = next((x for x in data["benchmarks"] if x["key"] == key), None)
        a = b and _cfg(b, "active")
        if a:
            L.append("  - Files of the active runs: %s." % ("every file a line names is there and whole, and "
                     "go tool pprof reads them" if not a["files_errors"] else "; ".join(sorted(set(
                         a["files_errors"])))))
            if a["slowest"]:
                L.append("  - Slowest stop: `…%s`" % a["slowest"][-110:])
    L.append("")
    return L


def main():
    import argparse
    import json
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import bench as B
    ap = argparse.ArgumentParser(description="the process-tree section of make bench, alone")
    ap.add_argument("--build", default=os.path.join(B.REPO, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", action="append")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    b = B.Bench(argparse.Namespace(smoke=False, build=args.build, keep=False))
    try:
        b.skipped["perf"] = "not needed"
        b.setup()
        t0 = time.monotonic()
        data = run(b, B.run_program, args.rounds, args.only)
        data["elapsed_s"] = time.monotonic() - t0
        print("\n".join(render(data, B.fmt_range, B.md_table)))
        for t in targets(data):
            print("%-7s %s [%s]: %s" % ("met" if t["met"] else "MISSED", t["target"], t["workload"], t["detail"]))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(data, f, indent=1, default=str)
    finally:
        shutil.rmtree(b.tmp, ignore_errors=True)
    return 1 if b.problems else 0


if __name__ == "__main__":
    sys.exit(main())
