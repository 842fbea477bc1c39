"""bubblewrap's command line: its namespaces and options, the program's files and the seccomp
filter passed by file descriptor, and what the sandbox sees of the host (the interpreter,
its standard library and the shared libraries they load, read-only, and nothing else)."""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

from evaluator.sandbox import inside, process, seccomp
from evaluator.sandbox.limits import Limits

log = logging.getLogger(__name__)

SANDBOX_DIR = "/sandbox"
SANDBOX_HOSTNAME = "sandbox"
LDD_PATH = re.compile(r"^\s+(?:\S+ => )?(/\S+) \(0x", re.M)


def bubblewrap_argv(files: dict[str, str], entry: str, limits: Limits, inner: list[str],
                    as_pid_1: bool = False, as_root: bool = False
                    ) -> tuple[list[str], list[int]]:
    """bwrap's command line and the fds it reads: options, the program's files, the filter.

    Options travel in `--args` so /proc/1/cmdline inside shows none of them; `inner`
    runs inside before the program (the uid drop).
    """
    fds: list[int] = []

    def fd(data: bytes) -> str:
        fds.append(_memfd(data))
        return str(fds[-1])

    namespaces = (["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                   "--unshare-cgroup-try"] if as_root else ["--unshare-all"])
    namespaces += ["--as-pid-1"] if as_pid_1 else []  # the runner: no run can signal it
    options = [*namespaces, "--die-with-parent", "--new-session", "--hostname", SANDBOX_HOSTNAME,
               "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
               "--setenv", "LANG", "C.UTF-8",
               *system_view(process.python()), "--proc", "/proc", "--dev", "/dev",
               "--perms", "1777", "--size", str(limits.tmpfs_mb << 20), "--tmpfs", "/tmp",
               "--dir", SANDBOX_DIR]
    for name, text in files.items():
        options += ["--perms", "0444", "--file", fd(text.encode("utf-8")), f"{SANDBOX_DIR}/{name}"]
    options += ["--remount-ro", "/", "--chdir", "/tmp"]
    seccomp_filter = seccomp.filter_program()
    if seccomp_filter:
        options += ["--seccomp", fd(seccomp_filter)]
    packed = b"".join(option.encode("utf-8") + b"\0" for option in options)
    argv = ["bwrap", "--args", fd(packed), "--", *inner, process.python(), *inside.flags(entry),
            f"{SANDBOX_DIR}/{entry}"]
    return argv, fds


def _memfd(data: bytes) -> int:
    """An anonymous in-memory file holding `data`, rewound: bwrap reads it like a pipe."""
    fd = os.memfd_create("sandbox")
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


@functools.lru_cache(maxsize=4)
def system_view(python: str) -> tuple[str, ...]:
    """bwrap options showing `python`, its standard library and their shared libraries.

    Everything sits read-only at its host path (symlinks on the way recreated); the
    interpreter's own site-packages, if it lies inside the standard library, is hidden.
    """
    paths = json.loads(subprocess.run([python, "-I", "-S", "-c", inside.INTERPRETER_PATHS],
                                      capture_output=True, text=True, check=True,
                                      env=process.clean_env()).stdout)
    folders = [os.path.realpath(p) for p in paths["path"] if os.path.isdir(p)]
    folders = [f for f in dict.fromkeys(folders) if not _inside(f, [g for g in folders if g != f])]
    programs = [python, *([process.setpriv()] if os.geteuid() == 0 else [])]
    extensions = [str(so) for p in paths["path"] if os.path.isdir(p) for so in Path(p).glob("*.so")]
    libraries = _shared_libraries([*programs, *extensions])
    entries: dict[str, tuple[str, str, str]] = {}
    for path in [*folders, *programs, *libraries]:
        for option, source, dest in _path_entries(path):
            shown = _inside(dest, folders) and not (option == "--ro-bind" and dest in folders)
            if not shown:  # what a bound folder already shows needs no entry of its own
                entries.setdefault(dest, (option, source, dest))
    parents = sorted({str(p) for dest in entries for p in Path(dest).parents if str(p) != "/"},
                     key=lambda p: p.count("/"))
    options = [part for p in parents for part in ("--dir", p)]  # 0755: bwrap's own are 0700
    options += [part for entry in entries.values() for part in entry]
    for hidden in paths["site"]:
        if os.path.isdir(hidden) and _inside(os.path.realpath(hidden), folders):
            options += ["--tmpfs", os.path.realpath(hidden), "--remount-ro", os.path.realpath(hidden)]
    library_dirs = dict.fromkeys(os.path.dirname(os.path.realpath(lib)) for lib in libraries)
    return (*options, "--setenv", "LD_LIBRARY_PATH", ":".join(library_dirs))


def _inside(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _path_entries(path: str) -> list[tuple[str, str, str]]:
    """bwrap entries making `path` resolve inside as here: each symlink on the way, then it."""
    entries = []
    for _ in range(40):  # the kernel's own limit on symlinks in one lookup
        parts = Path(path).parts
        for i in range(2, len(parts) + 1):
            prefix = os.path.join(*parts[:i])
            if os.path.islink(prefix):
                target = os.readlink(prefix)
                entries.append(("--symlink", target, prefix))
                path = os.path.normpath(os.path.join(os.path.dirname(prefix), target, *parts[i:]))
                break
        else:
            return [*entries, ("--ro-bind", path, path)]
    raise OSError(errno.ELOOP, f"too many symlinks resolving {path}")


def _shared_libraries(binaries: list[str]) -> list[str]:
    """The shared libraries `binaries` load (the dynamic loader included), as ldd finds them."""
    ldd = shutil.which("ldd")
    if not ldd:  # without ldd the library folders go in whole
        log.warning("sandbox: ldd is not installed; showing the system library folders whole")
        return [d for d in ("/lib", "/lib64", "/usr/lib", "/usr/lib64") if os.path.isdir(d)]
    listing = subprocess.run([ldd, *binaries], capture_output=True, text=True, check=False,
                             env=process.clean_env()).stdout
    return sorted(set(LDD_PATH.findall(listing)))
