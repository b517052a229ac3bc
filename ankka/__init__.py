"""ankka: an agent platform for Kubernetes.

Three deployables live in one distribution and never import each other:
``ankka.runtime`` (the agent loop), ``ankka.gateway`` (the checked model gateway) and
``ankka.operator`` (the kopf operator). ``ankka.api`` and ``ankka._kernel`` hold what more
than one of them needs.
"""

__version__ = "0.1.0"
