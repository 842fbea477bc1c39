"""The routing head (SPEC §3): z = W·h, a softmax per group, argmax or sampled decisions.

Pure tensor/array functions: training feeds them features from the prefix cache,
tests feed them random features. Rows 0..n_models−1 of W are the pool models in pool
order, the remaining rows the roles in ROLES order.
"""

from __future__ import annotations

import numpy as np
import torch

from evaluator.errors import SubmissionError
from evaluator.rules import OFFICIAL, ROLES, Competition
from evaluator.types import Decision

Array = np.ndarray | torch.Tensor


def _tensor(x: Array) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x, dtype=np.float32) if isinstance(x, np.ndarray) else x,
                           dtype=torch.float32)


def logits(features: Array, head: Array, rules: Competition = OFFICIAL) -> torch.Tensor:
    """(N, n_models + n_roles) logits z = W·h in fp32 (the hidden size is the head's)."""
    feats, weights = _tensor(features).cpu(), _tensor(head).cpu()
    rows = rules.n_models + rules.n_roles
    if weights.ndim != 2 or weights.shape[0] != rows:
        raise SubmissionError(f"the head has shape {tuple(weights.shape)}, the rules want "
                              f"{rows} rows (pool models, then roles)")
    if feats.ndim != 2 or feats.shape[1] != weights.shape[1]:
        raise SubmissionError(f"features must be (N, {weights.shape[1]}) for this head, "
                              f"got {tuple(feats.shape)}")
    return feats @ weights.T


def group_probs(z: torch.Tensor, rules: Competition = OFFICIAL) -> tuple[torch.Tensor, torch.Tensor]:
    """The model softmax and the role softmax of each row of logits."""
    return (torch.softmax(z[:, :rules.n_models], dim=-1),
            torch.softmax(z[:, rules.n_models:], dim=-1))


def model_probs(features: Array, head: Array, rules: Competition = OFFICIAL) -> torch.Tensor:
    """(N, n_models) routing probabilities over the pool (training's expected accuracy)."""
    return group_probs(logits(features, head, rules), rules)[0]


def decide(z: torch.Tensor, rules: Competition = OFFICIAL) -> list[Decision]:
    """The argmax of each group (evaluation's decisions); ties go to the earlier row."""
    models = torch.argmax(z[:, :rules.n_models], dim=-1).tolist()
    roles = torch.argmax(z[:, rules.n_models:], dim=-1).tolist()
    return [Decision(rules.pool_names[m], ROLES[r]) for m, r in zip(models, roles, strict=True)]


def sample(z: torch.Tensor, rng: np.random.Generator,
           rules: Competition = OFFICIAL) -> list[Decision]:
    """Decisions drawn from each group's softmax with a seeded generator."""
    p_models, p_roles = (p.double().numpy() for p in group_probs(z, rules))
    return [Decision(rules.pool_names[rng.choice(len(pm), p=pm / pm.sum())],
                     ROLES[rng.choice(len(pr), p=pr / pr.sum())])
            for pm, pr in zip(p_models, p_roles, strict=True)]
