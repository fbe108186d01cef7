"""Code checks across a trusted boundary: untrusted code answers calls, trusted code judges.

One check is two processes in two hardened containers of the same image, with different
uids, that share nothing but one Unix socket in a per-check host directory:

* the **trusted side** (``trusted.py``, uid 65533) holds the checker source (for HumanEval:
  the prompt and the hidden tests) and a one-time verdict token. It listens on the socket,
  runs the checker with a *proxy* in place of the candidate function, and alone prints
  the verdict;
* the **candidate side** (``candidate.py``, uid 65534) runs the untrusted program and
  answers the proxy's calls. It never sees the checker, the trusted driver, the token or
  the verdict channel, and its own output is never read.

Results cross only as frames of ``codec``: fresh objects of exact builtin types, so an
object that lies about equality, truth or its type never reaches the checker.

``spec`` holds the host's request and result types, ``checkdir`` the per-check directory,
``host`` runs one check. ``codec``, ``trusted`` and ``candidate`` are standard library only
and are copied into the check directory (each side gets only its own files).
"""
