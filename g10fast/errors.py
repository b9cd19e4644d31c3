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
        self.path = path
        self.line = line
        self.param = param
