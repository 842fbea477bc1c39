"""Call one function of solution.py (beside this file) and print its JSON result.

stdin: the function's name as a JSON string, then one JSON argument per line. Only the
result reaches stdout; whatever the program prints itself is discarded. The body runs at
module level, as the program's caller, under `if __name__ == "__main__"`.
"""

import json
import os
import sys

PRELUDE = ("from typing import *\nimport collections, heapq, bisect, math, itertools, functools\n"
           "from collections import *\nfrom heapq import *\nfrom bisect import *\n"
           "from itertools import *\nfrom functools import *\n")


def plain(value):
    """What JSON lacks, as JSON compares it: a set or a tuple as a list; anything else refused."""
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"cannot compare a {type(value).__name__}")


if __name__ == "__main__":
    fn_name = json.loads(sys.stdin.readline())
    args = [json.loads(line) for line in sys.stdin.read().splitlines() if line.strip()]
    out = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (the program's prints, for its lifetime)
    namespace = {"__name__": "solution"}
    exec(PRELUDE, namespace)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "solution.py")) as f:
        exec(compile(f.read(), "solution.py", "exec"), namespace)
    owner = namespace.get("Solution")
    fn = getattr(owner(), fn_name, None) if isinstance(owner, type) else None
    fn = fn or namespace.get(fn_name)
    if not callable(fn):
        sys.stderr.write(f"no function or Solution method named {fn_name!r}\n")
        sys.exit(3)
    result = fn(*args)
    out.write(json.dumps(result, default=plain) + "\n")
    out.flush()
