"""The judge's answer format (prompt D.6): the score line is read back or the answer is reported."""
import pytest

from judge.model.prompt_format import format_judge_answer, parse_judge_answer
from tests.judge.judge_fixtures import EXPLANATION


@pytest.mark.parametrize("text, score, explanation", [
    ("4\n\nThe caption is fine.", 4, "The caption is fine."),
    ("  2 \nwrong objects", 2, "wrong objects"),
    ("Score: 3\n\nok", 3, "ok"),
    ("5/5\n", 5, ""),
    ("1.\nbad", 1, "bad"),
])
def test_parse_reads_the_score_line(text, score, explanation):
    assert parse_judge_answer(text) == (score, explanation, None)


@pytest.mark.parametrize("text, reason", [
    ("", "empty answer"),
    ("   \n  ", "empty answer"),
    ("The caption is helpful.\n4", "no score line"),
    ("I would give it a 4 out of 5.", "prose containing a digit"),
    ("4 because the caption is accurate", "prose containing a digit"),
    ("0\n\nterrible", "outside 1..5"),
    ("6\nexcellent", "outside 1..5"),
    ("10", "outside 1..5"),
    ("-3\nx", "outside 1..5"),
])
def test_parse_reports_malformed_answers_without_a_score(text, reason):
    score, _, error = parse_judge_answer(text)
    assert score is None and reason in error


def test_answer_format_round_trips():
    for s in range(1, 6):
        assert parse_judge_answer(format_judge_answer(s, EXPLANATION)) == (s, EXPLANATION, None)

