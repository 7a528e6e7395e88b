"""check_cmd: says, before `profshim run` execs a program, when the loader
will not preload the shim into it: a statically linked program (no
PT_INTERP; a Go program built without cgo is one), a set-user-ID or
set-group-ID program or one with file capabilities (the loader's secure
mode drops LD_PRELOAD). Such a run would end without a profile; the
operator asked for one (a run without evidence is worse than none).
A Go program built with cgo loads the shim and is profiled, but its heap
profile holds its C allocations only, not Go's heap: it runs, after a
warning that says so.

usage: python3 check_cmd.py PATH     exit 0 (perhaps after one warning
line), or 78 after one error line.
Reads only the ELF header, program and section headers (stdlib: the
command must work where binutils is not installed)."""

import os
import stat
import struct
import sys

EX_CONFIG = 78
PT_INTERP = 3


def elf_info(path):
    """(is_elf, has_interp, section_names) from the ELF headers."""
    with open(path, "rb") as f:
        ident = f.read(64)
        if len(ident) < 52 or ident[:4] != b"\x7fELF":
            return False, False, set()
        is64, end = ident[4] == 2, "<" if ident[5] == 1 else ">"
        if is64:
            phoff, shoff = struct.unpack_from(end + "QQ", ident, 32)
            phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(end + "HHHHH", ident, 54)
        else:
            phoff, shoff = struct.unpack_from(end + "II", ident, 28)
            phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(end + "HHHHH", ident, 42)
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
        interp = any(struct.unpack_from(end + "I", ph, i * phentsize)[0] == PT_INTERP
                     for i in range(len(ph) // phentsize if phentsize else 0))
        return True, interp, section_names(f, end, is64, shoff, shentsize, shnum, shstrndx)


def section_names(f, end, is64, shoff, shentsize, shnum, shstrndx):
    if not shoff or not shnum or shstrndx >= shnum:
        return set()
    f.seek(shoff)
    sh = f.read(shentsize * shnum)
    fmt = end + ("IIQQQQ" if is64 else "IIIIII")  # name, type, flags, addr, offset, size
    def hdr(i):
        return struct.unpack_from(fmt, sh, i * shentsize)
    _, _, _, _, stroff, strsize = hdr(shstrndx)
    f.seek(stroff)
    strtab = f.read(min(strsize, 1 << 20))
    names = set()
    for i in range(len(sh) // shentsize):
        off = hdr(i)[0]
        names.add(strtab[off:strtab.find(b"\0", off)].decode("latin-1"))
    return names


def interpreter(path):
    """A script's #! interpreter, else None."""
    with open(path, "rb") as f:
        first = f.read(256)
    if not first.startswith(b"#!"):
        return None
    words = first[2:].split(b"\n")[0].split()
    return os.fsdecode(words[0]) if words else None


def secure_mode(path):
    """Why the loader would run path in secure mode (AT_SECURE), or None."""
    st = os.stat(path)
    try:
        if os.statvfs(path).f_flag & os.ST_NOSUID:
            return None  # the bits are ignored on this mount
    except OSError:
        pass
    if st.st_mode & stat.S_ISUID and st.st_uid != os.getuid():
        return "set-user-ID (owner uid %d)" % st.st_uid
    if st.st_mode & stat.S_ISGID and st.st_mode & stat.S_IXGRP and st.st_gid != os.getgid():
        return "set-group-ID (group gid %d)" % st.st_gid
    try:
        os.getxattr(path, "security.capability")
        return "given file capabilities (getcap %s)" % path
    except OSError:
        return None


def problem(path, depth=0):
    """("error" or "warning", one sentence) on why the shim will not (or
    not always) reach path, or None."""
    why = secure_mode(path)
    if why:
        return "error", ("%s is %s: the loader ignores LD_PRELOAD for it, so no profile would be written; "
                         "run it as that user, or profile a copy without the bit" % (path, why))
    script = interpreter(path)
    if script:
        return problem(script, depth + 1) if depth < 2 and os.path.isfile(script) else None
    is_elf, has_interp, sections = elf_info(path)
    if not is_elf:
        return None
    if ".go.buildinfo" in sections or ".note.go.buildid" in sections:
        if not has_interp:
            return "error", ("%s is a Go program built without cgo (statically linked): LD_PRELOAD cannot "
                             "reach it, so no profile would be written; Go's own runtime/pprof writes pprof "
                             "files" % path)
        return "warning", ("%s is a Go program: its heap profile holds its C allocations only, not Go's heap "
                           "(Go's own runtime/pprof writes that)" % path)
    if not has_interp:
        return "error", "%s is statically linked: LD_PRELOAD cannot reach it, so no profile would be written" % path
    return None


def main(argv):
    try:
        found = problem(argv[1])
    except OSError:
        found = None  # exec will say what is wrong with it
    if found:
        sys.stderr.write("# profshim: %s: %s\n" % found)
        return EX_CONFIG if found[0] == "error" else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
