"""How commands print: for humans, and for GitHub Actions logs that strangers' text reaches.

A miner controls file names, receipt fields and PR text, and some of it ends up in what a
command prints. In a workflow, a printed line that starts with `::` (or the older `##[`) is
a workflow command (`::add-mask::`, `::stop-commands::`, a forged `::error`). `inert` is the
one function that makes text safe for such a log: one line, control characters shown as
escapes, and no `::` or `##[` left to open a command. With `github=True`, `say` prints inert
lines inside a `::stop-commands::` block with a fresh random token; `github_output` passes
every log record, and the message of an error a command ends with, through `inert` too.
Annotations, the only commands we mean to send, are printed with their message and
properties escaped.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any

from evaluator.errors import TinyRouterError, UsageError
from evaluator.files import dumps, write_atomic

STDOUT = "-"
_machine_stdout: list[Any] = []  # where `-` writes while human text goes to stderr
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029\x85]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# what opens a workflow command, each with a zero-width space put inside it
_COMMAND_OPENERS = (("::", ":\u200b:"), ("##[", "#\u200b#["))


def one_line(text: object) -> str:
    """The text with every line break turned into a space, and anything that is not valid
    Unicode (a non-UTF-8 file name read from disk) as backslash escapes, so it prints."""
    return _LINE_BREAKS.sub(" ", str(text)).encode("utf-8", "backslashreplace").decode("utf-8")


def inert(text: object) -> str:
    """`text` as one log line that no runner reads as a workflow command (module docstring).

    `one_line`, then other control characters as `\\xNN`, and every `::` or `##[` with a
    zero-width space inside it.
    """
    line = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", one_line(text))
    for opener, defused in _COMMAND_OPENERS:
        line = line.replace(opener, defused)
    return line


def say(lines: Iterable[object], github: bool = False) -> None:
    """Print lines for a human; under GitHub, as inert log text (see the module docstring)."""
    if not github:
        print("\n".join(one_line(line) for line in lines), flush=True)
        return
    token = secrets.token_hex(16)
    print(f"::stop-commands::{token}")
    for line in lines:
        print(inert(line))
    print(f"::{token}::", flush=True)


class _InertRecords(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = inert(record.getMessage()), ()
        return True


@contextmanager
def github_output() -> Iterator[None]:
    """While a command runs in a workflow: every log line it writes goes through `inert`, and
    so does the message of the error it may end with (the line the CLI prints)."""
    guard, handlers = _InertRecords(), list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(guard)
    try:
        yield
    except TinyRouterError as exc:
        exc.args = (inert(str(exc)),)
        raise
    finally:
        for handler in handlers:
            handler.removeFilter(guard)


def _escape_data(text: str) -> str:
    return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotate(level: str, title: str, message: str) -> None:
    """One GitHub annotation (`error`, `warning` or `notice`), escaped as the runner expects."""
    if level not in ("error", "warning", "notice"):
        raise ValueError(f"unknown annotation level {level!r}")
    print(f"::{level} title={_escape_property(one_line(title))}::{_escape_data(one_line(message))}",
          flush=True)


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


@contextmanager
def text_to_stderr() -> Iterator[None]:
    """While a command writes a report to `-`: what it prints for humans goes to standard
    error, so standard output carries the report alone (`--json - | jq` works)."""
    _machine_stdout.append(sys.stdout)
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        _machine_stdout.pop()


def write_text_out(target: str | Path | None, text: str) -> None:
    """Write `text` to a file, or to standard output for `-`; nothing when no target."""
    if target is None:
        return
    if str(target) == STDOUT:
        stream = _machine_stdout[-1] if _machine_stdout else sys.stdout
        stream.write(text)
        stream.flush()
        return
    try:
        write_atomic(Path(target), text)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from exc


def write_json_out(target: str | Path | None, data: Any) -> None:
    write_text_out(target, dumps(data))
