"""normalise: every typography and script of an answer folded to the one the extractors read."""

from __future__ import annotations

import pytest

from evaluator.benchmarks.normalise import normalise


@pytest.mark.parametrize(("text", "normalised"), [
    # full-width letters, digits and punctuation are their ASCII selves
    ("Ａ", "A"),
    ("Ｂ。", "B. "),
    ("（Ｃ）", "(C)"),
    ("１２３４５", "12345"),
    ("３．５", "3.5"),
    ("Answer：D", "Answer:D"),
    ("＄５", "$5"),
    ("＼ｂｏｘｅｄ｛７｝", "\\boxed{7}"),
    ("－５", "-5"),
    # CJK punctuation
    ("是。", "是. "),
    ("1、2、3", "1, 2, 3"),
    ("【B】", "[B]"),
    ("「A」", '"A"'),
    ("￥300", "¥300"),
    # Chinese answer markers, with their copula or colon
    ("答案：B", " answer: B"),
    ("答案是B", " answer: B"),
    ("答案为 C", " answer: C"),
    ("答案应为D", " answer: D"),
    ("答案应该是A", " answer: A"),
    ("正确答案为（D）", " correct answer: (D)"),
    ("最终答案：Ｃ", " final answer: C"),
    ("最后答案是7", " final answer: 7"),
    ("答：A", " answer: A"),
    ("正确选项是C", " correct option: C"),
    ("答案解析", " answer 解析"),
    # markers that are not answers stay as they are
    ("解答：A项", "解答:A项"),
    ("回答：B", "回答:B"),
    # choosing a letter is answering it; not choosing it is not
    ("故选A", "故 answer: A"),
    ("选择(B)", " answer: (B)"),
    ("不选A", "不选A"),
    ("不应选A", "不应选A"),
    ("选项B", " option B"),
    # thousands separators of every typography, between digit groups only
    ("1\u00a0000", "1000"),
    ("1\u202f000\u202f000", "1000000"),
    ("1\u2009000", "1000"),
    ("1\u3000000", "1000"),
    ("1{,}000", "1000"),
    ("1\\,000", "1000"),
    ("1\\;000", "1000"),
    ("1~000", "1000"),
    ("3.141\u2009592", "3.141592"),
    # the same spaces elsewhere are plain spaces, and `{,}` before other than three digits stays
    ("a\u00a0b", "a b"),
    ("5\u00a0cm", "5 cm"),
    ("1\u00a000", "1 00"),
    ("1\u00a00000", "1 0000"),
    ("3{,}14", "3{,}14"),
    ("x\\,dx", "x\\,dx"),
    ("1 000", "1 000"),
    # zero-width characters are nothing
    ("A\u200bB", "AB"),
    ("\ufeff42", "42"),
    # the Unicode minus, and a dash before a number
    ("\u22125", "-5"),
    ("x = \u22123", "x = -3"),
    ("\u2013\\frac{1}{2}", "-\\frac{1}{2}"),
    ("(\u20132, 3)", "(-2, 3)"),
    ("= \u2013 4", "= - 4"),
    # a dash between numbers or after a word is not a minus
    ("3\u20135", "3\u20135"),
    ("pages\u20134", "pages\u20134"),
    ("x\u2014y", "x\u2014y"),
    # what needs no folding is left alone
    ("The answer is (B).", "The answer is (B)."),
    (r"\boxed{\frac{1}{2}}", r"\boxed{\frac{1}{2}}"),
    ("", ""),
])
def test_normalise(text, normalised):
    assert normalise(text) == normalised


def test_normalising_is_idempotent():
    text = "所以正确答案为（Ｄ）。总数是 1\u00a0000，差是 \u22125。"
    assert normalise(normalise(text)) == normalise(text)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("text", [
    "答案" * 50_000,
    "1\u00a0" * 50_000,
    "选" * 100_000,
    "\u2013" * 100_000 + "5",
])
def test_long_text_is_normalised_promptly(text):
    assert len(normalise(text)) <= 4 * len(text)
