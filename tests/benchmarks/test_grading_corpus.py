"""The grading corpus: what graders of this kind get wrong, one table per behaviour, one row per case.

Each row is (response, reference, correct): the whole response a pool model might send, the
dataset's reference, and the verdict a careful human gives. The classes come from the fixes
other routing benchmarks needed (answers in Chinese and at full width, thousands separators
in every typography, the Unicode minus, `\\over`, `\\binom`, `|x|`, boxed letters with
punctuation) and from math-verify's issue tracker (tiny values, equations, lists); the cases
are this project's own. A grader fix adds a row here; a verifier upgrade must keep every row.
"""

from __future__ import annotations

import pytest

from evaluator.benchmarks import get_benchmark

MATH = get_benchmark("math500")
MMLU = get_benchmark("mmlu")
NBSP, NNBSP, THIN, IDEO = "\u00a0", "\u202f", "\u2009", "\u3000"
MINUS, EN_DASH = "\u2212", "\u2013"


MMLU_ENGLISH = [
    # the instructed line
    ("Answer: B", "B", True),
    ("Answer: B", "C", False),
    ("The capital is Paris.\nAnswer: A", "A", True),
    ("answer: d", "D", True),
    ("ANSWER: C", "C", True),
    ("Answer:C", "C", True),
    ("Answer : B", "B", True),
    ("Answer: B.", "B", True),
    ("Answer: B)", "B", True),
    ("Answer: (B)", "B", True),
    ("Answer: [C]", "C", True),
    ("Answer: B - the enzyme is denatured", "B", True),
    ("Answer: D, since the other three are metals", "D", True),
    # sentences that commit to a letter
    ("The answer is C.", "C", True),
    ("The answer is (A).", "A", True),
    ("So the correct answer is D", "D", True),
    ("The correct option is B.", "B", True),
    ("The correct choice is A", "A", True),
    ("The best answer is option C.", "C", True),
    ("Therefore, the answer is choice D.", "D", True),
    ("The answer is letter B.", "B", True),
    ("The answer is probably A.", "A", True),
    ("The answer is clearly C.", "C", True),
    ("The answer is I believe D.", "D", True),
    ("Final answer: A", "A", True),
    ("Final Answer: The final answer is B.", "B", True),
    ("Final answer:\nC", "C", True),
    ("the answer is b.", "B", True),
    ("the answer is d", "D", True),
    # a bare letter on the last line
    ("C", "C", True),
    ("C", "A", False),
    ("(D)", "D", True),
    ("B)", "B", True),
    ("A.", "A", True),
    ("Option B", "B", True),
    ("Choice D", "D", True),
    ("Working it through, oxygen is the oxidiser.\n\nA", "A", True),
    ("Working it through.\n\n**C**", "C", True),
    ("Working it through.\n\n`B`", "B", True),
    # prose is not a letter
    ("A nice way to see it is through energy.", "A", False),
    ("The answer is a decrease in pressure.", "A", False),
    ("The answer is a", "A", True),
    ("I cannot decide between the options.", "B", False),
    ("Both B and C look plausible", "B", False),
    ("The answer depends on the temperature", "D", False),
    ("Vitamin D is fat-soluble, so it is stored.", "D", False),
    ("", "A", False),
    ("VERDICT: ACCEPT", "A", False),
]

MMLU_CHINESE_AND_FULL_WIDTH = [
    # Chinese answer markers, with colons at either width and the copulas 是 and 为
    ("答案：B", "B", True),
    ("答案:B", "B", True),
    ("答案是B", "B", True),
    ("答案是 B", "B", True),
    ("答案为C", "C", True),
    ("答案应为D", "D", True),
    ("答案应该是A", "A", True),
    ("所以正确答案为（D）", "D", True),
    ("所以正确答案为(D)", "D", True),
    ("正确答案是：A", "A", True),
    ("最终答案：Ｃ", "C", True),
    ("最终答案：C", "C", True),
    ("最后答案是B。", "B", True),
    ("答案：Ｂ。", "B", True),
    ("答：D", "D", True),
    ("分析：氧气是助燃剂。\n答案：A", "A", True),
    ("答案：B", "C", False),
    ("正确答案为（D）", "A", False),
    # options and choosing
    ("正确选项是C", "C", True),
    ("正确选项为：B", "B", True),
    ("故选A", "A", True),
    ("所以选 D。", "D", True),
    ("因此选择B", "B", True),
    ("应选C", "C", True),
    ("不选A，答案是B", "B", True),
    ("不应选A", "A", False),
    # a wrong answer is corrected later in the same response
    ("我先以为答案是A，但重新计算后，正确答案是C。", "C", True),
    ("答案是B。不对，答案是D。", "D", True),
    # full-width letters and brackets in English sentences
    ("Answer: Ｂ", "B", True),
    ("The answer is （Ｃ）.", "C", True),
    ("Answer：Ａ", "A", True),
    ("Ｄ", "D", True),
    ("（Ｂ）", "B", True),
    ("Answer:\u00a0B", "B", True),
    ("Answer:\u3000C", "C", True),
    ("Answer: \u200bD", "D", True),
    # a full-width reference reads as its letter
    ("Answer: B", "Ｂ", True),
    # not a committed letter
    ("答案解析：氧气能支持燃烧", "A", False),
    ("解答：A项错误，B项正确", "A", False),
]

MMLU_BOXED_AND_BOLD = [
    # boxed letters, bare or wrapped, with the punctuation models leave inside
    (r"\boxed{B}", "B", True),
    (r"\boxed{B.}", "B", True),
    (r"\boxed{(B)}", "B", True),
    (r"\boxed{ C }", "C", True),
    (r"\boxed{\text{D}}", "D", True),
    (r"\boxed{\textbf{A}}", "A", True),
    (r"\boxed{\textbf{(C)}}", "C", True),
    (r"\boxed{\mathrm{B}}", "B", True),
    (r"$\boxed{D}$", "D", True),
    (r"The answer is $\boxed{A}$.", "A", True),
    (r"\boxed{B}", "D", False),
    (r"\boxed{Ｃ}", "C", True),
    # bold and other Markdown emphasis
    ("**Answer: B**", "B", True),
    ("**Answer:** C", "C", True),
    ("Answer: **D**", "D", True),
    ("The answer is **(A)**.", "A", True),
    ("answer is __B__", "B", True),
    ("Answer: *C*", "C", True),
    ("**Final answer: D**", "D", True),
    ("### Answer: A", "A", True),
    # a box around prose is not a letter
    (r"\boxed{\text{Both are correct}}", "B", False),
]

MMLU_CHANGED_MIND = [
    # the last committed letter counts
    ("The answer is A. Wait, reconsidering: the answer is C.", "C", True),
    ("The answer is A. Wait, reconsidering: the answer is C.", "A", False),
    ("Answer: B\n\nOn reflection, that ignores friction.\n\nAnswer: D", "D", True),
    ("First guess: the answer is D. Actually, the answer is B.", "B", True),
    ("The answer is C.\n\nFinal answer: \\boxed{A}", "A", True),
    ("\\boxed{A} is tempting, but the answer is B.", "B", True),
    ("Answer: C\nHmm, no. Answer: A\nYes. Answer: A", "A", True),
    ("I first thought the answer is B, but the answer is D.", "D", True),
    # a later mention that does not commit leaves the answer alone
    ("The answer is C. Option B is wrong because it ignores heat.", "C", True),
    ("The answer is B.\nA) one\nB) two\nC) three\nD) four", "B", True),
    ("I think **A** is wrong; the answer is C.", "C", True),
    ("The answer is D. Choice A would need a catalyst.", "D", True),
]

MATH_SEPARATORS = [
    # thousands separators in every typography, against a plain reference
    (r"\boxed{1\,000}", "1000", True),
    (r"\boxed{1{,}000}", "1000", True),
    (r"\boxed{1,000}", "1000", True),
    (f"\\boxed{{1{NBSP}000}}", "1000", True),
    (f"\\boxed{{1{NNBSP}000}}", "1000", True),
    (f"\\boxed{{1{THIN}000}}", "1000", True),
    (f"\\boxed{{1{IDEO}000}}", "1000", True),
    (r"\boxed{1 000}", "1000", True),
    (r"\boxed{1\,000\,000}", "1000000", True),
    (r"\boxed{1{,}000{,}000}", "1000000", True),
    (r"\boxed{12,345,678}", "12345678", True),
    (f"\\boxed{{12{NBSP}345{NBSP}678}}", "12345678", True),
    (f"The answer is 1{NBSP}000.", "1000", True),
    (f"The answer is 2{NNBSP}500", "2500", True),
    (f"So the total is 6{THIN}318{THIN}000", "6318000", True),
    (r"The answer is $1\,000$.", "1000", True),
    # separated and plain references both read as the number
    (r"\boxed{23581}", r"23{,}581", True),
    (r"\boxed{23\,581}", r"23{,}581", True),
    (f"\\boxed{{23{NBSP}581}}", "23,581", True),
    (r"\boxed{23{,}582}", r"23{,}581", False),
    # decimals after the groups
    (r"\boxed{1{,}234.5}", "1234.5", True),
    (r"\boxed{1\,234.56}", "1234.56", True),
    (f"\\boxed{{1{NBSP}234.5}}", "1234.5", True),
    (r"\boxed{12,345.6}", "12345.6", True),
    # a separator joins digit groups, it does not make a list into a number or add digits
    (r"\boxed{1,2,3}", "123", False),
    (r"\boxed{1\,000}", "10000", False),
    (r"\boxed{10\,000}", "1000", False),
    (r"\boxed{1000001}", "1000000", False),
    (r"\boxed{1\,000}", "0", False),
    (f"\\boxed{{1{NBSP}000}}", "0", False),
    (r"\boxed{1 000}", "0", False),
    (r"\boxed{1\,000}", "100", False),
    # the wrong number, however it is typeset
    (f"\\boxed{{2{NBSP}000}}", "1000", False),
    (r"\boxed{1{,}001}", "1000", False),
]

MATH_NEGATIVES = [
    # a negative number written every way
    (r"\boxed{-5}", "-5", True),
    (f"\\boxed{{{MINUS}5}}", "-5", True),
    (f"\\boxed{{{EN_DASH}5}}", "-5", True),
    (r"\boxed{\text{-}5}", "-5", True),
    (r"\boxed{(-5)}", "-5", True),
    (r"\boxed{-(5)}", "-5", True),
    (r"\boxed{- 5}", "-5", True),
    (f"The answer is {MINUS}5.", "-5", True),
    (f"The answer is ${MINUS}\\frac{{1}}{{2}}$", r"-\frac12", True),
    (f"\\boxed{{{MINUS}\\frac{{3}}{{4}}}}", "-0.75", True),
    (f"\\boxed{{{EN_DASH}\\frac{{3}}{{4}}}}", "-3/4", True),
    (f"\\boxed{{{MINUS}2{NBSP}500}}", "-2500", True),
    (r"\boxed{-1{,}000}", "-1000", True),
    # the sign matters
    (r"\boxed{5}", "-5", False),
    (f"\\boxed{{{MINUS}5}}", "5", False),
    (f"\\boxed{{{EN_DASH}5}}", "5", False),
    (r"\boxed{\text{-}5}", "5", False),
    (r"\boxed{(-5)}", "5", False),
    # a dash between numbers is a range or a subtraction, not a sign
    (f"\\boxed{{7{EN_DASH}2}}", "-2", False),
    (f"x = {MINUS}3 or x = 2, so the answer is {MINUS}3", "-3", True),
]

MATH_FRACTIONS = [
    # one value in every fraction spelling
    (r"\boxed{\frac{3}{4}}", "0.75", True),
    (r"\boxed{\frac34}", r"\frac{3}{4}", True),
    (r"\boxed{\dfrac{3}{4}}", r"\frac{3}{4}", True),
    (r"\boxed{\tfrac{3}{4}}", r"\frac{3}{4}", True),
    (r"\boxed{\cfrac{3}{4}}", r"\frac{3}{4}", True),
    (r"\boxed{3/4}", r"\frac{3}{4}", True),
    (r"\boxed{{3 \over 4}}", r"\frac{3}{4}", True),
    (r"\boxed{3 \over 4}", r"\frac{3}{4}", True),
    (r"\boxed{\frac{6}{8}}", r"\frac{3}{4}", True),
    (r"\boxed{0.75}", r"\frac{3}{4}", True),
    (r"\boxed{.75}", r"\frac{3}{4}", True),
    (r"\boxed{75\%}", r"\frac{3}{4}", True),
    (r"\boxed{\frac{3}{4}}", r"\frac{4}{3}", False),
    (r"\boxed{{4 \over 3}}", r"\frac{3}{4}", False),
    (r"\boxed{\tfrac{1}{3}}", r"\frac{1}{4}", False),
    # negative fractions, the sign anywhere
    (r"\boxed{-\frac{3}{4}}", "-3/4", True),
    (r"\boxed{\frac{-3}{4}}", r"-\frac{3}{4}", True),
    (r"\boxed{\frac{3}{-4}}", r"-\frac{3}{4}", True),
    (r"\boxed{-\dfrac{3}{4}}", r"-\frac34", True),
    (r"\boxed{-{3 \over 4}}", "-0.75", True),
    (r"\boxed{-3/4}", "-0.75", True),
    # mixed numbers and improper fractions
    (r"\boxed{1 1/2}", "3/2", True),
    (r"\boxed{\frac{3}{2}}", "1.5", True),
    (r"\boxed{2\frac{1}{2}}", r"\frac{5}{2}", True),
    (r"\boxed{\frac{5}{2}}", r"2\frac{1}{2}", True),
    # radicals and pi in fractions
    (r"\boxed{\frac{\sqrt{3}}{2}}", r"\frac{\sqrt3}{2}", True),
    (r"\boxed{\frac{1}{\sqrt{2}}}", r"\frac{\sqrt{2}}{2}", True),
    (r"\boxed{\dfrac{\pi}{4}}", r"\frac{\pi}{4}", True),
    (r"\boxed{\frac{\pi}{3}}", r"\frac{\pi}{4}", False),
    (r"\boxed{\frac{2\sqrt{5}}{5}}", r"\frac{2}{\sqrt5}", True),
    # a repeating decimal is close enough; a rounded one is not
    (r"\boxed{0.333333}", "1/3", True),
    (r"\boxed{0.3}", "1/3", False),
    # a fraction stated in words and inline math
    (r"The answer is $\frac{209}{7}$.", r"\frac{209}{7}", True),
    ("The answer is 209/7", r"\frac{209}{7}", True),
]

MATH_BINOMIALS_AND_ABSOLUTE_VALUES = [
    # binomial coefficients in every spelling
    (r"\boxed{\binom{5}{2}}", "10", True),
    (r"\boxed{\dbinom{5}{2}}", "10", True),
    (r"\boxed{\tbinom{5}{2}}", "10", True),
    (r"\boxed{{5 \choose 2}}", "10", True),
    (r"\boxed{\binom{6}{3}}", "20", True),
    (r"\boxed{\binom{5}{2}}", "20", False),
    (r"\boxed{10}", r"\binom{5}{2}", True),
    # absolute values with bars of every size
    (r"\boxed{|-3|}", "3", True),
    (r"\boxed{\left|-3\right|}", "3", True),
    (r"\boxed{\lvert -3 \rvert}", "3", True),
    (r"\boxed{|-3|}", "-3", False),
    (r"\boxed{|2-7|}", "5", True),
]

MATH_UNITS_DEGREES_CURRENCY = [
    # units are not part of the value
    (r"\boxed{5\text{ cm}}", "5", True),
    (r"\boxed{5 \text{ cm}^2}", "5", True),
    (r"\boxed{12 \text{ square units}}", "12", True),
    (r"\boxed{4 \text{ m/s}}", "4", True),
    (r"\boxed{3\text{ hours}}", "3", True),
    (r"\boxed{10\text{ inches}}", "10", True),
    (r"\boxed{10 \mbox{ inches}}", "10", True),
    (r"\boxed{7\text{ cm}}", "5", False),
    (r"\boxed{5\text{ cm}}", r"5\text{ cm}", True),
    # degrees in every spelling
    (r"\boxed{90^\circ}", "90", True),
    (r"\boxed{90^{\circ}}", "90", True),
    (r"\boxed{90°}", "90", True),
    (r"\boxed{90\degree}", "90", True),
    (r"\boxed{90}", r"90^\circ", True),
    (r"\boxed{45^\circ}", r"90^\circ", False),
    (r"\boxed{120°}", r"120^\circ", True),
    # currency before or after
    (r"\boxed{\$18.90}", "18.90", True),
    (r"\boxed{\$ 18.90}", "18.90", True),
    (r"\boxed{18.90}", r"\$18.90", True),
    (r"\boxed{€5}", "5", True),
    (r"\boxed{5€}", "5", True),
    (r"\boxed{£12}", "12", True),
    (r"\boxed{¥300}", "300", True),
    (r"\boxed{\$1{,}000}", "1000", True),
    (f"\\boxed{{\\${NBSP}1{NBSP}000}}", "1000", True),
    (r"\boxed{\$19}", "18", False),
    ("The total cost is $\\$42$.", "42", True),
    # percent against a percent reference
    (r"\boxed{28\%}", r"28\%", True),
    (r"\boxed{28}", r"28\%", True),
    (r"\boxed{30\%}", r"28\%", False),
]

MATH_INTERVALS_AND_SETS = [
    # intervals: the brackets matter, the spacing does not
    (r"\boxed{(-\infty, 3]}", r"(-\infty,3]", True),
    (r"\boxed{[2,5)}", "[2,5)", True),
    (r"\boxed{[2,5)}", "[2,5]", False),
    (r"\boxed{(2,5)}", "[2,5)", False),
    (r"\boxed{(0, \infty)}", r"(0,\infty)", True),
    (r"\boxed{\left[1, 3\right]}", "[1,3]", True),
    (r"\boxed{x \in [1, 3]}", "[1,3]", True),
    (r"\boxed{(-\infty,-1) \cup (1,\infty)}", r"(-\infty,-1)\cup(1,\infty)", True),
    (r"\boxed{(-\infty,-1) \cup (2,\infty)}", r"(-\infty,-1)\cup(1,\infty)", False),
    (r"\boxed{[-2, 7]}", "[-2,7]", True),
    (f"\\boxed{{[{MINUS}2, 7]}}", "[-2,7]", True),
    # sets: order does not matter, members do
    (r"\boxed{\{1, 2, 3\}}", r"\{1,2,3\}", True),
    (r"\boxed{\{3, 2, 1\}}", r"\{1,2,3\}", True),
    (r"\boxed{\{1, 2\}}", r"\{1,2,3\}", False),
    (r"\boxed{\{-1, 4\}}", r"\{4,-1\}", True),
    # lists of solutions
    (r"\boxed{2, 3}", "2, 3", True),
    (r"\boxed{3, 2}", "2, 3", True),
    (r"\boxed{2, 4}", "2, 3", False),
    (r"\boxed{2 \text{ and } 3}", "2, 3", True),
    (r"\boxed{x=2 \text{ or } x=3}", "2, 3", True),
    (r"\boxed{-2, 2}", r"\pm 2", True),
    # points and tuples: order matters
    (r"\boxed{(5, 120)}", "(5,120)", True),
    (r"\boxed{(120, 5)}", "(5,120)", False),
    (r"\boxed{\left( 2, \frac{\pi}{6} \right)}", r"(2, \frac{\pi}{6})", True),
    (r"\boxed{(2, \frac{5\pi}{6})}", r"\left( 2, \frac{\pi}{6} \right)", False),
]

MATH_MATRICES = [
    # vectors and matrices, in any matrix environment
    (r"\boxed{\begin{pmatrix} 1 \\ 2 \end{pmatrix}}", r"\begin{pmatrix}1\\2\end{pmatrix}", True),
    (r"\boxed{\begin{pmatrix} 1 \\ 3 \end{pmatrix}}", r"\begin{pmatrix}1\\2\end{pmatrix}", False),
    (r"\boxed{\begin{bmatrix} 1 \\ 2 \end{bmatrix}}", r"\begin{pmatrix}1\\2\end{pmatrix}", True),
    (r"\boxed{\begin{pmatrix} 4 & -2 \\ 1 & 0 \end{pmatrix}}",
     r"\begin{pmatrix} 4 & -2 \\ 1 & 0 \end{pmatrix}", True),
    (r"\boxed{\begin{pmatrix} 4 & 2 \\ 1 & 0 \end{pmatrix}}",
     r"\begin{pmatrix} 4 & -2 \\ 1 & 0 \end{pmatrix}", False),
    (r"\boxed{\begin{pmatrix} \frac{1}{2} \\ -1 \end{pmatrix}}",
     r"\begin{pmatrix} 0.5 \\ -1 \end{pmatrix}", True),
    (f"\\boxed{{\\begin{{pmatrix}} 2 \\\\ {MINUS}1 \\end{{pmatrix}}}}",
     r"\begin{pmatrix} 2 \\ -1 \end{pmatrix}", True),
    (r"\boxed{\begin{pmatrix} 1 & 0 \\ 0 & 1 \end{pmatrix}}",
     r"\begin{pmatrix} 0 & 1 \\ 1 & 0 \end{pmatrix}", False),
]

MATH_BOXED_AND_BOLD = [
    # where the final answer sits: the last box, however it is spelled
    (r"So the answer is $\boxed{42}$.", "42", True),
    (r"\[\boxed{42}\]", "42", True),
    (r"\boxed {42}", "42", True),
    (r"\fbox{42}", "42", True),
    (r"\boxed{\boxed{42}}", "42", True),
    (r"\boxed{x = 42}", "42", True),
    (r"\boxed{\mathbf{42}}", "42", True),
    (r"\boxed{\textbf{42}}", "42", True),
    (r"\boxed{42} and then \boxed{}", "42", True),
    (r"\boxed{42.}", "42", True),
    # bold answers without a box
    ("The answer is **42**.", "42", True),
    ("**Answer:** 42", "42", True),
    ("**Final answer: 42**", "42", True),
    ("The answer is **43**.", "42", False),
    ("Final answer: $\\mathbf{42}$", "42", True),
    # no box: the stated answer, else the last value
    ("The answer is 42.", "42", True),
    ("Final answer: 17", "17", True),
    ("Adding them gives 40, and with the last 2 the total is 42", "42", True),
    ("so x = 42", "42", True),
    ("I could not finish the problem.", "42", False),
]

MATH_CHANGED_MIND = [
    # the last box or the last stated answer is the final one
    (r"So \boxed{12}. Wait, I dropped a term: the answer is \boxed{15}.", "15", True),
    (r"So \boxed{12}. Wait, I dropped a term: the answer is \boxed{15}.", "12", False),
    ("The answer is 12. Checking again, the answer is 15.", "15", True),
    ("The answer is 12. Checking again, the answer is 15.", "12", False),
    (r"First $\boxed{3}$... no, redo it. Hence $\boxed{-3}$.", "-3", True),
    ("Answer: 7\nActually that misses the edge case.\nAnswer: 8", "8", True),
    (r"\boxed{\frac{1}{2}} is wrong, so the answer is \boxed{\frac{1}{3}}", r"\frac13", True),
    (r"An earlier guess was $\boxed{10}$; the correct total is $\boxed{1\,000}$.", "1000", True),
]

MATH_CHINESE_AND_FULL_WIDTH = [
    # Chinese markers and full-width digits around math answers
    ("答案是 $\\frac{1}{2}$", r"\frac12", True),
    ("答案：7", "7", True),
    ("答案：７", "7", True),
    ("最终答案：\\boxed{7}", "7", True),
    ("所以答案为 １２。", "12", True),
    (r"\boxed{１２}", "12", True),
    (r"\boxed{－５}", "-5", True),
    (r"\boxed{３／４}", "0.75", True),
    ("答案是 １２，０００", "12000", True),
    (f"答案是 12{IDEO}000。", "12000", True),
    ("答案：８", "7", False),
]

# Tables whose verdicts equal math-verify's on these answers, so a verifier upgrade that
# changes one of them fails here before it changes a grade.
MATH_TABLES = (MATH_SEPARATORS, MATH_NEGATIVES, MATH_FRACTIONS,
               MATH_BINOMIALS_AND_ABSOLUTE_VALUES, MATH_UNITS_DEGREES_CURRENCY,
               MATH_INTERVALS_AND_SETS, MATH_MATRICES, MATH_BOXED_AND_BOLD, MATH_CHANGED_MIND,
               MATH_CHINESE_AND_FULL_WIDTH)
MMLU_TABLES = (MMLU_ENGLISH, MMLU_CHINESE_AND_FULL_WIDTH, MMLU_BOXED_AND_BOLD, MMLU_CHANGED_MIND)


def test_the_corpus_is_large_and_has_no_duplicate_rows():
    rows = [row for table in (*MATH_TABLES, *MMLU_TABLES) for row in table]
    assert len(rows) >= 300
    assert len(set(rows)) == len(rows)


@pytest.mark.parametrize(("response", "reference", "correct"), MMLU_ENGLISH)
def test_mmlu_english(response, reference, correct):
    assert MMLU.grade(response, reference).correct is correct


@pytest.mark.parametrize(("response", "reference", "correct"), MMLU_CHINESE_AND_FULL_WIDTH)
def test_mmlu_chinese_and_full_width(response, reference, correct):
    assert MMLU.grade(response, reference).correct is correct


@pytest.mark.parametrize(("response", "reference", "correct"), MMLU_BOXED_AND_BOLD)
def test_mmlu_boxed_and_bold(response, reference, correct):
    assert MMLU.grade(response, reference).correct is correct


@pytest.mark.parametrize(("response", "reference", "correct"), MMLU_CHANGED_MIND)
def test_mmlu_changed_mind(response, reference, correct):
    assert MMLU.grade(response, reference).correct is correct


@pytest.mark.parametrize(("response", "reference", "correct"), MATH_SEPARATORS)
def test_math_separators(response, reference, correct):
    assert _math(response, reference) is correct


@pytest.mark.parametrize(("response", "reference", "correct"), MATH_NEGATIVES)
def test_math_negatives(response, reference, correct):
    assert _math(response, reference) is correct


@pytest.mark.parametrize(("response", "reference", "correct"), MATH_FRACTIONS)
def test_math_fractions(response, reference, correct):
    assert _math(response, reference) is correct


@pytest.mark.parametrize(("response", "reference", "correct"), MATH_BINOMIALS_AND_ABSOLUTE_VALUES)
def test_math_binomials_and_absolute_values(response, reference, correct):
    assert _math(response, reference) is correct


@pytest.mark.parametrize(("response", "reference", "correct"), MATH_UNITS_DEGREES_CURRENCY)
def test_math_units_degrees_and_currency(response, reference, correct):
    assert _math(response, reference) is correct


@pytest.mark.parametrize(("response", "reference", "correct"), MATH_INTERVALS_AND_SETS)
def test_math_intervals_and_sets(response, reference, correct):
    assert _math(response, reference) is correct


@pytest.mark.parametrize(("response", "reference", "correct"), MATH_MATRICES)
def test_math_matrices(response, reference, correct):
    assert _math(response, reference) is correct


@pytest.mark.parametrize(("response", "reference", "correct"), MATH_BOXED_AND_BOLD)
def test_math_boxed_and_bold(response, reference, correct):
    assert _math(response, reference) is correct


@pytest.mark.parametrize(("response", "reference", "correct"), MATH_CHANGED_MIND)
def test_math_changed_mind(response, reference, correct):
    assert _math(response, reference) is correct


@pytest.mark.parametrize(("response", "reference", "correct"), MATH_CHINESE_AND_FULL_WIDTH)
def test_math_chinese_and_full_width(response, reference, correct):
    assert _math(response, reference) is correct


def _math(response: str, reference: str) -> bool:
    grade = MATH.grade(response, reference)
    assert grade.error is None, grade.error  # a verdict, not a failure to reach one
    return grade.correct
