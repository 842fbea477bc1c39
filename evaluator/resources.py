"""Folders the package ships beside its code: Jinja templates and the site's hand-written pages.

They live at the repository's top level (`templates/`, `site/`); a wheel carries them inside
the package as `evaluator/_bundle/<name>/`. An installed package reads its own copy; an
editable install from a checkout reads the checkout's folders, so edits show at once.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from evaluator.errors import TinyRouterError

BUNDLE = "_bundle"
TEMPLATES, GUIDES = "templates", "site"


def package_dir() -> Path:
    return Path(str(resources.files("evaluator")))


# the demo's stage times, written by `tinyrouter dev demo` and rendered by the Reference guide
DEMO_TIMES = "demo-times.json"
# the encoder's time per unit of work, written by `tinyrouter dev costs` for the guides' costs
COSTS = "costs.json"


def data_file(name: str) -> Path:
    """A file the package ships in evaluator/data/."""
    return package_dir() / "data" / name


def bundled(name: str) -> Path:
    """The shipped folder `name` (TEMPLATES or GUIDES)."""
    for folder in (package_dir() / BUNDLE / name, package_dir().parent / name):
        if folder.is_dir():
            return folder
    raise TinyRouterError(f"the package has no {name}/ folder: reinstall tinyrouter "
                          "(`pip install .` from a checkout, or the wheel)")
