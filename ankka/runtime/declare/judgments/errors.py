"""The errors of judgments, under ankka's one root, by who must act.

- :class:`JudgmentFailed`: the provider could not give a trustworthy answer (an outage, an
  answer that does not fit the questions, a coverage under the floor). A model fault: it names
  the provider, and carries the coverage when that was the reason.
- :class:`JudgmentScriptFailed`: a scripted provider was asked something its script does not
  answer. A test's mistake, deliberately *not* a :class:`JudgmentFailed`: nothing treats it as
  an outage (no guardrail turns it into a fault to be retried); it fails now, naming the
  question.
- :class:`GuardrailCheckFailed`: a judged guardrail could not decide because its provider
  failed. It refused nothing and passed nothing; the request loop answers it 503 (504 when the
  provider timed out, 500 when there is no provider at all).
- :class:`LogprobsMissing`: the model cannot answer judgments (its server returns no
  logprobs); refused naming the model and the capability.
- :class:`OptionLabelSplit`: the model's tokenizer splits a label the provider would read as
  one token; the question cannot be measured on this model.
"""

from __future__ import annotations

from ankka._kernel.errors import (
    ConfigurationError,
    DependencyFailed,
    ModelError,
    ModelTimeout,
    Refused,
)
from ankka.runtime.records.messages import Usage

__all__ = [
    "GuardrailCheckFailed",
    "JudgmentFailed",
    "JudgmentReadError",
    "JudgmentScriptFailed",
    "LogprobsMissing",
    "OptionLabelSplit",
]


class JudgmentFailed(ModelError):
    """The judgment provider gave no trustworthy answer. ``coverage`` is set when the options
    held too little of the model's probability (below the floor)."""

    kind = "judgment_failed"
    status = 502

    def __init__(
        self,
        provider: str,
        detail: str,
        *,
        coverage: float | None = None,
        question: str | None = None,
    ) -> None:
        super().__init__(provider, detail)
        self.coverage = coverage
        self.question = question
        self.usage: Usage | None = None  # what the failed judgment spent, when known


class JudgmentScriptFailed(ConfigurationError):
    """A scripted judgment provider has no answer for a question it was asked."""

    kind = "judgment_script_failed"
    status = 500

    def __init__(self, message: str, *, question: str) -> None:
        super().__init__(message)
        self.question = question


class JudgmentReadError(ConfigurationError):
    """A judgment was read as a question it does not hold, or as the wrong kind."""

    kind = "judgment_read_error"


class LogprobsMissing(Refused):
    """The model's server returns no logprobs, so it cannot answer judgments."""

    kind = "model_lacks_capability"

    def __init__(self, *, provider: str, model: str, sent: bool) -> None:
        how = (
            "its answer carried no logprobs"
            if sent
            else "its capabilities do not include it; the request was not sent"
        )
        super().__init__(
            f"model {model!r} cannot answer judgments: it lacks the capability 'logprobs' "
            f"({how}). Use a server that returns logprobs (llama.cpp, vLLM, Ollama 0.12.11+)",
            by=f"the judgment provider {provider!r}",
        )
        self.provider = provider
        self.model = model


class OptionLabelSplit(ConfigurationError):
    """A label the model must write as one token is split by its tokenizer."""

    kind = "option_label_split"


class GuardrailCheckFailed(DependencyFailed):
    """A judged guardrail could not decide: it refused nothing and passed nothing."""

    kind = "guardrail_check_failed"
    status = 503

    def __init__(self, guardrail: str, detail: str, *, cause: BaseException | None) -> None:
        super().__init__(f"guardrail {guardrail!r} could not decide: {detail}")
        self.guardrail = guardrail
        if isinstance(cause, ModelTimeout):
            self.status = 504
            self.kind = "guardrail_check_timed_out"
        elif cause is None or isinstance(cause, ConfigurationError | Refused):
            self.status = 500  # nothing to wait for: the service's configuration must change
