"""What starting bubblewrap here finds, found once per process and kept as a frozen value."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
import subprocess

from evaluator.errors import IsolationError, TinyRouterError
from evaluator.sandbox.inside import PROGRAM_FILE
from evaluator.sandbox.limits import BUBBLEWRAP, DEFAULT_LIMITS, RLIMITS
from evaluator.sandbox.runs import run_one

log = logging.getLogger(__name__)

NOT_IN_FORCE = "runner isolation not in force"


@dataclasses.dataclass(frozen=True)
class Probe:
    """What starting bubblewrap here found: the isolation it gives, whether bwrap runs as root
    (the program then drops to a uid of its own) or unprivileged in a user namespace of its
    own, and why it does not start ("" when it does)."""

    mode: str
    as_root: bool = False
    failure: str = ""


@functools.lru_cache(maxsize=1)
def probe() -> Probe:
    """bubblewrap when a trivial sandboxed run succeeds here (as root first, when root);
    otherwise rlimits and why not, said once."""
    reason = "bwrap is not installed"
    if shutil.which("bwrap") and (os.geteuid() != 0 or shutil.which("setpriv")):
        for as_root in (True, False) if os.geteuid() == 0 else (False,):
            try:
                result = run_one({PROGRAM_FILE: "print('ok')"}, PROGRAM_FILE, "", DEFAULT_LIMITS,
                                 BUBBLEWRAP, as_root)
            except (OSError, subprocess.CalledProcessError, TinyRouterError) as exc:
                reason = f"bwrap could not be set up here: {exc}"
                continue
            if result.ok and result.stdout.strip() == "ok":
                return Probe(BUBBLEWRAP, as_root)
            reason = f"bwrap failed here: {result.stderr.strip()[:200] or result.reason()}"
    log.warning("sandbox: %s", reason)
    return Probe(RLIMITS, failure=reason)


def probe_failure() -> str:
    """Why bubblewrap does not start here ("" when it does)."""
    return probe().failure


def bwrap_as_root() -> bool:
    """Whether bubblewrap runs as root here rather than unprivileged in a user namespace."""
    return probe().as_root


def default_mode() -> str:
    """The isolation of a run whose caller names none: bubblewrap where it starts, else
    IsolationError (rlimits alone only when asked for by name; `evaluator.isolation` proves
    bubblewrap with hostile probes and decides what grading asks for)."""
    if probe().mode == BUBBLEWRAP:
        return BUBBLEWRAP
    raise IsolationError(f"{NOT_IN_FORCE}: {probe_failure()}")
