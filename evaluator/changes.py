"""A pull request's changed files as `git diff --name-status` lists them (gate 0 reads them).

git quotes an unusual path C-style (core.quotePath): in double quotes, with escapes and
octal bytes, so a tab or a newline in a name stays inside it. `quote_path` writes that
form (the GitHub client lists a PR's files with it) and `parse_changes` reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Change:
    """One line of `git diff --name-status`."""

    status: str
    path: str
    old_path: str | None = None


# git's C-style quoting of unusual paths in `git diff --name-status` (core.quotePath)
_QUOTED = {"\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r",
           '"': '"', "\\": "\\"}
_UNQUOTED = {letter: char for char, letter in _QUOTED.items()}


def raw_bytes(text: str) -> bytes:
    """A name's bytes: a non-UTF-8 name read from disk or an API comes back exactly."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def quote_path(path: str) -> str:
    """A path as `git diff --name-status` writes it: as is when it is printable ASCII, else in
    double quotes with C escapes and octal bytes, so a tab or newline in a name stays in it."""
    raw = raw_bytes(path)
    if all(0x20 <= b < 0x7F and b not in b'"\\' for b in raw):
        return path
    body = "".join("\\" + _QUOTED[chr(b)] if chr(b) in _QUOTED else
                   chr(b) if 0x20 <= b < 0x7F else f"\\{b:03o}" for b in raw)
    return f'"{body}"'


def unquote_path(text: str) -> str:
    """The path `quote_path` (or git) quoted; a plain one as is."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return text
    body, raw, i = text[1:-1], bytearray(), 0
    while i < len(body):
        octal = body[i + 1:i + 4]
        if body[i] == "\\" and len(octal) == 3 and all(c in "01234567" for c in octal):
            raw.append(int(octal, 8) & 0xFF)
            i += 4
        elif body[i] == "\\" and body[i + 1:i + 2] in _UNQUOTED:
            raw += _UNQUOTED[body[i + 1]].encode()
            i += 2
        else:
            raw += raw_bytes(body[i])
            i += 1
    return raw.decode("utf-8", "surrogateescape")


def parse_changes(text: str) -> list[Change]:
    changes = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("\t")
        status = parts[0].strip()
        if status[:1] in ("R", "C") and len(parts) == 3:
            changes.append(Change(status[:1], unquote_path(parts[2]),
                                  old_path=unquote_path(parts[1])))
        elif len(parts) == 2 and status:
            changes.append(Change(status[:1], unquote_path(parts[1])))
        else:  # e.g. an unquoted file name holding a tab: gate 0 refuses it, never a crash
            changes.append(Change("?", line))
    return changes
