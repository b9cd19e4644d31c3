"""One exception type for bad input: the CLI turns it into one line and exit status 2."""

from __future__ import annotations


class InputError(Exception):
    """Bad user input: a missing file, a malformed line, an unknown key, an impossible setting.

    The message must name the file and line, or the parameter, so that a person can fix it.
    """

    def __init__(
        self, message: str, *, path: str | None = None, line: int | None = None, param: str | None = None
    ):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        elif param is not None:
            where = f"parameter '{param}': "
        super().__init__(where + message)
        self.message = message  # without the file / parameter prefix
        self.path = path
        self.line = line
        self.param = param


def one_of(value, known, what: str, **where):
    """`value` when it is one of `known`; else an InputError "unknown <what> <value> (known:
    ...)" at `where` (param=, path=, line=)."""
    if value not in known:
        raise InputError(f"unknown {what} {value!r} (known: {', '.join(known)})", **where)
    return value


def read_toml(path, what: str, missing: str | None = None) -> dict:
    """A TOML file as a dict; a missing, unreadable or malformed file is an InputError naming
    it (`what`: "run file", "model file", ...; `missing`: the message when it does not exist)."""
    import tomllib

    p = str(path)
    try:
        with open(p, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise InputError(missing or f"{what} not found", path=p) from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"not valid TOML: {e}", path=p) from None
    except OSError as e:
        raise InputError(f"cannot read {what}: {e.strerror or e}", path=p) from None


def toml_key_line(path, dotted: str) -> int | None:
    """The line (1-based) of `dotted` ("workload.batch", "system.overrides.gpu.memory_gb") in a
    TOML file, by a plain scan of its table headers and `key =` lines; the line of the longest
    prefix of it that is found (an inline table, a whole section) when the key itself is not
    written out; None when nothing matches or the file cannot be read. For error messages
    only: tomllib reports no positions."""
    import re

    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        return None

    def parts(text: str) -> list[str]:
        return [
            x.strip().strip('"').strip("'") for x in re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', text.strip())
        ]

    found: dict[str, int] = {}  # dotted key (quoted parts joined as written) -> line
    table: list[str] = []
    for n, raw in enumerate(lines, start=1):
        line = raw.strip()
        m = re.match(r"^\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$", line)
        if m:
            table = parts(m.group(1))
            found.setdefault(".".join(table), n)
            continue
        m = re.match(r'^((?:"[^"]*"|\'[^\']*\'|[A-Za-z0-9_.\- ])+?)\s*=', line)
        if m:
            key = table + parts(m.group(1))
            for i in range(1, len(key) + 1):
                found.setdefault(".".join(key[:i]), n)
    want = str(dotted)
    while want:
        if want in found:
            return found[want]
        want = want.rpartition(".")[0]
    return None


class InvariantError(RuntimeError):
    """An engine invariant does not hold (`--check`): a bug in g10fast, not bad input."""
