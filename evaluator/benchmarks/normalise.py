"""One reading of a response before any answer is extracted from it.

Models answer in many scripts and typographies; the extractors read ASCII. `normalise` folds
what means the same into one form, once, for every grader: full-width letters, digits and
punctuation; CJK punctuation and answer markers (答案, 正确答案, 最终答案, 选项, 选);
zero-width characters; no-break, narrow, thin and ideographic spaces, `{,}` and LaTeX's spaces
between digit groups (thousands separators); the Unicode minus and a dash that stands for one.
"""

from __future__ import annotations

import re

# U+FF01-U+FF5E are ASCII's printable characters at full width, in ASCII's order
FULL_WIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
CJK_PUNCTUATION = {ord(k): v for k, v in {
    "。": ". ", "、": ", ", "【": "[", "】": "]", "〔": "(", "〕": ")", "「": '"', "」": '"',
    "『": '"', "』": '"', "《": "<", "》": ">", "￥": "¥", "￡": "£", "￠": "¢"}.items()}
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
# the spaces a typesetter puts between digit groups; anywhere else each is a plain space
SPACES = "\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u3000"
FOLD = {**FULL_WIDTH, **CJK_PUNCTUATION, **dict.fromkeys(map(ord, ZERO_WIDTH))}
SPACE = dict.fromkeys(map(ord, SPACES), " ")
THOUSANDS = re.compile(rf"(?<=\d)(?:[{SPACES}]|\{{,\}}|\\[,;: ]|~)(?=\d{{3}}(?!\d))")
# U+2212 is the minus; a figure or en dash is one only before a number, not between two
MINUS = re.compile(r"[\u2212\ufe63]|(?<![A-Za-z0-9_)\]}])[\u2012\u2013](?=\s?[\d.\\(])")
# the answer markers of Chinese answers, with the copula or colon after them
MARKER = re.compile(r"(?P<kind>最终|最后|正确)?(?P<noun>答案|选项|(?<![解回])答(?=\s*:))\s*"
                    r"(?P<is>应该?[是为]|是|为|:)?\s*")
# "so pick B", but not "do not pick B"
CHOOSE = re.compile(r"(?<![不没别未])(?<!不应)(?<!不能)(?<!不该)选(?:择)?\s*(?=\(?[A-Da-d](?![A-Za-z]))")
KIND = {"最终": "final ", "最后": "final ", "正确": "correct ", None: ""}
NOUN = {"答案": "answer", "答": "answer", "选项": "option"}


def normalise(text: str) -> str:
    """`text` with every form above folded to the one the extractors read."""
    text = THOUSANDS.sub("", text.translate(FOLD)).translate(SPACE)
    text = CHOOSE.sub(" answer: ", MINUS.sub("-", text))
    return MARKER.sub(_marker, text)


def _marker(match: re.Match[str]) -> str:
    said = f" {KIND[match['kind']]}{NOUN[match['noun']]}"
    return f"{said}: " if match["is"] else f"{said} "
