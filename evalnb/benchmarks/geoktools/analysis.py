"""GeoKTools as a reader sees it: each case's evidence (element by element), the accuracy-by-K
table and figure, and the golden strings ROUGE-L cannot see.

The protocol itself (exact match, the judge or deterministic scorer, metrics) is :mod:`.protocol`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from evalnb.benchmarks.base import metric_ci, metric_value
from evalnb.benchmarks.geoktools.protocol import JUDGE_PROMPT, K_VALUES, METRICS, GeoKToolsProtocol
from evalnb.benchmarks.geoktools.scoring import explain, golden_list, rouge_blind
from evalnb.core.reasoning import reasoning_passages
from evalnb.core.types import Fact, ItemEvidence, Passage, Record, Table

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.views.figures import ReportFigure


class GeoKTools(GeoKToolsProtocol):
    """The protocol with the views a reader sees: each case element by element, and accuracy by
    K. The generate and judge notes depend on the parameters (a predictions file, the scorer), so
    :meth:`describe` writes them; the aggregate and report notes are fixed (``STAGE_NOTES``)."""

    FIGURE: ClassVar[str] = "accuracy_by_k"
    STAGE_NOTES: ClassVar[Mapping[str, str]] = {
        "aggregate": "The mean case score overall, per K and macro over K, each with a 95% "
                     "percentile bootstrap interval resampled within K, and repeats within cases.",
        "report": "Accuracy overall and by K with intervals, answer statuses, usage, the golden strings "
                  "ROUGE-L cannot see, and each case's evidence, element by element.",
    }

    def describe(self, stage: str) -> str:
        if stage == "generate":
            return ("No model is called: each case's answer is read from the predictions file (one file per "
                    "repeat); a missing or empty response scores 0." if self.predictions else
                    "The contestant answers each case's query; answers are appended to `generate.jsonl` as "
                    "they arrive, and re-running resumes.")
        if stage == "judge":
            scorer = ("the geospatial LLM judge" if self.config.options["scorer"] == "llm"
                      else "the deterministic offline scorer (an approximation of the judge)")
            return ("An answer equal to the golden one (after `strip()`, or as equal JSON) scores 1 with no "
                    f"call; every other answer is scored by {scorer}.")
        return super().describe(stage)

    def record_prompts(self) -> dict[str, str]:
        """The judge's system prompt file and user template (none with the deterministic scorer;
        the contestant's answers come from a file or the case's query as written)."""
        if self.judge_prompt is None:
            return {}
        return {"judge_system": self.judge_prompt.text, "judge_user": JUDGE_PROMPT}

    def evidence(self, responses: Mapping[str, Record], judgements: Mapping[str, Record],
                 scores: Mapping[str, Any]) -> list[ItemEvidence]:
        by_case: dict[str, list[dict[str, Any]]] = {}
        for row in scores["tasks"]:
            by_case.setdefault(row["case_id"], []).append(row)
        results = self.results(scores)
        out = []
        for case in self.cases:
            rows = sorted(by_case.get(case["id"], []), key=lambda r: r["repeat"])
            sections: list[Any] = [Fact("K", str(case["K"])), Passage("query", case["query"]),
                                   Passage("golden list", case["golden"])]
            blind = [f"element {i} {json.dumps(g, ensure_ascii=False)} (ROUGE-L scores it 0)"
                     for i, g in enumerate(golden_list(case["golden"])) if isinstance(g, str) and rouge_blind(g)]
            if blind:   # ROUGE-L is blind here: only an exact match of the whole response scores these
                sections.append(Fact("ROUGE-blind golden strings", "; ".join(blind)))
            per_repeat: dict[str, float | None] = {}
            for row in rows:
                prefix = f"repeat {row['repeat']}: " if self.repeats > 1 else ""
                text = (responses.get(row["task_id"]) or {}).get("text")
                per_repeat[f"repeat {row['repeat']}"] = row["score"]
                shown = "-" if row["score"] is None else f"{row['score']:.4f}"
                sections.append(Fact(f"{prefix}status",
                                     f"{row['status']}; scored by {row['method'] or '-'}; score {shown}"))
                sections.append(Passage(f"{prefix}response", text))
                sections += reasoning_passages(responses.get(row["task_id"]), prefix)
                sections.extend(self._elements(prefix, row, text, case["golden"]))
                if row.get("reply") is not None:
                    sections.append(Passage(f"{prefix}judge reply", row["reply"]))
                    sections += reasoning_passages(judgements.get(row["task_id"]), f"{prefix}judge ")
            out.append(ItemEvidence(case["id"], results.statuses[case["id"]], results.scores[case["id"]],
                                    per_repeat if self.repeats > 1 else {}, tuple(sections)))
        return out

    @staticmethod
    def _elements(prefix: str, row: Mapping[str, Any], text: str | None, golden: str) -> list[Any]:
        """The parsed list and each element's score with the rule that produced it."""
        columns = ("element", "golden", "predicted", "score", "rule")
        method = row["method"]
        if method in ("deterministic", "judge", "exact") and text is not None:
            parsed, explained = explain(text, golden)
            rows: list[tuple[int, Any, Any, float | None, str]] = list(explained)
            if method == "exact":
                rows = [(i, g, p, 1.0, "exact match of the whole response") for i, g, p, _, _ in rows]
            elif method == "judge":
                given = row.get("element_scores") or []
                rows = [(i, g, p, given[i] if i < len(given) else None, "judge") for i, g, p, _, _ in rows]
            return [Passage(f"{prefix}list parsed from the response",
                            json.dumps(parsed, ensure_ascii=False) if parsed is not None else "(no parsable list)"),
                    Table(f"{prefix}elements", columns,
                          tuple((i, json.dumps(g, ensure_ascii=False), "(missing)" if p is None and rule in
                                 ("missing", "no parsable list") else json.dumps(p, ensure_ascii=False),
                                 score, rule) for i, g, p, score, rule in rows))]
        if method is not None:   # missing, empty, refused ... response: 0 without a call
            return [Fact(f"{prefix}elements", f"every element scores 0: the response is {method}")]
        return []

    @classmethod
    def breakdown(cls, scores: Mapping[str, Any]) -> pd.DataFrame:
        """Overall, per K and macro over K, each with its interval (resampled within K)."""
        import pandas as pd

        counts = Counter(r["K"] for r in scores["tasks"] if r["repeat"] == 1)
        rows = []
        for metric in METRICS:
            ci = metric_ci(scores, metric.name) or {}
            n = counts.get(int(metric.name[2:])) if metric.name.startswith("K=") else \
                (scores.get("n_cases") if metric.name == "overall" else None)
            rows.append((metric.label.split(":")[0], n, metric_value(scores, metric.name), ci.get("low"),
                         ci.get("high")))
        return pd.DataFrame(rows, columns=["stratum", "n", "mean", "ci_low", "ci_high"]).set_index("stratum")

    @classmethod
    def figure(cls, scores: Mapping[str, Any]) -> ReportFigure:
        """Mean case score per K with its bootstrap interval as error bars, each value written
        above its bar (a zero too), the overall mean as a dashed line; one column wide."""
        from evalnb.views.figures import (OFFLINE, ONE_COLUMN, PALETTE, new_figure, styled, value_labels,
                                         with_offline_note)

        counts = Counter(r["K"] for r in scores["tasks"] if r["repeat"] == 1)
        ks = [k for k in K_VALUES if counts.get(k) and metric_ci(scores, f"K={k}")]
        ci = metric_ci(scores, "overall") or {}
        overall = metric_value(scores, "overall")
        offline = bool(scores.get("offline"))
        caption = with_offline_note(
            f"Accuracy (mean case score) by K, the number of elements in a case's golden list, with "
            f"{int(ci.get('confidence', 0.95) * 100)}% percentile bootstrap intervals ({ci.get('n_boot', '-')} "
            f"resamples, seed {ci.get('seed', '-')}; n cases under each bar)"
            + (f"; dashed: the overall mean, {overall:.3f}." if overall is not None else "."), offline)

        @styled
        def draw() -> ReportFigure:
            fig = new_figure((ONE_COLUMN, 2.4), caption=caption)
            ax = fig.subplots()
            if ks:
                means = [metric_value(scores, f"K={k}") or 0.0 for k in ks]
                cis = [metric_ci(scores, f"K={k}") or {} for k in ks]
                highs = [c["high"] if c.get("high") is not None else m for m, c in zip(means, cis)]
                lows = [c["low"] if c.get("low") is not None else m for m, c in zip(means, cis)]
                bars = ax.bar([f"K={k}\n(n={counts[k]})" for k in ks], means,
                              yerr=[[m - lo for m, lo in zip(means, lows)], [h - m for m, h in zip(means, highs)]],
                              capsize=3, error_kw={"elinewidth": 0.8},
                              **(OFFLINE if offline else {"color": PALETTE[0]}))   # type: ignore[arg-type]
                value_labels(ax, bars, list(means), highs)
                if overall is not None:
                    ax.axhline(overall, color="black", linestyle="--", linewidth=0.8)
            ax.set_ylim(0, 1.12)
            ax.set_ylabel("accuracy")
            return fig
        return draw()

    @classmethod
    def report_tables(cls, scores: Mapping[str, Any]) -> list[tuple[str, pd.DataFrame]]:
        """The golden strings ROUGE-L cannot see."""
        note = (scores.get("rouge_blind_golden_strings") or {}).get("note", "")
        return [(f"Golden strings ROUGE-L cannot see. {note}", rouge_blind_table(scores))]


class _HasPath(Protocol):
    def path(self, name: str) -> Path: ...


def rouge_blind_table(source: Mapping[str, Any] | _HasPath) -> pd.DataFrame:
    """For the report: one row per golden string element ROUGE-L cannot see.

    ``source`` is a scores.json body or a run; other benchmarks give an empty table.
    """
    import pandas as pd   # here, not at import: loading a benchmark stays light

    if isinstance(source, Mapping):
        scores: Mapping[str, Any] = source
    else:
        scores = json.loads(source.path("scores.json").read_text("utf-8"))
    entries = (scores.get("rouge_blind_golden_strings") or {}).get("elements", [])
    return pd.DataFrame(entries, columns=["case_id", "K", "index", "text"]).rename(
        columns={"index": "element", "text": "golden string (no [a-z0-9] token)"})
