"""Small test doubles that are not mocks: a clock the test moves, and a policy it edits."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from daemon.config.policy import BudgetPolicy


@dataclass
class Clock:
    now: float

    def __call__(self) -> float:
        return self.now


@dataclass
class Policies:
    """What ``policy_getter`` returns; tests replace ``budget`` the way a reload would."""

    budget: BudgetPolicy = field(default_factory=BudgetPolicy)

    def __call__(self) -> BudgetPolicy:
        return self.budget

    def set(self, **limits: int) -> None:
        self.budget = self.budget.model_copy(update=limits)


def write_script(folder: Path, text: str, name: str = "replies.toml") -> Path:
    path = folder / name
    path.write_text(text)
    return path
