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


def bundled(name: str) -> Path:
    """The shipped folder `name` (TEMPLATES or GUIDES)."""
    for folder in (package_dir() / BUNDLE / name, package_dir().parent / name):
        if folder.is_dir():
            return folder
    raise TinyRouterError(f"the package has no {name}/ folder: reinstall tinyrouter "
                          "(`pip install .` from a checkout, or the wheel)")
