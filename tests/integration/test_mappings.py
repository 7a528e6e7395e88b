"""The mappings a profile lists: has_* flags that say what every location in
the mapping has (pprof trusts them and will not symbolize a flagged mapping
itself), and no library that is there only for the shim (itself, libdw,
libunwind and what they drag in) unless a location lies in it. The mapping
list is read from the file itself (profile_proto), since go tool pprof -raw
leaves out mappings no location uses.
"""

import os
import re
import shutil
import subprocess

from common import KINDS, check, fail, indent, is_libc
from profile_proto import RawProfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(os.path.dirname(HERE), "workloads")


def _sh(argv, what):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        fail("%s failed (status %d): %s\n%s" % (what, p.returncode, " ".join(argv),
                                                indent(p.stderr.decode("utf-8", "replace"))))
    return p.stdout.decode("utf-8", "replace")


def _stripped_exe(ctx):
    """sym_stripped built -rdynamic and stripped: its static hot function's
    addresses have no name, its exported one's have."""
    cc = shutil.which("gcc") or shutil.which("cc")
    check(cc, "no C compiler (gcc) to build sym_stripped.c")
    exe = os.path.join(ctx.tmp, "sym_stripped")
    _sh([cc, "-O1", "-g", "-fno-omit-frame-pointer", "-fno-inline", "-fno-toplevel-reorder", "-rdynamic",
         "-o", exe, os.path.join(WORKLOADS, "sym_stripped.c")], "compiling sym_stripped.c")
    _sh(["strip", "--strip-all", exe], "strip")
    return exe


def _flag_problems(prof):
    """Mappings whose flags claim what one of their locations lacks."""
    by_mapping = {}
    for loc in prof.locations.values():
        by_mapping.setdefault(loc.mapping, []).append(loc)
    bad = []
    for m in prof.mappings:
        locs = by_mapping.get(m.id, [])
        claims = {
            "[FN]": lambda l: l.frames,
            "[FL]": lambda l: l.frames and all(f.file for f in l.frames),
            "[LN]": lambda l: l.frames and all(f.line > 0 for f in l.frames),
            "[IN]": lambda l: l.frames,
        }
        for bit, has in claims.items():
            lacking = [l for l in locs if not has(l)]
            if bit in m.bits and lacking:
                bad.append("mapping %d %s %s: %d of its %d locations lack what %s claims, e.g. %#x %s" % (
                    m.id, m.file, m.bits, len(lacking), len(locs), bit, lacking[0].address, lacking[0].frames))
    return bad


def test_mapping_flags_say_what_every_location_has(ctx):
    """cpu_split (its executable holds _start, which has a name and no
    DWARF) and a stripped sym_stripped (named and unnamed addresses in one
    mapping): a flag on a mapping holds for every location in it; and the
    flags are not simply all off (libc, named and lined by libc6-dbg)."""
    stripped = _stripped_exe(ctx)
    for argv in (["cpu_split", "60"], [stripped, "0.3"]):
        r, d = ctx.profile(argv)
        for kind in KINDS:
            path = os.path.join(d, "run.%s.pprof" % kind)
            prof = ctx.read(path, r)
            bad = _flag_problems(prof)
            check(not bad, "%s, %s profile: has_* flags that are not true of every location:\n%s" % (
                os.path.basename(argv[0]), kind, indent("\n".join(bad))))
        prof = ctx.read(os.path.join(d, "run.cpu.pprof"), r)
        check(any("[FN]" in m.bits for m in prof.mappings),
              "%s: no mapping says it has functions, though most locations are named:\n%s" % (
                  os.path.basename(argv[0]), indent(prof.raw[prof.raw.find("Mappings"):])))


def _ldd(path):
    """{soname: real path} of what the loader would load for path."""
    out = {}
    for l in _sh(["ldd", path], "ldd").split("\n"):
        m = re.match(r"^\s*(\S+) => (/\S+) \(", l)
        if m:
            out[m.group(1)] = os.path.realpath(m.group(2))
    return out


def _shim_only_libraries(ctx, program):
    """Real paths of the libraries that the shim brings and the program does
    not: the shim, its own dependencies, and libdw's and libunwind's."""
    lib_dir = None
    for l in _sh(["ldconfig", "-p"], "ldconfig -p").split("\n"):
        m = re.search(r"\blibdw\.so\.1 \(.*\) => (\S+)$", l.strip())
        if m:
            lib_dir = os.path.dirname(m.group(1))
    check(lib_dir, "ldconfig -p does not list libdw.so.1")
    shim = {}
    for obj in (ctx.lib, os.path.join(lib_dir, "libdw.so.1"), os.path.join(lib_dir, "libunwind.so.8")):
        shim.update(_ldd(obj))
        shim[os.path.basename(obj)] = os.path.realpath(obj)
    mine = set(_ldd(program).values())
    return {p for p in shim.values() if p not in mine}


def _mapping_report(raw):
    used = raw.used_mapping_ids()
    return "\n".join("%r%s" % (m, " (locations in it)" if m.id in used else "") for m in raw.mappings)


def test_shim_libraries_are_not_the_programs_mappings(ctx):
    """cpu_split needs libc only. The shim, libdw, libelf, libunwind, libz,
    liblzma, libbz2, libgcc_s and libm are there for the shim: none of them
    may be listed in either profile unless a location lies in it."""
    exe = ctx.workload("cpu_split")
    foreign = _shim_only_libraries(ctx, exe)
    check(os.path.realpath(ctx.lib) in foreign and len(foreign) >= 5,
          "the shim's own libraries were not worked out: %s" % sorted(foreign))
    r, d = ctx.profile([exe, "60"])
    for kind in KINDS:
        raw = RawProfile(os.path.join(d, "run.%s.pprof" % kind))
        used = raw.used_mapping_ids()
        listed = [m for m in raw.mappings if os.path.realpath(m.file) in foreign and m.id not in used]
        check(not listed, "the %s profile lists the shim's own libraries among the program's mappings, with "
              "no location in them:\n%s\nall mappings:\n%s" % (
                  kind, indent("\n".join(repr(m) for m in listed)), indent(_mapping_report(raw))))
        check(any(os.path.realpath(m.file) == os.path.realpath(exe) for m in raw.mappings),
              "the %s profile lost the executable's mapping:\n%s" % (kind, indent(_mapping_report(raw))))
        check(any(is_libc(m.file) for m in raw.mappings),
              "the %s profile lost libc's mapping:\n%s" % (kind, indent(_mapping_report(raw))))


def test_a_library_the_program_needs_too_stays(ctx):
    """uses_zlib links libz itself, as the shim does: libz is the program's
    library too and stays listed, with no location in it; libdw, which only
    the shim loaded, does not."""
    exe = ctx.workload("uses_zlib")
    libz = _ldd(exe).get("libz.so.1")
    check(libz, "uses_zlib does not need libz.so.1:\n%s" % _sh(["ldd", exe], "ldd"))
    r, d = ctx.profile([exe, "0.3"])
    for kind in KINDS:
        raw = RawProfile(os.path.join(d, "run.%s.pprof" % kind))
        check(any(os.path.realpath(m.file) == libz for m in raw.mappings),
              "the %s profile does not list libz (%s), which the program needs:\n%s" % (
                  kind, libz, indent(_mapping_report(raw))))
        check(not any(os.path.basename(m.file).startswith("libdw") and m.id not in raw.used_mapping_ids()
                      for m in raw.mappings),
              "the %s profile lists libdw:\n%s" % (kind, indent(_mapping_report(raw))))
