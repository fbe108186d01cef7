"""improve: the self-improvement loop and the decision on each candidate.

Owns: candidate intake (``intake``: parse once, apply once, static stage; ``tried``: the
programs already seen), the pipeline (smoke, dev, held-out, panel) and its gates, the
held-out stage (``heldout``: a candidate's sequential test at its share of alpha), the
lineage-wide alpha ledger (``alpha_ledger``: the ``heldout_budget`` and ``heldout_tests``
tables), the glue from policy to acceptance procedure (``procedure``, ``power_report``), the
model-free checks (decoy re-run, compute-matched, security), what the proposer is told of
earlier candidates (``briefing``, the information rule's one implementation), a person's
review of what passed every gate (``review``: ``[gates.review]``'s approve and reject) and
the loop that drives it all within the budgets. The statistics themselves are the pure
``daemon.acceptance`` core; the proposer is the ``proposer`` subpackage, which cannot import
anything that reaches held-out results.

May import: acceptance, config, evaluation, gateway, lineage, patches, providers, suites,
store, verdict. Never control or live.
"""
