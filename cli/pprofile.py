"""pprofile: what `profshim ls` needs from a pprof file, read with the
standard library alone: the gzip header's comment (the shim's marker), and
from profile.proto the sample types, each type's total, the comments, the
time and the period. Locations, functions and mappings are skipped unread.

Why not `go tool pprof -raw`, as everything else here does: ls must work
where Go is not installed (the Debian package only suggests golang-go),
and a process tree's directory holds hundreds of files: pprof costs ~11 ms
a file here, this ~1 ms (docs/TOOLS.md has the measurement). The test
test_cli_ls::test_decoder_agrees_with_pprof checks every figure against
pprof's."""

import gzip
import struct

FTEXT, FHCRC, FEXTRA, FNAME, FCOMMENT = 1, 2, 4, 8, 16


def gzip_comment(path):
    """The gzip member's FCOMMENT field as text, or "" (no decompression)."""
    with open(path, "rb") as f:
        head = f.read(4096)
    if len(head) < 10 or head[:3] != b"\x1f\x8b\x08":
        return ""
    flags, i = head[3], 10
    if flags & FEXTRA:
        if len(head) < i + 2:
            return ""
        i += 2 + struct.unpack_from("<H", head, i)[0]
    for flag in (FNAME, FCOMMENT):
        if flags & flag:
            end = head.find(b"\0", i)
            if end < 0:
                return ""
            if flag == FCOMMENT:
                return head[i:end].decode("latin-1")
            i = end + 1
    return ""


def parse_marker(comment):
    """The shim's "profshim session=ROOTPID:START pid=PID alt=STEM cpu=NS
    [forks=N:NS] exe=PATH" as a dict, or None (another writer's file, or an
    older shim's). cpu= (the image's CPU to its stop) is absent in older
    files; forks= (the forked children merged into the file, and their CPU)
    when none was."""
    if not comment.startswith("profshim session="):
        return None
    try:
        head, exe = comment.split(" exe=", 1)
        head, alt = head.split(" alt=", 1)
        alt, _, cpu = alt.partition(" cpu=")
        cpu, _, forks = cpu.partition(" forks=")
        session, pid = head[len("profshim session="):].split(" pid=", 1)
        int(pid)
        cpu_ns = int(cpu) if cpu else None
        n, _, fcpu = forks.partition(":")
        merged = (int(n), int(fcpu)) if forks else None
    except ValueError:
        return None
    return {"session": session, "pid": int(pid), "alt": alt, "cpu_ns": cpu_ns, "exe": exe, "forks": merged}


def _varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def _fields(buf, start=0, end=None):
    """(field number, wire type, value) for each field of one message; a
    length-delimited value is (start, end) into buf."""
    for num, wt, v, _ in _spans(buf, start, end):
        yield num, wt, v


def _spans(buf, start=0, end=None):
    """_fields with each field's own bytes, (start, end): for a writer
    that copies fields as they are (graph.py)."""
    i, end = start, len(buf) if end is None else end
    while i < end:
        first = i
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 2:
            n, i = _varint(buf, i)
            v, i = (i, i + n), i + n
        elif wt == 1:
            v, i = struct.unpack_from("<q", buf, i)[0], i + 8
        elif wt == 5:
            v, i = struct.unpack_from("<i", buf, i)[0], i + 4
        else:
            raise ValueError("wire type %d at byte %d" % (wt, i))
        yield num, wt, v, (first, i)


def _signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def _ints(buf, wt, v):
    """A repeated integer field's values, packed or not."""
    if wt == 0:
        return [_signed(v)]
    out, i, end = [], v[0], v[1]
    while i < end:
        x, i = _varint(buf, i)
        out.append(_signed(x))
    return out


def _value_type(buf, span):
    t = u = 0
    for num, _, v in _fields(buf, *span):
        if num == 1:
            t = v
        elif num == 2:
            u = v
    return t, u


class Summary:
    """types: ["cpu/nanoseconds", ...]; totals: one sum per type."""

    def __init__(self):
        self.types, self.totals, self.comments = [], [], []
        self.samples = 0
        self.time_nanos = self.duration_nanos = self.period = 0
        self.period_type = ""
        self.default_type = ""

    def total(self, name):
        """The total of the sample type named name ("cpu", "inuse_space"),
        or None when the profile has no such type."""
        for t, v in zip(self.types, self.totals):
            if t.split("/")[0] == name:
                return v
        return None

    def unit(self, name):
        for t in self.types:
            if t.split("/")[0] == name:
                return t.split("/", 1)[1]
        return ""


def read(path):
    """Summary of the profile at path (gzip'd or not)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    strings, types, period_type, comment_ids, dflt = [], [], (0, 0), [], 0
    s = Summary()
    sums = []
    for num, wt, v in _fields(data):
        if num == 2:  # Sample: value = field 2
            s.samples += 1
            for n2, wt2, v2 in _fields(data, *v):
                if n2 == 2:
                    vals = _ints(data, wt2, v2)
                    if len(sums) < len(vals):
                        sums.extend([0] * (len(vals) - len(sums)))
                    for k, x in enumerate(vals):
                        sums[k] += x
        elif num == 6:
            strings.append(data[v[0]:v[1]].decode("utf-8", "replace"))
        elif num == 1:
            types.append(_value_type(data, v))
        elif num == 13:
            comment_ids.extend(_ints(data, wt, v))
        elif num == 9:
            s.time_nanos = _signed(v)
        elif num == 10:
            s.duration_nanos = _signed(v)
        elif num == 11:
            period_type = _value_type(data, v)
        elif num == 12:
            s.period = _signed(v)
        elif num == 14:
            dflt = v

    def string(k):
        return strings[k] if 0 <= k < len(strings) else ""
    s.types = ["%s/%s" % (string(t), string(u)) for t, u in types]
    s.totals = (sums + [0] * len(types))[:len(types)]
    s.comments = [string(k) for k in comment_ids]
    s.period_type = "%s/%s" % (string(period_type[0]), string(period_type[1]))
    s.default_type = string(dflt) if dflt else (s.types[-1].split("/")[0] if s.types else "")
    return s
