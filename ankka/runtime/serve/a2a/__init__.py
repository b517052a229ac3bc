"""A2A v1.0 (the Agent2Agent protocol) for every agent a runtime serves, and a durable client
for agents of other platforms.

Server side (:mod:`.service`): each agent at ``/a2a/{agent}`` with its card, the JSON-RPC and
HTTP+JSON bindings (the ``a2a-sdk``'s), over ankka's turns and tasks; push notifications from
a durable outbox (:mod:`.push`). Everything it needs of the runtime goes through one adapter
(:mod:`.port`). Client side (:mod:`.client`): send a message with a stable ``messageId``,
follow the remote task, resume after a restart, and map what the remote agent says to a typed
outcome. ``ankka serve``'s options are :mod:`.options`. The package imports nothing until a
module of it is asked for (the SDK and protobuf are loaded off the start's critical path).
See docs/a2a.md.
"""
