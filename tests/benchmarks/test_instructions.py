"""``python -m benchmarks.instructions``: its arguments, the commands it runs, and (slow, where valgrind
is installed) a real count."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import instructions

ROOT = Path(__file__).resolve().parents[2]


def test_arguments():
    args = instructions.parse_args(["W1"])
    assert (args.workload, args.nodes, args.gc, args.dry_run) == ("W1", 3000, "both", False)
    args = instructions.parse_args(["W1", "--nodes", "600", "--gc", "off", "--dry-run"])
    assert (args.nodes, args.gc, args.dry_run) == (600, "off", True)


@pytest.mark.parametrize("argv", [[], ["W9"], ["W1", "--nodes", "2"], ["W1", "--gc", "sometimes"]])
def test_bad_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        instructions.parse_args(argv)
    assert exit_.value.code == 2 and "usage: python -m benchmarks.instructions" in capsys.readouterr().err


def test_help_says_what_it_measures():
    done = subprocess.run([sys.executable, "-m", "benchmarks.instructions", "--help"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    assert "instructions per node under callgrind" in done.stdout and "--nodes" in done.stdout


def test_dry_run_prints_n_and_2n_forward_and_both_per_gc_setting(capsys):
    assert instructions.main(["W1", "--nodes", "100", "--gc", "on", "--dry-run"]) == 0
    commands = [line for line in capsys.readouterr().out.splitlines() if line.startswith("valgrind")]
    assert [c.split("--child ")[1] for c in commands] == ["forward 100 on", "forward 200 on", "both 100 on",
                                                          "both 200 on"]
    assert all("--tool=callgrind" in c for c in commands)


def test_a_child_builds_and_differentiates_the_chain():
    """The child process alone, without valgrind: what it runs works."""
    subprocess.run([sys.executable, "-m", "benchmarks.instructions", "W1", "--child", "both", "30", "off"],
                   cwd=ROOT, check=True, timeout=120)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (apt install valgrind)")
def test_counts_are_per_node_and_positive():
    done = subprocess.run([sys.executable, "-m", "benchmarks.instructions", "W1", "--nodes", "100", "--gc", "off"],
                          cwd=ROOT, capture_output=True, text=True, check=True, timeout=1200)
    line = done.stdout.splitlines()[-1].split()
    forward, backward = int(line[line.index("forward") + 1].replace(",", "")), int(line[-1].replace(",", ""))
    assert 1_000 < forward < 200_000 and 1_000 < backward < 200_000, done.stdout


def test_w3_counts_steps():
    args = instructions.parse_args(["W3"])
    assert (args.workload, args.nodes, args.tiny) == ("W3", 20, False)
    args = instructions.parse_args(["W3", "--tiny", "--nodes", "5"])
    assert (args.nodes, args.tiny) == (5, True)
    with pytest.raises(SystemExit):
        instructions.parse_args(["W1", "--tiny"])


def test_w3_dry_run_passes_tiny_to_the_children(capsys):
    assert instructions.main(["W3", "--tiny", "--nodes", "4", "--gc", "off", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "instructions per step" in out
    commands = [line for line in out.splitlines() if line.startswith("valgrind")]
    assert [c.split("benchmarks.instructions ")[1] for c in commands] == [
        "W3 --tiny --child forward 4 off", "W3 --tiny --child forward 8 off", "W3 --tiny --child both 4 off",
        "W3 --tiny --child both 8 off"]


@pytest.mark.parametrize("tiny", [[], ["--tiny"]])
def test_a_w3_child_runs_its_steps(tiny):
    """The child process alone, without valgrind: what it runs works."""
    subprocess.run([sys.executable, "-m", "benchmarks.instructions", "W3", *tiny, "--child", "both", "2", "off"],
                   cwd=ROOT, check=True, timeout=120)
