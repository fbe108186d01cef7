"""acceptance: the held-out statistics, pure.

Owns: anytime-valid e-processes (``eprocess``), the knobs of the sequential Pareto rule
(``knobs``), the rule itself on one block (``rule``: non-inferiority, better in some
dimension, the honesty veto, futility, curtailment), the honesty summary (``honesty``),
the explanation of a decision part by part (``explain``), the paired observations
(``observations``), feeding results in dispatch order (``ordering``), the lineage-wide alpha
spending (``spending``) and exact power (``power``).

May import: nothing from ``daemon`` outside this package, and nothing that does IO. Every
function here is a deterministic function of its arguments, so the guarantees DESIGN.md
proves are about this code alone, and ``scripts/bench/acceptance.py`` simulates exactly
what the daemon decides. The layout test (``tests/test_layout.py``) enforces it.
"""
