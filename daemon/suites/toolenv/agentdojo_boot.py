"""Import AgentDojo's environments, tools, tasks and attacks from the pinned wheel, and no SDK.

Worker only. AgentDojo's benchmark loop wants to own the model: importing
``agentdojo.task_suite`` runs ``agentdojo/agent_pipeline/__init__.py``, which imports the
anthropic, openai, cohere and google clients, and ``agent_pipeline.tool_execution`` takes one
constant from ``llms/google_llm.py`` (which imports google-genai). In harnessd the harness
owns the loop and we need only the environments, the tool runtime, the checks and the
injection attacks. So the wheel is extracted into the asset cache (temporary folder, then
renamed), put on this process's ``sys.path``, and the two package ``__init__`` files are
skipped: those packages are registered bare (their submodules still load from the real
files), and the google module is replaced by one holding only that constant, read from the
shipped source with ``ast`` so it cannot drift. Everything else is AgentDojo's own code.
"""

from __future__ import annotations

import ast
import hashlib
import shutil
import sys
import tempfile
import types
import zipfile
from pathlib import Path

VENDOR_SDKS = ("openai", "anthropic", "google", "cohere", "langchain", "transformers", "torch")


def _extract(wheel: Path, sha256: str, cache_dir: Path) -> Path:
    raw = wheel.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != sha256:
        raise ValueError(f"{wheel}: sha256 {digest} is not the pinned {sha256}")
    target = cache_dir / f"site-{digest[:16]}"
    if (target / ".complete").exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=cache_dir, prefix=".extract-"))
    try:
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                name = info.filename
                if not name.startswith("agentdojo/") or ".." in Path(name).parts:
                    continue
                zf.extract(info, tmp)
        (tmp / ".complete").write_text(digest)
        try:
            tmp.rename(target)
        except OSError:  # another worker finished first; its copy is identical
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _empty_function_name(root: Path) -> str:
    src = (root / "agent_pipeline" / "llms" / "google_llm.py").read_text()
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "EMPTY_FUNCTION_NAME" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            if isinstance(value, str):
                return value
    raise ImportError("EMPTY_FUNCTION_NAME not found in agentdojo's google_llm.py")


def boot(wheel: Path, sha256: str, cache_dir: Path) -> types.ModuleType:
    """``agentdojo.task_suite.load_suites``, imported without any vendor SDK."""
    loaded = sys.modules.get("agentdojo.task_suite.load_suites")
    if loaded is not None:
        return loaded
    site = _extract(wheel, sha256, cache_dir)
    sys.path.insert(0, str(site))
    root = site / "agentdojo"
    for name, folder in (
        ("agentdojo.agent_pipeline", root / "agent_pipeline"),
        ("agentdojo.agent_pipeline.llms", root / "agent_pipeline" / "llms"),
    ):
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        package.__package__ = name
        sys.modules[name] = package
    google = types.ModuleType("agentdojo.agent_pipeline.llms.google_llm")
    google.__doc__ = "harnessd: only the constant agent_pipeline.tool_execution needs."
    google.EMPTY_FUNCTION_NAME = _empty_function_name(root)  # type: ignore[attr-defined]
    sys.modules[google.__name__] = google
    import agentdojo.attacks  # noqa: F401  (registers the attacks)
    from agentdojo.task_suite import load_suites

    leaked = sorted({m.split(".")[0] for m in sys.modules} & set(VENDOR_SDKS))
    if leaked:
        raise ImportError(f"importing agentdojo loaded vendor SDKs: {leaked}")
    module: types.ModuleType = load_suites
    return module
