"""The custom resources' spec and status: Agent, Task, Team, InstallationModel
(``ankka.dev/v1alpha1``).

These pydantic classes are the one definition of the resources' shape: ``ankka.api.crdgen``
generates ``crds/*.yaml`` from them (a test fails when the committed files drift), and the
operator parses what the API server hands it with them. They describe the wire (camelCase keys,
as Kubernetes writes them) and hold no behaviour beyond the checks a schema can express.
"""

from __future__ import annotations

import enum
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ankka.api.access import AgentAccess, Rights
from ankka.api.pods import EnvVar, PodOverlay
from ankka.api.stores import PostgresKeys, PostgresStore, SqliteStore, SslMode, Store
from ankka.api.wire import DNS_LABEL, SecretKeyRef
from ankka.api.wire import Wire as _Wire

__all__ = [
    "GROUP",
    "VERSION",
    "Agent",
    "AgentAccess",
    "AgentCaller",
    "AgentModel",
    "AgentSpec",
    "AgentStatus",
    "Compaction",
    "Condition",
    "ConditionStatus",
    "EnvVar",
    "HostedPreset",
    "InstallationModel",
    "InstallationModelSpec",
    "InstallationModelStatus",
    "LabelSelector",
    "McpApproval",
    "McpHeader",
    "McpServer",
    "ModelEndpoint",
    "ModelServer",
    "Printer",
    "RemoteA2AAgent",
    "Resource",
    "Rights",
    "PostgresKeys",
    "PostgresStore",
    "SecretKeyRef",
    "SqliteStore",
    "SslMode",
    "Store",
    "ServerKind",
    "Task",
    "TaskPhase",
    "TaskSpec",
    "TaskAttachment",
    "TaskStatus",
    "TaskTokens",
    "Team",
    "TeamAllowance",
    "TeamBudget",
    "TeamCounts",
    "TeamPhase",
    "TeamSpec",
    "TeamStatus",
    "AgentRuntime",
]

GROUP = "ankka.dev"
VERSION = "v1alpha1"

_DNS_LABEL = DNS_LABEL
# A model's name as a service's code spells it (``gpt-4.1``, ``llama3.2:3b``, ``Qwen/Qwen3-8B``):
# any name that works under ``ankka serve``, i.e. one holding a letter or a digit and no control
# character. ``ankka._kernel.model_names`` maps it to its ``ANKKA_MODEL_<NAME>_*`` variables.
_MODEL_NAME = r"^[^\x00-\x1f\x7f]*[A-Za-z0-9][^\x00-\x1f\x7f]*$"
_MODEL_NAME_MAX = 128


class ConditionStatus(enum.StrEnum):
    """True, False or Unknown."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(_Wire):
    """A Kubernetes-style condition, e.g. Served or ModelsServed."""

    type: str
    """What the condition is about: Served, Deployed, ModelsServed, Ready or Valid."""
    status: ConditionStatus
    reason: str = ""
    """One CamelCase word for why, e.g. Probed, ProbeFailed, AwaitingModels."""
    message: str = ""
    """What happened, in words, for a person reading kubectl describe."""
    last_transition_time: str | None = Field(
        default=None, json_schema_extra={"format": "date-time"}
    )
    """When status last changed."""


class ServerKind(enum.StrEnum):
    """Model servers the operator knows how to deploy."""

    OLLAMA = "ollama"
    LLAMACPP = "llamacpp"
    VLLM = "vllm"


class EndpointKind(enum.StrEnum):
    """How an adopted endpoint is probed (the gateway's upstream kinds)."""

    OLLAMA = "ollama"
    LLAMACPP = "llamacpp"
    OPENAI = "openai"


class ModelServer(PodOverlay):
    """A server the operator deploys as a Deployment and a Service, with the pod settings a GPU
    pool needs (resources, tolerations, node selector, affinity ...)."""

    kind: ServerKind
    image: str = Field(min_length=1)
    """The server's container image, e.g. ollama/ollama:0.9."""
    replicas: int = Field(default=1, ge=0, le=100)
    """How many server pods run."""
    port: int | None = Field(default=None, ge=1, le=65535, description="Defaults by kind.")
    args: list[str] = Field(default_factory=list)
    """The container's arguments; by default the kind's own, serving spec.model on the port."""
    env: list[EnvVar] = Field(default_factory=list, max_length=64)
    """More environment variables of the server container (a value, or valueFrom a Secret's or
    ConfigMap's key)."""


class ModelEndpoint(_Wire):
    """An existing server to adopt instead of deploying one."""

    url: str = Field(pattern=r"^https?://", description="Base URL, e.g. http://ollama:11434.")
    kind: EndpointKind = EndpointKind.OLLAMA


class InstallationModelSpec(_Wire):
    """A model the platform serves through its gateway: a server to deploy, or one to adopt."""

    model: str = Field(min_length=1, description="The model's name on its server.")
    server: ModelServer | None = None
    """A server for the operator to deploy (a Deployment and a Service); or set endpoint."""
    endpoint: ModelEndpoint | None = None
    """An existing server to adopt; or set server."""
    capabilities: list[str] = Field(
        default_factory=list, description="Declared capabilities (vllm and openai endpoints)."
    )
    max_concurrency: int | None = Field(default=None, ge=1)
    """Most requests the gateway sends this model at once; unlimited when unset. Divided
    among the gateway's replicas (each takes its share, at least 1; docs/gateway.md)."""
    max_in_flight_per_caller: int | None = Field(default=None, ge=1)
    """Most requests one caller (an Agent) has in flight on this model at once (429
    caller_busy past it); unlimited when unset. Divided among the gateway's replicas."""
    tokens_per_minute_per_caller: int | None = Field(default=None, ge=1)
    """Most tokens one caller spends on this model in a sliding minute (429
    caller_over_token_budget past it); unlimited when unset. Divided among the gateway's
    replicas."""
    probe_interval_seconds: int = Field(default=60, ge=1, le=86400)
    """How often a served model is probed again (an unserved one is probed every tick)."""


class InstallationModelStatus(_Wire):
    """What the operator last found: whether the model is served, and what it can do."""

    conditions: list[Condition] = Field(default_factory=list)
    """Deployed (its server rendered or adopted) and Served (the last probe answered)."""
    url: str | None = None
    """Where the gateway reaches the model."""
    capabilities: list[str] = Field(default_factory=list)
    """What the last probe found: completion, tools, thinking, vision and more."""
    thinking_values: list[str] = Field(default_factory=list)
    """The reasoning-effort values the model accepts."""
    context_length: int | None = None
    """The model's context window in tokens, as its server reports it."""
    last_probe_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    """When the model was last probed."""
    observed_generation: int | None = None
    """The spec generation this status describes."""


class HostedPreset(enum.StrEnum):
    """A hosted provider: anthropic, openai, openai-compatible or ollama."""

    ANTHROPIC = "anthropic"
    OPENAI = "openai"
    OPENAI_COMPATIBLE = "openai-compatible"
    OLLAMA = "ollama"


class AgentModel(_Wire):
    """One named model of an Agent: an InstallationModel, or a hosted preset with a key.

    address and apiKeySecretRef are accepted by the schema even next to installation, so that
    the operator can fail such an Agent with a status that names the field (an installation
    model takes its address and identity from the platform).
    """

    name: str = Field(pattern=_MODEL_NAME, max_length=_MODEL_NAME_MAX)
    """The name the service's code asks for, as it spells it (e.g. gpt-4.1, llama3.2:3b); becomes
    ANKKA_MODEL_<NAME>_* with every character but letters and digits written _ (gpt-4.1 is
    ANKKA_MODEL_GPT_4_1_*). Two names that become one <NAME> are refused.
    """
    installation: str | None = Field(default=None, description="An InstallationModel's name.")
    preset: HostedPreset | None = None
    """A hosted provider's preset; with model and apiKeySecretRef. Not with installation."""
    model: str | None = None
    """The model's name at the hosted provider, e.g. claude-sonnet-4-5."""
    address: str | None = None
    """The provider's base URL (openai-compatible, ollama). Not with installation: the platform's
    gateway is its address.
    """
    api_key_secret_ref: SecretKeyRef | None = None
    """The Secret key holding the provider's API key. Not with installation: the platform's
    certificate is its identity.
    """


class McpHeader(_Wire):
    """A header sent with every request to an MCP server; its value is a Secret's key."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9-]*$",
        max_length=64,
        description="The header's name, e.g. Authorization (becomes ..._HEADER_AUTHORIZATION).",
    )
    secret_key_ref: SecretKeyRef
    """The Secret key holding the header's value."""


class McpApproval(_Wire):
    """Which of a server's tools need a decision before they run: all, or the named ones."""

    all: bool = False
    """Every tool of the server needs a decision."""
    tools: list[str] = Field(default_factory=list)
    """The tools, by name, that need a decision."""


class McpServer(_Wire):
    """An MCP server the agent's code lists by name; rendered as ANKKA_MCP_<NAME>_*."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=40)
    """The name the agent's code uses; becomes ANKKA_MCP_<NAME>_*."""
    url: str = Field(pattern=r"^https?://", description="The Streamable HTTP endpoint.")
    headers: list[McpHeader] = Field(default_factory=list)
    """Headers sent with every request to the server, each value from a Secret's key."""
    requires_approval: McpApproval | None = None
    """The server's tools that need a decision before they run."""


class Compaction(_Wire):
    """Compaction of the agents' sessions; overrides, field by field, what the code declares.

    Rendered on the runtime container as ``ANKKA_COMPACTION_LIMIT_CHARS``, ``_START_CHARS``,
    ``_KEEP_MESSAGES``, ``_MODEL`` and ``_INSTRUCTIONS``. An agent that declares no compaction
    is compacted when ``limitChars`` is set here.
    """

    limit_chars: int | None = Field(
        default=None,
        ge=100,
        description="What the model is sent from memory stays under this many characters.",
    )
    start_chars: int | None = Field(
        default=None, ge=1, description="Compaction starts past this (default: 3/4 of the limit)."
    )
    keep_messages: int | None = Field(
        default=None, ge=0, le=10000, description="Recent messages kept verbatim."
    )
    model: str | None = Field(
        default=None,
        pattern=_MODEL_NAME,
        max_length=_MODEL_NAME_MAX,
        description="The named model that summarises.",
    )
    instructions: str | None = Field(
        default=None, min_length=1, max_length=20000, description="What the summariser is told."
    )


class AgentRuntime(_Wire):
    """Where the Agent's runtime is reached, when it is not the pods the operator renders."""

    address: str | None = Field(
        default=None,
        pattern=r"^https?://",
        description=(
            "The base URL of a runtime that runs outside the cluster (a development loop, or a "
            "cluster without pods): the operator hands this Agent's Tasks to it instead of to "
            "the Agent's Service. https:// (the runtime serves --tls-dir with this Agent's "
            "certificate Secret; the operator checks its identity, not its host name) or "
            "http:// (plain, for loopback only; the runtime then trusts callers as local)."
        ),
    )


class LabelSelector(_Wire):
    """Pods chosen by their labels, as in a NetworkPolicy's podSelector (matchLabels only)."""

    match_labels: dict[str, str] = Field(default_factory=dict, max_length=32)
    """Labels a pod must carry, every one of them; empty chooses every pod of the namespace."""


class AgentCaller(_Wire):
    """Pods allowed to reach the Agent's runtime over the network (its NetworkPolicy's ingress).

    Name another Agent (agent), or pods by their labels (podSelector), or a whole namespace
    (namespace alone). namespace defaults to the Agent's own. The gateway and the operator in
    the platform namespace are always allowed; this list adds to them.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!(has(self.agent) && has(self.podSelector))",
                    "message": "a caller names an agent or a podSelector, not both",
                },
                {
                    "rule": "has(self.agent) || has(self.podSelector) || has(self.__namespace__)",
                    "message": "a caller names an agent, a podSelector or a namespace",
                },
            ]
        }
    )

    namespace: str | None = Field(default=None, pattern=_DNS_LABEL, max_length=63)
    """The callers' namespace (default: the Agent's); alone, every pod in it may call."""
    agent: str | None = Field(default=None, pattern=_DNS_LABEL, max_length=63)
    """Another Agent, by name, whose runtime pods may call."""
    pod_selector: LabelSelector | None = None
    """Pods, chosen by their labels, that may call."""


class RemoteA2AAgent(_Wire):
    """An agent of another platform this Agent's agents may delegate to, over A2A v1.0."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=40)
    """How the agents name it (its delegation tool is named after it)."""
    card_url: str = Field(pattern=r"^https?://", max_length=2048)
    """Its agent card, e.g. https://agents.example/.well-known/agent-card.json."""
    token_secret: SecretKeyRef | None = None
    """A bearer token to send it (mounted as a file, read at each use), if it wants one."""


class AgentDelegation(_Wire):
    """Another Agent (in this namespace) whose agents this Agent's agents may delegate to
    (docs/delegation.md, Across runtimes)."""

    agent: str = Field(pattern=_DNS_LABEL, max_length=63)
    """The Agent resource whose runtime serves them."""
    serves: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=128)]] = (
        Field(default_factory=list, max_length=32)
    )
    """The agents, as the code's Delegate names them, that runtime serves (default: the
    Agent's own name)."""


class AgentSpec(PodOverlay):
    """A service's agents: the image and module to run, the models they use, and the pod
    settings of their runtime (resources, env from Secrets, tolerations, ...)."""

    image: str = Field(min_length=1)
    """The runtime's container image: ankka and the service's module, e.g. localhost/shop/agents:1.
    """
    module: str = Field(min_length=1, description="The Python module declaring the agents.")
    replicas: int = Field(default=1, ge=0, le=100)
    """How many runtime pods run once every model is served (none while held)."""
    models: list[AgentModel] = Field(default_factory=list)
    """The named models the service's agents use; each becomes ANKKA_MODEL_<NAME>_* on the runtime.
    """
    mcp_servers: list[McpServer] = Field(default_factory=list)
    """The MCP servers the agents reach by name."""
    env: list[EnvVar] = Field(default_factory=list, max_length=128)
    """More environment variables for the runtime container: a value, or valueFrom a Secret's
    or a ConfigMap's key (the value never appears in the Deployment). Names the operator sets
    (ANKKA_MODULE, the models' and MCP servers' settings ...) are refused."""
    compaction: Compaction | None = None
    """Compaction of the agents' sessions, overriding what the code declares."""
    runtime: AgentRuntime | None = Field(
        default=None, description="How the operator reaches the runtime (see runtime.address)."
    )
    access: AgentAccess | None = None
    """Who besides a session's creator and the platform may read, write or decide for the
    sessions, rendered as the runtime's --access-file (ankka approve's delegate, the
    <agent>-approver ServiceAccount, may always decide)."""
    store: Store | None = None
    """Where the runtime keeps sessions, tasks and approvals: SQLite on a volume (one replica)
    or PostgreSQL from a Secret. Without it: the chart's shared PostgreSQL when it has one
    (store.postgres), else SQLite on an emptyDir."""
    callers: list[AgentCaller] = Field(default_factory=list, max_length=32)
    """Who else may reach the runtime's port over the network, besides the platform's gateway
    and operator (rendered as the Agent's NetworkPolicy). Callers still identify themselves to
    the runtime (certificate or token).
    """
    remote_agents: list[RemoteA2AAgent] = Field(default_factory=list, max_length=32)
    """Agents of other platforms (A2A) the agents may delegate to (docs/a2a.md)."""
    delegates_to: list[AgentDelegation] = Field(default_factory=list, max_length=32)
    """Other Agents whose agents these may delegate to: rendered as this runtime's
    ANKKA_PEERS, as the other's ANKKA_DELEGATORS, and as a caller in the other's
    NetworkPolicy."""


class AgentStatus(_Wire):
    """What the operator did with the Agent and what its pods do: staged conditions and a phase."""

    phase: str | None = Field(default=None, description="Failed, Held, Progressing or Ready.")
    conditions: list[Condition] = Field(default_factory=list)
    """Rendered (its children are applied, or InvalidSpec naming the field), ModelsServed (every
    InstallationModel it names is served), Available (its Deployment has the desired replicas
    available) and Ready (all three; kubectl wait --for=condition=Ready waits for the pods).
    """
    ready_replicas: int | None = Field(default=None, ge=0)
    """Runtime pods available, as the Agent's Deployment counts them."""
    desired_replicas: int | None = Field(default=None, ge=0)
    """spec.replicas: the runtime pods asked for (none run while the Agent is held)."""
    replicas_ready: str | None = None
    """readyReplicas/desiredReplicas, e.g. 1/2: the REPLICAS column of kubectl get agents."""
    awaiting_models: list[str] = Field(default_factory=list)
    """The InstallationModels not yet served that hold this Agent."""
    certificate_not_after: str | None = Field(
        default=None, json_schema_extra={"format": "date-time"}
    )
    """When the runtime's current certificate expires (it is renewed at two thirds of its life)."""
    certificate_renew_at: str | None = Field(
        default=None, json_schema_extra={"format": "date-time"}
    )
    """When the operator renews the runtime's certificate (two thirds of its life)."""
    certificate_authority: str | None = Field(default=None, max_length=8192)
    """The platform CA's certificate (PEM, public): ankka approve checks the runtime's
    certificate with it."""
    certificate_profile: str | None = Field(default=None, max_length=64)
    """A digest of what the certificate was issued for (the platform CA and its names): the
    operator judges the certificate by it and never reads the Secret."""
    a2a_card_url: str | None = None
    """The A2A agent card of the runtime's agent (the only one, or the one it serves by default)
    at its Service's address (docs/a2a.md)."""
    observed_generation: int | None = None
    """The spec generation this status describes."""


class TaskPhase(enum.StrEnum):
    """Pending, Running, Completed, Failed or Cancelled (the last three are final)."""

    PENDING = "Pending"
    RUNNING = "Running"
    AWAITING_APPROVAL = "AwaitingApproval"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


class TaskAttachment(_Wire):
    """Content that travels with a Task: inline ``text``, or a ``ref`` a tool can fetch."""

    name: str = Field(default="", max_length=128, description="What the model calls it.")
    text: str | None = Field(default=None, max_length=200_000, description="Inline content.")
    ref: str | None = Field(
        default=None, max_length=2048, description="A reference one of the agent's tools fetches."
    )


class TaskSpec(_Wire):
    """A piece of autonomous work for an Agent: its type, instructions, attachments and
    dependencies. The budget is the runtime's (the task type's, as the agent accepts it)."""

    agent: str = Field(
        pattern=_DNS_LABEL, description="The Agent (resource) whose runtime works the task."
    )
    autonomous_agent: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description=(
            "The autonomous agent, as its module declares it, that works the task; defaults to "
            "the Agent's name."
        ),
    )
    type: str = Field(
        min_length=1,
        max_length=128,
        description="The task type's wire name: it gives the result's schema, rules and budget.",
    )
    instructions: str = Field(
        min_length=1, max_length=100_000, description="What the task asks, shown to the model."
    )
    attachments: list[TaskAttachment] = Field(
        default_factory=list, max_length=32, description="Content shown with the instructions."
    )
    depends_on: list[str] = Field(
        default_factory=list,
        max_length=64,
        description=(
            "Other Tasks in this namespace that must complete first; their results are shown "
            "to the model. A dependency that fails or is cancelled cancels this Task."
        ),
    )
    instance: str | None = Field(
        default=None,
        max_length=128,
        description=(
            "The runtime instance that works the task, one task at a time in order; without "
            "one the task gets an instance of its own."
        ),
    )


class TaskTokens(_Wire):
    """Tokens a task used, by kind."""

    input: int = Field(default=0, ge=0)
    """Input tokens."""
    output: int = Field(default=0, ge=0)
    """Output tokens."""
    cache_read: int = Field(default=0, ge=0)
    """Input tokens read from the provider's prompt cache."""
    cache_write: int = Field(default=0, ge=0)
    """Input tokens written to the provider's prompt cache."""


class PendingApproval(_Wire):
    """A tool call of the Task that waits for a person's decision."""

    id: str = Field(description="Decide with: ankka approve TASK ID --digest DIGEST.")
    tool: str = Field(description="The tool the call would run.")
    digest: str = Field(description="What the decider confirms: SHA-256 of the call.")
    expires_at: str | None = Field(default=None, description="When it expires undecided.")


class TaskStatus(_Wire):
    """A bounded summary of the runtime's record; the history stays in the runtime's journal."""

    phase: TaskPhase | None = Field(
        default=None,
        description="Pending, Running, AwaitingApproval, Completed, Failed or Cancelled.",
    )
    state: str | None = Field(default=None, description="The runtime's own state of the task.")
    iterations_used: int = Field(default=0, ge=0)
    """Model calls (iterations) spent on the task so far."""
    iteration_budget: int | None = Field(default=None, ge=1)
    """The most iterations the task may use, as the runtime's agent accepts its type."""
    tokens: TaskTokens | None = None
    """Tokens used so far."""
    result: dict[str, Any] | None = Field(
        default=None, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}
    )
    """The result, as the task type's schema describes it."""
    reason: str | None = None
    """Why the task failed, was cancelled or had its result rejected, in words."""
    last_event: int | None = Field(
        default=None, description="The runtime record's version when this status was written."
    )
    runtime_task: str | None = Field(default=None, description="The task's id at the runtime.")
    parent: str | None = Field(default=None, max_length=128)
    """The runtime task this one is a delegated child of (none for a Task made here)."""
    children: list[str] = Field(default_factory=list, max_length=64)
    """The runtime tasks it delegated, in the order they were made (the first 64)."""
    approvals: list[PendingApproval] = Field(
        default_factory=list, max_length=64, description="Tool calls waiting for a decision."
    )
    conditions: list[Condition] = Field(default_factory=list)
    """Handed (the runtime accepted the task) and, while its Agent is held, why it waits."""
    observed_generation: int | None = None
    """The spec generation this status describes."""


class TeamSpec(_Wire):
    """A team of an Agent's module, followed here: its backlog's counts are mirrored in
    status. The team itself (its lead, members, budget) is declared in the module."""

    agent: str = Field(
        pattern=_DNS_LABEL, description="The Agent (resource) whose runtime serves the team."
    )
    team: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$",
        description="The team's name in the Agent's module; defaults to the Team's name.",
    )


class TeamPhase(enum.StrEnum):
    """Waiting, Active or Failed."""

    WAITING = "Waiting"
    ACTIVE = "Active"
    FAILED = "Failed"


class TeamCounts(_Wire):
    """How many items of the backlog are in each state."""

    waiting: int = Field(default=0, ge=0)
    """Items whose dependencies have not all completed."""
    ready: int = Field(default=0, ge=0)
    """Items a member may claim."""
    claimed: int = Field(default=0, ge=0)
    """Items a member instance holds and works."""
    completed: int = Field(default=0, ge=0)
    """Items done, with their results."""
    failed: int = Field(default=0, ge=0)
    """Items that failed."""
    cancelled: int = Field(default=0, ge=0)
    """Items cancelled (or whose dependency failed or was cancelled)."""


class TeamAllowance(_Wire):
    """One of the backlog's budgets."""

    limit: int | None = Field(default=None, ge=0)
    """The team's budget (none: unlimited)."""
    used: int = Field(default=0, ge=0)
    """What the backlog's tasks spent."""
    reserved: int = Field(default=0, ge=0)
    """Granted to tasks at work and not spent yet (given back when they end)."""


class TeamBudget(_Wire):
    """The backlog's budget: one covers every item on it."""

    iterations: TeamAllowance | None = None
    """Iterations of the items' tasks."""
    tokens: TeamAllowance | None = None
    """Input and output tokens of the items' tasks."""


class TeamStatus(_Wire):
    """The backlog's counts as the team's runtime last answered them; the items stay in the
    runtime's store."""

    phase: TeamPhase | None = Field(
        default=None,
        description=(
            "Active (the runtime serves the team; counts are its backlog's), Waiting (its "
            "Agent or runtime is not there yet) or Failed (the Agent failed, or its runtime "
            "serves no such team)."
        ),
    )
    team: str | None = Field(default=None, description="The team's name at the runtime.")
    items: int = Field(default=0, ge=0, description="Items on the backlog.")
    counts: TeamCounts | None = None
    """Items by state."""
    budget: TeamBudget | None = None
    """The backlog's budget and its use, from the runtime's summary (absent when the runtime
    has no summary route: an older runtime's listing carries no budget)."""
    reason: str | None = Field(default=None, max_length=1024)
    """Why the team waits or failed, in words."""
    conditions: list[Condition] = Field(default_factory=list)
    """Served: whether the Agent's runtime answered the team's backlog, and if not why."""
    observed_generation: int | None = None
    """The spec generation this status describes."""


class Printer(BaseModel):
    """One printer column of ``kubectl get``."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: str
    json_path: str
    priority: int = 0


class Resource(BaseModel):
    """What every custom resource declares beyond its spec and status."""

    model_config = ConfigDict(frozen=True)

    kind: ClassVar[str]
    plural: ClassVar[str]
    short_names: ClassVar[tuple[str, ...]]
    printers: ClassVar[tuple[Printer, ...]]
    spec_rules: ClassVar[tuple[tuple[str, str], ...]] = ()
    spec_type: ClassVar[type[_Wire]]
    status_type: ClassVar[type[_Wire]]


_AGE = Printer(name="Age", type="date", json_path=".metadata.creationTimestamp")


def _condition(kind: str) -> str:
    return f'.status.conditions[?(@.type=="{kind}")].status'


def _condition_reason(kind: str) -> str:
    return f'.status.conditions[?(@.type=="{kind}")].reason'


class InstallationModel(Resource):
    """A model installed in the platform, served to every Agent through the gateway."""

    kind = "InstallationModel"
    plural = "installationmodels"
    short_names = ("im", "imodel")
    printers = (
        Printer(name="Model", type="string", json_path=".spec.model"),
        Printer(name="Server", type="string", json_path=".spec.server.kind"),
        Printer(name="Deployed", type="string", json_path=_condition("Deployed")),
        Printer(name="Served", type="string", json_path=_condition("Served")),
        Printer(name="Capabilities", type="string", json_path=".status.capabilities", priority=1),
        Printer(name="Context", type="integer", json_path=".status.contextLength", priority=1),
        _AGE,
    )
    spec_rules = (
        (
            "has(self.server) != has(self.endpoint)",
            "set exactly one of spec.server (a server to deploy) or spec.endpoint (one to adopt)",
        ),
    )
    spec_type = InstallationModelSpec
    status_type = InstallationModelStatus


class Agent(Resource):
    """A service's agents, run as runtime pods; held until every model they use is served."""

    kind = "Agent"
    plural = "agents"
    short_names = ("ag",)
    printers = (
        Printer(name="Image", type="string", json_path=".spec.image"),
        Printer(name="Replicas", type="string", json_path=".status.replicasReady"),
        Printer(name="Phase", type="string", json_path=".status.phase"),
        Printer(name="Ready", type="string", json_path=_condition("Ready")),
        Printer(name="ModelsServed", type="string", json_path=_condition("ModelsServed")),
        Printer(name="Reason", type="string", json_path=_condition_reason("Ready"), priority=1),
        _AGE,
    )
    spec_type = AgentSpec
    status_type = AgentStatus


class Task(Resource):
    """Autonomous work for an Agent, with an iteration budget and a typed result."""

    kind = "Task"
    plural = "tasks"
    short_names = ("tk",)
    printers = (
        Printer(name="Agent", type="string", json_path=".spec.agent"),
        Printer(name="Type", type="string", json_path=".spec.type"),
        Printer(name="Phase", type="string", json_path=".status.phase"),
        Printer(name="Iterations", type="integer", json_path=".status.iterationsUsed"),
        Printer(name="Budget", type="integer", json_path=".status.iterationBudget"),
        Printer(name="Parent", type="string", json_path=".status.parent"),
        Printer(name="Approval", type="string", json_path=".status.approvals[0].id", priority=1),
        Printer(name="Reason", type="string", json_path=".status.reason", priority=1),
        _AGE,
    )
    spec_rules = (("self == oldSelf", "a Task's spec cannot change; create a new Task instead"),)
    spec_type = TaskSpec
    status_type = TaskStatus


class Team(Resource):
    """A team of an Agent's module (a lead and members over a backlog), its backlog's counts
    shown by kubectl get teams."""

    kind = "Team"
    plural = "teams"
    short_names = ("tm",)
    printers = (
        Printer(name="Agent", type="string", json_path=".spec.agent"),
        Printer(name="Phase", type="string", json_path=".status.phase"),
        Printer(name="Ready", type="integer", json_path=".status.counts.ready"),
        Printer(name="Claimed", type="integer", json_path=".status.counts.claimed"),
        Printer(name="Done", type="integer", json_path=".status.counts.completed"),
        Printer(name="Failed", type="integer", json_path=".status.counts.failed"),
        Printer(name="Iterations", type="integer", json_path=".status.budget.iterations.used"),
        Printer(name="Team", type="string", json_path=".status.team", priority=1),
        Printer(name="Tokens", type="integer", json_path=".status.budget.tokens.used", priority=1),
        Printer(name="Waiting", type="integer", json_path=".status.counts.waiting", priority=1),
        Printer(name="Cancelled", type="integer", json_path=".status.counts.cancelled", priority=1),
        Printer(name="Reason", type="string", json_path=".status.reason", priority=1),
        _AGE,
    )
    spec_type = TeamSpec
    status_type = TeamStatus
