"""MkDocs hooks (mkdocs.yml ``hooks:``): pages made from files outside docs/.

``measurements.md`` is bench/results.md as ``make bench`` last wrote it, with its machine,
date and load: the figures the guide pages leave out, so those pages cannot go stale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GENERATED = {"measurements.md": ROOT / "bench" / "results.md"}
"""Each generated page, and the file it is made from."""


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the site's files (mkdocs is imported only here: the
    tests read :data:`GENERATED` without it)."""
    from mkdocs.structure.files import File

    for page, source in GENERATED.items():
        files.append(File.generated(config, page, content=source.read_text(encoding="utf-8")))
    return files
