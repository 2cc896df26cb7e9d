"""MkDocs hooks for the site (mkdocs.yml names this file; it is not a page).

The tutorials are the notebooks committed under ``notebooks/``, rendered with their stored outputs by
mkdocs-jupyter: they are added to the site from there (``notebooks/<name>.ipynb``), so that the
notebooks have one copy. The design pages under ``docs/design/`` join the Concepts section of the
navigation in file-name order, so a new page there needs no edit of mkdocs.yml.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent


def on_config(config):
    design = sorted((Path(config["docs_dir"]) / "design").glob("*.md"))
    if design:
        concepts = next(item for item in config["nav"] if isinstance(item, dict) and "Concepts" in item)
        concepts["Concepts"].append({"Design": [f"design/{page.name}" for page in design]})
    return config


@event_priority(100)  # before mkdocs-jupyter's on_files, which picks the notebooks up by their suffix
def on_files(files: Files, config) -> Files:
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        files.append(File(f"notebooks/{notebook.name}", str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files
