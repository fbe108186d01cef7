"""toolenv: the trusted tool environments, run in a worker process of their own.

Owns: BFCL v4 multi-turn's task data and tool specs (``bfcl_data``, also read by the daemon:
pure data), the simulated BFCL APIs (``bfcl_api``), their executor and BFCL's multi-turn
checker (``bfcl_run``), AgentDojo's environments, tool runtime, utility and security checks
(``agentdojo_boot``, ``agentdojo_run``), and the worker's main loop (``worker``) with its
wire format (``worker_protocol``).

Why a process: the simulated APIs run harness-chosen arguments through third-party code.
Some of it cannot be interrupted in-process (``MathAPI.power(10, 10**9)`` is one C-level
bigint operation), some changes process globals (``mpmath.mp.dps``, the decimal context),
state can grow without bound, and AgentDojo's package pulls in vendor SDKs if imported
naively. So the daemon imports only ``bfcl_data`` and ``worker_protocol``
from here, and the worker (started by :mod:`daemon.suites.envworker`) loads this folder as
a package of its own name (``harnessd_toolenv``), without ``daemon``.

May import: the standard library, its own modules (relative imports only) and the pinned
packages the suites need (the ``toolenv`` extra: mpmath, PyYAML, docstring-parser,
deepdiff, email-validator, and pydantic); never ``daemon`` or ``sandbox``.
"""
