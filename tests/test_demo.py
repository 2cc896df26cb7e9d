"""``python -m asyncgrad demo`` really trains: run it as a user would and read its report."""

import re
import subprocess
import sys

from asyncgrad.__main__ import build_parser, spiral


def _run(*args):
    return subprocess.run([sys.executable, "-m", "asyncgrad", *args], capture_output=True, text=True, timeout=120)


def test_demo_trains_a_spiral_classifier():
    result = _run("demo", "--epochs", "150", "--seed", "1")
    assert result.returncode == 0, result.stderr
    losses = [float(v) for v in re.findall(r"^epoch\s+\d+\s+loss (\d+\.\d+)$", result.stdout, re.MULTILINE)]
    assert len(losses) == 11 and losses[-1] < losses[0] / 5
    accuracy = re.search(r"^final training accuracy: (\d+\.\d+)%$", result.stdout, re.MULTILINE)
    assert accuracy is not None, result.stdout
    assert float(accuracy.group(1)) > 95.0


def test_usage_lists_the_demo_and_requires_a_command():
    assert "demo" in _run("--help").stdout
    missing = _run()
    assert missing.returncode == 2 and "required: command" in missing.stderr
    args = build_parser().parse_args(["demo", "--epochs", "7", "--seed", "3"])
    assert (args.epochs, args.seed) == (7, 3)


def test_spiral_is_seeded_and_balanced():
    features, labels = spiral(50, 3, seed=4)
    again, _ = spiral(50, 3, seed=4)
    assert features.shape == (150, 2) and features.dtype.name == "float32"
    assert (features == again).all()
    assert [int((labels == k).sum()) for k in range(3)] == [50, 50, 50]
