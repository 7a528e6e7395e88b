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

`profshim check` (check_main, through main.py) says what the shim would
make of an environment: this one, an EnvironmentFile or a unit's. The
values are judged by the shim's own parsers (options_dump --check, linked
with shim/config.cc), never by a copy of them here.
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


def env_file(path):
    """{NAME: value} of an EnvironmentFile as systemd reads it
    (load_env_file): '#' and ';' lines are comments, blanks around the name
    and the value go, a value may be quoted ('...' as it is, "..." with
    backslash escapes), a backslash at the end of a line joins the next."""
    text = open(path, encoding="utf-8", errors="surrogateescape").read()
    out, i, n = {}, 0, len(text)
    while i < n:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i < n and text[i] in "#;":
            while i < n and text[i] != "\n":
                i += 1
            continue
        key = ""
        while i < n and text[i] not in "=\n":
            key += text[i]
            i += 1
        if i >= n or text[i] != "=":
            continue
        i += 1
        while i < n and text[i] in " \t":
            i += 1
        value, quoted = "", False
        while i < n and text[i] != "\n":
            ch = text[i]
            if ch in "'\"" and not value.strip():
                end, i, quoted = ch, i + 1, True
                while i < n and text[i] != end:
                    if end == '"' and text[i] == "\\" and i + 1 < n:
                        i += 1
                        if text[i] != "\n":
                            value += text[i]
                    else:
                        value += text[i]
                    i += 1
                i += 1
                continue
            if ch == "\\" and i + 1 < n:
                i += 1
                if text[i] != "\n":
                    value += text[i]
                i += 1
                continue
            value += ch
            i += 1
        key = key.strip()
        if key:
            out[key] = value if quoted else value.rstrip(" \t\r")
    return out


def unit_env(unit):
    """The environment systemd gives unit: its Environment= (specifiers
    already expanded), then its EnvironmentFile=s, which override it."""
    import shlex
    import subprocess
    try:
        p = subprocess.run(["systemctl", "show", "-p", "Environment,EnvironmentFiles", unit],
                           capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise OSError("--unit needs systemctl, which is not installed here")
    if p.returncode != 0:
        raise OSError("systemctl show %s: %s" % (unit, p.stderr.strip() or "exit %d" % p.returncode))
    env, files = {}, []
    for line in p.stdout.splitlines():
        k, _, v = line.partition("=")
        if k == "Environment":
            env.update(w.split("=", 1) for w in shlex.split(v) if "=" in w)
        elif k == "EnvironmentFiles" and v:
            path, _, flags = v.partition(" (")
            files.append((path, "ignore_errors=yes" in flags))
    for path, optional in files:
        try:
            env.update(env_file(path))
        except OSError:
            if not optional:
                raise
    return env


def judge(env, tool, names):
    """Lines saying what the shim would do with env, and the exit status:
    0 nothing wrong, 1 a warning (an unknown name), 78 a setup error."""
    import difflib
    import subprocess
    shim_env = {k: v for k, v in env.items() if k.startswith("PROFILE_")}
    p = subprocess.run([tool, "--check"], env=shim_env, capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise OSError("%s --check failed: %s" % (tool, p.stderr.strip()))
    rows = [l.split("\t") for l in p.stdout.splitlines()]
    setup = next(r[1] for r in rows if r[0] == "setup")
    unknown = [u for u in next(r[1] for r in rows if r[0] == "unknown").split(", ") if u]
    lines, status = [], 0
    preload = env.get("LD_PRELOAD", "")
    lines.append("LD_PRELOAD: %s" % ("names %s" % preload if "libprofshim" in preload
                                      else "does not name libprofshim.so: nothing loads the shim"))
    if not env.get("PROFILE_DIR"):
        lines.append("inert: PROFILE_DIR is %s: the shim does nothing and prints nothing, and reads no other "
                     "variable" % ("empty" if "PROFILE_DIR" in env else "not set"))
    elif setup:
        lines.append("refused: the shim would stop the program before main with exit status %d and the line"
                     % EX_CONFIG)
        lines.append("  # profshim: error: %s" % setup)
        status = EX_CONFIG
    else:
        lines.append("active: profiles in %s" % env["PROFILE_DIR"])
    width = max([len(k) + len(v) + 1 for k, v in shim_env.items()] + [0])
    for r in rows:
        if len(r) == 3:
            lines.append("  %-*s  %s%s" % (width, "%s=%s" % (r[0], env[r[0]]),
                                            "" if r[1] == "ok" else "error: ", r[2]))
            status = max(status, EX_CONFIG if r[1] == "error" and env.get("PROFILE_DIR") else 0)
    for u in unknown:
        near = difflib.get_close_matches(u, names, n=1, cutoff=0.6)
        lines.append("  %-*s  unknown: not a profshim variable, ignored%s" % (
            width, "%s=%s" % (u, env[u]), "; did you mean %s?" % near[0] if near else ""))
        status = max(status, 1)
    return lines, status


def check_main(args, out, err):
    """profshim check [--env-file FILE | --unit NAME] [--print-env] [-- COMMAND]"""
    tool, table = os.environ.get("PROFSHIM_CHECK_TOOL", ""), os.environ.get("PROFSHIM_OPTIONS", "")
    if not (os.access(tool, os.X_OK) and os.path.isfile(table)):
        err("the shim's option table or its checker (options_dump) is missing: run make")
        return 69
    names = [l.split("\t")[0] for l in open(table) if l.strip()]
    source, env, command, printenv = "the environment of this command", None, None, False
    while args:
        a = args.pop(0)
        if a in ("--env-file", "--unit") and args:
            what = args.pop(0)
            try:
                env = env_file(what) if a == "--env-file" else unit_env(what)
            except (OSError, UnicodeError) as e:
                err("%s: %s" % (what, getattr(e, "strerror", None) or e))
                return 66
            source = "%s (as EnvironmentFile= reads it)" % what if a == "--env-file" else "unit %s" % what
        elif a == "--print-env":
            printenv = True
        elif a == "--" and args:
            command = args[0]
            break
        else:
            err("unknown argument %s (see profshim check --help)" % a)
            return 64
    if env is None:
        env = dict(os.environ)
    if printenv:
        for k in sorted(env):
            out("%s=%s" % (k, env[k]))
        return 0
    out("profshim check: %s" % source)
    try:
        lines, status = judge(env, tool, names)
    except OSError as e:
        err(str(e))
        return 69
    for line in lines:
        out(line)
    if command:
        import shutil
        try:
            found = problem(command if "/" in command else shutil.which(command) or command)
        except OSError:
            found = None
        if found:
            out("%s: %s" % found)
            status = max(status, EX_CONFIG if found[0] == "error" else 1)
    return status


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
