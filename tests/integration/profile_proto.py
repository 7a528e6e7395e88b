"""Reads a gzip'd profile.proto as it is on disk, without go tool pprof.

`go tool pprof -raw` leaves out mappings that no location uses and prints
times in local time; the tests of what the file itself says (every mapping
it lists, time_nanos, duration_nanos) read the message directly. Field
numbers are github.com/google/pprof proto/profile.proto's.
"""

import gzip


def _varint(b, i):
    r = shift = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return r, i


def _fields(b):
    """(field number, value) of one message: ints for varints, bytes else."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(b, i)
        elif wire == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d at byte %d" % (wire, i))
        yield field, v


class RawMapping:
    def __init__(self, fields, strings):
        self.id = fields.get(1, 0)
        self.start, self.limit, self.offset = fields.get(2, 0), fields.get(3, 0), fields.get(4, 0)
        self.file = strings[fields.get(5, 0)]
        self.build_id = strings[fields.get(6, 0)]
        self.has_functions, self.has_filenames = bool(fields.get(7)), bool(fields.get(8))
        self.has_line_numbers, self.has_inline_frames = bool(fields.get(9)), bool(fields.get(10))

    def bits(self):
        return "".join(tag for tag, on in (("[FN]", self.has_functions), ("[FL]", self.has_filenames),
                                           ("[LN]", self.has_line_numbers), ("[IN]", self.has_inline_frames))
                       if on)

    def __repr__(self):
        return "%d: %#x-%#x %s %s" % (self.id, self.start, self.limit, self.file, self.bits())


class RawProfile:
    def __init__(self, path):
        top = list(_fields(gzip.open(path).read()))
        self.strings = [v.decode("utf-8", "replace") for f, v in top if f == 6]
        self.mappings = [RawMapping(dict(_fields(v)), self.strings) for f, v in top if f == 3]
        self.location_mapping = {}  # location id -> mapping id (0: none)
        for f, v in top:
            if f == 4:
                loc = dict(_fields(v))
                self.location_mapping[loc.get(1, 0)] = loc.get(2, 0)
        ints = {}
        for f, v in top:
            if isinstance(v, int):
                ints[f] = v
        self.time_nanos = ints.get(9, 0)
        self.duration_nanos = ints.get(10, 0)
        self.period = ints.get(12, 0)
        drop = ints.get(7, 0)
        self.drop_frames = self.strings[drop] if 0 < drop < len(self.strings) else ""

    def used_mapping_ids(self):
        return set(self.location_mapping.values()) - {0}
