"""acceptance: the held-out statistics, pure.

Owns: anytime-valid e-processes (``eprocess``), the knobs of the sequential Pareto rule and
its tests as data (``knobs``: the "better in" dimensions and the futility tests are tables),
the rule itself on one block (``rule``: non-inferiority, better in some dimension, the
honesty veto, futility, curtailment; its outcome is an ``Outcome``), the honesty summary and
check (``honesty``), a decision explained part by part under typed keys, and its stored form
(``explain``), the paired observations (``observations``), feeding results in dispatch order
(``ordering``), the lineage-wide alpha spending (``spending``), the conditional-power stop
(``conditional``) and exact power (``power``).

May import: nothing from ``daemon`` outside this package, and nothing that does IO (numpy
for array arithmetic). Every
function here is a deterministic function of its arguments, so the guarantees DESIGN.md
proves are about this code alone, and ``scripts/bench/acceptance.py`` simulates exactly
what the daemon decides. The layout test (``tests/test_layout.py``) enforces it.
"""
