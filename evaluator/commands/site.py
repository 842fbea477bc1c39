"""`tinyrouter site build`: the leaderboard site, the same build as `mkdocs build`."""

from __future__ import annotations

import argparse
from pathlib import Path

from evaluator.store import Store


def add_site(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="site_command", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="build the whole site with MkDocs (strict)")
    build.add_argument("--repo", metavar="DIR", type=Path, default=Path("."),
                       help="repository whose leaderboard/ to show")
    build.add_argument("--leaderboard", metavar="DIR", type=Path,
                       help="another leaderboard folder to show (default: REPO/leaderboard)")
    build.add_argument("--out", metavar="DIR", type=Path, default=Path("public"),
                       help="output folder (emptied first; refused unless empty or a site)")
    build.add_argument("--site-url", metavar="URL",
                       help="the address the site is published at (default: site_url in "
                            "mkdocs.yml, TINYROUTER_SITE_URL, or a workflow's GitHub Pages)")
    build.add_argument("--demo", action="store_true",
                       help="mark every page as the demo's board, not the competition's")
    build.set_defaults(func=run_build)


PARSERS = {"site": add_site}


def run_build(args: argparse.Namespace) -> int:
    from evaluator.site import build_site  # MkDocs and matplotlib: only when building

    board = args.leaderboard or Store(args.repo).root
    out = build_site(args.out, board, args.rules, site_url=args.site_url, demo=args.demo)
    print(f"site built: {out / 'index.html'}")
    return 0
