"""Session memory as an event journal: records, the fold, the store seam and its stores.

:class:`Journal` (in :mod:`.journal`) is the door; the stores are behind it.
"""
