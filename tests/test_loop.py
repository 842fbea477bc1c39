"""The Thinker/Worker/Verifier loop with a scripted pool: transcripts, verdicts, stopping, answers."""

from __future__ import annotations

import asyncio
import dataclasses
import re

import pytest

from evaluator.errors import InfrastructureError, OutOfCreditError, PoolError, TinyRouterError
from evaluator.loop import (
    ANSWERED,
    FAILED,
    REFUSED,
    ROLE_CONTRACTS,
    TRUNCATED,
    LiveOutcome,
    Turn,
    coordinator_transcript,
    failure_share,
    find_verdict,
    model_messages,
    one_by_one,
    parse_verdict,
    run_session,
    run_sessions,
    select_answer,
    truncate_output,
    worker_messages,
)
from evaluator.loop import play as play_items
from evaluator.pool.client import CONTENT_FILTER, LENGTH, Completion
from evaluator.rules import OFFICIAL
from evaluator.types import Decision, Item

QWEN, GEMINI, DEEPSEEK = OFFICIAL.pool_names
ITEM = Item("math500", "q1", "What is 2 + 2?", "4", "arithmetic")


class Boxed:
    def render_prompt(self, item: Item) -> str:
        return f"{item.prompt}\nAnswer in \\boxed{{}}."

    def extract(self, response: str) -> str | None:
        found = re.findall(r"\\boxed\{([^{}]*)\}", response)
        return found[-1] if found else None

    def grade_many(self, pairs):
        return [dataclasses.make_dataclass("Grade", ["correct"])(self.extract(r) == ref)
                for r, ref in pairs]


BENCH = Boxed()


def t(role: str, text: str, model: str = QWEN, **extra) -> Turn:
    return Turn(model=model, role=role, text=text, shown=text, **extra)


class ScriptedPool:
    """Replies by role from a script; records every call."""

    def __init__(self, replies: dict[str, list[str]]):
        self.replies = {role: list(texts) for role, texts in replies.items()}
        self.calls: list[tuple[str, list[dict]]] = []

    async def chat(self, model: str, messages: list[dict]) -> Completion:
        self.calls.append((model, messages))
        role = next(r for r in ROLE_CONTRACTS if ROLE_CONTRACTS[r] == messages[0]["content"])
        text = self.replies[role].pop(0) if len(self.replies[role]) > 1 else self.replies[role][0]
        return Completion(text, prompt_tokens=10, completion_tokens=len(text),
                          cost_usd=0.5, request_id=f"r{len(self.calls)}")


def scripted_policy(*decisions: tuple[str, str]):
    """A batched policy that plays the given (model, role) per turn, recording transcripts."""
    seen: list[list[str]] = []

    def policy(transcripts: list[str]) -> list[Decision]:
        model, role = decisions[len(seen)]
        seen.append(transcripts)
        return [Decision(model, role) for _ in transcripts]

    policy.seen = seen
    return policy


def play(policy, pool, item=ITEM, rules=OFFICIAL):
    return asyncio.run(run_session(item, BENCH, policy, pool, rules))


# transcripts and messages ---------------------------------------------------------------


def test_coordinator_transcript_is_the_spec_format():
    turns = [t("Thinker", "plan it", QWEN), t("Worker", "\\boxed{4}", GEMINI)]
    assert coordinator_transcript("What is 2 + 2?", []) == "QUERY:\nWhat is 2 + 2?"
    assert coordinator_transcript("What is 2 + 2?", turns) == (
        "QUERY:\nWhat is 2 + 2?\n\n"
        f"[Turn 1 | Thinker | {QWEN}]\nplan it\n\n"
        f"[Turn 2 | Worker | {GEMINI}]\n\\boxed{{4}}")


def test_the_transcript_shows_the_truncated_output():
    turn = Turn(QWEN, "Worker", text="x" * 10, shown="short")
    assert coordinator_transcript("q", [turn]).endswith("\nshort")


@pytest.mark.parametrize("role", list(ROLE_CONTRACTS))
def test_model_messages_carry_the_role_contract_and_the_transcript(role):
    messages = model_messages(ITEM, BENCH, role, [t("Thinker", "plan it")])
    assert messages[0] == {"role": "system", "content": ROLE_CONTRACTS[role]}
    assert messages[1]["role"] == "user"
    content = messages[1]["content"]
    assert content.startswith("QUERY:\n" + BENCH.render_prompt(ITEM))
    assert f"[Turn 1 | Thinker | {QWEN}]\nplan it" in content
    assert content.endswith(f"Turn 2: respond as the {role}.")


def test_worker_messages_are_a_first_turn_worker_call():
    assert worker_messages(ITEM, BENCH) == model_messages(ITEM, BENCH, "Worker", [])


def test_the_verifier_contract_asks_for_the_verdict_line():
    assert "VERDICT: ACCEPT" in ROLE_CONTRACTS["Verifier"]
    assert "VERDICT: REVISE" in ROLE_CONTRACTS["Verifier"]


TRUNCATION = [
    # short outputs pass untouched
    ("abc", 10, "abc"),
    ("a" * 10, 10, "a" * 10),
    # long outputs keep head and tail
    ("0123456789ABCDEF", 10, "01234\n[... 6 characters omitted ...]\nBCDEF"),
    ("0123456789ABCDEF", 5, "01\n[... 11 characters omitted ...]\nDEF"),
]


@pytest.mark.parametrize(("text", "budget", "expected"), TRUNCATION)
def test_truncate_output(text, budget, expected):
    rules = dataclasses.replace(OFFICIAL, transcript_output_chars=budget)
    assert truncate_output(text, rules) == expected


# verdicts -------------------------------------------------------------------------------

VERDICTS = [
    # plain
    ("Looks right.\nVERDICT: ACCEPT", "ACCEPT"),
    ("Step 2 is wrong.\nVERDICT: REVISE", "REVISE"),
    ("verdict: accept", "ACCEPT"),
    ("VERDICT:ACCEPT", "ACCEPT"),
    ("VERDICT: ACCEPT.", "ACCEPT"),
    ("VERDICT - ACCEPT", "ACCEPT"),
    # Markdown emphasis
    ("**VERDICT:** ACCEPT", "ACCEPT"),
    ("**VERDICT: ACCEPT**", "ACCEPT"),
    ("VERDICT: __REVISE__", "REVISE"),
    ("VERDICT: `REVISE`", "REVISE"),
    ("#### VERDICT: ACCEPT", "ACCEPT"),
    ("__VERDICT__: ACCEPT", "ACCEPT"),
    # words that merely start with the token
    ("VERDICT: ACCEPTABLE only if fixed", None),
    ("VERDICT: ACCEPTED with reservations", None),
    ("VERDICT: REVISED the plan", None),
    ("VERDICT: **ACCEPTABLE** only if fixed", None),
    ("VERDICTS ACCEPT", None),
    # several verdicts: the last wins
    ("Maybe VERDICT: REVISE at first.\nOn reflection, VERDICT: ACCEPT", "ACCEPT"),
    ("VERDICT: ACCEPT\nWait, step 3.\nVERDICT: REVISE", "REVISE"),
    ("VERDICT: ACCEPTABLE only if fixed\nAfter the fix: VERDICT: REVISE", "REVISE"),
    ("First **VERDICT: REVISE**.\nThen VERDICT: **ACCEPT**", "ACCEPT"),
    # none
    ("I accept this solution.", None),
    ("", None),
]


@pytest.mark.parametrize(("text", "expected"), VERDICTS)
def test_verdict_parser(text, expected):
    assert find_verdict(text) == expected
    assert parse_verdict(text) == (expected or "REVISE")


# answer selection -----------------------------------------------------------------------

SELECTION = [
    # the latest Worker output with an answer
    ([t("Worker", "\\boxed{3}"), t("Worker", "\\boxed{4}")], 1),
    ([t("Worker", "\\boxed{3}"), t("Worker", "no answer yet")], 0),
    # Worker output is preferred over a later answer in another role
    ([t("Worker", "\\boxed{3}"), t("Verifier", "should be \\boxed{5}\nVERDICT: REVISE")], 0),
    # without one, the latest turn holding an answer
    ([t("Thinker", "\\boxed{7}"), t("Verifier", "\\boxed{8}"), t("Worker", "hmm")], 1),
    # nothing extractable
    ([t("Thinker", "plan"), t("Worker", "working on it")], None),
    ([], None),
]


@pytest.mark.parametrize(("turns", "expected"), SELECTION)
def test_select_answer(turns, expected):
    assert select_answer(turns, BENCH) == expected


# the loop -------------------------------------------------------------------------------

POOL_REPLIES = {"Thinker": ["Plan: add."], "Worker": ["2 + 2 = \\boxed{4}"],
                "Verifier": ["Fine.\nVERDICT: ACCEPT"]}


def test_a_turn_1_verifier_cannot_accept():
    policy = scripted_policy((QWEN, "Verifier"), (GEMINI, "Worker"), (DEEPSEEK, "Verifier"))
    trajectory = play(policy, ScriptedPool(POOL_REPLIES))
    assert [turn.role for turn in trajectory.turns] == ["Verifier", "Worker", "Verifier"]
    assert trajectory.turns[0].verdict == "ACCEPT"
    assert trajectory.stop == "accept"


class SlowPool(ScriptedPool):
    async def chat(self, model: str, messages: list[dict]) -> Completion:
        await asyncio.sleep(0.05)
        return await super().chat(model, messages)


def test_a_session_times_its_model_calls():
    policy = scripted_policy((QWEN, "Thinker"), (GEMINI, "Worker"), (DEEPSEEK, "Verifier"))
    trajectory = play(policy, SlowPool(POOL_REPLIES))
    assert trajectory.n_turns == 3 and 0.15 <= trajectory.seconds < 5


def test_stops_early_on_accept_and_totals_the_turns():
    policy = scripted_policy((QWEN, "Thinker"), (GEMINI, "Worker"), (DEEPSEEK, "Verifier"))
    trajectory = play(policy, ScriptedPool(POOL_REPLIES))
    assert trajectory.n_turns == 3
    assert [(turn.model, turn.role) for turn in trajectory.turns] == [
        (QWEN, "Thinker"), (GEMINI, "Worker"), (DEEPSEEK, "Verifier")]
    assert trajectory.answer == "2 + 2 = \\boxed{4}" and trajectory.answer_turn == 1
    assert trajectory.cost_usd == pytest.approx(1.5)
    assert trajectory.prompt_tokens == 30
    assert trajectory.completion_tokens == sum(len(turn.text) for turn in trajectory.turns)
    assert [turn.verdict for turn in trajectory.turns] == [None, None, "ACCEPT"]


def test_the_policy_sees_each_turns_transcript():
    policy = scripted_policy((QWEN, "Thinker"), (GEMINI, "Worker"), (DEEPSEEK, "Verifier"))
    play(policy, ScriptedPool(POOL_REPLIES))
    assert policy.seen[0] == ["QUERY:\nWhat is 2 + 2?"]
    assert policy.seen[2] == [coordinator_transcript(ITEM.prompt, [
        t("Thinker", "Plan: add.", QWEN), t("Worker", "2 + 2 = \\boxed{4}", GEMINI)])]


def test_revise_and_missing_verdicts_run_to_the_turn_cap():
    replies = {**POOL_REPLIES, "Verifier": ["VERDICT: REVISE", "no verdict here"]}
    policy = scripted_policy(*[(QWEN, "Worker"), (QWEN, "Verifier")] * 3)
    trajectory = play(policy, ScriptedPool(replies))
    assert trajectory.n_turns == OFFICIAL.max_turns
    assert trajectory.stop == "max_turns"
    assert [turn.verdict for turn in trajectory.turns if turn.verdict] == ["REVISE", "REVISE"]


def test_the_turn_cap_is_read_from_the_rules():
    rules = dataclasses.replace(OFFICIAL, max_turns=2)
    policy = scripted_policy(*[(QWEN, "Thinker")] * 3)
    assert play(policy, ScriptedPool(POOL_REPLIES), rules=rules).n_turns == 2


def test_long_outputs_are_truncated_for_later_turns():
    rules = dataclasses.replace(OFFICIAL, transcript_output_chars=20)
    long_plan = "think " * 50
    pool = ScriptedPool({**POOL_REPLIES, "Thinker": [long_plan]})
    trajectory = play(scripted_policy((QWEN, "Thinker"), (GEMINI, "Worker"),
                                      (QWEN, "Verifier")), pool, rules=rules)
    assert trajectory.turns[0].text == long_plan
    assert trajectory.turns[0].shown == truncate_output(long_plan, rules)
    assert long_plan not in pool.calls[1][1][1]["content"]
    assert trajectory.turns[0].shown in pool.calls[1][1][1]["content"]


BAD_DECISIONS = [
    Decision("gpt-5", "Worker"),
    Decision(QWEN, "Judge"),
]


@pytest.mark.parametrize("decision", BAD_DECISIONS)
def test_a_decision_outside_the_pool_or_roles_is_refused(decision):
    with pytest.raises(TinyRouterError, match="the router chose"):
        play(lambda transcripts: [decision] * len(transcripts), ScriptedPool(POOL_REPLIES))


def test_run_sessions_batches_one_policy_call_per_turn():
    items = [dataclasses.replace(ITEM, id=f"q{i}", prompt=f"What is {i} + {i}?")
             for i in range(3)]
    calls = []

    def policy(transcripts):
        calls.append(len(transcripts))
        # the first item is accepted at turn 2; the others keep working
        return [Decision(QWEN, "Verifier" if text.startswith("QUERY:\nWhat is 0") and
                         "Worker" in text else "Worker") for text in transcripts]

    trajectories = asyncio.run(run_sessions(items, BENCH, policy, ScriptedPool(POOL_REPLIES), OFFICIAL))
    assert [tr.n_turns for tr in trajectories] == [2, 5, 5]
    assert calls == [3, 3, 2, 2, 2]


def test_one_by_one_adapts_a_one_transcript_policy():
    policy = one_by_one(lambda text: Decision(GEMINI, "Worker"))
    assert policy(["a", "b"]) == [Decision(GEMINI, "Worker")] * 2


# isolation: one item's ending never touches another's ---------------------------------------


def items(n: int = 3) -> list[Item]:
    return [dataclasses.replace(ITEM, id=f"q{i}", prompt=f"What is {i} + {i}?", reference=str(2 * i))
            for i in range(n)]


class FaultyPool(ScriptedPool):
    """Answers every item right, except that the call to `target` at `turn` ends with `fault`:
    a finish_reason (the call returns so) or an exception (the call raises it)."""

    def __init__(self, target: str, turn: int, fault):
        super().__init__(POOL_REPLIES)
        self.target, self.turn, self.fault = target, turn, fault

    async def chat(self, model: str, messages: list[dict]) -> Completion:
        await asyncio.sleep(0)  # let the other items' calls of the turn start
        user = messages[1]["content"]
        i = int(re.search(r"What is (\d+)", user).group(1))
        turn = user.count("\n[Turn ") + 1
        self.calls.append((model, messages))
        text = (f"{i} + {i} = \\boxed{{{2 * i}}}" if messages[0]["content"] == ROLE_CONTRACTS["Worker"]
                else "Fine.\nVERDICT: ACCEPT")
        if f"What is {self.target} " in user and turn == self.turn:
            if isinstance(self.fault, Exception):
                raise self.fault
            return Completion("" if self.fault == LENGTH else text, 10, 4096, 0.5, "r",
                              finish_reason=self.fault)
        return Completion(text, 10, 5, 0.5, "r")


FAILED_CALL = InfrastructureError(f"{QWEN}: gave up after 6 attempts; last failure: HTTP 500",
                                  cost_usd=0.25)

# (the faulty item's call, its turn) -> its status, correct, turns, stop, cost
ISOLATION = [
    # a refusal ends the session, graded wrong, billed turns kept
    (CONTENT_FILTER, 1, REFUSED, False, 1, "refused", 0.5),
    (CONTENT_FILTER, 2, REFUSED, False, 2, "refused", 1.0),
    # a truncated Worker answer ("": reasoning used the budget) is kept as returned
    (LENGTH, 1, TRUNCATED, False, 2, "accept", 1.0),
    # a call that failed for good ends the session as failed, wrong even with an answer
    (FAILED_CALL, 1, FAILED, False, 0, "failed", 0.25),
    (FAILED_CALL, 2, FAILED, False, 1, "failed", 0.75),
    # a fault no one foresaw ends that session as failed, never the evaluation
    (OverflowError("cannot convert float infinity to integer"), 1, FAILED, False, 0, "failed", 0.0),
    (KeyError("choices"), 2, FAILED, False, 1, "failed", 0.5),
]


@pytest.mark.parametrize(("fault", "turn", "status", "correct", "n_turns", "stop", "cost"),
                         ISOLATION)
def test_one_items_ending_leaves_the_others_answered(fault, turn, status, correct, n_turns,
                                                     stop, cost):
    pool = FaultyPool("1", turn, fault)
    policy = scripted_policy((QWEN, "Worker"), (GEMINI, "Verifier"))
    outcomes = asyncio.run(play_items(items(), BENCH, policy, pool, OFFICIAL))
    assert [o.item_id for o in outcomes] == ["q0", "q1", "q2"]
    hit = outcomes[1]
    assert (hit.status, hit.correct, hit.n_turns) == (status, correct, n_turns)
    assert hit.cost_usd == pytest.approx(cost)
    assert hit.reason == (None if status != FAILED else str(fault)
                          if isinstance(fault, InfrastructureError)
                          else f"unexpected error ({type(fault).__name__})")
    for other in (outcomes[0], outcomes[2]):
        assert (other.status, other.correct, other.n_turns) == (ANSWERED, True, 2)
    trajectories = asyncio.run(run_sessions(items(), BENCH, scripted_policy(
        (QWEN, "Worker"), (GEMINI, "Verifier")), FaultyPool("1", turn, fault), OFFICIAL))
    assert trajectories[1].stop == stop
    assert trajectories[1].to_dict()["status"] == status


FATAL_ERRORS = [
    # the key cannot pay: the evaluation ends
    OutOfCreditError(f"{QWEN}: HTTP 402: the account is out of credit: top up the key"),
    # the pool is misconfigured for every call
    PoolError(f"{QWEN}: HTTP 401: the API key was refused"),
]


@pytest.mark.parametrize("error", FATAL_ERRORS)
def test_a_fatal_error_ends_the_run_after_the_turns_calls_finish(error):
    pool = FaultyPool("0", 1, error)
    with pytest.raises(type(error), match="HTTP 40"):
        asyncio.run(play_items(items(), BENCH, scripted_policy((QWEN, "Worker")), pool, OFFICIAL))
    assert len(pool.calls) == 3  # the other items' first calls still ran (and were ledgered)


def outcome(status: str) -> LiveOutcome:
    return LiveOutcome(item_id="q", correct=False, n_turns=1, cost_usd=0.0, status=status)


FAILURE_SHARES = [
    # nothing played
    ([], 0.0),
    # only infrastructure failures count; refusals and truncations are the pool's answers
    ([ANSWERED, REFUSED, TRUNCATED], 0.0),
    ([FAILED, ANSWERED, ANSWERED, ANSWERED], 0.25),
    ([FAILED] * 3, 1.0),
]


@pytest.mark.parametrize(("statuses", "share"), FAILURE_SHARES)
def test_failure_share(statuses, share):
    assert failure_share([outcome(s) for s in statuses]) == pytest.approx(share)


def test_the_void_threshold_is_a_rule_between_none_and_all():
    assert 0 < OFFICIAL.void_failure_share < 1
