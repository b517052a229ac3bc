"""``ankka up``: the cluster's path on one machine (model → gateway over mTLS → runtime).

- :mod:`.state` — the state directory and the record of what runs (PIDs, addresses, logs).
- :mod:`.pki` — the local CA, made on first run, and the certificates the operator would issue.
- :mod:`.plan` — pure: which parts start, with which commands, environment and ports.
- :mod:`.supervise` — starting the parts in order, watching them, stopping them.
- :mod:`.cli` — ``ankka up``, ``ankka down`` and ``ankka status``.
"""
