"""stacks: a pprof file's samples with their call stacks and labels, read
with the standard library (pprofile.py's wire reader), for what pprof's
text output cannot give: shares with their sampling error (diff), flame
graphs and per-thread tables (report).

Each sample becomes (frames, values, labels): frames leaf first, inlined
functions as frames of their own (a Location's lines, innermost first, as
pprof shows them), each frame (function name, file, line), a function
marked " (inline)" or " (partial-inline)" as pprof's text report marks it
(every, or some, of the calls into it inlined); values one per
sample type; labels {key: text}. The profile's drop_frames is applied as
pprof applies it (profile/prune.go): from the root toward the leaf, past
the first frame that does not match, the first that does is cut with all
it called, so a heap profile shows who asked for the memory."""

import gzip
import re

import pprofile

_fields, _ints, _signed = pprofile._fields, pprofile._ints, pprofile._signed

# pprof matches drop_frames against a name without its argument list; these
# two hold a '(' that is part of the name.
_RESERVED = ("(anonymous namespace)", "operator()")


class Sample:
    __slots__ = ("frames", "values", "labels")

    def __init__(self, frames, values, labels):
        self.frames, self.values, self.labels = frames, values, labels


class Profile:
    def __init__(self):
        self.types = []  # ["cpu/nanoseconds", ...]
        self.samples = []
        self.period = 0
        self.period_type = ""
        self.default_type = ""
        self.comments = []
        self.duration_nanos = 0

    def index(self, name):
        """The position of the sample type named name, or None."""
        for i, t in enumerate(self.types):
            if t.split("/")[0] == name:
                return i
        return None

    def unit(self, i):
        return self.types[i].split("/", 1)[1] if 0 <= i < len(self.types) else ""

    def total(self, i):
        return sum(s.values[i] for s in self.samples if i < len(s.values))


def simplify(name):
    """name without its argument list (pprof's simplifyFunc)."""
    name = name[1:] if name.startswith(".") else name
    i = 0
    while True:
        i = name.find("(", i)
        if i <= 0:
            return name
        if any(name.startswith(r, i) for r in _RESERVED) or name.endswith("operator", 0, i):
            i += 1
            continue
        return name[:i]


def _message(buf, span, want):
    """{field number: [values]} of one nested message, for the fields wanted."""
    out = {}
    for num, wt, v in _fields(buf, *span):
        if num in want:
            out.setdefault(num, []).extend(_ints(buf, wt, v) if want[num] == "ints" else [v])
    return out


def read(path):
    """The Profile at path (gzip'd or not)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    strings, raw_samples, locations, functions, mappings = [], [], {}, {}, {}
    types, period_type, drop, dflt, comment_ids = [], (0, 0), 0, 0, []
    p = Profile()
    for num, wt, v in _fields(data):
        if num == 6:
            strings.append(data[v[0]:v[1]].decode("utf-8", "replace"))
        elif num == 2:
            raw_samples.append(v)
        elif num == 4:
            m = _message(data, v, {1: "int", 2: "int", 3: "int", 4: "span"})
            locations[m.get(1, [0])[0]] = ([_message(data, s, {1: "int", 2: "int"}) for s in m.get(4, [])],
                                           m.get(2, [0])[0], m.get(3, [0])[0])
        elif num == 3:
            m = _message(data, v, {1: "int", 5: "int"})
            mappings[m.get(1, [0])[0]] = m.get(5, [0])[0]
        elif num == 5:
            m = _message(data, v, {1: "int", 2: "int", 4: "int"})
            functions[m.get(1, [0])[0]] = (m.get(2, [0])[0], m.get(4, [0])[0])
        elif num == 1:
            types.append(pprofile._value_type(data, v))
        elif num == 11:
            period_type = pprofile._value_type(data, v)
        elif num == 12:
            p.period = _signed(v)
        elif num == 7:
            drop = v
        elif num == 14:
            dflt = v
        elif num == 13:
            comment_ids.extend(_ints(data, wt, v))
        elif num == 10:
            p.duration_nanos = _signed(v)

    def string(k):
        return strings[k] if 0 <= k < len(strings) else ""
    p.types = ["%s/%s" % (string(t), string(u)) for t, u in types]
    p.period_type = "%s/%s" % (string(period_type[0]), string(period_type[1]))
    p.default_type = string(dflt) if dflt else (p.types[-1].split("/")[0] if p.types else "")
    p.comments = [string(k) for k in comment_ids]
    frames_of = {}
    for lid, (lines, mapping, address) in locations.items():
        # A location without lines is named as pprof names it: [its
        # mapping's file name], else its address.
        fname = string(mappings.get(mapping, 0)).rsplit("/", 1)[-1]
        fr = [] if lines else [("[%s]" % fname if fname else "0x%x" % address, "", 0, False)]
        for i, ln in enumerate(lines):
            name, fname = functions.get(ln.get(1, [0])[0], (0, 0))
            # All but a location's last line are inlined calls: pprof names
            # those "f (inline)", a node apart from f's own.
            fr.append((string(name), string(fname), ln.get(2, [0])[0], i < len(lines) - 1))
        frames_of[lid] = fr
    dropper = _dropper(string(drop))
    for span in raw_samples:
        m = _message(data, span, {1: "ints", 2: "ints", 3: "span"})
        frames = []
        for lid in m.get(1, []):
            frames.extend(frames_of.get(lid) or [("?", "", 0, False)])
        labels = {}
        for lab in m.get(3, []):
            lm = _message(data, lab, {1: "int", 2: "int"})
            if lm.get(2):
                labels[string(lm[1][0])] = string(lm[2][0])
        p.samples.append(Sample(dropper(frames), m.get(2, []), labels))
    suffix = _inline_suffixes(p.samples)
    for smp in p.samples:
        smp.frames = [(f[0] + suffix.get(f[0], ""), f[1], f[2]) for f in smp.frames]
    return p


def _inline_suffixes(samples):
    """{name: " (inline)" or " (partial-inline)"} as pprof's text report
    marks a function (report.TextItems): by the edges into its node, one
    node per name; an edge is inline if every call it stands for was
    inlined into its caller (graph.New: not a location's last line), and a
    node whose in-edges all are is "(inline)", some "(partial-inline)"."""
    edges = {}
    for smp in samples:
        seen, parent = set(), None
        for name, _, _, inlined in reversed(smp.frames):
            if parent is not None and name != parent and (parent, name) not in seen:
                seen.add((parent, name))
                edges[(parent, name)] = edges.get((parent, name), True) and inlined
            parent = name
    kinds = {}
    for (_, callee), inline in edges.items():
        kinds.setdefault(callee, set()).add(inline)
    return {n: " (inline)" if k == {True} else " (partial-inline)" for n, k in kinds.items() if True in k}


def _dropper(pattern):
    if not pattern:
        return lambda frames: frames
    rx = re.compile("^(?:%s)$" % pattern)

    def prune(frames):
        user = False
        for i in range(len(frames) - 1, -1, -1):
            if not rx.match(simplify(frames[i][0])):
                user = True
            elif user:
                return frames[i + 1:]
        return frames
    return prune
