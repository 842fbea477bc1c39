"""`pack`: a training run as the next submission folder, with its receipt and README."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluator import __version__
from evaluator.errors import TrainingError
from evaluator.files import dumps, format_time, utc_now
from evaluator.pool.ledger import LedgerSummary, verify_ledger
from evaluator.rules import NAME_RE, Competition, is_name
from evaluator.store import Store
from evaluator.submission.folder import write_submission
from evaluator.submission.weights import read_weights, sha256_file
from evaluator.templating import render
from evaluator.train.data import LEDGER_FILE
from evaluator.train.run import BEST_FILE, HOLDOUT_FILE, read_holdout, read_run

log = logging.getLogger(__name__)

SPARK = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 60
RECEIPT_MARGIN = 512  # bytes for the fields write_submission adds
README_TEMPLATE = "submission/README.md.j2"
SCORE_FILE = "score.json"  # what `tinyrouter score` leaves in a run folder


def sparkline(values: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """The values as one line of block characters, resampled to at most `width`."""
    if len(values) > width:
        values = [values[round(i * (len(values) - 1) / (width - 1))] for i in range(width)]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    return "".join(SPARK[round((v - lo) / span * (len(SPARK) - 1))] for v in values)


def render_readme(login: str, generation: int, summary: dict[str, Any],
                  history: list[dict], cost_usd: float, score: dict[str, Any] | None = None) -> str:
    """The submission's README: the run's settings, how it did, its fitness curve, and what
    `tinyrouter score` measured on its held-out rows."""
    step = max(1, len(history) // 10)
    shown = history[::step] + ([history[-1]] if (len(history) - 1) % step else [])
    return render(README_TEMPLATE, login=login, generation=generation, summary=summary,
                  opt=summary["optimizer"], cost_usd=cost_usd, shown=shown,
                  best_line=sparkline([h["best"] for h in history]),
                  mean_line=sparkline([h["mean"] for h in history]), score=score)


def receipt_fields(summary: dict[str, Any], history: list[dict], cost_usd: float,
                   ledger_head: str, created_at: str,
                   held_out: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The receipt minus what write_submission fills in from the files themselves."""
    opt = summary["optimizer"]
    return {"benchmarks": summary["benchmarks"],
            "optimizer": {k: opt[k] for k in ("name", "popsize", "sigma0", "seed")}
            | {"generations": len(history)},
            "fitness_history": [{k: (h[k] if k == "generation" else round(h[k], 6))
                                 for k in ("generation", "mean", "max", "best")}
                                for h in history],
            "total_cost_usd": round(cost_usd, 6), "ledger_head": ledger_head,
            "init_weights_sha256": summary.get("init_weights_sha256"),
            "held_out": held_out,
            "tinyrouter_version": __version__, "created_at": created_at}


def held_out_ids(run_dir: Path) -> dict[str, list[str]] | None:
    """The ids the run kept out of training, for the receipt; None when it kept none."""
    if not (run_dir / HOLDOUT_FILE).is_file():
        return None
    try:
        ids = read_holdout(run_dir)
    except TrainingError:  # a run that kept none, or a spoilt file: the receipt says nothing
        return None
    return {bench: sorted(found) for bench, found in ids.items() if found} or None


def current_score(run_dir: Path) -> dict[str, Any] | None:
    """The run's `score.json` when it scored the weights the run holds now, else None."""
    path = run_dir / SCORE_FILE
    try:
        score = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(score, dict) or score.get("weights_sha256") != sha256_file(
            run_dir / BEST_FILE):
        return None
    return score


def pack(run_dir: str | Path, login: str, repo_dir: str | Path, rules: Competition,
         created_at: str | None = None) -> Path:
    """Write the run's head as submissions/<login>/<next generation>/, whole or not at all."""
    run_dir = Path(run_dir)
    if not is_name(login):
        raise TrainingError(f"{login!r} is not a valid GitHub login ({NAME_RE.pattern})")
    summary, history = read_run(run_dir)
    if len(history) < rules.receipt_min_fitness_entries:
        raise TrainingError(f"{run_dir} has {len(history)} finished generation(s); a "
                            f"receipt needs at least {rules.receipt_min_fitness_entries}: "
                            "continue it with `tinyrouter train --resume --generations N`")
    if summary.get("pool") != list(rules.pool_names) or summary.get("n_params") != rules.n_params:
        raise TrainingError(f"{run_dir} was trained for another pool or head size than these "
                            "rules (check --competition)")
    head, scales = read_weights(run_dir / BEST_FILE, rules)
    ledger = _paid_ledger(run_dir, rules)
    repo = Path(repo_dir)
    generation, draft = target_generation(repo, login)
    created_at = created_at or format_time(utc_now())
    fields = receipt_fields(summary, history, ledger.total_cost_usd, ledger.head, created_at,
                            held_out_ids(run_dir))
    _fit_the_cap(fields, len(history), rules)
    readme = render_readme(login, generation, summary, history, ledger.total_cost_usd,
                           current_score(run_dir))
    if draft is None:
        return write_submission(repo, login, generation, head, scales, fields, rules, readme)
    log.info("replacing %s: no attempt records it and git does not track it, so it was never "
             "submitted, and the bot expects generation %d", draft.relative_to(repo), generation)
    aside = Path(tempfile.mkdtemp(dir=draft.parent, prefix=f".{generation}.replaced."))
    draft.replace(aside / "folder")
    try:
        folder = write_submission(repo, login, generation, head, scales, fields, rules, readme)
    except BaseException:
        (aside / "folder").replace(draft)
        raise
    finally:
        shutil.rmtree(aside, ignore_errors=True)
    return folder


def _paid_ledger(run_dir: Path, rules: Competition) -> LedgerSummary:
    """The run's verified ledger, which proves the receipt's cost; TrainingError without one,
    or with one that records too little."""
    if not (run_dir / LEDGER_FILE).is_file():
        raise TrainingError(f"{run_dir} has no {LEDGER_FILE}: train on data collected with "
                            "`tinyrouter collect`, whose ledger proves the receipt's cost")
    ledger = verify_ledger(run_dir / LEDGER_FILE)
    if ledger.total_cost_usd <= rules.receipt_min_cost_usd:
        raise TrainingError(f"the run's ledger records ${ledger.total_cost_usd}; a receipt "
                            f"needs a cost above ${rules.receipt_min_cost_usd}")
    return ledger


def _fit_the_cap(fields: dict[str, Any], generations: int, rules: Competition) -> None:
    """Keeps the receipt under its byte cap: its held-out ids left out where they would take
    it over, a TrainingError where it is over without them."""
    if len(dumps(fields)) + RECEIPT_MARGIN > rules.max_receipt_bytes and fields["held_out"]:
        log.warning("the run's held-out ids would take the receipt over its %d-byte cap, so "
                    "it leaves them out: challengers' `score --king` will compare with this "
                    "head on rows it may have trained on", rules.max_receipt_bytes)
        fields["held_out"] = None
    size = len(dumps(fields)) + RECEIPT_MARGIN
    if size > rules.max_receipt_bytes:
        raise TrainingError(f"{generations} generations make a receipt of about {size} bytes, "
                            f"over the {rules.max_receipt_bytes}-byte cap; train a new run "
                            "with fewer --generations")


def target_generation(repo: Path, login: str) -> tuple[int, Path | None]:
    """(the generation the PR bot expects next, the unsubmitted folder there to replace or None).

    A folder of yours that no attempt records and that git does not track was packed here and
    never submitted (the bot never sees it), so it does not count: packing again replaces it
    rather than writing the next generation, which the bot would refuse.
    """
    store = Store(repo)
    attempted = {a.generation for a in store.attempts() if a.miner.lower() == login.lower()}
    tracked = tracked_folders(repo, login)
    drafts = {int(p.name): p for p in store.submission_folders()
              if p.parent.name.lower() == login.lower() and int(p.name) not in attempted
              and p.relative_to(repo).as_posix() not in tracked}
    seen = [g for g in store.merged_generations(login) if g not in drafts] + list(attempted)
    generation = max(seen, default=0) + 1
    return generation, drafts.get(generation)


def tracked_folders(repo: Path, login: str) -> set[str]:
    """The submissions/<login>/<n> folders git tracks in `repo` (none outside a git checkout)."""
    try:
        listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--", "submissions/"],
                                capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    return {"/".join(path.split("/")[:3]) for path in listed.decode("utf-8", "replace").split("\0")
            if path.count("/") >= 3 and path.split("/")[1].lower() == login.lower()}
