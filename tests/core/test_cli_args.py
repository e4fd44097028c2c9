"""core.cli_args: argparse refuses a bad number naming the option, before anything runs."""
from core.cli_args import non_negative_int, positive_float, positive_int, unit_float

import argparse

import pytest


def _parser():
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=non_negative_int)
    parser.add_argument("--batch-size", type=positive_int)
    parser.add_argument("--rate", type=positive_float)
    parser.add_argument("--share", type=unit_float)
    return parser


@pytest.mark.parametrize("argv,message", [
    (["--limit", "-1"], "argument --limit: must be an integer >= 0, got '-1'"),
    (["--batch-size", "0"], "argument --batch-size: must be a positive integer, got '0'"),
    (["--batch-size", "2.5"], "argument --batch-size: must be a positive integer, got '2.5'"),
    (["--rate", "nan"], "argument --rate: must be a positive number, got 'nan'"),
    (["--share", "1.5"], "argument --share: must be a number in [0, 1], got '1.5'"),
])
def test_bad_numbers_name_the_option(argv, message, capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(argv)
    assert message in capsys.readouterr().err


def test_good_numbers_pass():
    args = _parser().parse_args(["--limit", "0", "--batch-size", "3", "--rate", "0.5", "--share", "1"])
    assert (args.limit, args.batch_size, args.rate, args.share) == (0, 3, 0.5, 1.0)
