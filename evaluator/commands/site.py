"""`tinyrouter site build`: the leaderboard site, the same build as `mkdocs build`."""

from __future__ import annotations

import argparse
from pathlib import Path

from evaluator.site import build_site


def register(sub: argparse._SubParsersAction) -> None:
    site = sub.add_parser("site", help="build the leaderboard site")
    actions = site.add_subparsers(dest="site_command", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="build the whole site with MkDocs (strict)")
    build.add_argument("--leaderboard", metavar="DIR", type=Path, default=None,
                       help="leaderboard folder to read (default: REPO/leaderboard)")
    build.add_argument("--out", metavar="DIR", type=Path, default=None,
                       help="output folder (default: mkdocs.yml's site_dir, public/)")
    build.add_argument("--repo", metavar="DIR", type=Path, default=Path("."),
                       help="repository root holding mkdocs.yml, site/ and templates/ "
                            "(default: the current folder)")
    build.set_defaults(func=run_build)


def run_build(args: argparse.Namespace) -> int:
    out = build_site(args.repo, args.out, leaderboard_dir=args.leaderboard, rules=args.rules)
    print(f"site built: {out / 'index.html'}")
    return 0
