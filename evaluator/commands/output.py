"""How commands print: for humans, and for GitHub Actions logs that strangers' text reaches.

A miner controls file names, receipt fields and PR text, and some of it ends up in what a
command prints. In a workflow, a printed line that starts with `::` is a workflow command
(`::add-mask::`, `::stop-commands::`, a forged `::error`). So with `github=True`, `say`
prints its lines inside a `::stop-commands::` block with a fresh random token: nothing in
between is read as a command. Annotations, the only commands we mean to send, are printed
outside it with their message and properties escaped.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evaluator.errors import UsageError
from evaluator.files import dumps, write_atomic

STDOUT = "-"
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029\x85]")


def one_line(text: object) -> str:
    """The text with every line break turned into a space."""
    return _LINE_BREAKS.sub(" ", str(text))


def say(lines: Iterable[object], github: bool = False) -> None:
    """Print lines for a human; under GitHub, as inert log text (see the module docstring)."""
    lines = [one_line(line) for line in lines]
    if not github:
        print("\n".join(lines), flush=True)
        return
    token = secrets.token_hex(16)
    print(f"::stop-commands::{token}")
    for line in lines:
        print(line)
    print(f"::{token}::", flush=True)


def _escape_data(text: str) -> str:
    return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotate(level: str, title: str, message: str) -> None:
    """One GitHub annotation (`error`, `warning` or `notice`), escaped as the runner expects."""
    if level not in ("error", "warning", "notice"):
        raise ValueError(f"unknown annotation level {level!r}")
    print(f"::{level} title={_escape_property(title)}::{_escape_data(message)}", flush=True)


def append_summary(markdown: str) -> bool:
    """Append to the job summary ($GITHUB_STEP_SUMMARY); False when not in a workflow."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(markdown)
    return True


def set_outputs(values: dict[str, str]) -> None:
    """Print `key=value` lines and append them to $GITHUB_OUTPUT; values must be single-line."""
    for key, value in values.items():
        if _LINE_BREAKS.search(f"{key}{value}") or "=" in key:
            raise ValueError(f"step output {key!r} must be one line without '=' in its name")
    lines = "".join(f"{key}={value}\n" for key, value in values.items())
    print(lines, end="")
    target = os.environ.get("GITHUB_OUTPUT")
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(lines)


def write_text_out(target: str | Path | None, text: str) -> None:
    """Write `text` to a file, or to standard output for `-`; nothing when no target."""
    if target is None:
        return
    if str(target) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        write_atomic(Path(target), text)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from exc


def write_json_out(target: str | Path | None, data: Any) -> None:
    write_text_out(target, dumps(data))
