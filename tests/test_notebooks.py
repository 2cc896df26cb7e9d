"""Every notebook in notebooks/ runs top to bottom in a fresh kernel (top-level ``await`` included)."""

import json
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="executing notebooks needs nbformat (the 'test' extra)")
nbclient = pytest.importorskip("nbclient", reason="executing notebooks needs nbclient (the 'test' extra)")
pytest.importorskip("ipykernel", reason="executing notebooks needs ipykernel (the 'test' extra)")

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.fixture
def python3_kernel(tmp_path, monkeypatch):
    """A ``python3`` kernel spec that runs this interpreter, found before any user-wide one.

    A spec installed elsewhere may point at a Python without asyncgrad; JUPYTER_PATH is
    searched first, so the kernel always shares the test run's environment.
    """
    spec_dir = tmp_path / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (asyncgrad tests)",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    return "python3"


def test_there_are_notebooks():
    assert [path.name for path in NOTEBOOKS] == ["01_the_graph.ipynb", "02_training.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_runs(path, python3_kernel):
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, kernel_name=python3_kernel, timeout=120,
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    errors = [output for cell in notebook.cells for output in cell.get("outputs", [])
              if output.get("output_type") == "error"]
    assert not errors, errors
