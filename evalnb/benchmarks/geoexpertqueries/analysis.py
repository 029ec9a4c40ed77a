"""GeoExpertQueries as a reader sees it: each query's condensed trajectory and ratings, the
ratings table and figure, and the raters' agreement.

The protocol itself (condensation, the rating prompt, three runs, the score rule) is :mod:`.protocol`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from evalnb.benchmarks.base import metric_ci, metric_value, offline_title
from evalnb.benchmarks.geoexpertqueries.protocol import GeoExpertQueriesProtocol
from evalnb.core.reasoning import reasoning_passages
from evalnb.core.types import Fact, ItemEvidence, Passage, Record, Table

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.core.figures import ReportFigure

class GeoExpertQueries(GeoExpertQueriesProtocol):
    """The protocol with the views the report, the evidence pages and compare show."""

    FIGURE: ClassVar[str] = "ratings_and_agreement"
    STAGE_NOTES: ClassVar[Mapping[str, str]] = {
        "generate": "No model is called: each query's agent trajectory is read from the traces file and "
                    "condensed for the rater (a query without a trace is `missing` and scores 0).",
        "judge": "The autorater rates each trajectory 0, 1 or 2 in independent runs, each prompt headed "
                 "`Today is YYYY-MM-DD.` (readings 16-17). A rating that does not parse is a judge failure: "
                 "resumable, never a zero.",
        "aggregate": "Ratings map to scores through the likert file (0, 0.5, 1); a query's score is the mean "
                     "of its runs; the overall mean gets a seeded bootstrap interval.",
        "report": "The overall score, the rating distribution and the runs' agreement, usage, and each "
                  "query's evidence: the condensed trajectory and every run's reply.",
    }

    def evidence(self, responses: Mapping[str, Record], judgements: Mapping[str, Record],
                 scores: Mapping[str, Any]) -> list[ItemEvidence]:
        out = []
        by_id = {t.task_id: t for t in self.tasks}
        for row in scores["tasks"]:
            task = by_id[row["task_id"]]
            trace = self.traces.traces.get(task.task_id)
            response = responses.get(task.task_id) or {}
            sections: list[Any] = [Fact("status", row["status"]), Passage("query", task.query),
                                   Passage("condensed trajectory", response.get("text"), collapsed=True),
                                   Passage("final response", trace["final_response"] if trace else None)]
            if row["runs"]:
                sections.append(Table("ratings", ("run", "status", "rating", "mapped score"),
                                      tuple((r["run"], r["status"], r["rating"], r["score"]) for r in row["runs"])))
                for r in row["runs"]:
                    sections += [Passage(f"run {r['run']}: reply", r["reply"]),
                                 *reasoning_passages(judgements.get(f"{task.task_id}::run{r['run']}"), f"run {r['run']}: ")]
            sections.append(Fact("mapped mean", "-" if row["score"] is None else f"{row['score']:.4f}"))
            judges = {f"run{r['run']}": r["score"] for r in row["runs"]}
            out.append(ItemEvidence(task.task_id, row["status"], row["score"], judges, tuple(sections)))
        return out

    @classmethod
    def breakdown(cls, scores: Mapping[str, Any]) -> pd.DataFrame:
        """The rating distribution, run-to-run agreement, and the overall score with its interval."""
        import pandas as pd

        ci = metric_ci(scores, "overall") or {}
        rows: list[tuple[str, Any]] = [(f"rating {k}", v) for k, v in scores["rating_counts"].items()]
        rows += [(k.replace("_", " "), v) for k, v in scores["agreement"].items()]
        rows += [("overall", metric_value(scores, "overall")), ("CI low", ci.get("low")), ("CI high", ci.get("high"))]
        return pd.DataFrame(rows, columns=["", "value"]).set_index("")

    @classmethod
    def figure(cls, scores: Mapping[str, Any]) -> ReportFigure:
        """The rating distribution, and each query's ratings across runs."""
        from evalnb.core.figures import new_figure

        fig = new_figure((9, 3.5))
        left, right = fig.subplots(1, 2)
        counts = scores["rating_counts"]
        left.bar(list(counts), list(counts.values()), color="#4c72b0")
        left.set_xlabel("rating")
        left.set_ylabel("autorater calls")
        left.set_title("rating distribution")
        rated = [r for r in scores["tasks"] if r["ratings"] and None not in r["ratings"]]
        for i, row in enumerate(rated):
            right.scatter([i] * len(row["ratings"]), row["ratings"], alpha=0.5, color="#dd8452")
        right.set_xticks(range(len(rated)), [r["task_id"] for r in rated], rotation=60, fontsize=7)
        right.set_yticks([0, 1, 2])
        share = scores["agreement"]["unanimous_share"]
        right.set_title(f"ratings per run (unanimous: {share:.0%})" if share is not None else "ratings per run")
        config = scores["judge_config"]
        fig.suptitle(offline_title(scores, f"autorater {config['model']}, {config['num_runs']} runs"))
        fig.tight_layout()
        return fig

    @classmethod
    def report_tables(cls, scores: Mapping[str, Any]) -> list[tuple[str, pd.DataFrame]]:
        """Which trajectories were missing, unknown, duplicated or converted from transcripts."""
        import pandas as pd

        report = scores.get("traces_report") or {}
        rows = [(kind.replace("_", " "), ", ".join(report.get(kind) or []) or "-")
                for kind in ("missing_ids", "unknown_ids", "duplicate_ids", "converted_from_messages")]
        return [(f"Trajectories file {report.get('file', '-')}",
                 pd.DataFrame(rows, columns=["", "queries"]).set_index(""))]


