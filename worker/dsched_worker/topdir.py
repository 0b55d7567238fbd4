"""Marking the worker's busiest directories as tops of their own hierarchies (``chattr +T``).

The worker creates a file per attempt (its log) and directories for attempts' working directories.
On ext2/3/4 a new file's inode is taken from its directory's block group, and a new directory's,
unless its parent is marked a top directory, from its parent's group too: everything below the data
directory then shares the group of wherever the data directory was made, often ``/tmp`` or a home
directory where other programs create and delete files all day. That costs: ext4 without a journal
(this development machine's disk) skips every inode freed in the last minute or more when it
allocates one, reading its inode table entry each time (``find_inode_bit`` and
``recently_deleted`` in fs/ext4/ialloc.c), so after a test suite or another program deleted a few
thousand files in that group, each log file cost 260-480 us of CPU instead of 8 us (measured here
in a 1,000-task fan-out: a quarter of the worker's CPU).

With ``FS_TOPDIR_FL`` set on the log root and on the working directories' root, ext4's Orlov
allocator places their subdirectories (a day's logs, an instance's working directory) in block
groups of their own, chosen for free inodes and space, away from the churn of unrelated programs.
The flag changes only where *new* subdirectories go; nothing moves. On other file systems (XFS,
Btrfs, tmpfs, overlayfs) the request is refused or ignored and nothing changes.

Orlov picks a top directory's group from a hash of its *name* (fs/ext4/ialloc.c,
``find_group_orlov``). A day's log directory has the same name in every data directory on the
machine, so every worker, test run and bench of the day put their logs in the same group, and one
that removed its data directory slowed the next one's every log file for minutes (the window is
60 s from the deletion, 360 s while the inode table block stays dirty, which new files in the same
block keep it). :func:`make_below_top` therefore makes such a directory under a unique scratch
name and renames it into place: the group follows the scratch name, so it differs per data
directory, and the rename moves no inode.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import itertools
import logging
import os
import secrets
from pathlib import Path

log = logging.getLogger(__name__)

# linux/fs.h: the inode flag ioctls (the kernel reads and writes an int) and the top-directory flag.
FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
FS_TOPDIR_FL = 0x00020000
SCRATCH_PREFIX = ".new-"  # a directory being made below a top directory (see make_below_top)

_scratch = itertools.count()


def mark_top(directory: Path) -> bool:
    """Makes ``directory`` (and its parents) if needed and marks it a top directory; returns
    whether it carries the mark. Never raises: a directory that cannot be made or marked is left
    to the code that uses it, which reports its own failure (an attempt that cannot start)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        log.debug("cannot make %s a top directory: %s", directory, exc)
        return False
    try:
        flags = _flags(fd)
        if not flags & FS_TOPDIR_FL:
            fcntl.ioctl(fd, FS_IOC_SETFLAGS, array.array("i", [flags | FS_TOPDIR_FL]))
        return True
    except OSError as exc:  # ENOTTY, EOPNOTSUPP, EINVAL: no such flag here; EPERM: not ours
        log.debug("%s not marked a top directory: %s", directory, exc)
        return False
    finally:
        os.close(fd)


def is_top(directory: Path) -> bool:
    """Whether ``directory`` carries the mark (False where the file system has no such flag)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return bool(_flags(fd) & FS_TOPDIR_FL)
    except OSError:
        return False
    finally:
        os.close(fd)


def _flags(fd: int) -> int:
    flags = array.array("i", [0])
    fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
    return flags[0]


def make_below_top(top: Path, directory: Path) -> None:
    """Makes ``directory`` and its missing parents, where ``directory`` lies below ``top``; the
    one directly below ``top``, if missing, is made under a scratch name and renamed into place
    (see the module). Any thread; another thread or process making the same directory at the
    same time is no error. Raises OSError as :meth:`Path.mkdir` does."""
    parts = directory.relative_to(top).parts
    if not parts:  # the top itself: nothing below it to place
        top.mkdir(parents=True, exist_ok=True)
        return
    first = top / parts[0]
    if not first.is_dir():
        scratch = top / f"{SCRATCH_PREFIX}{os.getpid()}-{next(_scratch)}-{secrets.token_hex(4)}"
        top.mkdir(parents=True, exist_ok=True)
        scratch.mkdir()
        try:
            # Replaces an empty directory another thread made meanwhile (the paths stay the
            # same for everyone) and fails on one already in use.
            os.rename(scratch, first)
        except OSError:
            with contextlib.suppress(OSError):
                scratch.rmdir()
            if not first.is_dir():
                raise
    directory.mkdir(parents=True, exist_ok=True)
