"""Files only the server's user may read: databases, keys, kubeconfigs, audit logs.

Whatever the process umask, a private file is created 0600 and a directory
the server creates for such files 0700 (with every missing parent, as Go's
``os.MkdirAll(dir, 0700)``); an existing directory is the operator's and
is left as it is.  Modes are set explicitly after creation because the umask
only ever removes bits: it could leave a file less open, never more, but an
explicit mode also survives an unusual umask that strips the owner's bits.
"""
from __future__ import annotations

import os

FILE_MODE = 0o600
DIR_MODE = 0o700


def make_private_dir(path: str) -> None:
    """Create ``path`` and its missing parents with mode 0700 (existing ones are kept as they are)."""
    path = os.path.abspath(path)
    missing = []
    while path and not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise
            continue
        os.chmod(directory, DIR_MODE)


def ensure_private_file(path: str) -> None:
    """Create ``path`` empty with mode 0600 if missing; tighten an existing one to 0600."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def tighten(path: str) -> None:
    """Mode 0600 for ``path`` if it exists (SQLite's -wal and -shm files)."""
    try:
        os.chmod(path, FILE_MODE)
    except FileNotFoundError:
        pass


def open_private_append(path: str) -> int:
    """An O_APPEND descriptor of ``path``, created 0600 (in a 0700 directory made if missing)."""
    directory = os.path.dirname(os.path.abspath(path))
    make_private_dir(directory)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return fd
