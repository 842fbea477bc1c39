"""The role rows, fitted from collected rows without a live call.

The cheapest good session answers on turn 1 and is judged on turn 2 (SPEC §4): turn 1 is the
query alone, where a Worker should answer; turn 2 the query and one pool model's cached Worker
answer (a seeded draw, so the fit does not learn whether it is right), where a Verifier should
judge it. The role rows never change which model is called, so they are fitted after the
search on the trained head's features: a convex softmax regression of those two targets.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evaluator.coordinator import head as routing
from evaluator.loop import VERIFIER, WORKER, Turn, coordinator_transcript, truncate_output
from evaluator.rules import ROLES, Competition
from evaluator.train.data import TrainingSet
from evaluator.train.start import softmax_fit

ROLE_STREAM = 3  # keeps the role draws apart from the minibatch, live and held-out streams
ANSWERING, JUDGING = ROLES.index(WORKER), ROLES.index(VERIFIER)
L2 = 1e-4  # penalty on the role rows' squared norm: bounded weights on separable features


def fit_rows(data: TrainingSet, limit: int, seed: int) -> np.ndarray:
    """The (sorted) training rows the role fit reads: all of them, or a seeded `limit`."""
    if limit >= len(data.rows):
        return np.arange(len(data.rows))
    rng = np.random.default_rng([seed, ROLE_STREAM])
    return np.sort(rng.choice(len(data.rows), size=limit, replace=False))


def turn2_transcripts(data: TrainingSet, rows: Sequence[int], seed: int,
                      rules: Competition) -> list[str]:
    """Each row's query followed by one pool model's cached Worker answer, as the loop shows it."""
    picks = np.random.default_rng([seed, ROLE_STREAM, 1]).integers(rules.n_models,
                                                                   size=len(data.rows))
    transcripts = []
    for i in rows:
        row, model = data.rows[i], rules.pool_names[picks[i]]
        text = row.answers[model].text
        turn = Turn(model=model, role=WORKER, text=text, shown=truncate_output(text, rules))
        transcripts.append(coordinator_transcript(row.item.prompt, [turn]))
    return transcripts


def fit_roles(turn1: np.ndarray, turn2: np.ndarray) -> np.ndarray:
    """(n_roles, hidden) role rows: Worker on the turn-1 features, Verifier on the turn-2 ones,
    by gradient descent on the mean cross-entropy plus L2·‖rows‖²."""
    feats = np.concatenate([turn1, turn2]).astype(np.float64)
    target = np.zeros((len(feats), len(ROLES)))
    target[:len(turn1), ANSWERING] = 1.0
    target[len(turn1):, JUDGING] = 1.0
    return softmax_fit(feats, target, L2).astype(np.float32)


def with_roles(head: np.ndarray, turn1: np.ndarray, turn2: np.ndarray,
               rules: Competition) -> np.ndarray:
    """The head with its role rows replaced by the fit; the model rows untouched."""
    fitted = np.array(head, dtype=np.float32, copy=True)
    fitted[rules.n_models:] = fit_roles(turn1, turn2)
    return fitted


def role_choices(head: np.ndarray, turn1: np.ndarray, turn2: np.ndarray,
                 rules: Competition) -> dict[str, float]:
    """How the argmax roles come out: the share of turn-1 Worker and turn-2 Verifier picks."""
    _, first = routing.choices(routing.logits(turn1, head, rules), rules)
    _, second = routing.choices(routing.logits(turn2, head, rules), rules)
    return {"turn1_worker": float(np.mean(first == ANSWERING)),
            "turn2_verifier": float(np.mean(second == JUDGING))}
