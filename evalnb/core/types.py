"""The types every layer shares (in the spirit of simple-evals' ``types.py``).

A request and its completion, the retry policy, a call and its stored record, the statuses
a response or a verdict can have, a declared metric, a run's item results, and the evidence
a reviewer reads for one item. The runner, the configuration, the providers and the
benchmarks depend on this module, not on each other. It imports nothing heavy (numpy and
pandas appear in annotations only). It is one module on purpose: these are declarations
only (no behaviour beyond a record's fields), and one place for them is what keeps the layers
from importing each other.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    import numpy as np

# --- a request, its completion ----------------------------------------------------------------

CompletionStatus = Literal["ok", "refused", "empty"]
ErrorKind = Literal["transient", "permanent", "endpoint"]
"""``transient``: retried, then resumable; ``permanent``: the item's own final failure (a
context overflow, a bad request); ``endpoint``: the endpoint refused for reasons of its own
(authentication, permission, an unknown model or route, billing or quota), which
says nothing about the item: its calls stop, the item stays unanswered."""

FAILED_ENDPOINT = "failed_endpoint"
"""The status of a call the endpoint refused for reasons of its own. Such a line is
kept in the stage's store (what was sent, the error, the attempts), but it never stands for
its item: :meth:`evalnb.records.stores.JsonlStore.load` leaves it out, so the item is pending,
never scored, and the next pass calls it again."""


TurnRole = Literal["user", "assistant"]


@dataclass(frozen=True)
class Turn:
    """One earlier turn of a conversation: what the user said or what the model answered.
    The system prompt is not a turn (``ChatRequest.system``): Anthropic and Gemini carry it
    apart from the messages, so it is kept apart everywhere."""

    role: TurnRole
    content: str


@dataclass(frozen=True)
class ChatRequest:
    """One user turn: ``prompt``, the output budget ``max_tokens`` (sent under the endpoint's
    ``token_param``), ``temperature`` (None: the field is not sent at all), an optional
    ``system`` prompt and an optional ``json_schema`` for structured output where the
    provider supports it.

    ``history``: the conversation before this turn, oldest first, as the providers' own
    message lists carry it (an assistant turn is the model's answer, not text pasted into a
    user message). It starts with a user turn and alternates, ending with an assistant turn,
    so that ``prompt`` (always the last user turn) follows it: the one shape every API
    accepts. Empty (the default) is the single-turn request every benchmark sent before."""

    prompt: str
    max_tokens: int
    temperature: float | None = None
    system: str | None = None
    json_schema: dict[str, Any] | None = None
    history: tuple[Turn, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.history, tuple):   # a list given: kept hashable and immutable
            object.__setattr__(self, "history", tuple(self.history))
        for i, turn in enumerate(self.history):
            expected = "user" if i % 2 == 0 else "assistant"
            if not isinstance(turn, Turn) or turn.role != expected:
                got = turn.role if isinstance(turn, Turn) else type(turn).__name__
                raise ValueError(f"ChatRequest.history[{i}]: expected role {expected!r}, got {got!r} (the history "
                                 "alternates user, assistant, ... and ends with an assistant turn)")
        if len(self.history) % 2:
            raise ValueError("ChatRequest.history: ends with a user turn; the last user turn is the prompt")

    def turns(self) -> tuple[Turn, ...]:
        """The whole conversation as sent: the history, then ``prompt`` as the last user turn."""
        return (*self.history, Turn("user", self.prompt))

    def text(self) -> str:
        """Everything the request sends as text (system, every turn): what its length is
        estimated from."""
        return "\n".join([*([self.system] if self.system else []), *(t.content for t in self.turns())])


@dataclass(frozen=True)
class Usage:
    """Reported tokens. ``output_tokens`` includes reasoning tokens wherever they are billed as
    output; ``reasoning_tokens`` is their share where the provider reports it.
    ``estimated``: the reply reported no usage (a stream from a server that ignores
    ``include_usage``), so the counts are the characters-per-token estimate of the prompt and
    the returned text, never a silent zero."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int | None = None
    estimated: bool = False   # the reply reported none: counted from the texts (providers.retry.usage_or_estimate)


@dataclass(frozen=True)
class Latency:
    """One call's timing (its final attempt): ``total_s`` from sending to the last byte;
    where streamed, ``first_token_s`` from sending to the first text or reasoning token and
    ``output_tokens_per_s`` the reported output tokens over the first token to the last."""

    total_s: float
    first_token_s: float | None = None
    output_tokens_per_s: float | None = None
    server_s: float | None = None   # the server's own time where it reports it (llama.cpp's timings):
                                    # total_s also holds the queue in front of a busy server


@dataclass(frozen=True)
class Completion:
    """What an endpoint returned for one request, as every provider reads it: ``text`` (the
    answer, never the reasoning), ``status`` (``ok``, ``refused`` or ``empty``), and metadata.
    A benchmark's ``interpret`` gets this and returns the record's fields."""

    text: str
    status: CompletionStatus
    finish_reason: str | None = None
    usage: Usage | None = None
    model_route: str | None = None       # the model the endpoint says answered
    request_id: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)   # other provider metadata
    reasoning: str | None = None         # returned apart from the answer: never the text
    think_block: str | None = None       # the text began with <think>...</think>: "kept" or "stripped"
    latency: Latency | None = None
    streamed: bool = False               # transport only: the same completion either way


@dataclass(frozen=True)
class RetryPolicy:
    """The one retry policy: at most ``max_retries`` retries after the first attempt."""

    max_retries: int = 5
    base_delay: float = 1.0        # seconds before the first retry, doubled each time
    max_delay: float = 60.0        # cap on an exponential wait
    retry_after_cap: float = 60.0  # cap on a server's Retry-After

    def wait(self, retry: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        if retry_after is not None:
            return min(retry_after, self.retry_after_cap)
        ceiling = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        return ceiling / 2 + rng.uniform(0, ceiling / 2)   # "equal jitter"


# --- a call and its record ------------------------------------------------------------------------

Record: TypeAlias = dict[str, Any]
"""One stored line of a stage (``generate.jsonl``, ``judge.jsonl``): ``key``, ``endpoint``,
``status`` and ``text`` (the completion's text, or None), then the benchmark's own fields."""


@dataclass(frozen=True)
class Prepared:
    """A call made ready: a request to send, or (``request=None``) a final record as is.

    ``fields`` go into the record. With a request, they are the benchmark's own fields
    (``task_id`` ...) and ``interpret`` gives ``status`` and ``text``; without one, they are the
    whole record and must hold ``status`` and ``text`` themselves (an item out of context, an
    answer read from a file)."""

    request: ChatRequest | None
    fields: Mapping[str, Any] = field(default_factory=dict)


def answer_fields(completion: Completion) -> dict[str, Any]:
    """The default reading of a completion: its status and text."""
    return {"status": completion.status, "text": completion.text}


@dataclass(frozen=True)
class Call:
    """One call of a stage. ``key``: unique in the stage (the store's key; a resume skips keys
    whose record is done). ``endpoint``: ``"model"`` for the contestant, ``"judge1"`` ... for the
    judges. ``prepare()``: run when a worker takes the call (read a document here, not before);
    returns a :class:`Prepared`. ``interpret(completion)``: the record's fields from the
    completion (default :func:`answer_fields`); it must return ``status`` and ``text`` (see
    ``Record``). Neither may call a provider: the stages make the call.

    ``needs`` and ``prepare_after``: a chained call (made with ``chained``), which needs the
    records of other calls of the same stage (the keys in ``needs``) and is prepared from them
    by ``prepare_after(records)`` once they are all done; its ``prepare`` raises ``NotYet``.
    The stage makes it in a later round of the same pass, never before, and never when a call
    it needs did not succeed.

    ``sample``: which draw of the same request this call is (a repeat, an autorater's run),
    part of the response cache's key so that K draws stay K calls. ``cached``: False for a
    call whose reply must always be fresh (the response cache neither reads nor keeps it)."""

    key: str
    endpoint: str                                   # which provider of the pool runs it
    prepare: Callable[[], Prepared]                 # runs when a worker takes the call
    interpret: Callable[[Completion], dict[str, Any]] = answer_fields
    # A chained call (evalnb.core.chains): the keys of the same stage's calls whose records it
    # needs, and how it is prepared from them; made only once they are all done.
    needs: tuple[str, ...] = ()
    prepare_after: Callable[[Mapping[str, Record]], Prepared] | None = None
    sample: int = 1
    cached: bool = True


# --- statuses ------------------------------------------------------------------------------------

class Status(StrEnum):
    """What became of an item's response (the long-document protocol's statuses, and ``missing`` for a file-fed contestant)."""

    OK = "ok"
    OUT_OF_CONTEXT = "out_of_context"       # longer than the model's cap: sent to nobody
    REFUSED = "refused"
    EMPTY = "empty"
    MISSING = "missing"                     # no prediction or trace for the item
    FAILED_PERMANENT = "failed_permanent"
    FAILED_TRANSIENT = "failed_transient"   # resumable
    PENDING = "pending"                     # not generated yet


class JudgeStatus(StrEnum):
    """What became of one judge call: ``ok`` is a verdict; everything else is resumable."""

    OK = "ok"
    FAILED_PARSE = "failed_parse"           # a reply without a usable verdict (never a zero)
    JUDGE_REFUSED = "judge_refused"
    JUDGE_EMPTY = "judge_empty"
    FAILED_TRANSIENT = "failed_transient"
    FAILED_PERMANENT = "failed_permanent"
    PENDING = "pending"


# --- declared metrics and a run's item results ----------------------------------------------------

MetricFn: TypeAlias = "Callable[[np.ndarray, Mapping[str, np.ndarray]], np.ndarray]"
ChannelMetricFn: TypeAlias = "Callable[..., np.ndarray]"
"""A metric function that also reads named per-item channels: ``fn(values, strata, **channels)``,
each channel an array shaped like ``values`` (a :class:`Metric` with ``channels`` set)."""


@dataclass(frozen=True)
class Metric:
    """One number a benchmark reports, computed from a matrix of item scores.

    ``fn(values, strata)`` takes ``values`` of shape ``(..., repeats, items)`` (NaN where an
    item has no score of its own) and ``strata`` (stratum label -> the column indices of its
    items), and returns the metric over the last two axes, shape ``(...)``. Resampling keeps
    every column in its stratum, so the same ``strata`` hold for every bootstrap replicate.

    ``channels`` names the per-item channels (:attr:`ItemResults.channels`) the metric reads
    besides ``values``: each is passed to ``fn`` as a keyword argument of that name, an array
    shaped like ``values`` and resampled with it (the same items, the same repeats), so
    ``fn(values, strata, correct=..., attempted=...)``. A ratio of two channels is
    :func:`evalnb.stats.metrics.ratio`.
    """

    name: str                 # short id: a column of the leaderboard, a key of scores.json "metrics"
    label: str                # what a reader is told it is
    fn: MetricFn | ChannelMetricFn
    headline: bool = False    # shown first, in the headline table and the leaderboard figure
    partial: bool = False     # defined on an incomplete run too (else null until complete)
    interval: bool = True     # a bootstrap interval makes sense (not for a count)
    channels: tuple[str, ...] = ()   # the ItemResults channels fn reads, by keyword


@dataclass(frozen=True)
class ItemResults:
    """A run's items, read from its scores.json by its benchmark: what compare, agreement and
    the statistics need, and nothing benchmark-specific.

    ``values`` is repeats x items (row r = repeat r + 1; NaN where an item has no score of
    its own), the matrix the declared metrics read. ``scores`` is each item's own score (the
    mean over repeats; None while unscored); ``attempted`` says whether the contestant had a
    chance at it (a file-fed answer existed, the document fitted); ``judges`` holds each
    item's per-judge (or per-rater-run) scores, for agreement. ``clusters`` names each item's
    cluster, the unit of randomisation it shares with others (the corpus document a task
    asks about); an item it does not name is its own cluster, the default. ``channels``
    holds named per-item outcomes besides the score (``correct``, ``attempted``: 1.0 or 0.0, NaN
    where the item has none yet), each repeats x items like ``values`` and in the same order; a
    :class:`Metric` reads those it names in its ``channels``.
    """

    ids: tuple[str, ...]
    values: list[list[float]]
    scores: Mapping[str, float | None]
    statuses: Mapping[str, str]
    attempted: Mapping[str, bool]
    strata: Mapping[str, str] = field(default_factory=dict)      # item -> stratum label ("" none)
    judges: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    clusters: Mapping[str, str] = field(default_factory=dict)    # item -> cluster label (default: itself)
    channels: Mapping[str, list[list[float]]] = field(default_factory=dict)   # name -> repeats x items

    @property
    def repeats(self) -> int:
        return len(self.values)


# --- evidence: what a reviewer needs to judge one item ----------------------------------------------

@dataclass(frozen=True)
class Fact:
    """A short labelled value, shown inline."""

    label: str
    value: str
    kind: Literal["fact"] = "fact"


@dataclass(frozen=True)
class Passage:
    """A long text (a question, a response, a judge's reply), shown whole in a box."""

    label: str
    text: str | None
    collapsed: bool = False   # folded by default (a long trajectory)
    kind: Literal["passage"] = "passage"


@dataclass(frozen=True)
class Table:
    """Rows under named columns (rubric items, element scores, judges)."""

    label: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    kind: Literal["table"] = "table"


Section: TypeAlias = Fact | Passage | Table
_SECTIONS: dict[str, type[Fact] | type[Passage] | type[Table]] = {
    "fact": Fact, "passage": Passage, "table": Table}


@dataclass(frozen=True)
class ItemEvidence:
    """One item's evidence, as its benchmark declares it; every view renders this alone.

    ``ItemEvidence(item_id, status, score, judges, sections)``: the item's id and status, its
    score (None while unscored), its per-judge scores (judge label -> score or None; ``{}``
    without judges) and the sections a reviewer reads, in order (:class:`Fact`,
    :class:`Passage`, :class:`Table`).
    """

    item_id: str
    status: str
    score: float | None
    judges: Mapping[str, float | None]     # per-judge (or per-run) scores, for the compact table
    sections: Sequence[Section]

    @property
    def disagreement(self) -> float | None:
        """The spread (max - min) of the judges' scores, when at least two gave one."""
        given = [s for s in self.judges.values() if s is not None]
        return max(given) - min(given) if len(given) >= 2 else None

    def as_dict(self) -> dict[str, Any]:
        return {"item_id": self.item_id, "status": self.status, "score": self.score,
                "judges": dict(self.judges), "disagreement": self.disagreement,
                # Shallow: a section holds only strings, numbers and tuples of them, and
                # dataclasses.asdict's deep copy of every value was most of writing the evidence.
                "sections": [{f.name: getattr(s, f.name) for f in fields(s)} for s in self.sections]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ItemEvidence:
        sections: list[Section] = []
        for raw in data["sections"]:
            kind = _SECTIONS[raw["kind"]]
            values = dict(raw)
            if kind is Table:
                values["columns"] = tuple(values["columns"])
                values["rows"] = tuple(tuple(r) for r in values["rows"])
            sections.append(kind(**values))
        return cls(data["item_id"], data["status"], data["score"], dict(data["judges"]), tuple(sections))


RunScores = tuple[str, Mapping[str, Any]]
"""A finished run as compare sees it: its label and its scores.json."""


# --- the stages ---------------------------------------------------------------------------------
# Every run has these four stages, in this order, each a notebook (``01_generate.ipynb`` ...);
# the first two make calls and keep a store of records (``generate.jsonl``, ``judge.jsonl``).
STAGES = ("generate", "judge", "aggregate", "report")
CALL_STAGES = ("generate", "judge")
