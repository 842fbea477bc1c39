"""`tinyrouter pool check` against the loopback simulator, healthy and faulted."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from evaluator.cli import main
from evaluator.pool.check import check_pool
from evaluator.pool.simulator import Simulator, bundled_simulator, serve_simulator
from evaluator.rules import OFFICIAL


def check(url, tmp_path, *extra):
    out = tmp_path / "checks.json"
    code = main(["pool", "check", "--pool-url", url, "--json", str(out), *extra])
    return code, json.loads(out.read_text()) if out.exists() else None


def test_a_healthy_pool_answers_every_model_and_reports_what_a_call_costs(tmp_path, capsys):
    with serve_simulator(bundled_simulator(OFFICIAL)) as url:
        code, checks = check(url, tmp_path)
    assert code == 0
    assert [c["model"] for c in checks] == list(OFFICIAL.pool_names)
    for c in checks:
        assert c["ok"] and c["listed"] and c["finish_reason"] == "stop"
        assert c["cost_usd"] > 0 and c["completion_tokens"] > 0 and c["seconds"] >= 0
        assert c["reasoning_tokens"] is not None  # effort low shows in the usage
    out = capsys.readouterr().out
    assert out.count("✓") == 3 and "3 of 3 pool models answered" in out
    assert "reasoning tokens at effort 'low'" in out


@pytest.mark.parametrize(("fault", "says"), [
    ("401", "HTTP 401"),
    ("402", "top up"),
    ("403-moderation", "blocked the request"),
    ("403", "HTTP 403"),
])
def test_a_broken_pool_fails_naming_the_problem(tmp_path, capsys, fault, says):
    sim = bundled_simulator(OFFICIAL, fault_rates={fault: 1.0})
    with serve_simulator(sim) as url:
        code, checks = check(url, tmp_path)
    assert code == 1
    assert all(not c["ok"] and says in c["problem"] for c in checks), checks
    out = capsys.readouterr().out
    assert out.count("✗") == 3 and "0 of 3 pool models answered" in out
    assert "Traceback" not in out


def test_an_unknown_slug_is_named():
    bogus = dataclasses.replace(OFFICIAL.pool[2], slug="nobody/no-such-model")
    rules = dataclasses.replace(OFFICIAL, pool=(*OFFICIAL.pool[:2], bogus))
    with serve_simulator(Simulator([], {}, OFFICIAL)) as url:
        checks = asyncio.run(check_pool(rules, url))
    assert [c.ok for c in checks] == [True, True, False]
    assert checks[2].listed is False and "HTTP 404" in checks[2].problem


def test_no_key_for_openrouter_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.delenv("OPENROUTER_BASE_URL", raising=False)
    assert main(["pool", "check"]) == 1
    assert "no OpenRouter API key" in capsys.readouterr().err
