"""compare: `profshim diff` of two runs, function by function, as shares
of each run's total with the sampling error of each change.

Why shares: two runs of one program seldom get the same CPU (a time-boxed
job on a shared machine runs for its time, not its work), so the difference
of absolute times blames every function for the machine's mood; each
function's share of its own run's total does not move unless the mix of
work did (pprof's -normalize does the same to the base). The absolute
view (--abs) is there for runs of a fixed amount of work.

Why the error: every profile here is sampled. A count of samples is
Poisson: a function with n samples is n ± sqrt(n). The heap is sampled by
jemalloc (an allocation of x bytes with probability p = 1-exp(-x/P), P the
mean bytes between samples, the profile's period) and the wait profile by
duration (a wait of d with probability q = min(1, d/R), R from its
comment); both unsample, and a stack of N objects of size x then has the
variance N x^2 (1-p)/p: for x much below P that is S*P (S = N x, so the
relative error is sqrt(P/S)), and an object larger than P is counted
exactly. A change smaller than three standard errors is marked noise."""

import math
import re

import stacks

SIGMAS = 3.0
# The kernel fires a CPU-time timer at its tick (CONFIG_HZ: 100 to 1000 Hz),
# so above the tick's rate one signal brings several periods (the shim
# weighs each by the thread's clock): the draws are the signals, not the
# periods. The file does not say the tick; the coarsest (100 Hz) is assumed,
# which is exact at the default 100 Hz and errs on the side of noise above.
TICK_NS = 10000000


def variance_fn(p, i):
    """(function(sample) -> the variance of its value of type i, what the
    error is reckoned from), or (None, why) when the kind is not known."""
    name = p.types[i].split("/")[0]
    if p.period_type == "space/bytes" and p.period > 0:
        prefix = name.rsplit("_", 1)[0]
        oi, si = p.index(prefix + "_objects"), p.index(prefix + "_space")
        if oi is None or si is None:
            return None, "heap profile without %s_objects and %s_space" % (prefix, prefix)
        period = float(p.period)

        def keep(size):
            return -math.expm1(-size / period)
        return _unsampled(oi, si, i == si, keep), "heap sampled every %s on average" % fmt_bytes(p.period)
    rate = _wait_rate(p)
    if rate:
        ci, di = p.index("contentions"), p.index("delay")
        if ci is None or di is None:
            return None, "wait profile without contentions and delay"
        return (_unsampled(ci, di, i == di, lambda d: min(1.0, d / rate)),
                "waits sampled by duration, one per %s of waiting" % fmt_signed(rate, "nanoseconds", False))
    if p.period > 0 and p.period_type.split("/", 1)[1:] == [p.unit(i)]:
        # A CPU profile's time: signals of one period (or tick) each, Poisson.
        draw = max(p.period, TICK_NS)
        return (lambda s: abs(s.values[i]) * draw), "%d samples at %s%s" % (
            p.total(p.index("samples")) if p.index("samples") is not None else 0,
            fmt_signed(p.period, p.unit(i), False),
            "" if p.period >= TICK_NS else " (reckoned as %s: the kernel's tick)" % fmt_signed(draw, "nanoseconds"))
    if p.unit(i) == "count" and p.period_type.startswith(name + "/"):
        return (lambda s: abs(s.values[i])), "Poisson on the sample count"
    return None, "no sampling error known for %s profiles" % p.period_type


def _unsampled(count_i, size_i, of_size, keep_of):
    def var(s):
        n, b = s.values[count_i], s.values[size_i]
        if n <= 0 or b <= 0:
            return 0.0
        size = b / n
        k = keep_of(size)
        if k <= 0:
            return 0.0
        return (b * size if of_size else n) * (1 - k) / k
    return var


def _wait_rate(p):
    for c in p.comments:
        m = re.search(r"PROFILE_WAIT_SAMPLE=(\d+)", c)
        if m and p.period_type.startswith("contentions/"):
            return float(m.group(1))
    return 0.0


class Side:
    """One run's figures per function: flat and cum values, their variances,
    the total and its variance."""

    def __init__(self, profiles, type_name, lines):
        p = profiles[0]
        self.i = p.index(type_name)
        self.unit = p.unit(self.i) if self.i is not None else ""
        self.var, self.how = variance_fn(p, self.i) if self.i is not None else (None, "")
        self.flat, self.cum, self.vflat, self.vcum = {}, {}, {}, {}
        self.total = self.vtotal = 0.0
        for prof in profiles:
            for s in prof.samples:
                self._add(s, lines)

    def _add(self, s, lines):
        v = s.values[self.i] if self.i < len(s.values) else 0
        if not v:
            return
        w = self.var(s) if self.var else 0.0
        self.total += v
        self.vtotal += w
        keys = [key(f, lines) for f in s.frames] or ["(no stack)"]
        self.flat[keys[0]] = self.flat.get(keys[0], 0) + v
        self.vflat[keys[0]] = self.vflat.get(keys[0], 0) + w
        for k in set(keys):
            self.cum[k] = self.cum.get(k, 0) + v
            self.vcum[k] = self.vcum.get(k, 0) + w


def key(frame, lines):
    name, fname, line = frame
    return "%s %s:%d" % (name, fname, line) if lines else name


def change(a, b, key, which, absolute):
    """(base figure, new figure, change, its standard error) for one
    function: shares of the totals (fractions), or values with --abs. The
    error is reckoned as if nothing changed (the two runs' values pooled),
    so that a function seen in one run only is judged by what the other
    could have missed."""
    xa, xb = getattr(a, which).get(key, 0.0), getattr(b, which).get(key, 0.0)
    va, vb = getattr(a, "v" + which).get(key, 0.0), getattr(b, "v" + which).get(key, 0.0)
    per = (va + vb) / (xa + xb) if xa + xb > 0 else 0.0  # variance per unit of value
    if absolute:
        return xa, xb, xb - xa, math.sqrt(per * (xa + xb) if xa + xb > 0 else 0.0)
    share = (xa + xb) / (a.total + b.total) if a.total + b.total else 0.0
    var = 0.0
    for side in (a, b):
        if side.total <= 0:
            continue
        vx = share * side.total * per
        rest = max(0.0, side.vtotal - vx)
        var += (vx * (1 - share) ** 2 + rest * share ** 2) / side.total ** 2
    sa = xa / a.total if a.total else 0.0
    sb = xb / b.total if b.total else 0.0
    return sa, sb, sb - sa, math.sqrt(var)


def rows(a, b, absolute):
    """[(function, flat figures, cum figures, changed)], largest change first."""
    out = []
    for k in set(a.cum) | set(b.cum):
        fl, cu = change(a, b, k, "flat", absolute), change(a, b, k, "cum", absolute)
        changed = any(abs(c[2]) > SIGMAS * c[3] and c[2] != 0 for c in (fl, cu))
        out.append((k, fl, cu, changed))
    out.sort(key=lambda r: (-max(abs(r[1][2]), abs(r[2][2])), r[0]))
    return out


def fmt_bytes(v):
    return fmt_signed(v, "bytes", False)


def fmt_signed(v, unit, signed=True):
    sign = "+" if signed and v > 0 else ""
    a = abs(v)
    if v == 0:
        return "0"
    if unit == "nanoseconds":
        text = "%.2f s" % (v / 1e9) if a >= 1e9 else "%.0f ms" % (v / 1e6) if a >= 1e6 else "%.0f us" % (v / 1e3)
    elif unit == "bytes":
        text = ("%.1f MiB" % (v / 1048576.0) if a >= 1048576 else "%.1f KiB" % (v / 1024.0) if a >= 1024
                else "%d B" % v)
    else:
        text = "%.0f" % v
    return sign + text


def table(a, b, n, absolute):
    """The lines of the comparison: a legend and one row per function."""
    def cell(fig, signed):
        if absolute:
            return fmt_signed(fig, a.unit, signed)
        return ("%+.1f%%" if signed else "%.1f%%") % (100 * fig)

    def part(f):
        return "%9s %9s %9s %9s" % (cell(f[0], False), cell(f[1], False), cell(f[2], True),
                                    "±" + cell(SIGMAS * f[3], False))
    cols = "%9s %9s %9s %9s" % ("base", "new", "change", "±3σ")
    out = ["%-39s   %-39s" % ("flat (in the function itself)", "cum (with all it called)"),
           "%s   %s  %-8s %s" % (cols, cols, "verdict", "function")]
    rs = rows(a, b, absolute)
    for k, fl, cu, changed in rs[:n]:
        out.append("%s   %s  %-8s %s" % (part(fl), part(cu), "CHANGED" if changed else "noise", k))
    if len(rs) > n:
        more = sum(1 for r in rs[n:] if r[3])
        out.append("(%d more function%s, %d of them changed: -n %d shows all)" % (
            len(rs) - n, "" if len(rs) - n == 1 else "s", more, len(rs)))
    return out


def compare(base_files, new_files, type_name, n, absolute, lines):
    """The text of `profshim diff` for one kind (its files: the final one
    and any snapshots, added up), or raises ValueError."""
    bp = [stacks.read(f) for f in base_files]
    np_ = [stacks.read(f) for f in new_files]
    t = type_name or np_[0].default_type
    if np_[0].index(t) is None or bp[0].index(t) is None:
        raise ValueError("no sample type %s in both" % t)
    a, b = Side(bp, t, lines), Side(np_, t, lines)
    unit = b.unit
    ratio = ("x%.2f" % (b.total / a.total)) if a.total else "base empty"
    out = ["%s: base %s, new %s (%s); %s." % (
        t, fmt_signed(a.total, unit, False), fmt_signed(b.total, unit, False), ratio, b.how or a.how)]
    if absolute:
        out.append("Each function's %s, base and new, and the change (--abs)." % t)
    else:
        out.append("Each function's share of its own run's total, base and new, and the change "
                   "(--abs: the values).")
    if b.var is None or a.var is None:
        out.append("No error estimate: every change is shown as CHANGED.")
    else:
        out.append("A change within 3 standard errors of the sampling (±3σ) is noise, not a change of the program.")
    if not a.total and not b.total:
        return out[:1] + ["No samples in either run."]
    return out + table(a, b, n, absolute)
