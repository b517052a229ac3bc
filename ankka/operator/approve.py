"""Decide a Task's pending tool approval, as a person allowed to by the cluster's RBAC.

``ankka approve TASK APPROVAL-ID --digest D [--refuse] [--reason R] [--content JSON]
[-n NAMESPACE]`` (``--content``: the form's values answering an MCP server's question, an
``eli_`` id; docs/mcp.md) (also
``kubectl ankka approve ...`` with the ``kubectl-ankka`` plugin shim, docs/operator.md):

1. reads the Task (the caller's kubeconfig) and refuses an id its status does not list as
   pending;
2. asks the API server whether the caller may ``update`` ``tasks/approval`` in the namespace
   (a SelfSubjectAccessReview): that RBAC verb is who may decide;
3. asks the API server who the caller is (a SelfSubjectReview): the username it stamps;
4. sends the decision to the Task's runtime (``POST /v1/approvals/{id}``) with that name in
   ``X-Ankka-Approver``: in a cluster as the Agent's delegate ``<agent>-approver`` (a token
   the API server issues for the Agent's audience; RBAC's ``create`` on
   ``serviceaccounts/token`` of that account is the real gate), through a port-forward to a
   runtime pod, the runtime checked by the platform CA (``ankka.operator.approve_route``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from pydantic import ValidationError

from ankka._kernel.errors import AnkkaError, ConfigurationError
from ankka._kernel.logs import say
from ankka.api.resources import GROUP, VERSION, AgentSpec, TaskSpec

__all__ = ["APPROVER_HEADER", "configure", "run"]

APPROVER_HEADER = "X-Ankka-Approver"
API_VERSION = f"{GROUP}/{VERSION}"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", help="the Task's name")
    parser.add_argument("approval", help="the approval's id (kubectl get task -o wide)")
    parser.add_argument("--digest", required=True, help="the digest shown with the request")
    parser.add_argument("--refuse", action="store_true", help="refuse instead of approving")
    parser.add_argument("--reason", default="", help="why (told to the model when refused)")
    parser.add_argument(
        "--content",
        type=_content,
        help="a JSON object: the values answering an MCP server's question (an eli_ id)",
    )
    parser.add_argument("-n", "--namespace", default="default")
    parser.add_argument(
        "--via",
        choices=("port-forward", "service"),
        default="port-forward",
        help="reach a runtime in a pod through the API server's port-forward (default: from "
        "anywhere kubectl works), or its Service (when this runs inside the cluster)",
    )


class _Refused(Exception):
    pass


def _content(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--content is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--content must be a JSON object (the form's fields)")
    return value


async def _decide(args: argparse.Namespace) -> dict[str, Any]:
    from ankka.operator import approve_route
    from ankka.operator.kube import Kube

    kube = Kube.from_environment(field_manager="ankka-approve")
    try:
        ns = args.namespace
        body = await kube.get(API_VERSION, "Task", ns, args.task)
        if body is None:
            raise _Refused(f"there is no Task {args.task!r} in {ns}")
        status = body.get("status") or {}
        pending = [a.get("id") for a in status.get("approvals") or []]
        if args.approval not in pending:
            listed = ", ".join(str(p) for p in pending) or "none"
            raise _Refused(
                f"Task {ns}/{args.task} lists no pending approval {args.approval!r} "
                f"(pending: {listed})"
            )
        allowed = await kube.review(
            "authorization.k8s.io/v1",
            "selfsubjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {
                    "resourceAttributes": {
                        "namespace": ns,
                        "verb": "update",
                        "group": GROUP,
                        "resource": "tasks",
                        "subresource": "approval",
                        "name": args.task,
                    }
                },
            },
        )
        if not (allowed.get("status") or {}).get("allowed"):
            raise _Refused(
                f"you may not decide approvals of Task {ns}/{args.task}: RBAC does not grant "
                f"'update' on 'tasks/approval' in {ns} (docs/operator.md)"
            )
        who = await kube.review(
            "authentication.k8s.io/v1",
            "selfsubjectreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        username = str(((who.get("status") or {}).get("userInfo") or {}).get("username", ""))
        try:
            spec = TaskSpec.model_validate(body.get("spec") or {})
        except ValidationError as exc:
            raise _Refused(f"Task {ns}/{args.task}'s spec does not parse: {exc}") from exc
        agent = await kube.get(API_VERSION, "Agent", ns, spec.agent)
        if agent is None:
            raise _Refused(f"there is no Agent {spec.agent!r} in {ns}")
        agent_spec = AgentSpec.model_validate(agent.get("spec") or {})
        address = agent_spec.runtime.address if agent_spec.runtime is not None else None
        route = await approve_route.route_to(
            kube, ns, spec.agent, agent, address=address, via=args.via
        )
        decision: dict[str, Any] = {
            "decision": "refuse" if args.refuse else "approve",
            "digest": args.digest,
            "reason": args.reason,
        }
        if args.content is not None:
            decision["content"] = args.content
        headers = {APPROVER_HEADER: username} if username else {}
        status_code, data = await approve_route.send(
            kube, route, f"/v1/approvals/{args.approval}", decision, headers
        )
    finally:
        kube.close()
    if status_code >= 400:
        error = (data or {}).get("error") if isinstance(data, dict) else data
        raise _Refused(f"the runtime refused the decision ({status_code}): {error}")
    answer: dict[str, Any] = data
    return answer


def run(args: argparse.Namespace) -> int:
    try:
        answer = asyncio.run(_decide(args))
    except ConfigurationError as exc:  # no kubeconfig: the user must pass one
        say(f"ankka approve: {exc}", stream=sys.stderr, level="ERROR")
        return 2
    except (_Refused, AnkkaError) as exc:
        say(f"ankka approve: {exc}", stream=sys.stderr, level="ERROR")
        return 1
    print(json.dumps(answer))
    return 0
