"""GeoExpertQueries as a reader sees it: each query's condensed trajectory and ratings, the
ratings table and figure, and the raters' agreement.

The protocol itself (condensation, the rating prompt, three runs, the score rule) is :mod:`.protocol`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from evalnb.benchmarks.base import metric_ci, metric_value
from evalnb.benchmarks.geoexpertqueries.protocol import GeoExpertQueriesProtocol
from evalnb.views.estimates import estimate_text, number_text
from evalnb.core.reasoning import reasoning_passages
from evalnb.core.types import Fact, ItemEvidence, Passage, Record, Table

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.views.figures import ReportFigure


class GeoExpertQueries(GeoExpertQueriesProtocol):
    """The protocol with the views a reader sees: each query's trajectory and ratings, the
    rating distribution with the runs' agreement, and the trajectories file's report. Every
    stage's note is fixed text (``STAGE_NOTES``): none depends on the parameters."""

    FIGURE: ClassVar[str] = "ratings_and_agreement"
    STAGE_NOTES: ClassVar[Mapping[str, str]] = {
        "generate": "No model is called: each query's agent trajectory is read from the traces file and "
                    "condensed for the rater (a query without a trace is `missing` and scores 0).",
        "judge": "The autorater rates each trajectory 0, 1 or 2 in independent runs, each prompt headed "
                 "`Today is YYYY-MM-DD.` A rating that does not parse is a judge failure: "
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
        rows += [(k.replace("_", " "), number_text(v) if isinstance(v, float) else v)   # a share of 1 reads 1.000
                 for k, v in scores["agreement"].items()]
        rows += [("overall [95% CI]", estimate_text(metric_value(scores, "overall"), ci.get("low"), ci.get("high"))),
                 ("n (queries)", ci.get("n"))]
        return pd.DataFrame(rows, columns=["measure", "value"]).set_index("measure")

    @classmethod
    def figure(cls, scores: Mapping[str, Any]) -> ReportFigure:
        """Each query's rating from every autorater run, runs side by side (a rating of 0 drawn
        as a point at 0, a query not rated says so, its status beside its id); the distribution
        and agreement in the caption."""
        from evalnb.views.figures import OFFLINE_NOTE
        from evalnb.views.plots import dodged_bars

        config = scores["judge_config"]
        rated = [r for r in scores["tasks"] if r["ratings"]]
        runs = max((len(r["ratings"]) for r in rated), default=0)
        counts = ", ".join(f"{n} rated {k}" for k, n in scores["rating_counts"].items())
        share = scores["agreement"]["unanimous_share"]
        agreement = f"; the runs agree on {share:.0%} of queries" if share is not None else ""
        offline = bool(scores.get("offline"))
        caption = (f"Ratings (0, 1 or 2) of each query's trajectory by the autorater {config['model']}, one bar per "
                   f"run of {config['num_runs']} (calls: {counts}{agreement}); a query without a trajectory "
                   "is not rated (scored 0).") + (f" {OFFLINE_NOTE}" if offline else "")
        series = {f"run {k + 1}": [r["ratings"][k] if k < len(r["ratings"]) else None for r in rated]
                  for k in range(runs)}
        return dodged_bars([r["task_id"] + ("" if r["status"] == "ok" else f" ({r['status']})") for r in rated],
                           series, caption=caption, xlabel="rating", offline=dict.fromkeys(series, offline),
                           xlim=(0, 2.05), ticks=[0, 1, 2], missing="not rated")

    @classmethod
    def report_tables(cls, scores: Mapping[str, Any]) -> list[tuple[str, pd.DataFrame]]:
        """Which trajectories were missing, unknown, duplicated or converted from transcripts."""
        import pandas as pd

        report = scores.get("traces_report") or {}
        rows = [(kind.replace("_", " "), ", ".join(report.get(kind) or []) or "-")
                for kind in ("missing_ids", "unknown_ids", "duplicate_ids", "converted_from_messages")]
        shown = Path(report["file"]).name if report.get("file") else "-"   # its name: no machine path in a table
        return [(f"Trajectories file {shown}",
                 pd.DataFrame(rows, columns=["", "queries"]).set_index(""))]


