from __future__ import annotations

import pytest

from daemon.acceptance.ordering import ready_in_order

pytestmark = pytest.mark.unit


def test_only_the_completed_prefix_is_released() -> None:
    order = ["a", "b", "c", "d"]
    assert ready_in_order(order, {"b": 2, "c": 3}, 0) == ()
    assert ready_in_order(order, {"a": 1, "b": 2, "d": 4}, 0) == (1, 2)
    assert ready_in_order(order, {"a": 1, "b": 2, "c": 3, "d": 4}, 2) == (3, 4)
    with pytest.raises(ValueError):
        ready_in_order(order, {}, 5)
