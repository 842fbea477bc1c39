"""`tinyrouter dev words`: how close a linear head on the encoder's features comes to the
category lookup, next to the same fit on an exact bag of the questions' words.

On the demo the lookup is the best router there is (grades are drawn per model, benchmark and
category); what a head reaches on an exact bag of the words is what any encoder could give
it. Each seeded split fits the start (train/start.py) on the training rows and scores it and
the lookup by the personas' skills on every other corpus question: no grading noise.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import numpy as np

from evaluator.baselines import lookup_picks
from evaluator.commands.output import write_json_out
from evaluator.errors import UsageError

WORD = re.compile(r"[A-Za-z]+|\d+|\S")


def add_words(p: argparse.ArgumentParser) -> None:
    p.description = ("Fit the start (the category lookup's choices) on the encoder's features "
                     "and on an exact bag of the questions' words, on seeded splits of collected "
                     "rows, and score both and the lookup by the demo personas' skills on every "
                     "corpus question outside the training rows. Needs the demo corpus's rules "
                     "(--competition demo/competition.json). About a minute.")
    p.add_argument("--data", required=True, metavar="DIR",
                   help="collected rows (for instance the demo's miners/data)")
    p.add_argument("--splits", type=int, default=8, help="seeded splits (default 8)")
    p.add_argument("--json", metavar="OUT", help="also write the report here (- for stdout)")
    p.set_defaults(func=run)


PARSERS = {"words": add_words}


def run(args: argparse.Namespace) -> int:
    if args.splits < 1:
        raise UsageError("--splits must be at least 1")
    report = measure(args.rules, args.data, args.splits)
    print("\n".join(summary(report)))
    write_json_out(args.json, report)
    return 0


def summary(report: dict[str, Any]) -> list[str]:
    lines = [f"{report['rows']} collected rows, {report['splits']} splits; expected accuracy "
             f"on the corpus questions outside each split's training rows "
             f"(lookup {report['lookup']:.4f}, best single model {report['best_single']:.4f})"]
    for name, row in report["features"].items():
        lines.append(f"  {name:<28} {row['accuracy']:.4f}   vs the lookup "
                     f"{row['difference']:+.4f} ± {row['standard_error']:.4f}")
    return lines


def measure(rules: Any, data_dir: str, splits: int) -> dict[str, Any]:
    # torch and the encoder load only when the study runs, so --help works without them
    from evaluator.benchmarks.corpus import load_corpus, load_personas, skill
    from evaluator.loop import coordinator_transcript
    from evaluator.train.data import load_training_set, split_holdout
    from evaluator.train.fitness import encoder_featurizer
    from evaluator.train.start import best_models, start_targets, whitened_fit

    collected = load_training_set(data_dir, rules.benchmarks, rules)
    items = [entry.item for entry in load_corpus(rules, collected.benchmarks)]
    personas = load_personas(rules)
    skills = np.array([[skill(personas, model, item) for model in rules.pool_names]
                       for item in items])
    transcripts = [coordinator_transcript(item.prompt, []) for item in items]
    encoder = encoder_featurizer(rules.encoder_id, collected, rules, transcripts)
    features = {"the rules' encoder": encoder.features(np.arange(len(items)),
                                                       np.ones(rules.svf_scale_count)),
                "an exact bag of the words": _word_bag([item.prompt for item in items])}
    where = {item.id: k for k, item in enumerate(items)}
    results: dict[str, list[float]] = {name: [] for name in features}
    lookups, singles = [], []
    for seed in range(splits):
        train, _ = split_holdout(collected, rules.train_holdout, seed, rules)
        seen = [where[row.item.id] for row in train.rows]
        unseen = np.setdiff1d(np.arange(len(items)), seen)
        lookups.append(_expected(skills, items, unseen,
                                 _lookup_picks(train, items, unseen, rules.pool_names)))
        singles.append(_expected(skills, items, unseen,
                                 _lookup_picks(train, items, unseen, rules.pool_names,
                                               by_category=False)))
        targets = best_models(start_targets(train, rules.train_shrink))
        for name, feats in features.items():
            rows = whitened_fit(feats[seen], targets)  # the start's model rows (scales at 1)
            picks = (feats[unseen] @ rows.T).argmax(axis=1)
            results[name].append(_expected(skills, items, unseen, picks))
    lookup = np.array(lookups)
    return {"rows": len(collected.rows), "splits": splits, "lookup": float(lookup.mean()),
            "best_single": float(np.mean(singles)),
            "features": {name: {"accuracy": float(np.mean(values)),
                                "difference": float(np.mean(np.array(values) - lookup)),
                                "standard_error": float(np.std(np.array(values) - lookup)
                                                        / np.sqrt(splits))}
                         for name, values in results.items()}}


def _word_bag(texts: list[str]) -> np.ndarray:
    vocabulary: dict[str, int] = {}
    tokens = [[vocabulary.setdefault(w, len(vocabulary)) for w in WORD.findall(t.lower())]
              for t in texts]
    bag = np.zeros((len(texts), len(vocabulary)))
    for row, ids in enumerate(tokens):
        np.add.at(bag[row], ids, 1.0)
    return bag / np.linalg.norm(bag, axis=1, keepdims=True)


def _lookup_picks(train: Any, items: list[Any], unseen: np.ndarray, pool_names: Any,
                  by_category: bool = True) -> np.ndarray:
    """Each unseen item's pick by the category lookup learnt on the training rows (or, not
    `by_category`, by each benchmark's best single model there)."""
    picks = np.zeros(len(unseen), dtype=int)
    for name in train.benchmarks:
        mine = np.array([items[k].benchmark == name for k in unseen])
        fitted = [row for row in train.rows if row.item.benchmark == name]
        best, chosen = lookup_picks(fitted, [items[k] for k in unseen[mine]], pool_names)
        picks[mine] = chosen if by_category else best
    return picks


def _expected(skills: np.ndarray, items: list[Any], unseen: np.ndarray,
              picks: np.ndarray) -> float:
    """The mean over benchmarks of the picked models' mean skill on the unseen items."""
    benchmarks = np.array([items[k].benchmark for k in unseen])
    chosen = skills[unseen, picks]
    return float(np.mean([chosen[benchmarks == name].mean() for name in dict.fromkeys(benchmarks)]))
