"""`ablate.baselines` in a source checkout that is not installed.

pyproject's package-dir installs the repository's `baselines/` folder as `ablate.baselines` (in
the wheel and in an editable install alike). A checkout run uninstalled, with only its root on
the path (`PYTHONPATH=.`, as the GPU targets run on a machine's own Python), has no such
mapping: `mount_presets` adds the same one, last among the finders, so that any install wins.
It only says where the folder is; the import itself stays a plain `import ablate.baselines`.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib.machinery import ModuleSpec
from pathlib import Path

#: The installed name of the presets' folder.
PRESETS = "ablate.baselines"


class PresetsFinder:
    """Finds `ablate.baselines` in `folder` (its modules then load from the package's path)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def find_spec(self, fullname: str, path=None, target=None) -> ModuleSpec | None:
        if fullname != PRESETS:
            return None
        init = self.folder / "__init__.py"
        return importlib.util.spec_from_file_location(
            PRESETS, init, submodule_search_locations=[str(self.folder)]
        )


def mount_presets() -> None:
    """Map `ablate.baselines` to `baselines/` beside the package when the package runs from a
    checkout (the folder is there); idempotent, and a no-op in an installed wheel."""
    folder = Path(__file__).resolve().parents[2] / "baselines"
    if not (folder / "__init__.py").is_file():
        return
    if not any(isinstance(f, PresetsFinder) for f in sys.meta_path):
        sys.meta_path.append(PresetsFinder(folder))
