"""`make bench`'s harness (tests/bench/bench.py) still runs and writes a sane
table: its --smoke mode (one round, one small workload, plain + profshim
active, the probe, a small accuracy run, a small micro run, a small
wait-profile run) into a temp dir, never docs/."""

import json
import os
import re
import subprocess
import sys
import time

from common import check, clip, indent

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(os.path.dirname(HERE), "bench", "bench.py")

TABLE_COLUMNS = ["configuration", "runs", "wall s", "wall ×plain", "user+sys s", "cpu ×plain",
                 "peak RSS MiB", "RSS ×plain", "files written", "stop ms (summary)"]
PROBE_COLUMNS = ["configuration", "runs", "stop latency ms", "latency ×plain", "latency − plain ms",
                 "user+sys s", "peak RSS MiB", "files written"]
MICRO_COLUMNS = ["benchmark", "configuration", "runs", "loop s", "loop ×plain", "loop cpu s", "cpu ×plain"]
WAIT_COLUMNS = ["benchmark", "configuration", "runs", "loop s", "loop cpu s", "loop ×base", "cpu ×base"]
CELL_RE = re.compile(r"^(-?\d+(?:\.\d+)?)(?: s)? \((-?\d+(?:\.\d+)?)(?: s)?–(-?\d+(?:\.\d+)?)(?: s)?\)$")


def tables(md):
    """{header tuple: [row lists]} of every markdown table in md, in order,
    as a list of (header, rows)."""
    out = []
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("| ---"):
            header = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("| "):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            out.append((header, rows))
        else:
            i += 1
    return out


def cell(text, what):
    """'1.23 (1.20–1.30)' -> (median, min, max), all positive and ordered."""
    m = CELL_RE.match(text)
    check(m, "%s: cell %r is not 'median (min–max)'" % (what, text))
    med, lo, hi = (float(g) for g in m.groups())
    check(lo <= med <= hi, "%s: median %s not within (%s–%s)" % (what, med, lo, hi))
    return med, lo, hi


def test_bench_smoke(ctx):
    out = ctx.mkdtemp("bench-out")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, BENCH, "--build", ctx.build, "--smoke", "--out", out],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    took = time.monotonic() - t0
    log = p.stdout.decode("utf-8", "replace")
    check(p.returncode == 0, "bench.py --smoke exited %d:\n%s" % (p.returncode, indent(clip(log, 6000))))
    # How long it took is bench's business (a quiet machine: ~30 s); here the
    # 300 s above is only a hang guard, loaded machines being what they are.
    print("bench.py --smoke took %.0f s" % took)
    md_path, json_path = os.path.join(out, "BENCHMARKS.md"), os.path.join(out, "benchmarks.json")
    check(os.path.isfile(md_path) and os.path.isfile(json_path),
          "bench.py --smoke did not write BENCHMARKS.md and benchmarks.json into %s: %s\n%s" % (
              out, sorted(os.listdir(out)), indent(clip(log))))
    md = open(md_path, encoding="utf-8").read()
    data = json.load(open(json_path, encoding="utf-8"))
    ctxmsg = "\n--- BENCHMARKS.md ---\n" + indent(clip(md, 6000))

    for section in ("## Targets", "## Results per workload", "## Stop latency", "## Threads and the signal API",
                    "## Wait profile", "## Per-thread CPU accuracy", "## Commands"):
        check(section in md, "no %r section in the smoke BENCHMARKS.md%s" % (section, ctxmsg))
    check("## Problems" not in md, "the smoke run reported problems%s" % ctxmsg)

    tabs = tables(md)
    main = [rows for header, rows in tabs if header == TABLE_COLUMNS]
    check(len(main) == 1, "expected one per-workload table with columns %s; tables have headers %s%s" % (
        TABLE_COLUMNS, [h for h, _ in tabs], ctxmsg))
    rows = {r[0]: r for r in main[0]}
    check(sorted(rows) == ["plain", "profshim active"],
          "the smoke table should have rows plain and profshim active, has %s%s" % (sorted(rows), ctxmsg))
    for name, r in rows.items():
        check(len(r) == len(TABLE_COLUMNS), "row %s has %d cells, header %d%s" % (name, len(r), len(TABLE_COLUMNS), ctxmsg))
        check(r[1] == "1", "row %s: runs %r, expected 1 (one round)%s" % (name, r[1], ctxmsg))
        wall = cell(r[2], name + " wall")[0]
        cpu = cell(r[4], name + " cpu")[0]
        rss = cell(r[6], name + " rss")[0]
        check(0.02 < wall < 30, "row %s: wall %.2f s is not sane%s" % (name, wall, ctxmsg))
        check(0.01 < cpu < 30, "row %s: user+sys %.2f s is not sane%s" % (name, cpu, ctxmsg))
        check(1 < rss < 4096, "row %s: peak RSS %.1f MiB is not sane%s" % (name, rss, ctxmsg))
        for col in (3, 5, 7):
            ratio = cell(r[col], "%s %s" % (name, TABLE_COLUMNS[col]))[0]
            check(0.2 < ratio < 5, "row %s: %s %.3f is not sane%s" % (name, TABLE_COLUMNS[col], ratio, ctxmsg))
    plain, active = rows["plain"], rows["profshim active"]
    for col in (3, 5, 7):
        check(cell(plain[col], "plain ratio")[0] == 1.0, "plain's own ratio must be 1.000: %r%s" % (plain[col], ctxmsg))
    check(plain[8] == "0" and plain[9] == "—", "plain writes no files and has no stop: %r%s" % (plain, ctxmsg))
    check(re.match(r"^\d+(\.\d+)? (B|KiB|MiB).* in 3 files$", active[8]),
          "profshim active should have written 3 files: %r%s" % (active[8], ctxmsg))
    stop = cell(active[9], "active stop")[0]
    check(0 <= stop < 10000, "active stop %s ms is not sane%s" % (stop, ctxmsg))

    probe = [rows for header, rows in tabs if header == PROBE_COLUMNS]
    check(len(probe) == 1, "expected the probe's stop-latency table%s" % ctxmsg)
    prow = {r[0]: r for r in probe[0]}
    check(sorted(prow) == ["plain", "profshim active"], "probe rows: %s%s" % (sorted(prow), ctxmsg))
    lat_plain = cell(prow["plain"][2], "probe plain latency")[0]
    lat_active = cell(prow["profshim active"][2], "probe active latency")[0]
    check(0 < lat_plain < 1000 and 0 < lat_active < 10000,
          "probe latencies %.1f / %.1f ms are not sane%s" % (lat_plain, lat_active, ctxmsg))

    acc = [rows for header, rows in tabs if header and header[0] == "profiler"]
    check(len(acc) == 1 and len(acc[0]) == 2, "expected the accuracy table with 2 rows%s" % ctxmsg)
    for r in acc[0]:
        ratio = cell(r[4], "accuracy ratio " + r[0])[0]
        # A peer's accuracy is what the bench reports, not something this
        # harness test can hold it to: gperftools' process-wide ITIMER_PROF
        # loses signals on a busy machine (0.28 seen at load 13). Ours is
        # held to its own accuracy tests; here only a sane figure.
        low = 0.3 if r[0].startswith("profshim") else 0.0
        check(low < ratio < 1.5, "accuracy ratio %.2f for %s is not sane%s" % (ratio, r[0], ctxmsg))

    micro = [rows for header, rows in tabs if header == MICRO_COLUMNS]
    check(len(micro) == 1, "expected the threads/signal API table%s" % ctxmsg)
    mrows = {(r[0], r[1]): r for r in micro[0]}
    want = {("`%s`" % b, c) for b in ("threads", "sigapi", "mallocs", "climb")
            for c in ("plain", "profshim inert", "profshim active")}
    check(set(mrows) == want, "micro rows: %s, want %s%s" % (sorted(mrows), sorted(want), ctxmsg))
    for key, r in mrows.items():
        check(r[2] == "1", "micro row %s: runs %r, expected 1%s" % (key, r[2], ctxmsg))
        loop = cell(r[3], "%s loop" % (key,))[0]
        check(0 < loop < 30, "micro row %s: loop %.3f s is not sane%s" % (key, loop, ctxmsg))
        ratio = cell(r[4], "%s loop ratio" % (key,))[0]
        check(0.01 < ratio < 100, "micro row %s: ratio %.3f is not sane%s" % (key, ratio, ctxmsg))
        if key[1] == "plain":
            check(ratio == 1.0, "plain's own ratio must be 1.000: %r%s" % (r[4], ctxmsg))
    for b in ("threads", "sigapi"):
        check(any(t["workload"] == b and t["met"] is not None for t in data["targets"]),
              "no verdict for the %s target in benchmarks.json: %s" % (b, data["targets"]))

    waits = [rows for header, rows in tabs if header == WAIT_COLUMNS]
    check(len(waits) == 1, "expected the wait profile's table%s" % ctxmsg)
    wrows = {(r[0], r[1]): r for r in waits[0]}
    want = {("`%s`" % b, c) for b in ("wait-mutex", "wait-write", "wait-threads")
            for c in ("plain", "profshim inert", "profshim active, PROFILE_WAIT_SAMPLE=0", "profshim active")}
    want.add(("`wait-threads`", "profshim active, PROFILE_WAIT_SAMPLE=1"))
    check(set(wrows) == want, "wait rows: %s, want %s%s" % (sorted(wrows), sorted(want), ctxmsg))
    for key, r in wrows.items():
        check(r[2] == "1", "wait row %s: runs %r, expected 1%s" % (key, r[2], ctxmsg))
        loop = cell(r[3], "%s loop" % (key,))[0]
        check(0 < loop < 30, "wait row %s: loop %.3f s is not sane%s" % (key, loop, ctxmsg))
    for b in ("wait-mutex", "wait-write", "wait-threads"):
        check(any(t["workload"] == b and t["met"] is not None for t in data["targets"]),
              "no verdict for the %s target in benchmarks.json: %s" % (b, data["targets"]))

    # The machine-readable copy carries the same runs, with raw values.
    check(data.get("mode") == "smoke", "benchmarks.json mode %r" % data.get("mode"))
    wls = {w["key"]: w for w in data["workloads"]}
    check(set(wls) == {"xz-small", "probe"}, "benchmarks.json workloads: %s" % sorted(wls))
    for w in wls.values():
        check([c["key"] for c in w["configs"]] == ["plain", "active"],
              "%s configs in json: %s" % (w["key"], [c["key"] for c in w["configs"]]))
        for c in w["configs"]:
            check(len(c["runs"]) == 1 and c["runs"][0]["ok"], "%s/%s runs: %s" % (w["key"], c["key"], c["runs"]))
            run = c["runs"][0]
            for k in ("wall_s", "cpu_s", "maxrss_mib"):
                check(isinstance(run[k], (int, float)) and run[k] > 0, "%s/%s %s = %r" % (w["key"], c["key"], k, run[k]))
            check(c["command"] and "/OUT" not in c["command"], "command %r" % c["command"])
    check(data["targets"], "no targets evaluated in benchmarks.json")
