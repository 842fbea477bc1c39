"""A retired season's verdicts, re-derived from what `reveal` published by the evaluator's code.

`reveal --season` publishes every split and, per verdict decided on the hidden items, the
evaluation's private record. `replay` checks each published verdict against them in order
(the record, the partition commitment, the items its seed draws, each cached grade, then every
figure `evaluate.decide` gives) and names the first difference. Taken as recorded: each live
session's grade and a king's router card, which no verdict reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.benchmarks.sealing import check_revealed, reveal_split
from evaluator.contenders import Contender
from evaluator.errors import BenchmarkError, LeaderboardError
from evaluator.evaluate import (
    HeadRun,
    Stamp,
    best_model,
    decide,
    live_stages,
    overfit_rejection,
    pool_rows,
    scored_items,
    verdict,
)
from evaluator.files import loads_finite, parse_time, write_json
from evaluator.leaderboard import check_private
from evaluator.records import DECISIVE, KING, PUBLIC_FIELDS, HeadRecord, HeadRef, Result
from evaluator.rules import CACHED_SETS, LIVE_SPLIT, SEALED_SPLITS, Competition
from evaluator.verdict import MORE

EVALUATIONS_DIR = "evaluations"  # in it: evaluations/<miner>/<generation>.json, private records
NOT_REPLAYED = ("router_card", "isolation", "not_compared")  # fields no verdict computes
RECORD, COMMITMENT, ITEMS, GRADE, FIGURE = "record", "commitment", "items", "grade", "figure"
CHECKS = (RECORD, COMMITMENT, ITEMS, GRADE, FIGURE)


def split_path(folder: str | Path, benchmark: str, split: str) -> Path:
    """Where a revealed split lies in a revealed season's folder."""
    return Path(folder) / f"{benchmark}.{split}.json"


def record_path(folder: str | Path, miner: str, generation: int) -> Path:
    """Where the private record behind a decisive result lies, as `results/` files it."""
    return Path(folder) / EVALUATIONS_DIR / miner / f"{generation}.json"


@dataclass(frozen=True)
class Difference:
    """The first thing a replay could not reproduce: which check (`CHECKS`), where, and the
    published value beside the replayed one."""

    check: str
    where: str
    published: Any = None
    replayed: Any = None

    @property
    def sentence(self) -> str:
        if self.check == RECORD:
            return f"{self.where}; reveal the season's private records with it"
        if self.check == COMMITMENT:
            return (f"the record's partition seed does not open the published commitment "
                    f"{str(self.published)[:12]}…")
        if self.check == ITEMS:
            return (f"{self.where}: the seed draws {self.published}, the record holds "
                    f"{self.replayed}")
        if self.check == GRADE:
            return (f"{self.where}: the revealed pool grades it {_grade(self.published)}, the "
                    f"record {_grade(self.replayed)}")
        return f"{self.where}: published {self.published!r}, replayed {self.replayed!r}"


def _grade(correct: Any) -> str:
    return "right" if correct else "wrong"


@dataclass(frozen=True)
class Replayed:
    """One published verdict replayed: the board's record, the record re-derived (None where a
    check before the verdict stopped the replay), and the first difference (None: reproduced)."""

    published: Result
    result: Result | None
    difference: Difference | None = None

    @property
    def reproduced(self) -> bool:
        return self.difference is None


@dataclass(frozen=True)
class Season:
    """A retired season as `reveal --season` published it: every split's rows, checked against
    the manifest's commitments, and the private records, by the evaluation they are of."""

    sets: dict[str, dict[str, list[dict[str, Any]]]]
    records: dict[tuple[Any, ...], Result]


def _read(path: Path, what: str) -> Any:
    try:
        return loads_finite(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise BenchmarkError(f"{path} is missing: publish the retired season with `tinyrouter "
                             f"reveal --season` first") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BenchmarkError(f"cannot read {what} {path}: {exc}") from exc


def _evaluation(record: Result) -> tuple[Any, ...]:
    return (*record.key, record.evaluated_at)


def open_season(folder: str | Path, manifest: Mapping[str, Any], rules: Competition) -> Season:
    """The revealed season in `folder`; a split that does not match the manifest's commitment,
    or a record that cannot be read, is an error naming it."""
    folder = Path(folder)
    sets: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for bench in rules.benchmarks:
        sets[bench] = {}
        for split in SEALED_SPLITS:
            path = split_path(folder, bench, split)
            revealed = _read(path, "the revealed split")
            check_revealed(revealed, manifest)
            if (revealed.get("benchmark"), revealed.get("split")) != (bench, split):
                raise BenchmarkError(f"{path} holds {revealed.get('benchmark')} "
                                     f"{revealed.get('split')}, not {bench} {split}")
            sets[bench][split] = revealed["rows"]
    records = {}
    for path in sorted((folder / EVALUATIONS_DIR).glob("*/*.json")):
        data = _read(path, "the revealed record")
        if not isinstance(data, dict):
            raise BenchmarkError(f"{path} is not an evaluation's private record")
        try:
            record = Result.from_dict(data, True, str(path))
        except LeaderboardError as exc:
            raise BenchmarkError(str(exc)) from exc
        records[_evaluation(record)] = record
    return Season(sets, records)


def private_records(folder: str | Path) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Every evaluation's private record under `folder`, by the evaluation it is of: any JSON
    file holding one, as `tinyrouter evaluate --private-out` writes it (public results, ledgers
    and other files beside them are passed over)."""
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for path in sorted(Path(folder).rglob("*.json")):
        data = _read(path, "the private record")
        if not isinstance(data, dict) or not isinstance(data.get("public"), dict):
            continue
        try:
            key = _evaluation(Result.from_dict(data, True, str(path)))
        except LeaderboardError as exc:
            raise BenchmarkError(str(exc)) from exc
        if found.setdefault(key, data) != data:
            raise BenchmarkError(f"{path} is another private record of an evaluation already "
                                 "found: keep the one the runner wrote")
    return found


def reveal_season(out: str | Path, hidden: str | Path, password: str, private: str | Path,
                  published: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any],
                  rules: Competition) -> tuple[int, int]:
    """Publish a retired season into `out`: every sealed split (with the salt of its commitment)
    and the private record of each verdict `published` decided on the hidden items. Nothing is
    written unless every such verdict has its record in `private` and every split matches the
    manifest. Returns (splits, records) written."""
    records, wanted = private_records(private), []
    for public in published:
        result = Result.from_dict(dict(public))
        if replayable(result):
            wanted.append((result, public, records.get(_evaluation(result))))
    missing = [result for result, _, record in wanted if record is None]
    if missing:
        first = missing[0]
        raise BenchmarkError(
            f"{private} holds no private record of {len(missing)} published verdict(s), e.g. "
            f"{first.miner} generation {first.generation} (PR {first.pr}, evaluated at "
            f"{first.evaluated_at}): gather every evaluation runner's private records first")
    for result, public, record in wanted:
        try:
            check_private(dict(public), record, rules)
        except LeaderboardError as exc:
            raise BenchmarkError(f"{result.miner} generation {result.generation}: {exc}") from exc
    splits = {(bench, split): reveal_split(hidden, bench, split, password)
              for bench in rules.benchmarks for split in SEALED_SPLITS}
    for revealed in splits.values():
        check_revealed(revealed, manifest)
    for (bench, split), revealed in splits.items():
        write_json(split_path(out, bench, split), revealed)
    for result, _, record in wanted:
        write_json(record_path(out, result.miner, result.generation), record)
    return len(splits), len(wanted)


def replayable(result: Result) -> bool:
    """Whether a published result was decided on the hidden items (a verdict with a partition):
    gate re-checks and the behavioural check decide before the hidden sets are opened."""
    return result.outcome in DECISIVE and result.partition_commitment is not None


def replay_season(season: Season, published: Iterable[Result], rules: Competition
                  ) -> list[Replayed]:
    """Every replayable published verdict, replayed (others are left out: see `replayable`)."""
    return [replay(result, season.records.get(_evaluation(result)), season.sets, rules)
            for result in published if replayable(result)]


# ---------------------------------------------------------------- one verdict

class _Stop(Exception):
    def __init__(self, difference: Difference) -> None:
        super().__init__(difference.sentence)
        self.difference = difference


def replay(published: Result, record: Result | None, sets: Mapping[str, Any],
           rules: Competition) -> Replayed:
    """One published verdict against its revealed record and the revealed splits."""
    try:
        result = _rederive(published, record, sets, rules)
    except _Stop as stop:
        return Replayed(published, None, stop.difference)
    result = dataclasses.replace(result, **{name: getattr(published, name)
                                            for name in NOT_REPLAYED})
    return Replayed(published, result, first_difference(published, result, rules)
                    or unlike_record(record, result, rules))


def _rederive(published: Result, record: Result | None, sets: Mapping[str, Any],
              rules: Competition) -> Result:
    if record is None or record.challenger_run is None:
        raise _Stop(Difference(RECORD, "no revealed record of this evaluation"))
    partition = record.partition
    if partition is None or partition.commitment != published.partition_commitment:
        raise _Stop(Difference(COMMITMENT, "partition", published.partition_commitment))
    halves = scored_items(sets, partition.seed, rules)
    stages = live_stages(sets, partition.seed, rules)
    best = {bench: best_model(pool_rows(sets, bench), rules) for bench in rules.benchmarks}
    graded = {bench: {split: [r.answers[best[bench]].correct for r in halves[bench][split]]
                      for split in CACHED_SETS if split in halves[bench]}
              for bench in rules.benchmarks}
    runs = [_checked(head, who, halves, stages, rules) for who, head in
            (("the challenger", record.challenger_run), ("the king", record.king_run))
            if head is not None]
    played = {len(head.items[bench][LIVE_SPLIT]) for head in runs
              for bench in rules.benchmarks}
    ends = [sum(rules.live_stages[:n]) for n in range(len(rules.live_stages) + 1)]
    if len(played) != 1 or next(iter(played)) not in ends:
        raise _Stop(Difference(ITEMS, "live questions per benchmark",
                               "the same whole live stages for both heads",
                               f"{', '.join(map(str, sorted(played)))} of them"))
    mine, *rest = (HeadRun.of_record(head.items, graded, rules) for head in runs)
    theirs = rest[0] if rest else None
    stage = ends.index(len(runs[0].items[rules.benchmarks[0]][LIVE_SPLIT]))
    stamp = Stamp(_contender(published), parse_time(published.evaluated_at),
                  published.benchmark_manifest, partition)
    if stage == 0:  # stopped by the overfit gate on its cached items, before any live call
        result = overfit_rejection(stamp, mine, rules)
        if result is None:
            raise _Stop(Difference(FIGURE, "outcome", str(published.outcome),
                                   "not stopped by the overfit gate"))
        return result
    decided = decide(mine, theirs, rules, stage)
    if decided.outcome == MORE:
        raise _Stop(Difference(FIGURE, "outcome", str(published.outcome),
                               "more live questions asked for"))
    king = None if record.king_run is None else _contender(record.king_run)
    return verdict(stamp, mine, theirs, king, decided, rules)


def _contender(head: HeadRef) -> Contender:
    return Contender(head.miner, head.generation, np.empty(0), head.pr, head.head_sha)


def _checked(head: HeadRecord, who: str, halves: Mapping[str, Mapping[str, list]],
             stages: Sequence[Mapping[str, list]], rules: Competition) -> HeadRecord:
    """The head's record, once its items are the ones the seed draws, in their order, and its
    cached grades the revealed answers'."""
    for bench in rules.benchmarks:
        kept = head.items.get(bench) or {}
        drawn = {split: [row.item.id for row in halves[bench][split]] for split in CACHED_SETS}
        drawn[LIVE_SPLIT] = [item.id for stage in stages for item in stage[bench]]
        for split, ids in drawn.items():
            recorded = [row.get("id") for row in kept.get(split, [])]
            expected = ids[:len(recorded)] if split == LIVE_SPLIT else ids
            if recorded != expected:
                pairs = enumerate(zip(expected, recorded, strict=False))
                at = next((i for i, (a, b) in pairs if a != b), min(len(expected), len(recorded)))
                raise _Stop(Difference(ITEMS, f"{who}: {bench} {split} item {at + 1}",
                                       _nth(expected, at), _nth(recorded, at)))
        for split in CACHED_SETS:
            for row, answered in zip(kept[split], halves[bench][split], strict=True):
                answer = answered.answers.get(row.get("model"))
                if answer is None or answer.correct != row.get("correct"):
                    raise _Stop(Difference(
                        GRADE, f"{who}: {bench} {split} item {row['id']}, the cached answer of "
                        f"{row.get('model')}", None if answer is None else answer.correct,
                        row.get("correct")))
    return head


def _nth(ids: Sequence[str], at: int) -> str:
    return repr(ids[at]) if at < len(ids) else "nothing more"


# ---------------------------------------------------------------- the published figures

def _flat(value: Any, where: str) -> Iterable[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key in sorted(value):
            yield from _flat(value[key], f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, part in enumerate(value):
            yield from _flat(part, f"{where}[{index}]")
    else:
        yield where, value


def figures(public: Mapping[str, Any]) -> dict[str, Any]:
    """A public record's figures, flat ("per_benchmark.mmlu.live_acc" → value), outcome first
    and the rest in the disclosure rule's order; the fields no verdict computes left out."""
    order = ["outcome", *PUBLIC_FIELDS.get(public.get("outcome"), ())]
    flat = {}
    for name in dict.fromkeys(order):
        if name in public and name not in NOT_REPLAYED:
            flat.update(_flat(public[name], name))
    return flat


def first_difference(published: Result, replayed: Result, rules: Competition
                     ) -> Difference | None:
    """The first published figure the replayed record does not give exactly, or None."""
    precision = rules.disclosure_precision
    shown, derived = figures(published.public(precision)), figures(replayed.public(precision))
    return _first(shown, derived, "")


def unlike_record(record: Result, replayed: Result, rules: Competition) -> Difference | None:
    """The first figure the revealed record keeps that the replay does not give exactly: every
    figure a king publishes, at full precision, a loss's included (what the disclosure rule
    hid is checked once it is revealed)."""
    def kept(result: Result) -> dict[str, Any]:
        whole = dataclasses.replace(result, outcome=KING)
        return figures({**whole.public(rules.disclosure_precision), "outcome": result.outcome})

    return _first(kept(record), kept(replayed), "the revealed record's ")


def _first(shown: Mapping[str, Any], derived: Mapping[str, Any], whose: str
           ) -> Difference | None:
    for where in dict.fromkeys([*shown, *derived]):
        if shown.get(where) != derived.get(where) or (where in shown) != (where in derived):
            return Difference(FIGURE, f"{whose}{where}", shown.get(where), derived.get(where))
    return None
