"""Suite specs from the policy, loaded once per process."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.errors import ConfigError
from daemon.suites import UnknownTask, load_suite, parse_spec
from daemon.suites.bfcl import BfclSuite
from daemon.suites.humaneval import HumanEvalSuite

pytestmark = pytest.mark.unit


def test_bfcl_specs_select_categories(asset_cache: Path) -> None:
    suite = load_suite("bfcl:simple,irrelevance", asset_cache)
    assert isinstance(suite, BfclSuite)
    assert suite.name == "bfcl:simple,irrelevance"
    assert len(suite.task_ids()) == 640
    assert suite.task_ids()[-1] == "irrelevance_239"


def test_loading_is_cached_per_process(asset_cache: Path) -> None:
    first = load_suite("bfcl:parallel", asset_cache)
    assert load_suite(" bfcl:parallel,parallel ", asset_cache) is first
    assert load_suite("humaneval", asset_cache) is load_suite("humaneval", asset_cache)
    assert isinstance(load_suite("humaneval", asset_cache), HumanEvalSuite)


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ("bfcl:simple,live_simple", "unknown BFCL categories ['live_simple']"),
        ("bfcl", "no BFCL category given"),
        ("bfcl:", "no BFCL category given"),
        ("humaneval:plus", "unknown suite 'humaneval:plus'"),
        ("gsm8k", "unknown suite 'gsm8k'"),
    ],
)
def test_bad_specs_name_the_spec_and_the_valid_names(spec: str, names: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_spec(spec)
    message = str(err.value)
    assert names in message
    assert "simple, multiple, parallel, parallel_multiple, irrelevance" in message
    assert "'humaneval'" in message


@pytest.mark.anyio
async def test_unknown_task_ids_are_errors(asset_cache: Path) -> None:
    suite = load_suite("bfcl:simple", asset_cache)
    for call in (suite.task, suite.expected, suite.reference_output):
        with pytest.raises(UnknownTask, match="suite 'bfcl:simple' has no task 'multiple_0'"):
            call("multiple_0")
    with pytest.raises(UnknownTask):
        await suite.check("nope", [], checker=None)  # type: ignore[arg-type]
