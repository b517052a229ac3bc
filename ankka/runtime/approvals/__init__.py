"""Tool approvals: a call waits for a person's decision, and an approved call runs at most once.

See docs/approvals.md. The journal is the truth (:mod:`.records`, folded by :mod:`.state`); an
index table (:mod:`.index`) finds a request by id and holds the durable expiry timers.
"""
