"""Each client's request and spend windows, on a clock the test moves."""

from __future__ import annotations

import pytest

from evaluator.serve.allowance import Allowances, Refusal, ServeLimits


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_requests_slide_out_of_the_minute_and_clients_are_apart():
    clock = Clock()
    allow = Allowances(ServeLimits(requests_per_minute=2), clock)
    assert allow.admit("a") is None
    clock.now += 10
    assert allow.admit("a") is None
    assert allow.admit("a") == Refusal("requests", 50)  # the first leaves the window in 50 s
    assert allow.admit("b") is None  # another client has its own
    clock.now += 50
    assert allow.admit("a") is None


def test_spend_is_charged_after_and_refuses_until_it_leaves_the_hour():
    clock = Clock()
    allow = Allowances(ServeLimits(spend_usd_per_hour=0.5), clock)
    assert allow.admit("a") is None
    allow.charge("a", 0.6)  # one request may cross the limit: it is checked as one starts
    clock.now += 600
    assert allow.admit("a") == Refusal("spend", 3000)
    assert allow.spent("a") == pytest.approx(0.6)
    clock.now += 3000
    assert allow.admit("a") is None and allow.spent("a") == 0


@pytest.mark.parametrize("field", ["requests_per_minute", "spend_usd_per_hour",
                                   "max_request_bytes", "request_timeout", "max_sessions"])
def test_a_limit_must_be_positive(field):
    with pytest.raises(ValueError, match=field):
        ServeLimits(**{field: 0})
