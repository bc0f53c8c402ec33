"""Search-R1 style QA rewards: normalisation, last-answer extraction, EM / sub-EM / F1."""

import pytest

from drmas.rewards.qa import exact_match, extract_answer, f1, normalize_answer, sub_em


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("an apple a day", "apple day"),
        ("  Paris,   France!! ", "paris france"),
        ("U.S.A.", "usa"),
        ("theory of a thing", "theory of thing"),  # "the" inside a word stays
        ("Anne", "anne"),
        ("", ""),
    ],
)
def test_normalize_answer(raw, expected):
    assert normalize_answer(raw) == expected


def test_extract_answer_takes_the_last_tag_and_strips():
    text = "<answer>first</answer> thinking… <answer>\n  second answer \n</answer> trailing"
    assert extract_answer(text) == "second answer"
    assert extract_answer("no tag here") is None
    assert extract_answer("<answer>unclosed") is None
    assert extract_answer("<answer></answer>") == ""


def test_exact_match_ignores_articles_punctuation_case_whitespace():
    assert exact_match("<answer>the  EIFFEL tower.</answer>", ["Eiffel Tower"]) == 1.0
    assert exact_match("<answer>An Apple</answer>", ["apple"]) == 1.0
    assert exact_match("<answer>Eiffel</answer>", ["Eiffel Tower"]) == 0.0


def test_exact_match_any_gold_alias():
    golds = ["Barack Obama", "Obama", "Barack Hussein Obama II"]
    assert exact_match("<answer>obama</answer>", golds) == 1.0
    assert exact_match("<answer>Barack Hussein Obama, II</answer>", golds) == 1.0
    assert exact_match("<answer>Michelle Obama</answer>", golds) == 0.0
    assert exact_match("<answer>paris</answer>", "Paris") == 1.0  # a single gold string


def test_no_answer_tag_scores_zero():
    for metric in (exact_match, sub_em, f1):
        assert metric("The answer is Paris", ["Paris"]) == 0.0


def test_last_answer_wins():
    assert exact_match("<answer>Paris</answer> no wait <answer>Lyon</answer>", ["Paris"]) == 0.0
    assert exact_match("<answer>Lyon</answer> no wait <answer>Paris</answer>", ["Paris"]) == 1.0


def test_empty_answer_never_matches_a_gold_that_normalises_to_nothing():
    assert exact_match("<answer></answer>", ["The"]) == 0.0
    assert sub_em("<answer>anything</answer>", ["the", "!"]) == 0.0


def test_sub_em():
    assert sub_em("<answer>It is the Eiffel Tower in Paris</answer>", ["eiffel tower"]) == 1.0
    assert sub_em("<answer>Eiffel</answer>", ["Eiffel Tower"]) == 0.0


def test_f1():
    assert f1("<answer>Eiffel Tower</answer>", ["the Eiffel Tower"]) == 1.0
    # pred {eiffel}, gold {eiffel, tower}: p = 1, r = 1/2
    assert f1("<answer>Eiffel</answer>", ["Eiffel Tower"]) == pytest.approx(2 / 3)
    assert f1("<answer>Eiffel</answer>", ["Louvre", "Eiffel Tower", "Eiffel"]) == 1.0
    assert f1("<answer>Louvre</answer>", ["Eiffel Tower"]) == 0.0
