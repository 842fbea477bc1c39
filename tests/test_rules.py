import dataclasses
import json

import pytest

from evaluator.rules import OFFICIAL, SVF_MATRICES, Competition


def test_official_figures_hold_together():
    assert OFFICIAL.head_shape == (6, OFFICIAL.hidden_size)
    assert OFFICIAL.n_params == OFFICIAL.n_head_params + OFFICIAL.svf_scale_count
    assert OFFICIAL.svf_scale_count == len(SVF_MATRICES) * OFFICIAL.hidden_size
    assert OFFICIAL.n_params == 13_312
    assert OFFICIAL.train_popsize == 32
    weights = (OFFICIAL.weight_cached, OFFICIAL.weight_live, OFFICIAL.weight_efficiency,
               OFFICIAL.weight_novelty)
    assert sum(weights) == pytest.approx(1.0)
    assert OFFICIAL.overfit_penalty_gap < OFFICIAL.overfit_reject_gap
    assert OFFICIAL.svf_layer == OFFICIAL.num_layers - 2


def test_overrides_change_derived_figures_and_reject_unknown_fields(tmp_path):
    path = tmp_path / "competition.json"
    path.write_text(json.dumps({"hidden_size": 64, "svf_scale_count": 448, "num_layers": 4,
                                "svf_layer": 2}))
    tiny = Competition.load(path)
    assert tiny.head_shape == (6, 64) and tiny.n_params == 6 * 64 + 448
    assert tiny.win_margin == OFFICIAL.win_margin
    with pytest.raises(ValueError, match="unknown competition fields: bogus"):
        Competition.from_overrides({"bogus": 1})


def test_as_dict_exposes_every_rule_for_docs():
    data = OFFICIAL.as_dict()
    for f in dataclasses.fields(Competition):
        if f.name != "extra":
            assert f.name in data
    assert data["n_params"] == OFFICIAL.n_params
    assert data["pool"][0]["slug"] == OFFICIAL.pool[0].slug
    json.dumps(data)  # renderable as-is
