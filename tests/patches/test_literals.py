"""The static data screen against real memorised answers (BFCL simple, HumanEval).

The answer tables are the suites' own public answers, packed the ways a harness would pack
them; each must stop at the static stage. A partial table cut into short literals slips
under both limits, which is why provenance and the decoy exist (tests/improve).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config.policy import PatchPolicy
from daemon.patches import PatchRejected, apply_proposal, parse_proposal, static_check
from daemon.patches.literals import payload
from daemon.suites import load_suite
from tests.improve.cheats import Encoding, memorised_patch

pytestmark = pytest.mark.unit

SEED = Path(__file__).resolve().parents[2] / "seeds" / "minimal"
IMPROVE = Path(__file__).resolve().parents[2] / "scripts" / "demo" / "improve.patch"


def check(text: str, dest: Path, policy: PatchPolicy | None = None) -> str:
    applied = apply_proposal(SEED, parse_proposal(text), dest)  # type: ignore[arg-type]
    try:
        static_check(applied, policy or PatchPolicy())
    except PatchRejected as exc:
        return exc.reason
    return "passed"


@pytest.mark.parametrize("spec", ["bfcl:simple", "humaneval"])
@pytest.mark.parametrize("encoding", ["blob", "plain", "chunks"])
def test_a_full_answer_table_stops_at_the_static_stage(
    spec: str, encoding: Encoding, asset_cache: Path, tmp_path: Path
) -> None:
    suite = load_suite(spec, asset_cache)
    why = check(memorised_patch(suite, "alone", encoding), tmp_path / "t")
    assert "max_literal_bytes is 8000" in why and "harness.py" in why, why


@pytest.mark.parametrize("spec", ["bfcl:simple", "humaneval"])
def test_a_partial_table_as_one_blob_is_an_encoded_run(
    spec: str, asset_cache: Path, tmp_path: Path
) -> None:
    suite = load_suite(spec, asset_cache)
    why = check(memorised_patch(suite, "alone", "blob", keep=40), tmp_path / "t")
    assert "base64/hex-like" in why and "max_encoded_chars is 256" in why, why
    # Cut into short literals it passes both limits: the other defences take over.
    assert check(memorised_patch(suite, "alone", "chunks", keep=40), tmp_path / "u") == "passed"


def test_a_data_file_or_comments_count_as_data(asset_cache: Path, tmp_path: Path) -> None:
    suite = load_suite("bfcl:simple", asset_cache)
    answers = [str(suite.reference_output(t)) for t in suite.task_ids()]
    data_file = (
        "Rationale: keep answers aside.\n\nanswers.txt\n<<<<<<< SEARCH\n=======\n"
        + " ".join(answers)
        + "\n>>>>>>> REPLACE\n"
    )
    assert "max_literal_bytes" in check(data_file, tmp_path / "a")
    comments = "\n".join(f"# {line}" for line in answers[:200])
    in_comments = (
        "Rationale: notes.\n\nharness.py\n<<<<<<< SEARCH\nimport json\n=======\n"
        f"import json\n{comments}\n>>>>>>> REPLACE\n"
    )
    assert "max_literal_bytes" in check(
        in_comments, tmp_path / "b", PatchPolicy(max_changed_lines=1000)
    )


def test_ordinary_patches_pass(tmp_path: Path) -> None:
    assert check(IMPROVE.read_text(), tmp_path / "t") == "passed"
    seed = payload("harness.py", (SEED / "harness.py").read_bytes())
    assert seed.size < 2000 and seed.longest_run < 40
    assert payload("x.bin", bytes(range(256))).longest_run == 256


@pytest.mark.parametrize("spec", ["bfcl:simple", "humaneval"])
def test_a_table_in_identifiers_counts_as_data(
    spec: str, asset_cache: Path, tmp_path: Path
) -> None:
    """Names are data too: the table as hex in the names of class attributes, read back
    with ``vars()``, has almost no literal, but one new name per 240 hex digits."""
    suite = load_suite(spec, asset_cache)
    why = check(memorised_patch(suite, "alone", "names"), tmp_path / "t")
    assert "max_literal_bytes is 8000" in why and "harness.py" in why, why
