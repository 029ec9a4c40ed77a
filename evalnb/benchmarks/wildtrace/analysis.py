"""WildTrace as a reader sees it: each task's evidence, the per-judge table and figure, and
the analysis across runs (the rubric items missed most, the points distribution).

The protocol itself (prompts, calls, score rule, metrics) is :mod:`.protocol`; this module
only reads what it recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from evalnb.benchmarks.base import judge_table
from evalnb.benchmarks.wildtrace.imported import report_table
from evalnb.benchmarks.wildtrace.repeats import repeat_key
from evalnb.benchmarks.wildtrace.prompt_text import ANSWER_PROMPT, JUDGE_PROMPT
from evalnb.benchmarks.wildtrace.protocol import WildTraceProtocol
from evalnb.benchmarks.wildtrace.tasks import read_tasks
from evalnb.benchmarks.wildtrace.verdicts import points_awarded
from evalnb.core.reasoning import reasoning_passages
from evalnb.core.types import Fact, ItemEvidence, Passage, Record, RunScores, Table

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.views.figures import ReportFigure


class WildTrace(WildTraceProtocol):
    """The protocol with the views the report, the evidence pages and compare show."""

    FIGURE: ClassVar[str] = "judge_distributions"
    STAGE_NOTES: ClassVar[Mapping[str, str]] = {
        "generate": "The contestant answers each task from the document and the question alone (the protocol's §1). "
                    "A document longer than the model's cap in characters is *out of context*: scored 0 and "
                    "sent to nobody. Answers are appended to `generate.jsonl` as they arrive; "
                    "re-running resumes.",
        "judge": "Every configured judge grades every `ok` answer against the task's points rubric "
                 ". A reply without a parsable `total` is a judge failure: resumable, never a "
                 "zero.",
        "aggregate": "A task's score is the mean of its judges' normalised scores once every judge has scored "
                     "it. *Scored* is the mean over tasks answered `ok`; *All* counts every task in "
                     "the data file, non-`ok` as 0. Both stay null, and the command exits 2, while "
                     "anything is resumable.",
        "report": "The headline metrics with seeded bootstrap intervals, answer statuses, the per-judge "
                  "distributions, usage, and each task's evidence: document route, answer, rubric and every "
                  "judge's reply (`tasks.html` has every task whole).",
    }

    def record_prompts(self) -> dict[str, str]:
        """The templates as sent, placeholders unfilled (written to the run's prompts/ folder)."""
        answered = {} if self.imported is not None else {"answer": ANSWER_PROMPT}   # imported answers: no answer prompt
        return {**answered, "judge": JUDGE_PROMPT}

    def evidence(self, responses: Mapping[str, Record], judgements: Mapping[str, Record],
                 scores: Mapping[str, Any]) -> list[ItemEvidence]:
        out = []
        for row in scores["tasks"]:
            task = self.by_id[row["task_id"]]
            response = responses.get(task.task_id) or {}
            route = row.get("route") or {}
            sections: list[Any] = [
                Fact("status", row["status"]),
                *([Fact("answer", f"imported from the responses file ({response.get('imported_entry', 'not in it')})")]
                  if response.get("source") == "imported" else []),
                Fact("route", f"cap {route.get('cap', '-')} characters ({route.get('cap_kind', '-')}), "
                              f"document {route.get('doc_chars', '-')} characters" if route else "not routed yet"),
                Passage("question", task.question),
            ]
            rubric = Table("rubric", ("item", "points", "criterion"),
                           tuple((f"P{i}", item.points, item.criterion) for i, item in enumerate(task.rubric, 1)))
            judges: dict[str, float | None] = {}
            answers = row.get("repeats") or [{"repeat": None}]
            for answer in answers:   # one answer per task, unless the run has repeats
                n = answer["repeat"]
                prefix = "" if n is None else f"repeat {n}: "
                key = task.task_id if n is None else repeat_key(task.task_id, n)
                record = response if n is None else responses.get(key) or {}
                if n is not None:
                    score = "-" if answer["score"] is None else f"{answer['score']:.4f}"
                    sections.append(Fact(f"repeat {n}", f"{answer['status']}, score {score}"))
                sections += [Passage(f"{prefix}response", record.get("text")), *reasoning_passages(record, prefix)]
                if n is None or n == 1:
                    sections.append(rubric)
                for verdict in row["judges"]:
                    if verdict.get("repeat") != n:
                        continue
                    label = f"{verdict['judge']} {verdict['model']}"
                    judges[label if n is None else f"{prefix}{label}"] = verdict["score"]
                    awarded = points_awarded(verdict["reply"])
                    sections.append(Table(f"{prefix}{label}: verdict", ("status", "total", "max points",
                                                                        "normalised score", "clamped", "points per item"),
                                          ((verdict["status"], verdict["total"], task.max_points, verdict["score"],
                                            verdict["clamped"],
                                            ", ".join(f"P{i}={p:g}" for i, p in enumerate(awarded, 1))
                                            if awarded is not None else "not given"),)))
                    sections.append(Passage(f"{prefix}{label}: reply", verdict["reply"]))
                    sections += reasoning_passages(judgements.get(f"{key}::{verdict['judge']}"), f"{prefix}{label}: ")
            if row["judges"]:
                sections.append(Fact("panel mean" if len(answers) == 1 else "mean over repeats", "-" if row["score"] is None else f"{row['score']:.4f}"))
            out.append(ItemEvidence(task.task_id, row["status"], row["score"], judges, tuple(sections)))
        return out

    @classmethod
    def breakdown(cls, scores: Mapping[str, Any]) -> pd.DataFrame:
        """Per judge: verdicts, mean and s.d. of the normalised scores."""
        return judge_table(cls.results(scores))

    @classmethod
    def figure(cls, scores: Mapping[str, Any]) -> ReportFigure:
        """Each judge's normalised scores as a strip plot, with its mean and interval."""
        from evalnb.views.plots import judge_strip_plot

        results = cls.results(scores)
        per_judge: dict[str, list[float]] = {}
        for item in results.ids:
            for judge, score in results.judges.get(item, {}).items():
                per_judge.setdefault(judge, []).append(score)
        return judge_strip_plot(per_judge, offline=bool(scores.get("offline")), ylabel="normalised judge score")

    @classmethod
    def report_tables(cls, scores: Mapping[str, Any]) -> list[tuple[str, pd.DataFrame]]:
        return report_table(scores.get("responses_report"))

    @classmethod
    def compare_tables(cls, runs: Sequence[RunScores], top: int) -> list[tuple[str, pd.DataFrame]]:
        table = rubric_items(runs)
        return [("rubric items awarded least often (share of their points, over judges)",
                 table.head(top) if len(table) else table)]

    @classmethod
    def compare_figure(cls, runs: Sequence[RunScores]) -> ReportFigure | None:
        return points_distribution(runs)


# --- analysis across runs ----------------------------------------------------------------------------

def _rubrics(runs: Sequence[RunScores]) -> dict[str, list[tuple[float, str]]]:
    """Each task's rubric: from the runs' rows, else (runs recorded before rows carried it) the data file."""
    rubrics: dict[str, list[tuple[float, str]]] = {}
    for _, scores in runs:
        for row in scores["tasks"]:
            if row.get("rubric"):
                rubrics.setdefault(row["task_id"], [(i["points"], i["criterion"]) for i in row["rubric"]])
    if not rubrics and runs:
        data = Path(runs[0][1]["config"]["data"])
        if data.exists():
            rubrics = {t.task_id: [(i.points, i.criterion) for i in t.rubric] for t in read_tasks(data)}
    return rubrics


def rubric_items(runs: Sequence[RunScores]) -> pd.DataFrame:
    """How often each rubric item was awarded (share of its points, over judges), per model;
    the items missed most come first. Only judges whose reply itemises the points count."""
    import pandas as pd

    rubrics = _rubrics(runs)
    shares: dict[tuple[str, int], dict[str, list[float]]] = {}
    for label, scores in runs:
        for row in scores["tasks"]:
            rubric = rubrics.get(row["task_id"])
            if rubric is None:
                continue   # the data changed since the run: nothing to attribute to
            for verdict in row["judges"]:
                awarded = points_awarded(verdict["reply"])
                if awarded is None or len(awarded) != len(rubric):
                    continue   # a reply that does not itemise cannot be attributed to items
                for i, ((points, _), got) in enumerate(zip(rubric, awarded)):
                    if points:
                        shares.setdefault((row["task_id"], i), {}).setdefault(label, []).append(
                            min(1.0, max(0.0, got / points)))
    rows = []
    for (task_id, i), per_model in shares.items():
        points, criterion = rubrics[task_id][i]
        rates = {m: sum(v) / len(v) for m, v in per_model.items()}
        rows.append({"task_id": task_id, "item": f"P{i + 1}", "points": points, "criterion": criterion,
                     **rates, "award_rate": sum(rates.values()) / len(rates)})
    out = pd.DataFrame(rows)
    if len(out):
        out = out.sort_values(["award_rate", "task_id", "item"]).set_index(["task_id", "item"])
    return out


POINTS_SHOWN = 30   # tasks in the compare figure: the lowest-scoring, so that it stays readable


def points_distribution(runs: Sequence[RunScores]) -> ReportFigure:
    """Per task, each run's points as a share of the task's rubric points (panel mean of
    the judges' totals): tasks sorted by their mean share over runs, lowest first, runs side
    by side."""
    from evalnb.views.plots import dodged_bars

    shares: dict[str, dict[str, float]] = {}
    for label, scores in runs:
        for row in scores["tasks"]:
            if not row["judges"] or any(j["total"] is None for j in row["judges"]):
                continue
            top = row.get("max_points") or 100   # runs recorded before rows carried max_points: out of 100
            shares.setdefault(row["task_id"], {})[label] = sum(j["total"] for j in row["judges"]) / len(row["judges"]) / top
    order = sorted(shares, key=lambda t: (sum(shares[t].values()) / len(shares[t]), t))[:POINTS_SHOWN]
    labels = [label for label, _ in runs]
    offline = {label: bool(scores.get("offline")) for label, scores in runs}
    shown = "" if len(shares) <= POINTS_SHOWN else f" The {POINTS_SHOWN} lowest of {len(shares)} judged tasks."
    caption = ("Points awarded per judged task as a share of its rubric's points (the panel's mean total), "
               f"one bar per run; tasks sorted by their mean share over runs, lowest first.{shown}"
               + (" Grey hatched: an offline approximation, not comparable with the paper." if any(offline.values()) else ""))
    return dodged_bars(order, {label: [shares[t].get(label) for t in order] for label in labels}, caption=caption,
                       xlabel="share of the rubric's points", offline=offline)
