"""The review verbs' wire contract: their refusals carry their own closed codes, and
harnessctl's parser asks for what a decision needs."""

from __future__ import annotations

import pytest

from daemon.control import ctl
from daemon.control.error_codes import wire_code
from daemon.control.protocol import ErrorCode
from daemon.errors import NotAwaitingReview, StaleParent

pytestmark = pytest.mark.unit


def test_review_refusals_have_codes_of_their_own() -> None:
    stale = StaleParent("c3 was tested against v0002", candidate_id=3, parent="v0002", live="v0001")
    assert wire_code(stale) is ErrorCode.STALE_PARENT
    assert wire_code(NotAwaitingReview("c3 does not await review")) is ErrorCode.NOT_AWAITING_REVIEW


def test_a_rejection_needs_a_reason_and_a_decision_names_who(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = ctl.build_parser()
    with pytest.raises(SystemExit) as refused:
        parser.parse_args(["reject", "c3"])
    assert refused.value.code == 2 and "--reason" in capsys.readouterr().err
    approve = parser.parse_args(["approve", "c3"])
    assert approve.reviewer and approve.reason == ""  # the login name by default
    reject = parser.parse_args(["reject", "c3", "--reason", "no", "--as", "alice"])
    assert (reject.ref, reject.reviewer, reject.reason) == ("c3", "alice", "no")
