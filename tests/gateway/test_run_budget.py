"""An evaluation's calls are held to the task and eval budgets of the policy it started
under; the daemon-wide windows stay the live policy's."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config.policy import BudgetPolicy
from daemon.errors import BudgetExceeded
from daemon.gateway.budget import BudgetGuard
from daemon.gateway.ledger import Charge
from daemon.store import Store

pytestmark = pytest.mark.unit

PINNED = Charge("local:m", "solve", run_id="run-pinned", task_id="t")
OTHER = Charge("local:m", "solve", run_id="run-other", task_id="t")


def test_a_pinned_run_keeps_its_budgets_while_the_live_policy_changes(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    try:
        live = [BudgetPolicy(tokens_per_task=1000, tokens_per_hour=50_000)]
        runs = {PINNED.run_id: BudgetPolicy(tokens_per_task=300)}
        guard = BudgetGuard(store, lambda: live[0], run_budget=runs.get)
        assert guard.allowance(PINNED) == 300 and guard.allowance(OTHER) == 1000
        live[0] = BudgetPolicy(tokens_per_task=5, tokens_per_hour=50_000)  # a reload
        assert guard.allowance(PINNED) == 300 and guard.allowance(OTHER) == 5
        live[0] = BudgetPolicy(tokens_per_task=1000, tokens_per_hour=100)  # windows: live
        assert guard.allowance(PINNED) == 100
        live[0] = BudgetPolicy(tokens_per_hour=1)
        with pytest.raises(BudgetExceeded) as caught:
            guard.reserve(PINNED, 50, prompt_tokens=400)  # past the pinned task budget
        assert (caught.value.scope, caught.value.limit) == ("task", 300)
    finally:
        store.close()
