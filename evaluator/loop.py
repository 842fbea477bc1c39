"""The Thinker/Worker/Verifier loop (SPEC §4): transcripts, role messages, verdicts, answers.

The loop asks a batched `decide(transcripts) -> decisions` each turn, one decision per
coordinator transcript (a router bound to a θ), so all live questions of a turn are encoded
in one batch. `run_sessions` runs many questions turn by turn in lockstep; `run_session` one.

Sessions are isolated (SPEC §8): a refused call ends its session (graded wrong), a truncated
one is kept as returned, and a call that fails for good (`InfrastructureError`) ends its
session as failed; the others go on. Any other error ends them all once the turn's calls
have finished.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from evaluator.errors import InfrastructureError, TinyRouterError
from evaluator.rules import ROLES, Competition
from evaluator.types import Decision, Item

log = logging.getLogger(__name__)

Decide = Callable[[list[str]], list[Decision]]

# How a call, and a session, ended: its worst call, failed > refused > truncated > answered.
ANSWERED, REFUSED, TRUNCATED, FAILED = "answered", "refused", "truncated", "failed"
STATUSES = (ANSWERED, REFUSED, TRUNCATED, FAILED)
ACCEPT_STOP, MAX_TURNS_STOP = "accept", "max_turns"
ENDED = (ACCEPT_STOP, REFUSED, FAILED)  # stops that end a session before the turn cap

ACCEPT, REVISE = "ACCEPT", "REVISE"
THINKER, WORKER, VERIFIER = ROLES
QUERY_HEADER = "QUERY:\n"
TURN_HEADER = "[Turn {k} | {role} | {model}]"
TURN_HEADER_RE = re.compile(r"^\[Turn (\d+) \| (\w+) \| ([^\]\n]+)\]$", re.MULTILINE)
OMITTED = "\n[... {n} characters omitted ...]\n"

ROLE_CONTRACTS = {
    THINKER: (
        "You are the Thinker in a team of models solving a problem turn by turn. "
        "Plan, decompose or critique: name the key ideas, the pitfalls and the next steps, "
        "building on the work in the transcript. Do not solve the problem end to end and "
        "do not state a final answer."),
    WORKER: (
        "You are the Worker in a team of models solving a problem turn by turn. "
        "Make concrete progress: produce the derivation, the code or the final answer, in "
        "the format the query asks for, using the plans and critiques in the transcript."),
    VERIFIER: (
        "You are the Verifier in a team of models solving a problem turn by turn. "
        "Judge the accumulated solution in the transcript: is the latest answer correct and "
        "complete? Explain briefly, then end with exactly one line: `VERDICT: ACCEPT` or "
        "`VERDICT: REVISE`."),
}

# The keyword, optionally wrapped in Markdown emphasis or code, then the token as a whole word.
_VERDICT_RE = re.compile(
    r"(?<![A-Za-z0-9])[*_`]*VERDICT[*_`]*\s*[:\-–—]?\s*[*_`]*\s*(ACCEPT|REVISE)(?![A-Za-z0-9])",
    re.IGNORECASE)


class Grader(Protocol):
    """What the loop needs of a benchmark: its prompt, the answer it extracts, its grades
    (every benchmarks.base.Benchmark is one)."""

    def render_prompt(self, item: Item) -> str: ...

    def extract(self, response: str) -> str | None: ...

    def grade_many(self, pairs: list[tuple[str, Any]]) -> list[Any]: ...


@dataclass(frozen=True)
class Turn:
    """One call of the loop; `shown` is the output as later turns and the coordinator see it."""

    model: str
    role: str
    text: str
    shown: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    verdict: str | None = None
    status: str = ANSWERED
    replayed: bool = False  # the response came from the evaluation's response cache


@dataclass
class Trajectory:
    """A finished session: every turn, the graded answer and the totals. `stop` is accept,
    max_turns, refused or failed; `failure` says why a failed session failed."""

    item: Item
    turns: list[Turn] = field(default_factory=list)
    answer: str | None = None
    answer_turn: int | None = None
    stop: str = MAX_TURNS_STOP
    failure: str | None = None
    failed_cost_usd: float = 0.0  # what the failed call's attempts billed
    seconds: float = 0.0  # wall-clock time of its model calls, retries included

    @property
    def n_turns(self) -> int:
        return len(self.turns)

    @property
    def status(self) -> str:
        if self.stop in (REFUSED, FAILED):
            return self.stop
        return TRUNCATED if any(turn.status == TRUNCATED for turn in self.turns) else ANSWERED

    @property
    def cost_usd(self) -> float:
        return sum(turn.cost_usd for turn in self.turns) + self.failed_cost_usd

    @property
    def replayed(self) -> bool:
        """Whether every call of the session was a replay from the response cache (a failed
        session made a call that was not)."""
        return bool(self.turns) and self.stop != FAILED and all(t.replayed for t in self.turns)

    @property
    def prompt_tokens(self) -> int:
        return sum(turn.prompt_tokens for turn in self.turns)

    @property
    def completion_tokens(self) -> int:
        return sum(turn.completion_tokens for turn in self.turns)

    def to_dict(self) -> dict[str, Any]:
        return {"item_id": self.item.id, "benchmark": self.item.benchmark,
                "turns": [asdict(turn) for turn in self.turns], "answer": self.answer,
                "answer_turn": self.answer_turn, "stop": self.stop, "n_turns": self.n_turns,
                "cost_usd": self.cost_usd, "status": self.status, "failure": self.failure}


def truncate_output(text: str, rules: Competition) -> str:
    """Keep the head and the tail of a long output (budget: rules.transcript_output_chars)."""
    budget = rules.transcript_output_chars
    if len(text) <= budget:
        return text
    head = budget // 2
    tail = budget - head
    return text[:head] + OMITTED.format(n=len(text) - budget) + text[len(text) - tail:]


def coordinator_transcript(query: str, turns: Sequence[Turn]) -> str:
    """SPEC §3: `QUERY:\\n{prompt}` then one `[Turn k | role | model]` block per earlier turn."""
    blocks = [QUERY_HEADER + query]
    for k, turn in enumerate(turns, start=1):
        blocks.append(TURN_HEADER.format(k=k, role=turn.role, model=turn.model) + "\n"
                      + turn.shown)
    return "\n\n".join(blocks)


def model_messages(item: Item, benchmark: Grader, role: str,
                   turns: Sequence[Turn]) -> list[dict]:
    """The role's contract as the system message; the query and transcript as the user's."""
    if role not in ROLE_CONTRACTS:
        raise TinyRouterError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
    user = coordinator_transcript(benchmark.render_prompt(item), turns)
    user += f"\n\nTurn {len(turns) + 1}: respond as the {role}."
    return [{"role": "system", "content": ROLE_CONTRACTS[role]},
            {"role": "user", "content": user}]


def worker_messages(item: Item, benchmark: Grader) -> list[dict]:
    """A single-turn Worker call: how cached answers and training data are collected."""
    return model_messages(item, benchmark, WORKER, [])


def find_verdict(text: str) -> str | None:
    """The last committed `VERDICT: ACCEPT|REVISE` in the text, or None."""
    matches = _VERDICT_RE.findall(text or "")
    return matches[-1].upper() if matches else None


def parse_verdict(text: str) -> str:
    """ACCEPT or REVISE; a missing verdict counts as REVISE."""
    return find_verdict(text) or REVISE


def select_answer(turns: Sequence[Turn], benchmark: Grader) -> int | None:
    """Index of the graded turn: the latest extractable Worker output, else the latest any."""
    for workers_only in (True, False):
        for index in range(len(turns) - 1, -1, -1):
            turn = turns[index]
            if workers_only and turn.role != WORKER:
                continue
            if benchmark.extract(turn.text) is not None:
                return index
    return None


def _check(decision: Decision, rules: Competition) -> Decision:
    if decision.model not in rules.pool_names or decision.role not in ROLES:
        raise TinyRouterError(f"the router chose {decision!r}; models are "
                              f"{', '.join(rules.pool_names)} and roles {', '.join(ROLES)}")
    return decision


def call_status(completion: Any) -> str:
    """ANSWERED, REFUSED or TRUNCATED for a returned call (a `pool.client.Completion`)."""
    if getattr(completion, "refused", False):
        return REFUSED
    return TRUNCATED if getattr(completion, "truncated", False) else ANSWERED


async def _play_turn(trajectory: Trajectory, decision: Decision, benchmark: Grader,
                     client: Any, rules: Competition) -> None:
    messages = model_messages(trajectory.item, benchmark, decision.role, trajectory.turns)
    started = time.monotonic()
    try:
        completion = await client.chat(decision.model, messages)
    except InfrastructureError as exc:
        trajectory.seconds += time.monotonic() - started
        log.warning("a session failed at turn %d: %s", trajectory.n_turns + 1, exc)
        trajectory.stop, trajectory.failure = FAILED, str(exc)
        trajectory.failed_cost_usd += exc.cost_usd
        return
    except TinyRouterError:
        raise  # not this session's: out of credit, a misconfigured pool
    except Exception as exc:  # a fault no one foresaw ends this session only, counted as failed
        log.exception("a session failed at turn %d on an unexpected error",
                      trajectory.n_turns + 1)
        trajectory.stop, trajectory.failure = FAILED, f"unexpected error ({type(exc).__name__})"
        return
    trajectory.seconds += time.monotonic() - started
    status = call_status(completion)
    verdict = parse_verdict(completion.text) if decision.role == VERIFIER else None
    has_worker = any(turn.role == WORKER for turn in trajectory.turns)
    trajectory.turns.append(Turn(
        model=decision.model, role=decision.role, text=completion.text,
        shown=truncate_output(completion.text, rules), prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens, cost_usd=completion.cost_usd,
        verdict=verdict, status=status, replayed=bool(getattr(completion, "replayed", False))))
    if status == REFUSED:
        trajectory.stop = REFUSED
    elif verdict == ACCEPT and has_worker:
        trajectory.stop = ACCEPT_STOP


async def run_sessions(items: Sequence[Item], benchmark: Grader, decide: Decide, client: Any,
                       rules: Competition) -> list[Trajectory]:
    """Run every item through the loop, turn by turn, with one `decide` call per turn."""
    trajectories = [Trajectory(item=item) for item in items]
    for _ in range(rules.max_turns):
        active = [t for t in trajectories if t.stop not in ENDED]
        if not active:
            break
        decisions = decide([coordinator_transcript(t.item.prompt, t.turns) for t in active])
        if len(decisions) != len(active):
            raise TinyRouterError(f"the router returned {len(decisions)} decisions for "
                                  f"{len(active)} transcripts")
        checked = [_check(decision, rules) for decision in decisions]
        # every call of the turn finishes (and is ledgered) before an error ends the run
        done = await asyncio.gather(*(_play_turn(t, d, benchmark, client, rules)
                                      for t, d in zip(active, checked, strict=True)),
                                    return_exceptions=True)
        errors = [outcome for outcome in done if isinstance(outcome, BaseException)]
        if errors:
            raise errors[0]
    for trajectory in trajectories:
        trajectory.answer_turn = select_answer(trajectory.turns, benchmark)
        if trajectory.answer_turn is not None:
            trajectory.answer = trajectory.turns[trajectory.answer_turn].text
    return trajectories


async def run_session(item: Item, benchmark: Grader, decide: Decide, client: Any,
                      rules: Competition) -> Trajectory:
    """One question through the loop (see `run_sessions`)."""
    return (await run_sessions([item], benchmark, decide, client, rules))[0]


@dataclass(frozen=True)
class LiveOutcome:
    """One question played through the loop and graded: no question or answer text.

    `status` is how the session ended (see STATUSES); `reason` why a failed one failed;
    `replayed` whether every call of its session was a replay from the evaluation's response
    cache (what makes a tie with the session it replayed certain)."""

    item_id: str
    correct: bool
    n_turns: int
    cost_usd: float
    decisions: tuple[Decision, ...] = ()
    status: str = ANSWERED
    reason: str | None = None
    seconds: float = 0.0  # how long its session's model calls took, every turn
    replayed: bool = False


# Plays one benchmark's live items under a router's decisions (pool.runner.pool_runner makes
# one; evaluation, `score --live` and the tests' fakes take one).
LiveRunner = Callable[[str, Sequence[Item], Decide], list[LiveOutcome]]


async def play(items: Sequence[Item], benchmark: Grader, decide: Decide, client: Any,
               rules: Competition) -> list[LiveOutcome]:
    """Run the items through the loop and grade each final answer; one outcome per item.

    No answer, a refusal or a failed session is wrong. Only an error that is not one item's
    (out of credit, a misconfigured pool, a broken router) propagates."""
    trajectories = await run_sessions(items, benchmark, decide, client, rules)
    graded = [t for t in trajectories if t.answer is not None and t.status not in (REFUSED, FAILED)]
    grades = benchmark.grade_many([(t.answer, t.item.reference) for t in graded])
    correct = {id(t): bool(g.correct) for t, g in zip(graded, grades, strict=True)}
    return [LiveOutcome(item_id=t.item.id, correct=correct.get(id(t), False), n_turns=t.n_turns,
                        cost_usd=t.cost_usd,
                        decisions=tuple(Decision(x.model, x.role) for x in t.turns),
                        status=t.status, reason=t.failure, seconds=t.seconds,
                        replayed=t.replayed)
            for t in trajectories]


def failure_share(outcomes: Sequence[LiveOutcome]) -> float:
    """The share of outcomes whose session failed for infrastructure reasons (0 for none);
    compare with `rules.void_failure_share`."""
    if not outcomes:
        return 0.0
    return sum(outcome.status == FAILED for outcome in outcomes) / len(outcomes)


def one_by_one(choose: Callable[[str], Decision]) -> Decide:
    """Adapt a one-transcript chooser `str -> Decision` to the batched form."""
    return lambda transcripts: [choose(text) for text in transcripts]

