"""The notebooks: each runs top to bottom in a fresh kernel, and each is committed with its outputs.

Executing goes through ``notebooks/run_all.py`` (the script that saves the committed outputs),
so the suite checks exactly what a reader sees. The kernels start concurrently, once per
session: most of a short notebook's time is its kernel importing numpy, matplotlib and
asyncgrad, which overlaps well even on two cores.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="reading notebooks needs nbformat (the 'test' extra)")

FOLDER = Path(__file__).resolve().parents[2] / "notebooks"

NAMES = ["01_quickstart", "02_inside_the_engine", "03_training", "04_reentrant_and_checkpointing",
         "05_higher_order", "06_distributed", "07_serving_while_training"]
WITH_PICTURES = {"02_inside_the_engine", "03_training", "04_reentrant_and_checkpointing", "05_higher_order",
                 "06_distributed", "07_serving_while_training"}


def test_the_notebooks_are_there():
    assert sorted(p.stem for p in FOLDER.glob("*.ipynb")) == NAMES


@pytest.fixture(scope="module")
def executed():
    """Every notebook executed once, in fresh kernels started side by side."""
    for module, why in [("nbclient", "executing notebooks needs nbclient"),
                        ("ipykernel", "executing notebooks needs ipykernel"),
                        ("matplotlib", "the notebooks draw with matplotlib"),
                        ("sklearn", "03_training uses scikit-learn's digits"),
                        ("tqdm", "03_training shows a tqdm progress bar"),
                        ("aiohttp", "07_serving_while_training serves HTTP with aiohttp")]:
        pytest.importorskip(module, reason=f"{why} (the 'test' extra)")
    spec = importlib.util.spec_from_file_location("notebooks_run_all", FOLDER / "run_all.py")
    run_all = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_all)
    assert [p.stem for p in run_all.NOTEBOOKS] == NAMES
    return {path.stem: result for path, result in run_all.execute(run_all.NOTEBOOKS).items()}


def _errors(notebook) -> list[str]:
    return [f"{out.get('ename')}: {out.get('evalue')}" for cell in notebook.cells
            for out in cell.get("outputs", []) if out.get("output_type") == "error"]


def _images(notebook) -> list[str]:
    return [kind for cell in notebook.cells for out in cell.get("outputs", [])
            for kind in out.get("data", {}) if kind.startswith("image/")]


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_top_to_bottom(name, executed):
    result = executed[name]
    if isinstance(result, BaseException):
        raise result
    notebook, _seconds = result
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1))
    assert not _errors(notebook)
    if name in WITH_PICTURES:
        assert "image/png" in _images(notebook)


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebook_has_its_outputs(name):
    """What is committed is an executed notebook: a reader on GitHub sees every output and picture.

    Re-create the outputs with ``python notebooks/run_all.py`` after editing a notebook.
    """
    notebook = nbformat.read(FOLDER / f"{name}.ipynb", as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code
    counts = [cell.execution_count for cell in code]
    assert counts == list(range(1, len(code) + 1)), f"not executed top to bottom in one kernel: {counts}"
    assert sum(len(cell.outputs) for cell in code) >= len(code) // 2, "most cells should show something"
    assert not _errors(notebook)
    if name in WITH_PICTURES:
        assert "image/png" in _images(notebook), "its figures were not saved"
    if name == "02_inside_the_engine":
        assert "image/svg+xml" in _images(notebook) or any(
            "digraph" in "".join(out.get("text", "")) for cell in code for out in cell.outputs), "the graph drawing"
