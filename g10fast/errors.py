"""One exception type for bad input: the CLI turns it into one line and exit status 2."""

from __future__ import annotations


class InputError(Exception):
    """Bad user input: a missing file, a malformed line, an unknown key, an impossible setting.

    The message must name the file and line, or the parameter, so that a person can fix it.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 param: str | None = None):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        elif param is not None:
            where = f"parameter '{param}': "
        super().__init__(where + message)
        self.message = message
        self.path = path
        self.line = line
        self.param = param


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
