"""The competition's frozen numbers and names: the one place they live.

Code reads `OFFICIAL` (or a `Competition` passed in); docs and templates render
from `Competition.as_dict()`. Tests needing other values use `dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1
# receipt.json's own format: raised whenever a receipt field becomes required, so that a receipt
# from an older `pack` is refused before the rate limit spends a slot (gate 0), never after
RECEIPT_FORMAT = 1

BENCHMARKS = ("math500", "mmlu", "livecodebench")
ROLES = ("Thinker", "Worker", "Verifier")
# where `tinyrouter train` starts without --init (evaluator/train/start.py): the category
# lookup imitated, each row's own best model under --shrink imitated, or W = 0 with scales 1
TRAIN_STARTS = ("fit", "rows", "zero")
SVF_MATRICES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# A benchmark is sealed as three splits, drawn by the secret seed: the scored pool from the
# public dataset, and the audit and the live questions from a private source that was never
# published, so no miner can have collected answers for them (a head fitted to the public
# dataset's answers would otherwise know, on each live question, which model gets it right).
# Pool and audit items carry every pool model's cached answer. Each evaluation scores a fresh
# half of the pool, drawn with a secret seed on the runner, as its eval items, and the whole
# audit.
POOL_SPLIT, LIVE_SPLIT, AUDIT_SPLIT = "pool", "live", "audit"
SPLITS = (POOL_SPLIT,)  # drawn from the public dataset
PRIVATE_SPLITS = (AUDIT_SPLIT, LIVE_SPLIT)  # drawn from the private source, in this order
SEALED_SPLITS = (POOL_SPLIT, LIVE_SPLIT, AUDIT_SPLIT)
ANSWERED_SPLITS = (POOL_SPLIT, AUDIT_SPLIT)
PARTITION = ("eval", "audit")
# the pool's other half: not scored, but graded for the crown test's evidence (evaluator/verdict.py)
REST = "rest"
CACHED_SETS = (*PARTITION, REST)  # every cached item an evaluation grades each head on

WEIGHTS_FILE = "weights.safetensors"
RECEIPT_FILE = "receipt.json"
README_FILE = "README.md"
SUBMISSION_FILES = (WEIGHTS_FILE, RECEIPT_FILE, README_FILE)
REQUIRED_FILES = (WEIGHTS_FILE, RECEIPT_FILE)
HEAD_TENSOR = "head"
SCALES_TENSOR = "svf_scales"

# The upstream datasets, each read at one hub commit. LiveCodeBench is also pinned to a release
# (its file set) and to the contest dates of the problems used: from the first day, up to but
# excluding the last.
DATASET_REVISIONS = {
    "math500": "6e4ed1a2a79af7d8630a6b768ec859cb5af4d3be",  # HuggingFaceH4/MATH-500
    "mmlu": "c30699e8356da336a370243923dbaf21066bb9fe",  # cais/mmlu
    "livecodebench": "0fe84c3912ea0c4d4a78037083943e8f0c4dd505",  # livecodebench/code_generation_lite
}
# The encoder, read at one hub commit wherever a hub id is loaded (a local folder is used as is)
ENCODER_REVISIONS = {
    "Qwen/Qwen3-0.6B": "c1899de289a04d12100db370d81485cdf75e47ca",
}
LIVECODEBENCH_RELEASE = "release_v6"
LIVECODEBENCH_CONTEST_DATES = ("2024-08-01", "2025-05-01")

# Untrusted names and ids are checked with `fullmatch` on ASCII patterns: no trailing newline,
# no Unicode look-alike digits or letters.
NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}", re.ASCII)  # GitHub logins, run names, labels
GENERATION_RE = re.compile(r"[1-9][0-9]{0,5}", re.ASCII)
COMMIT_SHA_RE = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?", re.ASCII)  # SHA-1 or SHA-256 git ids
SHA256_RE = re.compile(r"[0-9a-f]{64}", re.ASCII)
PR_NUMBER_RE = re.compile(r"[1-9][0-9]{0,9}", re.ASCII)


def _full(pattern: re.Pattern[str], value: object) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def is_name(value: object) -> bool:
    return _full(NAME_RE, value)


def is_generation(value: object) -> bool:
    return _full(GENERATION_RE, value)


def is_commit_sha(value: object) -> bool:
    return _full(COMMIT_SHA_RE, value)


def is_sha256(value: object) -> bool:
    return _full(SHA256_RE, value)


def is_pr_number(value: object) -> bool:
    return _full(PR_NUMBER_RE, value)


@dataclass(frozen=True)
class PoolModel:
    """One pool model: its short name, OpenRouter slug and list prices (USD per 1M tokens)."""

    name: str
    slug: str
    usd_per_m_prompt: float
    usd_per_m_completion: float

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.usd_per_m_prompt
                + completion_tokens * self.usd_per_m_completion) / 1e6


# Fallback prices, used only when the provider's response carries no cost.
POOL = (
    PoolModel("qwen3.5-35b-a3b", "qwen/qwen3.5-35b-a3b", 0.15, 1.00),
    PoolModel("gemini-3.1-flash-lite", "google/gemini-3.1-flash-lite", 0.10, 0.40),
    PoolModel("deepseek-v4-flash", "deepseek/deepseek-v4-flash", 0.14, 0.28),
)


@dataclass(frozen=True)
class Competition:
    """Every frozen rule of the competition. `OFFICIAL` is the instance that counts."""

    # coordinator (SPEC §3)
    encoder_id: str = "Qwen/Qwen3-0.6B"
    hidden_size: int = 1024
    num_layers: int = 28
    svf_layer: int = 26
    svf_scale_count: int = 7168
    head_input_suffix: str = "\n<Head Input>"
    head_context_tokens: int = 2048
    # pool and loop (SPEC §4)
    pool: tuple[PoolModel, ...] = POOL
    temperature: float = 0.0
    reasoning_effort: str = "low"
    max_completion_tokens: int = 4096
    max_turns: int = 5
    transcript_output_chars: int = 6000
    # retries stop this long after an evaluation's first live call: live play of both
    # contenders takes under an hour at the token cap, and two hours keep the whole run far
    # inside GitHub Actions' six-hour job limit
    pool_retry_budget_seconds: float = 7200.0
    # an evaluation is void when more than this share of a contender's live questions failed
    # for infrastructure reasons: each one moves the composite by at most
    # (weight_live + weight_efficiency) / live_size / len(benchmarks) ≈ 0.004, so the 3 of 60
    # allowed stay well inside win_margin
    void_failure_share: float = 0.05
    # free disk an evaluation runner keeps where the sealed files and the encoder live: a fresh
    # virtual environment with CUDA torch per job, the pip cache, the encoder and the sealed
    # benchmark (`tinyrouter runner check` fails below it; the Maintaining guide says it)
    runner_free_disk_gib: int = 40
    # hidden benchmark (SPEC §6)
    benchmarks: tuple[str, ...] = BENCHMARKS
    eval_size: int = 150
    # never-published items per benchmark: the overfit gate's second set, and all the cached
    # evidence the crown reads (a lead on the public pool is one a memoriser can set). With the
    # crown read on the audit alone, at 300 a router better by 0.03 (other decisions differing
    # on 30 %) was crowned in 0.36 of evaluations, at 600 in 0.52 under the stricter bars below
    # (`tinyrouter fairness`, demo corpus); the 300 more cost the maintainer 300 private items
    # per benchmark a season and 2,700 sealing calls, no live call
    audit_size: int = 600
    # the live split: played in stages, the first `live_first_stage` questions of each
    # benchmark, then (when the crown test is undecided) the rest
    live_size: int = 60
    live_first_stage: int = 20
    # share of the non-hidden items published as train ids; the rest is withheld so the
    # hidden items are not simply the complement of the published ones
    train_fraction: float = 0.5
    # gates (SPEC §7)
    rate_limit_count: int = 1
    rate_limit_hours: int = 24
    # of the model rows, against every earlier attempt. Default runs converge on the category
    # lookup, and so on nearly the same rows: on the demo, runs with their own seeds reached
    # 0.9954 on the basis, every disguised copy 0.99999 (`tinyrouter dev agreement`)
    duplicate_cosine: float = 0.9999
    # gate 3 weighs the model rows by the public train items' features (evaluator/basis.py):
    # their leading directions holding this share of the features' energy, at most this many
    fingerprint_energy: float = 0.999
    fingerprint_directions: int = 256
    max_basis_bytes: int = 8 * 1024 * 1024  # the committed basis file, read by every gates run
    # the behavioural check (evaluator/contenders.py): a head is a copy of an earlier one when
    # it picks the same model on `duplicate_agreement` of the public train items or more, and
    # of the earlier head's own choices (the items it sends away from the model it picks most
    # for their category; at least `duplicate_own_items` of them) makes the same choice on
    # `duplicate_own_share` or more. The share: from `tinyrouter dev agreement` (evaluator/
    # studies/alike.py), the most alike independently trained pair plus its OWN_MARGIN
    duplicate_agreement: float = 0.88
    duplicate_own_share: float = 0.61
    duplicate_own_items: int = 10
    max_abs_weight: float = 1e6
    receipt_min_fitness_entries: int = 3
    receipt_min_cost_usd: float = 0.0
    max_weights_bytes: int = 128 * 1024
    max_receipt_bytes: int = 64 * 1024
    max_readme_bytes: int = 64 * 1024
    max_safetensors_header_bytes: int = 16 * 1024
    # scoring (SPEC §8)
    weight_cached: float = 0.70
    weight_live: float = 0.15
    weight_efficiency: float = 0.10
    weight_novelty: float = 0.05
    win_margin: float = 0.02
    overfit_reject_gap: float = 0.15
    overfit_penalty_gap: float = 0.08
    overfit_penalty_factor: float = 0.85
    # the overfit gap is charged at its one-sided lower confidence bound at this level, so the
    # audit's sampling noise penalises an honest head rarely even in a small audit; measured by
    # `tinyrouter fairness` (its memorisation figures), which also shows what it lets through
    overfit_confidence: float = 0.8
    novelty_questions: int = 50
    novelty_without_king: float = 0.5
    # the crown test (SPEC §8, evaluator/verdict.py): one-sided z of the composite difference
    # without the overfit factor, its live part weighed by crown_live_weight. After the first
    # live stage z > crown_z_first crowns and z ≤ lose_z_first loses, anything between plays
    # the rest of the live split; after it z > crown_z_final crowns. Chosen with `tinyrouter
    # fairness` (the Fairness page gives the figures): at 3.090 (the normal's upper 0.1 %
    # point) after each stage a near-equal head was crowned in 0.11 % of evaluations with
    # independent live re-runs, so a campaign of 300 such submissions in 29 %; at 3.290 (its
    # upper 0.05 % point) in 0.05 % and 15 %, for 0.07 less of a +0.03 router's crowns (0.52)
    crown_z_first: float = 3.290
    lose_z_first: float = 1.0
    crown_z_final: float = 3.290
    # what z counts of the live part: a benchmark's few, noisy live questions carry less
    # evidence per unit of composite than its cached items (the audit), so
    # weighing them down makes a better router's z larger; the margin still reads the whole
    # difference
    crown_live_weight: float = 0.25
    # sealing refuses an audit whose best-single-model accuracy is further than this many
    # standard errors of the difference from the pool's (two-sided): the crown reads the audit
    # alone, so a harder audit reads a real gain as a smaller one
    audit_match_z: float = 2.0
    bootstrap_resamples: int = 2000
    # a loser's composite, delta and interval, a king's audit accuracy: published to this
    disclosure_precision: float = 0.01
    # miner tool defaults (SPEC §12): not rules, but documented from here too
    train_sigma0: float = 0.1
    train_generations: int = 250
    train_minibatch: int = 72  # items per generation, split evenly across the benchmarks
    # SVF scales' initial step as a multiple of train_sigma0: a step of 1 moved the demo
    # encoder's features more than its questions differ, and the search lost its fitted start
    train_scales_step: float = 0.1
    train_shrink: float = 0.5  # weight of the category's rate in each answer's correctness
    # share of each benchmark's collected rows a run keeps out of training, so that
    # `tinyrouter score` can measure the head on rows it never fitted
    train_holdout: float = 0.2
    # share of each benchmark's training rows the search does not read: the start and every
    # generation's head are scored on them, and the start is kept until a head leads it there
    # beyond chance (train_select_z), so a search that only fits its minibatches' noise gives
    # back the start rather than erode it
    train_select: float = 0.2
    # a later head replaces the kept one only when, on the rows set aside, its wins less its
    # losses (rows exactly one of them gets right) exceed this many √(such rows): a sign test,
    # so that the best of hundreds of noisy generations is not kept for a lead of one row
    train_select_z: float = 2.0
    # training rows the role fit reads after the search (evaluator/train/roles.py)
    train_role_rows: int = 300
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def n_models(self) -> int:
        return len(self.pool)

    @property
    def n_roles(self) -> int:
        return len(ROLES)

    @property
    def head_shape(self) -> tuple[int, int]:
        return (self.n_models + self.n_roles, self.hidden_size)

    @property
    def n_head_params(self) -> int:
        rows, cols = self.head_shape
        return rows * cols

    @property
    def n_params(self) -> int:
        return self.n_head_params + self.svf_scale_count

    @property
    def live_stages(self) -> tuple[int, ...]:
        """Live questions per benchmark played in each stage of the crown test."""
        first = min(self.live_first_stage, self.live_size)
        return (first, self.live_size - first) if self.live_size > first else (first,)

    def crown_bar(self, stage: int) -> float:
        """The z a crown must exceed after live stage `stage`: the final bar from the last on."""
        return self.crown_z_final if stage >= len(self.live_stages) else self.crown_z_first

    @property
    def pool_size(self) -> int:
        """The sealed pool: twice the eval items, so each evaluation scores a fresh half."""
        return 2 * self.eval_size

    @property
    def split_sizes(self) -> dict[str, int]:
        """Items per split drawn from the public dataset."""
        return {POOL_SPLIT: self.pool_size}

    @property
    def private_sizes(self) -> dict[str, int]:
        """Items per split drawn from the private source."""
        return {AUDIT_SPLIT: self.audit_size, LIVE_SPLIT: self.live_size}

    @property
    def sealed_sizes(self) -> dict[str, int]:
        """Items per sealed split."""
        sizes = {**self.split_sizes, **self.private_sizes}
        return {split: sizes[split] for split in SEALED_SPLITS}

    @property
    def partition_sizes(self) -> dict[str, int]:
        """Items per half of an evaluation's partition of the pool."""
        return {"eval": self.eval_size, "audit": self.audit_size}

    @property
    def pool_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.pool)

    @property
    def train_popsize(self) -> int:
        """pycma's default population for n parameters: 4 + floor(3 ln n)."""
        return 4 + math.floor(3 * math.log(self.n_params))

    def pool_model(self, name: str) -> PoolModel:
        for model in self.pool:
            if model.name == name:
                return model
        raise KeyError(f"{name!r} is not in the pool {self.pool_names}")

    def as_dict(self) -> dict[str, Any]:
        """Every rule by name, plus the derived figures, for docs and templates."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        data["pool"] = [dataclasses.asdict(m) for m in self.pool]
        data["benchmarks"] = list(self.benchmarks)
        for name in ("n_models", "n_roles", "head_shape", "n_head_params", "n_params", "pool_size",
                     "live_stages", "split_sizes", "private_sizes", "sealed_sizes",
                     "partition_sizes", "pool_names", "train_popsize"):
            value = getattr(self, name)
            data[name] = list(value) if isinstance(value, tuple) else value
        data.update(roles=list(ROLES), svf_matrices=list(SVF_MATRICES), splits=list(SPLITS),
                    private_splits=list(PRIVATE_SPLITS), sealed_splits=list(SEALED_SPLITS),
                    partition=list(PARTITION),
                    submission_files=list(SUBMISSION_FILES), weights_file=WEIGHTS_FILE,
                    receipt_file=RECEIPT_FILE, readme_file=README_FILE,
                    head_tensor=HEAD_TENSOR, scales_tensor=SCALES_TENSOR,
                    format_version=FORMAT_VERSION, receipt_format=RECEIPT_FORMAT,
                    name_pattern=NAME_RE.pattern,
                    generation_pattern=GENERATION_RE.pattern,
                    dataset_revisions=dict(DATASET_REVISIONS),
                    encoder_revisions=dict(ENCODER_REVISIONS),
                    livecodebench_release=LIVECODEBENCH_RELEASE,
                    livecodebench_contest_dates=list(LIVECODEBENCH_CONTEST_DATES))
        return data

    def differences(self, base: Competition | None = None) -> list[tuple[str, Any, Any]]:
        """(name, this value, `base`'s) of every rule and derived figure in which these rules
        differ from `base` (default OFFICIAL): what a site built under them must say."""
        mine, theirs = self.as_dict(), (base or OFFICIAL).as_dict()
        return [(name, value, theirs.get(name)) for name, value in mine.items()
                if value != theirs.get(name)]

    @classmethod
    def from_overrides(cls, overrides: dict[str, Any], base: Competition | None = None) -> Competition:
        """A competition that differs from `base` (default OFFICIAL) in the named fields."""
        base = base or OFFICIAL
        known = {f.name for f in dataclasses.fields(cls)} - {"extra", "pool"}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown competition fields: {', '.join(unknown)}")
        values = dict(overrides)
        if "benchmarks" in values:
            values["benchmarks"] = tuple(values["benchmarks"])
        return dataclasses.replace(base, **values)

    @classmethod
    def load(cls, path: str | Path) -> Competition:
        """Read overrides from a JSON file (the demo's tiny encoder uses one)."""
        return cls.from_overrides(json.loads(Path(path).read_text(encoding="utf-8")))


OFFICIAL = Competition()
