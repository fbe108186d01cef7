"""improve: the self-improvement loop and the decision on each candidate.

Owns: the proposer (what a model is shown, how its reply becomes a patch), candidate intake
(parse once, apply once, static stage), the pipeline (smoke, dev, held-out, panel), the
gates and their statistics, and the loop that drives them within the budgets.

May import: config, evaluation, gateway, lineage, patches, providers, suites, verdict.
Never control or live.
"""
