"""``python -m asyncgrad demo`` really trains: run it as a user would and read its report and picture."""

import re
import subprocess
import sys

import numpy as np
import pytest

from asyncgrad.__main__ import build_parser, confusion, load_digits_split

pytest.importorskip("sklearn", reason="the demo needs scikit-learn (pip install '.[demo]')")
pytest.importorskip("matplotlib", reason="the demo needs matplotlib (pip install '.[demo]')")
pytest.importorskip("tqdm", reason="the demo needs tqdm (pip install '.[demo]')")


def _run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "asyncgrad", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def test_demo_trains_a_digit_classifier_and_draws_it(tmp_path):
    picture = tmp_path / "digits.png"
    result = _run("demo", "--epochs", "6", "--seed", "1", "--out", str(picture))
    assert result.returncode == 0, result.stderr
    losses = [float(v) for v in re.findall(r"^epoch\s+\d+\s+loss (\d+\.\d+)$", result.stdout, re.MULTILINE)]
    assert len(losses) == 6 and losses[-1] < losses[0] / 5, result.stdout
    accuracy = re.search(r"^test accuracy: (\d+\.\d)%$", result.stdout, re.MULTILINE)
    assert accuracy is not None, result.stdout
    assert float(accuracy.group(1)) > 90.0
    assert str(picture) in result.stdout
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 20_000
    assert "training" in result.stderr  # the tqdm bar


def test_usage_lists_the_demo_and_its_options():
    assert "demo" in _run("--help").stdout
    missing = _run()
    assert missing.returncode == 2 and "required: command" in missing.stderr
    usage = _run("demo", "--help").stdout
    for option in ("--epochs", "--seed", "--out"):
        assert option in usage
    args = build_parser().parse_args(["demo", "--epochs", "7", "--seed", "3", "--out", "x.png"])
    assert (args.epochs, args.seed, args.out) == (7, 3, "x.png")


@pytest.mark.parametrize("argv, words", [
    (["--epochs", "0"], "argument --epochs: expected a positive whole number, got 0"),
    (["--epochs", "two"], "argument --epochs: expected a positive whole number, got 'two'"),
    (["--seed", "-1"], "argument --seed: expected a whole number from 0 to 2**32 - 1, got -1"),
    (["--out", "picture.jpg"], "argument --out: the picture is a PNG"),
    (["--out", "/no/such/folder/x.png"], "argument --out: folder '/no/such/folder' does not exist"),
])
def test_bad_values_are_argparse_errors(argv, words, capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["demo", *argv])
    assert info.value.code == 2
    assert words in capsys.readouterr().err


def test_the_split_is_seeded_stratified_and_held_out():
    x_train, x_test, y_train, y_test = load_digits_split(4)
    again = load_digits_split(4)
    assert x_train.shape[1:] == (1, 8, 8) and x_train.dtype == np.float32 and y_train.dtype == np.int64
    assert len(y_train) + len(y_test) == 1797
    assert (x_train == again[0]).all() and not (x_train[:50] == load_digits_split(5)[0][:50]).all()
    assert 0.0 <= x_train.min() and x_train.max() <= 1.0
    assert np.bincount(y_test).min() >= 43 and np.bincount(y_test).max() <= 46  # each digit a quarter held out


def test_confusion_counts_true_against_predicted():
    matrix = confusion(np.array([0, 1, 1, 2]), np.array([0, 1, 2, 2]), classes=3)
    assert matrix.tolist() == [[1, 0, 0], [0, 1, 1], [0, 0, 1]]
