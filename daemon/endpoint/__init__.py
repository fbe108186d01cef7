"""endpoint: the live harness over HTTP, as an OpenAI-compatible chat completions API.

Owns: the translation between OpenAI's chat completions wire format and harnessd's tasks
and answers, with OpenAI-shaped errors (``wire``: pure, no IO), the ASGI application
(``app``: bearer-token auth, body and concurrency limits, whole or streamed answers, a
client that goes away cancels its harness run; the daemon's probes beside the API) and the
server on a loopback address and/or a Unix socket, run inside the daemon's task group
(``server``). Off unless ``[endpoint] enabled = true`` in ``harnessd.toml``.

May import: live (the live harness serves every request; it records each one, so
``harnessctl label`` works on endpoint traffic), config (the ``[endpoint]`` settings and the
token), providers.base (messages and tool specs), tasks, errors. Never improve, control or
evaluation.
"""
