"""Compaction: long sessions stay within the model's window without losing what was said.

A consumer of the journal (:mod:`.consumer`), never part of a request. The pure core: the
settings (:mod:`.settings`), the fold of what the model is sent (:mod:`.view`), the cut
(:mod:`.cut`), the summariser's request (:mod:`.summariser`), the checks (:mod:`.checks`),
the decision and the journal records (:mod:`.decide`, :mod:`.records`).
"""

from ankka.runtime.compaction.settings import Compaction, SummaryCheck

__all__ = ["Compaction", "SummaryCheck"]
