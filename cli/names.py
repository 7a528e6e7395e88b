"""names: a function's name made short enough to read in a table or a
flame graph, the full name kept for hover (the report's title attributes).

A C++ name from the symbolizer carries every template argument and the
parameter list: `std::vector<long, std::allocator<long> >::_M_fill_insert(
__gnu_cxx::__normal_iterator<long*, std::vector<long, ...> >, unsigned long,
long const&)`. What tells functions apart on a page is the path of scopes
and the function's own name: template arguments become `<…>` and a
parameter list `(…)`, so that line reads `std::vector<…>::_M_fill_insert(…)`.
Operators keep their own angle brackets and parentheses (`operator<<`,
`operator()`), as do `(anonymous namespace)` and a lambda's braces."""

ELLIPSIS = "\u2026"
_KEEP_PAREN = ("(anonymous namespace)",)
_OPERATORS = ("operator<<=", "operator<=>", "operator<<", "operator<=", "operator<",
              "operator>>=", "operator>>", "operator>=", "operator>", "operator->*", "operator->",
              "operator()")


def shorten(name):
    """name with template arguments and parameters folded; unchanged when it
    has neither (a C function, a mapping's [file])."""
    if "<" not in name and "(" not in name:
        return name
    out, i, n = [], 0, len(name)
    while i < n:
        op = next((o for o in _OPERATORS if name.startswith(o, i)), None)
        if op:
            out.append(op)
            i += len(op)
            continue
        keep = next((k for k in _KEEP_PAREN if name.startswith(k, i)), None)
        if keep:
            out.append(keep)
            i += len(keep)
            continue
        c = name[i]
        if c in "<(":
            end = _closing(name, i)
            if end < 0:
                out.append(name[i:])
                break
            inner_empty = end == i + 1
            out.append(c + ("" if inner_empty else ELLIPSIS) + name[end])
            i = end + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _closing(name, start):
    """The index of the bracket that closes name[start] ('<' or '('),
    counting both kinds and skipping operators; -1 when it is unclosed."""
    depth, i, n = 0, start, len(name)
    while i < n:
        op = next((o for o in _OPERATORS if name.startswith(o, i)), None)
        if op:
            i += len(op)
            continue
        c = name[i]
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1
