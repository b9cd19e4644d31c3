"""Files that appear whole or not at all: the one temporary-then-rename helper.

Every writer of a finished artifact (figures, plans, exports, workload traces, cost-model
tables, profiles, Perfetto files) writes a temporary file next to its target and renames it
over the target only when writing succeeded; on any error the temporary file is removed and the
target is left as it was (a previous file of that name included).
"""

from __future__ import annotations

import contextlib
import os
import secrets

from g10fast.errors import InputError


def checked_target(path, param: str | None = None) -> str:
    """``path`` as a string, once its folder is known to exist (checked before any work, so
    that a long job does not end on an unwritable name): InputError naming the folder and
    ``param`` otherwise."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise InputError("folder does not exist", path=directory, param=param)
    return path


def temporary_name(path, suffix: str = "") -> str:
    """A fresh hidden name next to ``path`` in the same directory (so that the rename is
    atomic): ``.<name>.<pid>.<random>.tmp`` and then ``suffix`` (give the extension where the
    writer infers the format from the name, as matplotlib's ``savefig`` does)."""
    path = os.fspath(path)
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(directory, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp{suffix}")


@contextlib.contextmanager
def atomic_path(path, suffix: str = ""):
    """``with atomic_path(out) as tmp:`` write ``tmp``; on leaving the block normally it is
    renamed over ``out``, on an exception it is removed (and the exception goes on)."""
    path = os.fspath(path)
    tmp = temporary_name(path, suffix)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
