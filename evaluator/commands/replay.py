"""`tinyrouter replay`: re-derive every verdict of a retired season from what `reveal` published."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from evaluator.errors import UsageError
from evaluator.explain import explain
from evaluator.rules import Competition
from evaluator.store import REVEALED_DIR, Store

if TYPE_CHECKING:
    from evaluator.replay import Replayed


def add_replay(p: argparse.ArgumentParser) -> None:
    p.description = ("Re-derive every verdict of a retired season with the evaluator's own "
                     "verdict function, from the splits and private records `tinyrouter reveal "
                     "--season` published beside the leaderboard: each published composite, "
                     "delta, interval, crown-test z and outcome reproduced exactly, or the first "
                     "difference named. Needs no password, no GPU and no network. Exits 1 when "
                     "a verdict is not reproduced.")
    p.add_argument("--repo", type=Path, default=Path("."),
                   help="the repository whose leaderboard/ holds the season")
    p.add_argument("--leaderboard", type=Path,
                   help="a leaderboard folder elsewhere (e.g. an archived season's), instead of "
                        "REPO/leaderboard")
    p.add_argument("--revealed", type=Path,
                   help=f"the revealed season (default: the leaderboard's {REVEALED_DIR}/)")
    p.set_defaults(func=run)


PARSERS = {"replay": add_replay}


def run(args: argparse.Namespace) -> int:
    from evaluator.replay import open_season, replay_season, replayable

    store = Store(args.repo, board=args.leaderboard)
    manifest = store.manifest()
    if manifest is None:
        raise UsageError(f"{store.root} has no manifest: point --repo or --leaderboard at the "
                         "season's leaderboard")
    folder = args.revealed or store.file(REVEALED_DIR)
    published = store.results()
    replayed = replay_season(open_season(folder, manifest, args.rules), published, args.rules)
    for one in sorted(replayed, key=lambda r: r.published.evaluated_at):
        print(line(one, args.rules))
    differ = sum(not one.reproduced for one in replayed)
    before = sum(not replayable(r) for r in published)
    print(f"{len(replayed) - differ} of {len(replayed)} verdict(s) reproduced exactly"
          + (f"; {differ} not" if differ else "")
          + (f" ({before} record(s) decided before the hidden items were opened, or not "
             "decided at all, have nothing to replay)" if before else ""))
    return 1 if differ else 0


def line(one: Replayed, rules: Competition) -> str:
    """One verdict: who, what the board says (at the precision it was published to), and
    reproduced or the first difference."""
    head = one.published
    who = (f"{head.miner} generation {head.generation}"
           + (f" (PR {head.pr})" if head.pr is not None else ""))
    if not one.reproduced:
        return f"{who}: {head.outcome}, NOT reproduced: {one.difference.sentence}"
    shown = explain(head, rules)
    places, figures = shown.places, []
    if shown.composite is not None:
        figures.append(f"composite {shown.composite:.{places}f}")
    if shown.delta is not None:
        figures.append(f"Δ {shown.delta:+.{places}f}")
    if shown.interval is not None:
        figures.append("interval [{:+.{p}f}, {:+.{p}f}]".format(*shown.interval, p=places))
    if head.crown_test and "z" in head.crown_test:
        figures.append(f"z {head.crown_test['z']:.2f}")
    said = f" ({', '.join(figures)})" if figures else ""
    return f"{who}: {head.outcome}{said}, reproduced"
