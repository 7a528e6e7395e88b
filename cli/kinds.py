"""kinds: the profiles every image writes at its stop, in the shim's
order (shim/engine.cc's all(): one engine each). The one list the CLI and
the tests read; a test holds it to the shim's engines. Each kind with the
sample type that totals it, that type's unit, and its column in ls."""

import collections

Kind = collections.namedtuple("Kind", "name total unit heading")

KINDS = [
    Kind("cpu", "cpu", "nanoseconds", "CPU"),
    Kind("heap", "inuse_space", "bytes", "HEAP IN USE"),
    Kind("wait", "delay", "nanoseconds", "WAIT"),
]

NAMES = [k.name for k in KINDS]


def files(stem):
    """The files an image's stop writes: STEM.KIND.pprof for each kind,
    sorted as a directory listing is."""
    return sorted("%s.%s.pprof" % (stem, k) for k in NAMES)
