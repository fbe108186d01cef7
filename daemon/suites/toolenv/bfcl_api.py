"""The simulated BFCL APIs (file system, messaging, trading, travel, ...), from the wheel.

Worker only. The API modules are extracted from the pinned bfcl-eval wheel into the asset
cache (a temporary folder renamed into place, so a crashed extraction never leaves half a
package), with the one absolute import prefix they use rewritten to a relative one, and
imported as a standalone package: ``bfcl_eval`` itself and its dependency tree are never
imported and ``sys.path`` is not touched. Runtime dependency: ``mpmath`` (MathAPI).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from .bfcl_data import CLASS_MODULE

_SOURCE_DIR = "bfcl_eval/eval_checker/multi_turn_eval/func_source_code/"
_IMPORT_PREFIX = "from bfcl_eval.eval_checker.multi_turn_eval.func_source_code."
_MODULES = (*CLASS_MODULE.values(), "long_context")


class BfclWheel:
    """The pinned wheel, hash-checked on open: the API code we import comes from it."""

    def __init__(self, path: Path, sha256: str, cache_dir: Path) -> None:
        raw = path.read_bytes()
        digest = hashlib.sha256(raw).hexdigest()
        if digest != sha256:
            raise ValueError(f"{path}: sha256 {digest} is not the pinned {sha256}")
        self.path = path
        self.sha256 = digest
        self._zip = zipfile.ZipFile(path)
        self._dir = cache_dir / f"multi_turn_api-{digest[:16]}"
        self._package = f"_harnessd_bfcl_api_{digest[:12]}"
        self._classes: dict[str, type] = {}

    def read(self, member: str) -> bytes:
        return self._zip.read(member)

    def api_classes(self, names: Iterable[str]) -> dict[str, type]:
        """The named API classes, each module imported once per process (only those asked
        for: MathAPI's pulls in mpmath)."""
        package = self._import_package(self._extract())
        for cls in names:
            if cls not in self._classes:
                module = importlib.import_module(f"{package.__name__}.{CLASS_MODULE[cls]}")
                self._classes[cls] = getattr(module, cls)
        return dict(self._classes)

    def _extract(self) -> Path:
        if (self._dir / ".complete").exists():
            return self._dir
        self._dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=self._dir.parent, prefix=".extract-"))
        try:
            (tmp / "__init__.py").write_text('"""Extracted from the pinned bfcl-eval wheel."""\n')
            for mod in _MODULES:
                src = self._zip.read(f"{_SOURCE_DIR}{mod}.py").decode("utf-8")
                src = src.replace(_IMPORT_PREFIX, "from .")
                if "bfcl_eval" in src:
                    raise RuntimeError(f"{mod}.py still refers to bfcl_eval after the rewrite")
                (tmp / f"{mod}.py").write_text(src)
            (tmp / ".complete").write_text(self.sha256)
            try:
                tmp.rename(self._dir)
            except OSError:  # another worker finished first; its copy is identical
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return self._dir

    def _import_package(self, folder: Path) -> ModuleType:
        existing = sys.modules.get(self._package)
        if existing is not None:
            return existing
        spec = importlib.util.spec_from_file_location(
            self._package, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import the BFCL APIs from {folder}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[self._package] = module
        spec.loader.exec_module(module)
        return module
