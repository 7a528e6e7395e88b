"""gopprof: runs Go's pprof (`go tool pprof`), the one reader of the
files' call stacks, with a clear error where it is missing."""

import os
import shutil
import subprocess
import tempfile

import images
import kinds

MISSING = ("go tool pprof is needed to read call stacks and is not installed: "
           "install Debian's golang-go (apt-get install golang-go)")
NO_DOT = "the call graph needs graphviz's dot: install Debian's graphviz (apt-get install graphviz)"


class Missing(Exception):
    pass


def find_go():
    """PROFSHIM_GO when set (a go of one's choice), else go on PATH, else
    where Debian's golang-go and Go's own tarball put it."""
    if os.environ.get("PROFSHIM_GO"):
        if os.access(os.environ["PROFSHIM_GO"], os.X_OK):
            return os.environ["PROFSHIM_GO"]
        raise Missing("PROFSHIM_GO=%s is not an executable go; " % os.environ["PROFSHIM_GO"] + MISSING)
    for cand in (shutil.which("go"), "/usr/lib/go/bin/go", "/usr/local/go/bin/go"):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise Missing(MISSING)


def _env(scratch):
    env = dict(os.environ)
    # pprof keeps nothing we want under $HOME; a service's user may have no
    # writable one, and go refuses to start without a cache directory.
    env["PPROF_TMPDIR"] = scratch
    env.setdefault("GOCACHE", os.path.join(scratch, "gocache"))
    if not env.get("HOME") or not os.access(env["HOME"], os.W_OK):
        env["HOME"] = scratch
    env["GOTOOLCHAIN"] = "local"
    env["GOFLAGS"] = ""
    env.pop("PPROF_BINARY_PATH", None)
    return env


def run(args, timeout=300):
    """(status, stdout, stderr) of `go tool pprof -symbolize=none ARGS`.
    The files are symbolized already: pprof looks up no binary and asks
    no server."""
    go = find_go()
    scratch = tempfile.mkdtemp(prefix="profshim-pprof-")
    try:
        p = subprocess.run([go, "tool", "pprof", "-symbolize=none"] + args, env=_env(scratch),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


_merged = []


def merged(files):
    """One file of several profiles' samples added up (pprof's own merge,
    written as a profile), or the file itself when there is one."""
    if len(files) == 1:
        return files[0]
    scratch = tempfile.mkdtemp(prefix="profshim-merge-")
    _merged.append(scratch)
    dest = os.path.join(scratch, "merged.pb.gz")
    rc, _, err = run(["-proto", "-output=" + dest] + list(files))
    if rc != 0 or not os.path.isfile(dest):
        raise OSError("go tool pprof could not merge %s: %s" % (" ".join(files), err.strip()))
    return dest


def cleanup():
    while _merged:
        shutil.rmtree(_merged.pop(), ignore_errors=True)


def has_dot():
    return shutil.which("dot") is not None


def profiles_of(target):
    """{kind: path} for FILE or DIR/NAME (NAME.KIND.pprof, KIND without
    dots: the image's own files, not its snapshots nor its children's)."""
    if os.path.isfile(target):
        sk = images.split_name(os.path.basename(target))
        return {sk[1] if sk else "profile": target}
    d, name = os.path.split(target)
    d = d or "."
    out = {}
    if os.path.isdir(d):
        for fn in sorted(os.listdir(d)):
            sk = images.split_name(fn)
            if sk and sk[0] == name and "." not in sk[1]:
                out[sk[1]] = os.path.join(d, fn)
    return out


def ordered(have):
    """The kinds in have: the stop's in the shim's order, then any other."""
    return [k for k in kinds.NAMES if k in have] + sorted(k for k in have if k not in kinds.NAMES)
