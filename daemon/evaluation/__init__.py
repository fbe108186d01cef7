"""evaluation: run a harness on tasks x models in sandboxes and say what happened.

Owns: the runtime (engine, image, models, suite, budgets), the outages of its
dependencies (``health``: engine and models down, probed with backoff until back), one
task run (container + gateway), the evaluator (many task runs -> ``EvalReport``), reports,
coverage analysis of harness code, the ``evaluations`` table (``results``) and
``harnessd eval``.

May import: config, gateway, providers, suites, store, tasks, events (the ``Emit``
contract), patches (diff reading for coverage) and ``sandbox``. Never improve, lineage,
live or control.
"""
