"""cluster: evaluation units on a Ray cluster, beyond this machine.

Owns: the Ray driver, which runs in a process of its own (``ray_driver``: Ray's core worker
exits its process when it loses the cluster's head, and that must never be the daemon),
the daemon's side of that process (``driver_process``), and the ``ray`` executor
(``ray_executor``):
units submitted as Ray tasks to nodes that declare sandbox capacity, each reaching the
daemon's gateway front over TLS with a per-run capability, re-queued once when a node or
worker is lost, and the cluster reported unavailable when it is gone.

May import: config, gateway, errors, tasks, events (the ``Emit`` contract) and ``sandbox``
(the unit and its node side).
Never evaluation or anything above; only ``ray_driver`` imports ``ray``.
"""
