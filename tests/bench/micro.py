"""The "Threads and the signal API" section of `make bench` (bench.py calls
run() and render()): two small programs whose cost is one thing the shim
could change, timed from inside so that process start and the stop are not
in the figures.

- threads (tests/bench/threads.c): thread create+join, each thread
  allocating across size classes. Target: inert ≤ 1.1× plain.
- sigapi (tests/bench/sigapi.c): signal() + pthread_sigmask() pairs.
  Target: active ≤ 1.3× plain.
- mallocs (tests/bench/mallocs.c): one thread per core allocating at once.
  No target: it shows what one shared jemalloc arena costs
  (docs/ALLOCATOR.md), the price of the threads target.
- climb (tests/bench/climb.c): a heap climbing to 1 GiB, with heap-peak
  files written as it goes (PROFILE_PEAK_AFTER=0: the loop is shorter than
  the default 10 s). Target: active ≤ 1.03× inert.

Each is run plain, inert and active, interleaved (every program under every
configuration, then again), one warm-up round not counted; a ratio is the
median of the per-round ratios to the plain run of the same round.
"""

import os
import re
import shutil
import statistics

CONFIGS = [("plain", "plain"), ("inert", "profshim inert"), ("active", "profshim active")]
COLUMNS = ["benchmark", "configuration", "runs", "loop s", "loop ×plain", "loop cpu s", "cpu ×plain"]
RESULT_RE = re.compile(r"loop_s ([\d.]+) cpu_s ([\d.]+)")


class Micro:
    def __init__(self, key, src, label, count, smoke_count, unit, target_cfg, limit, mechanism, per_core=False,
                 versus="plain", active_env=None):
        self.key, self.src, self.label = key, src, label
        self.count, self.smoke_count, self.unit = count, smoke_count, unit
        self.target_cfg, self.limit, self.mechanism = target_cfg, limit, mechanism
        self.per_core = per_core  # one thread per core, count operations each
        self.versus = versus  # the configuration the target compares with
        self.active_env = active_env or {}  # more PROFILE_* for the active run

    def args(self, count):
        return ([str(os.cpu_count() or 1)] if self.per_core else []) + [str(count)]

    def describe(self, count):
        return self.label % ((os.cpu_count() or 1, count) if self.per_core else count)


MICROS = [
    Micro("threads", "threads.c", "thread create+join, %d threads one after another, each 64 malloc/free "
          "of 16 B–8 KiB", 20000, 500, "thread", "inert", 1.1,
          "jemalloc's own per-thread set-up at a thread's first malloc and tear-down at its exit "
          "(thread data; the thread cache, whose 32 KiB slot array is recycled from the last thread's "
          "and zeroed with `madvise`, flushed at exit; docs/ALLOCATOR.md)"),
    Micro("sigapi", "sigapi.c", "signal API, %d pairs of signal(SIGPIPE, SIG_IGN/SIG_DFL) + "
          "pthread_sigmask(SIG_BLOCK/SIG_UNBLOCK)", 200000, 5000, "pair", "active", 1.3,
          "the shim's signal-API wrappers (shim/hooks.cc → shim/signals.cc: the program's view of "
          "dispositions and the bookkeeping behind it)"),
    Micro("mallocs", "mallocs.c", "concurrent allocation, %d threads at once (one per core), each %d "
          "malloc/free of 16 B–64 KiB", 5000000, 20000, "operation", "inert", None,
          "one jemalloc arena shared by all threads (docs/ALLOCATOR.md)", per_core=True),
    Micro("climb", "climb.c", "a heap climbing to %d MiB in blocks of 4–64 KiB, each written and read, then "
          "freed; heap-peak files written as it climbs (PROFILE_PEAK_AFTER=0)", 1024, 128, "MiB", "active", 1.03,
          "the snapshot worker's heap dumps and heap-peak files (shim/snapshot_jobs.cc; rate limits in "
          "docs/DESIGN.md, \"While the program runs\"), besides CPU and heap sampling",
          versus="inert", active_env={"PROFILE_PEAK_AFTER": "0"}),
]


def summarize(values):
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def run(bench, run_program, rounds):
    """Runs every micro benchmark under every configuration for rounds
    counted rounds (after one warm-up round unless smoke); returns the
    section's data for benchmarks.json."""
    smoke = bench.smoke
    progs = {m.key: bench.cc(m.src, m.key, ["-pthread"]) for m in MICROS}
    first = 1 if smoke else 0
    runs = {(m.key, c): [] for m in MICROS for c, _ in CONFIGS}
    commands = {}
    for rnd in range(first, rounds + 1):
        for m in MICROS:
            count = m.smoke_count if smoke else m.count
            for cfg, _ in CONFIGS:
                bench.counter += 1
                cwd = os.path.join(bench.tmp, "micro-%d" % bench.counter)
                out = os.path.join(cwd, "out")
                os.makedirs(out)
                env = bench.base_env()
                if cfg != "plain":
                    env["LD_PRELOAD"] = bench.shim
                if cfg == "active":
                    env.update(PROFILE_DIR=out, PROFILE_NAME=m.key, **m.active_env)
                rfd, wfd = os.pipe()
                argv = [progs[m.key], str(wfd)] + m.args(count)
                try:
                    rc, wall, _, err, _ = run_program(bench.runner, argv, env, cwd, None, 300, (wfd,))
                finally:
                    os.close(wfd)
                os.set_blocking(rfd, False)
                try:
                    text = os.read(rfd, 256).decode()
                except BlockingIOError:
                    text = ""
                os.close(rfd)
                shown = " ".join("%s=%s" % (k, env[k]) for k in ("LD_PRELOAD", "PROFILE_DIR", "PROFILE_NAME")
                                 + tuple(sorted(m.active_env)) if k in env)
                commands[(m.key, cfg)] = ((shown + " " if shown else "") + " ".join([progs[m.key], "FD"] + m.args(count))) \
                    .replace(bench.shim, "$SHIM").replace(out, "$OUT").replace(bench.bin, "$BIN")
                r = {"round": rnd, "ok": True, "rc": rc, "wall_s": wall}
                mm = RESULT_RE.search(text)
                if rc != 0 or not mm:
                    r.update(ok=False, error="exit status %d, report %r" % (rc, text), stderr_tail=err[-1500:])
                    bench.problems.append("%s / %s / round %d: %s" % (m.key, cfg, rnd, r["error"]))
                    bench.log("PROBLEM %s / %s / round %d: %s\n%s" % (m.key, cfg, rnd, r["error"], err[-1500:]))
                else:
                    r.update(loop_s=float(mm.group(1)), cpu_s=float(mm.group(2)))
                runs[(m.key, cfg)].append(r)
                shutil.rmtree(cwd, ignore_errors=True)
        bench.log("micro round %d%s done" % (rnd, " (warm-up)" if rnd < 1 else ""))
    out = []
    for m in MICROS:
        count = m.smoke_count if smoke else m.count
        base = {c: {r["round"]: r for r in runs[(m.key, c)] if r["round"] >= 1 and r["ok"]}
                for c in ("plain", m.versus)}
        cfgs = []
        for cfg, label in CONFIGS:
            good = [r for r in runs[(m.key, cfg)] if r["round"] >= 1 and r["ok"]]
            ratios = {}
            for c, by_round in base.items():
                ratios[c] = {k: summarize([r[k] / by_round[r["round"]][k] for r in good
                                           if r["round"] in by_round and by_round[r["round"]][k] > 0])
                             for k in ("loop_s", "cpu_s")}
            cfgs.append({"key": cfg, "label": label, "command": commands.get((m.key, cfg)),
                         "summary": {k: summarize([r[k] for r in good]) for k in ("loop_s", "cpu_s")},
                         "parallel": summarize([r["cpu_s"] / r["loop_s"] for r in good if r["loop_s"] > 0]),
                         "ratio_to_plain": ratios["plain"], "ratio_to_versus": ratios[m.versus],
                         "runs": runs[(m.key, cfg)]})
        out.append({"key": m.key, "label": m.describe(count), "count": count, "unit": m.unit,
                    "threads": (os.cpu_count() or 1) if m.per_core else 1,
                    "target": {"configuration": m.target_cfg, "limit": m.limit, "versus": m.versus},
                    "configs": cfgs})
    return {"rounds": rounds, "warmup": 1 - first, "benchmarks": out}


def _cfg(b, key):
    return next((c for c in b["configs"] if c["key"] == key), None)


def targets(data):
    """Target rows in bench.py's format, with the cause of a miss."""
    out = []
    for b in data["benchmarks"]:
        m = next(x for x in MICROS if x.key == b["key"])
        t, p = _cfg(b, m.target_cfg), _cfg(b, m.versus)
        r = t and t["ratio_to_versus"]["loop_s"]
        if not r:
            continue
        c = t["ratio_to_versus"]["cpu_s"]
        detail = "per-round %s/%s loop wall: median %.3f (%.3f–%.3f)" % (m.target_cfg, m.versus, r["median"],
                                                                       r["min"], r["max"])
        if c:
            detail += "; cpu: %.3f (%.3f–%.3f)" % (c["median"], c["min"], c["max"])
        met = None if m.limit is None else r["median"] <= m.limit
        if met is False and p and p["summary"]["loop_s"]:
            extra = (t["summary"]["loop_s"]["median"] - p["summary"]["loop_s"]["median"]) / b["count"] * 1e6
            detail += ". Missed: %.2f µs more per %s, in %s" % (extra, m.unit, m.mechanism)
        elif met is None:
            detail += " (%s)" % m.mechanism
        name = "%s vs %s (loop wall) — reported, no target" % (dict(CONFIGS)[m.target_cfg], dict(CONFIGS)[m.versus]) \
            if m.limit is None else "%s ≤ %s× %s (loop wall)" % (dict(CONFIGS)[m.target_cfg], ("%.2f" % m.limit).rstrip("0"),
                                                              dict(CONFIGS)[m.versus])
        out.append({"target": name, "workload": b["key"], "value": r["median"], "limit": m.limit, "met": met,
                    "detail": detail})
    return out


def render(data, fmt_range, md_table):
    """The markdown section (a list of lines)."""
    L = ["## Threads and the signal API", "",
         "Small programs, timed from inside (`CLOCK_MONOTONIC` and `CLOCK_PROCESS_CPUTIME_ID` around the "
         "loop, written to a pipe), so process start and the stop are not in the figures; %d warm-up + %d "
         "counted rounds, interleaved (every program under every configuration, then again). A `×plain` cell is "
         "the median (min–max) of the per-round ratios to the plain run of the same round." % (
             data["warmup"], data["rounds"]), ""]
    rows = []
    for b in data["benchmarks"]:
        for c in b["configs"]:
            s, r = c["summary"], c["ratio_to_plain"]
            rows.append(["`%s`" % b["key"], c["label"], str(s["loop_s"]["n"] if s["loop_s"] else 0),
                         fmt_range(s["loop_s"], "%.3f"), fmt_range(r["loop_s"], "%.3f"),
                         fmt_range(s["cpu_s"], "%.3f"), fmt_range(r["cpu_s"], "%.3f")])
    L.append(md_table(COLUMNS, rows))
    L.append("")
    for b in data["benchmarks"]:
        lim = b["target"]["limit"]
        versus = dict(CONFIGS)[b["target"].get("versus", "plain")]
        L.append("- `%s`: %s. %s" % (b["key"], b["label"], "No target." if lim is None else "Target: %s ≤ %s× %s."
                                    % (dict(CONFIGS)[b["target"]["configuration"]], ("%.2f" % lim).rstrip("0"),
                                       versus)))
        if b["threads"] > 1:
            par = ", ".join("%s %.2f" % (c["label"], c["parallel"]["median"]) for c in b["configs"] if c["parallel"])
            L.append("  - Cores busy at once (loop CPU / loop wall, median): %s, of %d.%s" % (
                par, b["threads"], "" if all(c["parallel"] and c["parallel"]["median"] >= 0.75 * b["threads"]
                                             for c in b["configs"]) else
                " Under %.1f: the machine was busy and the threads often did not run at the same moment, so "
                "this run understates what they cost each other." % (0.75 * b["threads"])))
        for c in b["configs"]:
            L.append("  - %s: `%s`" % (c["label"], c["command"]))
    L.append("")
    return L
