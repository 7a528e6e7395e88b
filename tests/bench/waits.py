"""The "Wait profile" section of `make bench` (bench.py calls run(),
targets() and render(); `bench.py --only waits` runs this section alone and
re-renders the page from the last full run's benchmarks.json): what the wait
profile (NAME.wait.pprof, PROFILE_WAIT_SAMPLE) costs.

- wait-mutex (tests/bench/waitcost.c mutex): lock/unlock of one uncontended
  mutex. Target: active ≤ 1.02× inert.
- wait-write: 1M write()s of 1 byte to /dev/null. Target: active ≤ 1.10×
  inert.
- wait-threads: 256 threads blocked nearly all the time in 1 ms
  nanosleep()s, 30 frames deep. Target: the wait profile's extra CPU
  (active − active with PROFILE_WAIT_SAMPLE=0, per round) ≤ 3% of one CPU
  (0.03 CPU-seconds per second of wall time, as top's %CPU): how the default
  PROFILE_WAIT_SAMPLE was chosen (docs/CONFIG.md). Also run with every wait
  recorded (PROFILE_WAIT_SAMPLE=1), which gives the CPU one record costs
  with 20x the signal; times the waits the default records, that is the
  same cost from its parts, reported beside the direct figure (which the
  machine's noise can swamp).
- The real workloads of the main tables, active with and without the wait
  profile: its cost on programs that do not mostly wait. Reported.

The microbenchmarks time their loop from inside (CLOCK_MONOTONIC and
CLOCK_PROCESS_CPUTIME_ID, written to a pipe). For the single-threaded loops
the verdict is on the loop's CPU time: the loop's own cost, which a busy
machine's preemptions do not change as they change its wall time.
Configurations interleaved (every program under every configuration, then
again), one warm-up round not counted; a ratio is the median of per-round
ratios.
"""

import datetime
import os
import re
import shutil
import statistics
import subprocess

CONFIGS = [("plain", "plain"), ("inert", "profshim inert"),
           ("nowait", "profshim active, PROFILE_WAIT_SAMPLE=0"), ("active", "profshim active"),
           ("every", "profshim active, PROFILE_WAIT_SAMPLE=1")]
LABELS = dict(CONFIGS)
RESULT_RE = re.compile(r"loop_s ([\d.]+) cpu_s ([\d.]+) waits (\d+)")
THREADS, THREAD_S, DEPTH, WAIT_US = 256, 3, 30, 1000
CPU_SHARE = 0.03  # of one CPU
DEFAULT_RATE_NS = 100000000  # PROFILE_WAIT_SAMPLE's default (shim/config.h)


class Micro:
    def __init__(self, key, label, args, smoke_args, limit, base, mechanism, configs=("plain", "inert", "nowait",
                                                                                      "active")):
        self.key, self.label, self.args, self.smoke_args = key, label, args, smoke_args
        self.limit, self.base, self.mechanism, self.configs = limit, base, mechanism, configs


MICROS = [
    Micro("wait-mutex", "uncontended mutex, %s lock/unlock pairs (a counter increment inside)", ["mutex", "50000000"],
          ["mutex", "200000"], 1.02, "inert",
          "the pthread_mutex_lock wrapper's one load and branch more than inert (shim/hooks_wait.cc: a free "
          "mutex is locked untimed), under 1 ns a pair: at this resolution the machine's noise decides"),
    Micro("wait-write", "%s write()s of 1 byte to /dev/null", ["write", "1000000"], ["write", "20000"], 1.10,
          "inert", "two reads of the TSC (~10 ns each on this machine) and a draw per call (shim/waits.h), "
          "against a ~140 ns write()"),
    Micro("wait-threads", "%s threads, each %s frames deep, blocked in nanosleep(%s µs) over and over for %s s",
          ["threads", str(THREADS), str(THREAD_S), str(DEPTH), str(WAIT_US)],
          ["threads", "32", "0.5", str(DEPTH), str(WAIT_US)], CPU_SHARE, "nowait",
          "the stack walks of the sampled waits (libgcc's DWARF unwinder, shim/stackwalk.cc): "
          "PROFILE_WAIT_SAMPLE sets how many", configs=("plain", "inert", "nowait", "active", "every")),
]


def summarize(values):
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def _describe(m, args):
    if m.key == "wait-threads":
        return m.label % (args[1], args[3], args[4], args[2])
    return m.label % "{:,}".format(int(args[1])).replace(",", " ")


def _env(bench, cfg, out, name):
    env = bench.base_env()
    if cfg != "plain":
        env["LD_PRELOAD"] = bench.shim
    if cfg in ("nowait", "active", "every"):
        env.update(PROFILE_DIR=out, PROFILE_NAME=name)
    if cfg == "nowait":
        env["PROFILE_WAIT_SAMPLE"] = "0"
    if cfg == "every":
        env["PROFILE_WAIT_SAMPLE"] = "1"
    return env


def _shown(bench, env, argv, out):
    words = ["%s=%s" % (k, env[k]) for k in ("LD_PRELOAD", "PROFILE_DIR", "PROFILE_NAME", "PROFILE_WAIT_SAMPLE")
             if k in env]
    return " ".join(words + argv).replace(bench.shim, "$SHIM").replace(out, "$OUT").replace(bench.bin, "$BIN")


def _micro_run(bench, run_program, prog, m, cfg, rnd, args, commands):
    bench.counter += 1
    cwd = os.path.join(bench.tmp, "waits-%d" % bench.counter)
    out = os.path.join(cwd, "out")
    os.makedirs(out)
    env = _env(bench, cfg, out, m.key)
    rfd, wfd = os.pipe()
    argv = [prog, str(wfd)] + args
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
    commands[(m.key, cfg)] = _shown(bench, env, [prog, "FD"] + args, out)
    r = {"round": rnd, "ok": True, "rc": rc, "wall_s": wall}
    mm = RESULT_RE.search(text)
    waits_file = os.path.isfile(os.path.join(out, m.key + ".wait.pprof"))
    if rc != 0 or not mm or waits_file != (cfg in ("active", "every")):
        r.update(ok=False, error="exit status %d, report %r, wait profile %s" % (
            rc, text, "written" if waits_file else "not written"), stderr_tail=err[-1500:])
        bench.problems.append("%s / %s / round %d: %s" % (m.key, cfg, rnd, r["error"]))
        bench.log("PROBLEM %s / %s / round %d: %s\n%s" % (m.key, cfg, rnd, r["error"], err[-1500:]))
    else:
        r.update(loop_s=float(mm.group(1)), cpu_s=float(mm.group(2)), waits=int(mm.group(3)))
        ws = re.search(r"\| waits (\d+\.\d+) s \|", err)
        r["waited_s"] = float(ws.group(1)) if ws else None
    shutil.rmtree(cwd, ignore_errors=True)
    return r


def _workload_run(bench, run_program, wl, cfg, rnd, commands):
    bench.counter += 1
    cwd = os.path.join(bench.tmp, "waits-%d" % bench.counter)
    out = os.path.join(cwd, "out")
    os.makedirs(out)
    env = _env(bench, cfg, out, wl.key)
    env.update(wl.env)
    rc, wall, ru, err, _ = run_program(bench.runner, wl.argv, env, cwd, wl.stdin, 300)
    line = " ".join(wl.argv) + (" < " + wl.stdin if wl.stdin else "")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    commands[(wl.key, cfg)] = _shown(bench, env, [line], out).replace(bench.data, "$DATA") \
        .replace(os.path.join(repo, ""), "$REPO/")
    # profshim's symbol cache (a hidden directory the images of a session
    # share) is not one of the files.
    files = sorted(f for f in os.listdir(out) if not f.startswith("."))
    r = {"round": rnd, "ok": True, "rc": rc, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "files": files}
    want = 3 if cfg == "active" else 2
    if rc != 0 or len(files) != want:
        r.update(ok=False, error="exit status %d, files %s (want %d)" % (rc, files, want), stderr_tail=err[-1500:])
        bench.problems.append("%s / %s / round %d: %s" % (wl.key, cfg, rnd, r["error"]))
        bench.log("PROBLEM %s / %s / round %d: %s\n%s" % (wl.key, cfg, rnd, r["error"], err[-1500:]))
    m = re.search(r"\| waits (\d+\.\d+) s \|", err)
    r["waits_s"] = float(m.group(1)) if m else None
    shutil.rmtree(cwd, ignore_errors=True)
    return r


def _paired(runs, num, den, fn):
    a = {r["round"]: r for r in runs.get(num, []) if r["round"] >= 1 and r["ok"]}
    b = {r["round"]: r for r in runs.get(den, []) if r["round"] >= 1 and r["ok"]}
    return summarize([fn(a[k], b[k]) for k in sorted(set(a) & set(b))])


def run(bench, run_program, rounds):
    """Every row under its configurations for `rounds` counted rounds (after
    one warm-up round unless smoke); the section's data for benchmarks.json."""
    smoke = bench.smoke
    prog = bench.cc("waitcost.c", "waitcost", ["-pthread"])
    wls = [] if smoke else bench.workloads()
    first = 1 if smoke else 0
    runs = {}
    commands = {}
    for rnd in range(first, rounds + 1):
        for m in MICROS:
            args = m.smoke_args if smoke else m.args
            for cfg in m.configs:
                runs.setdefault(m.key, {}).setdefault(cfg, []).append(
                    _micro_run(bench, run_program, prog, m, cfg, rnd, args, commands))
        for wl in wls:
            for cfg in ("nowait", "active"):
                runs.setdefault(wl.key, {}).setdefault(cfg, []).append(
                    _workload_run(bench, run_program, wl, cfg, rnd, commands))
        bench.log("waits round %d%s done" % (rnd, " (warm-up)" if rnd < 1 else ""))
    micros = []
    for m in MICROS:
        args = m.smoke_args if smoke else m.args
        rs = runs[m.key]
        cfgs = []
        for cfg in m.configs:
            label = LABELS[cfg]
            good = [r for r in rs[cfg] if r["round"] >= 1 and r["ok"]]
            cfgs.append({"key": cfg, "label": label, "command": commands.get((m.key, cfg)),
                         "summary": {k: summarize([r[k] for r in good]) for k in ("loop_s", "cpu_s", "waits")},
                         "ratio_to_base": {k: _paired(rs, cfg, m.base, lambda x, y, k=k: x[k] / y[k] if y[k] else None)
                                           for k in ("loop_s", "cpu_s")},
                         "runs": rs[cfg]})
        extra = _paired(rs, "active", "nowait", lambda x, y: (x["cpu_s"] - y["cpu_s"]) / x["loop_s"])
        record_us = model = None
        if "every" in m.configs:
            # Every wait recorded: the CPU a record costs, per round, from
            # the CPU per wait with and without (20x the default's records,
            # so the machine's noise matters 20x less).
            record_us = _paired(rs, "every", "nowait", lambda x, y: (x["cpu_s"] / x["waits"] - y["cpu_s"] / y["waits"])
                                * 1e6 if x["waits"] and y["waits"] else None)
            # At the default rate a wait of d < R is recorded with chance d/R:
            # records = the time waited (the summary's waits) / R.
            act = [r for r in rs["active"] if r["round"] >= 1 and r["ok"] and r.get("waited_s")]
            if record_us and act:
                rate_s = DEFAULT_RATE_NS / 1e9
                model = summarize([r["waited_s"] / rate_s * record_us["median"] / 1e6 / r["loop_s"] for r in act])
        micros.append({"key": m.key, "label": _describe(m, args), "base": m.base, "limit": m.limit,
                       "mechanism": m.mechanism, "configs": cfgs, "extra_cpu_share": extra,
                       "record_us": record_us, "model_share": model})
    workloads = []
    for wl in wls:
        rs = runs[wl.key]
        workloads.append({
            "key": wl.key, "label": wl.label,
            "commands": {c: commands.get((wl.key, c)) for c in ("nowait", "active")},
            "wall": {c: summarize([r["wall_s"] for r in rs[c] if r["round"] >= 1 and r["ok"]]) for c in rs},
            "cpu": {c: summarize([r["cpu_s"] for r in rs[c] if r["round"] >= 1 and r["ok"]]) for c in rs},
            "waits_s": summarize([r["waits_s"] for r in rs["active"] if r["round"] >= 1 and r["ok"]]),
            "wall_ratio": _paired(rs, "active", "nowait", lambda x, y: x["wall_s"] / y["wall_s"]),
            "cpu_ratio": _paired(rs, "active", "nowait", lambda x, y: x["cpu_s"] / y["cpu_s"]),
            "runs": rs})
    head = subprocess.run(["git", "-C", os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "rev-parse",
                           "--short", "HEAD"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode().strip()
    return {"rounds": rounds, "warmup": 1 - first, "micros": micros, "workloads": workloads,
            "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "git_head": head or "?", "shim_sha256": bench.shim_sha,
            "load_end": " ".join(open("/proc/loadavg").read().split()[:3])}


def _cfg(b, key):
    return next((c for c in b["configs"] if c["key"] == key), None)


def targets(data):
    """Target rows in bench.py's format, with the cause of a miss."""
    out = []
    if not data:
        return out
    for b in data["micros"]:
        if b["key"] == "wait-threads":
            e, mod, rec = b["extra_cpu_share"], b.get("model_share"), b.get("record_us")
            if not e:
                continue
            met = e["median"] <= b["limit"]
            detail = "per-round (active − PROFILE_WAIT_SAMPLE=0) CPU / loop wall: median %.4f (%.4f–%.4f) CPU" % (
                e["median"], e["min"], e["max"])
            if mod and rec:
                detail += "; from the cost of a record (%.2f µs, median of per-round PROFILE_WAIT_SAMPLE=1 − 0 CPU " \
                          "per wait, %.2f–%.2f) × the waits recorded at the default: %.4f (%.4f–%.4f) CPU" % (
                              rec["median"], rec["min"], rec["max"], mod["median"], mod["min"], mod["max"])
            if not met:
                detail += ". Missed: %s" % b["mechanism"]
            out.append({"target": "wait profile's extra CPU ≤ %.0f%% of one CPU" % (100 * b["limit"]),
                        "workload": b["key"], "value": e["median"], "limit": b["limit"], "met": met,
                        "detail": detail})
            continue
        a = _cfg(b, "active")
        r, w = a["ratio_to_base"]["cpu_s"], a["ratio_to_base"]["loop_s"]
        if not r:
            continue
        met = r["median"] <= b["limit"]
        detail = "per-round active/%s loop CPU: median %.3f (%.3f–%.3f)" % (b["base"], r["median"], r["min"], r["max"])
        if w:
            detail += "; loop wall: %.3f (%.3f–%.3f)" % (w["median"], w["min"], w["max"])
        base = _cfg(b, b["base"])
        n = a["summary"]["waits"]["median"] if a["summary"]["waits"] else 0
        if base and base["summary"]["cpu_s"] and n:
            extra = (a["summary"]["cpu_s"]["median"] - base["summary"]["cpu_s"]["median"]) / n * 1e9
            detail += "; %+.1f ns per call" % extra
        if not met:
            detail += ". Missed: %s" % b["mechanism"]
        out.append({"target": "profshim active ≤ %.2f× %s (loop CPU)" % (b["limit"], LABELS[b["base"]]),
                    "workload": b["key"], "value": r["median"], "limit": b["limit"], "met": met, "detail": detail})
    return out


def _per_call(data):
    for t in targets(data):
        if t["workload"] == "wait-write":
            m = re.search(r"([+-]\d+\.\d) ns per call", t["detail"])
            return "%s ns a call" % m.group(1) if m else "?"
    return "?"


def render(data, fmt_range, md_table):
    """The markdown section (a list of lines)."""
    if not data:
        return []
    L = ["## Wait profile", "",
         "Measured %s at %s (shim sha256 %s…) by `python3 tests/bench/bench.py --only waits` (this section alone, "
         "the rest of the page kept from the last full run) or as part of the full run: %d warm-up + %d counted "
         "rounds, interleaved. The loops are timed from inside (`CLOCK_MONOTONIC` and `CLOCK_PROCESS_CPUTIME_ID`, "
         "written to a pipe) by `tests/bench/waitcost.c`; a `×` cell is the median (min–max) of per-round ratios "
         "to the configuration named. The single-threaded loops are judged on their CPU time, which a busy "
         "machine's preemptions do not change as they change wall time." % (
             data["generated"], data["git_head"], data["shim_sha256"][:16], data["warmup"], data["rounds"]), ""]
    rows = []
    for b in data["micros"]:
        for c in b["configs"]:
            s, r = c["summary"], c["ratio_to_base"]
            rows.append(["`%s`" % b["key"], c["label"], str(s["loop_s"]["n"] if s["loop_s"] else 0),
                         fmt_range(s["loop_s"], "%.3f"), fmt_range(s["cpu_s"], "%.3f"),
                         fmt_range(r["loop_s"], "%.3f"), fmt_range(r["cpu_s"], "%.3f")])
    L.append(md_table(["benchmark", "configuration", "runs", "loop s", "loop cpu s", "loop ×base", "cpu ×base"],
                      rows))
    L.append("")
    for b in data["micros"]:
        L.append("- `%s`: %s. Base: %s." % (b["key"], b["label"], LABELS[b["base"]]))
        if b["key"] == "wait-threads" and b["extra_cpu_share"]:
            e = b["extra_cpu_share"]
            a = _cfg(b, "active")
            w = a["summary"]["waits"]
            L.append("  - The wait profile's extra CPU, measured directly (active − `PROFILE_WAIT_SAMPLE=0`, per "
                     "round): median %.4f CPU-seconds per second (%.1f%% of one CPU; min %.4f, max %.4f), over %s "
                     "blocking calls a run (median) at the default PROFILE_WAIT_SAMPLE. On a shared machine each "
                     "run's CPU swings by a few percent, as much as the figure itself." % (
                         e["median"], 100 * e["median"], e["min"], e["max"],
                         "{:,}".format(int(w["median"])).replace(",", " ") if w else "?"))
            rec, mod = b.get("record_us"), b.get("model_share")
            if rec and mod:
                L.append("  - The same from its parts: a recorded wait costs %.2f µs of CPU (per round, CPU per "
                         "wait with every wait recorded less without the profile: %.2f–%.2f), and at the default "
                         "the waits recorded are the time waited (the summary's `waits`) / 100 ms: %.4f CPU-seconds "
                         "per second (%.1f%% of one CPU; %.4f–%.4f), the timing of each call aside (`wait-write`: "
                         "%s)." % (rec["median"], rec["min"], rec["max"], mod["median"], 100 * mod["median"],
                                   mod["min"], mod["max"], _per_call(data)))
        for c in b["configs"]:
            L.append("  - %s: `%s`" % (c["label"], c["command"]))
    L.append("")
    if data["workloads"]:
        L.append("The real workloads of the tables above, active without (`PROFILE_WAIT_SAMPLE=0`) and with the "
                 "wait profile (default rate), interleaved; ratios per round, active over the other.")
        L.append("")
        rows = []
        for w in data["workloads"]:
            rows.append(["`%s`" % w["key"], fmt_range(w["wall"].get("nowait"), "%.2f"),
                         fmt_range(w["wall"].get("active"), "%.2f"), fmt_range(w["wall_ratio"], "%.3f"),
                         fmt_range(w["cpu"].get("nowait"), "%.2f"), fmt_range(w["cpu"].get("active"), "%.2f"),
                         fmt_range(w["cpu_ratio"], "%.3f"), fmt_range(w["waits_s"], "%.2f")])
        L.append(md_table(["workload", "wall s, no wait profile", "wall s, wait profile", "wall ×", "user+sys s, no "
                           "wait profile", "user+sys s, wait profile", "cpu ×", "waits in the summary s"], rows))
        L.append("")
        for w in data["workloads"]:
            L.append("- `%s` with the wait profile: `%s`" % (w["key"], w["commands"]["active"]))
        L.append("")
    return L
