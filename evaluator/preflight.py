"""The behavioural duplicate check before a pull request: what `preflight` and `score` add.

The evaluation compares a head's routing of the public train items with the king's and every
earlier attempt's before it opens the hidden sets (contenders.py). A miner runs that same
check here, with the same functions, on the same items (read from their collected rows, which
hold every public train item's question) and the same encoder, wherever this install and this
checkout allow; where they do not, the preview says what it could not run and what it needs,
so an honest head never spends its slot on a verdict its author could have seen.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.contenders import (
    Alike,
    Contender,
    behaviour_reason,
    earlier_attempts,
    earlier_contenders,
    load_contender,
    public_routing,
)
from evaluator.errors import TinyRouterError
from evaluator.records import Attempt
from evaluator.rules import WEIGHTS_FILE, Competition
from evaluator.store import LEADERBOARD_DIR, MANIFEST_PATH, Store, submission_path
from evaluator.submission import sha256_file
from evaluator.types import Item

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BehaviourPreview:
    """The behavioural check as the evaluation would decide it: its reason (None: passed),
    how alike the head routes with each head compared, the earlier attempts it could not
    compare here (their folders are not at hand), and, when it could not run at all, why and
    what it needs (`not_run`)."""

    reason: str | None = None
    compared: tuple[Alike, ...] = ()
    skipped: tuple[Attempt, ...] = ()
    not_run: str | None = None

    @property
    def passed(self) -> bool | None:
        return None if self.not_run else self.reason is None


def public_items_from(data: Path, repo: Path, rules: Competition) -> list[Item]:
    """Every public train item the evaluation compares on, in the manifest's order, read from
    the rows `tinyrouter collect` wrote to `data`; a TinyRouterError says which are missing."""
    from evaluator.train.data import data_path, read_training_rows

    manifest = Store(repo).manifest()
    if manifest is None:
        raise TinyRouterError(f"{repo} has no {MANIFEST_PATH} naming the public train items; "
                              "pass --repo with a checkout of main")
    items, missing = [], 0
    for bench in rules.benchmarks:
        ids = list((manifest.get("benchmarks", {}).get(bench) or {}).get("train_ids") or [])
        path = data_path(data, bench)
        have = ({row.item.id: row.item for row in read_training_rows(path, rules)}
                if path.is_file() else {})
        items += [have[i] for i in ids if i in have]
        missing += sum(i not in have for i in ids)
    if missing:
        raise TinyRouterError(
            f"{data} holds {len(items)} of the {len(items) + missing} public train items the "
            f"evaluation compares heads on: collect every benchmark's train split into it "
            f"(`tinyrouter collect --benchmark B --out {data}`, no --limit) or pass --data")
    return items


def preview_behaviour(repo: Path, challenger: Contender, rules: Competition, data: Path,
                      encoder: str | None = None, earlier_dir: Path | None = None,
                      weights_sha256: str | None = None,
                      router: Any = None) -> BehaviourPreview:
    """The behavioural check for `challenger` (its miner "" when unknown: then only the king
    is compared, as an earlier attempt of the miner's own would be exempt), as the
    evaluation would run it if its attempt were recorded now. `router`: one already loaded
    on the encoder."""
    for module in ("torch", "transformers"):
        try:
            __import__(module)
        except ImportError:
            return BehaviourPreview(not_run=f"it routes the public items with the encoder, "
                                            f"which needs the model extra ({module} is not "
                                            "installed: pip install 'tinyrouter[model]')")
    store = Store(repo)
    try:
        items = public_items_from(data, repo, rules)
        reigning, king = store.king(), None
        if reigning is not None:
            king = load_contender(repo, submission_path(reigning.miner, reigning.generation),
                                  rules)
        attempts = (earlier_attempts(store, challenger.miner, None, None, reigning,
                                     weights_sha256 or "") if challenger.miner else [])
        earlier, missing = earlier_contenders(attempts, rules, repo=earlier_dir or repo)
        if router is None:
            from evaluator.coordinator.router import load_router

            router = load_router(encoder or rules.encoder_id, rules)
        public = public_routing(challenger, king, router, items, earlier)
    except TinyRouterError as exc:
        return BehaviourPreview(not_run=str(exc))
    return BehaviourPreview(behaviour_reason(public, rules), public.compared,
                            tuple(attempt for _, attempt in missing))


def preview_submission(repo: Path, relpath: str, rules: Competition, data: Path,
                       encoder: str | None = None,
                       earlier_dir: Path | None = None) -> BehaviourPreview:
    """`preview_behaviour` for a submission folder, against the king and every earlier
    attempt of another miner."""
    folder = repo / relpath
    return preview_behaviour(repo, load_contender(repo, relpath, rules), rules, data, encoder,
                             earlier_dir, sha256_file(folder / WEIGHTS_FILE))


NOT_COMPARED = (f"earlier attempts whose folders are not in this checkout: the evaluation reads "
                f"each from its pull request's head; copy them into a folder as "
                f"submissions/<login>/<n> and pass it as --earlier-dir to compare here "
                f"({LEADERBOARD_DIR}/attempts.jsonl names them)")
