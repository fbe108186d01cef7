"""improve: the self-improvement loop and the decision on each candidate.

Owns: the proposer (what a model is shown, how its reply becomes a patch), candidate intake
(parse once, apply once, static stage), the pipeline (smoke, dev, held-out, panel), the
acceptance test and its statistics (anytime-valid e-processes, the sequential Pareto rule,
honesty, exact power), the lineage-wide error budget and its ``heldout_budget`` and
``heldout_tests`` tables (``alpha_ledger``), the model-free checks (decoy re-run), the gates,
and the loop that drives them within the budgets.

May import: config, evaluation, gateway, lineage, patches, providers, suites, store, verdict.
Never control or live.
"""
