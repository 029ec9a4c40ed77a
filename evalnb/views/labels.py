"""The one vocabulary: what every table calls a column, and what each word means.

Every view (the notebooks' HTML, the LaTeX and Markdown exports, the terminal) shows a column
under :func:`header` of its machine name, the name the records (``compare.json``, the CSV
files) keep. A table that must say something of its own (the MDE's power, a benchmark's
cluster noun, the agreement threshold) uses a header that :data:`TEMPLATES` declares, so a
test can check that every header a reader sees is a word of this one table.

Why one table: a reader meets the same number in the leaderboard, the pairwise verdicts, the
terminal and a paper's table, and must find it under the same name; an abbreviation used in a
header is defined once here (:data:`ABBREVIATIONS`), and the exports write that definition
under the table (:func:`abbreviations`), the CSV files beside it (:func:`data_dictionary`).

To add a column: one entry in :data:`LABELS` (machine name -> header, meaning). A column
without an entry is shown under its machine name, and the vocabulary test fails on any
snake_case header, so a new column cannot slip through unnamed.

Headers are ASCII (``A - B``, ``rho``, ``tau-b``): the same table goes into LaTeX, where a
Greek letter or a minus sign needs packages a paper may not load.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CI = "[95% CI]"   # after an estimate's title: the cell holds value [low, high]
CLUSTER_CI = "cluster 95% CI"   # beside the protocol's interval: clustered SE with Student t on the clusters
WILSON_CI = "Wilson 95% CI"     # beside it near a bound: Wilson's interval on the effective n
T_CI = "t 95% CI"               # a pairwise difference's clustered-SE interval with Student t


@dataclass(frozen=True)
class Label:
    """A column's header and what it means (the data dictionary's line)."""

    header: str
    meaning: str


def _l(header: str, meaning: str) -> Label:
    return Label(header, meaning)


LABELS: dict[str, Label] = {
    # who
    "model": _l("model", "the contestant: the model (or predictions file) whose answers were scored"),
    "contestant": _l("contestant", "a contestant under its name in the suite or comparison"),
    "run": _l("run", "the run's name"),
    "judge": _l("judge", "a judge of the panel (or an autorater's run)"),
    "without": _l("judge left out", "the judge whose verdicts were left out"),
    "family": _l("family", "the model family the judge and the contestant share"),
    "model_a": _l("model A", "the higher-ranked model of the pair on the leaderboard"),
    "model_b": _l("model B", "the lower-ranked model of the pair on the leaderboard"),
    "A": _l("model A", "the higher-ranked model of the pair on the leaderboard"),
    "B": _l("model B", "the lower-ranked model of the pair on the leaderboard"),
    "judge_a": _l("judge A", "the first judge of the pair"),
    "judge_b": _l("judge B", "the second judge of the pair"),
    "metric": _l("metric", "the headline metric"),
    "number": _l("statistic", "which statistic the row's estimate is"),
    "statistic": _l("statistic", "which statistic the row's estimate is"),
    "item": _l("item", "the item's id"),
    # counts
    "n": _l("n", "the number of items the estimate beside it rests on"),
    "count": _l("n", "the number of verdicts"),
    "failed": _l("failed", "items that ended in a failure (scored 0)"),
    "n_common": _l("n", "the items both models attempted"),
    "n_own": _l("n own", "items of the contestant of the judge's family"),
    "n_other": _l("n other", "items of the contestants of other families"),
    "n_clusters": _l("clusters", "the clusters (documents, ...) the items fall in"),
    "answers": _l("answers", "answers judged again"),
    "verdicts": _l("verdicts", "verdicts given again"),
    "repeats": _l("repeats", "answers per item"),
    # leaderboard and ranks
    "rank": _l("rank", "the place on the leaderboard (ties averaged)"),
    "rank_interval": _l("rank (95% interval)", "the 95% interval of the rank over the joint cluster bootstrap"),
    "p_first": _l("P(first)", "the share of joint cluster-bootstrap resamples in which the model ranks first"),
    # estimates
    "value": _l("estimate", "the estimate on the items it rests on"),
    "estimate": _l("estimate", "the statistic's estimate"),
    "label": _l("metric", "the metric and how it is computed"),
    "description": _l("what it is", "the metric and how it is computed"),
    "mean": _l("mean", "the mean"),
    "sd": _l("s.d.", "the standard deviation"),
    "std": _l("s.d.", "the standard deviation"),
    "score": _l("score", "the judge's score"),
    "spread": _l("spread", "the largest minus the smallest judge score of the item"),
    "scores": _l("scores", "each judge's score"),
    "record": _l("record", "where the item's evidence is, relative to this folder"),
    "show": _l("command", "the command that prints the item's evidence"),
    "note": _l("note", "a note on the row"),
    # pairwise verdicts
    "delta": _l("A - B", "model A's headline metric minus model B's, over the full task set"),
    "mean_diff": _l("A - B, common items", "the mean item-score difference A minus B on the items both attempted"),
    "se_delta": _l("SE", "the clustered standard error of A - B"),
    "rho": _l("rho", "the correlation of the two models' item scores"),
    "p": _l("p", "the two-sided paired cluster-bootstrap p-value"),
    "p_holm": _l("p (Holm)", "the p-value adjusted by Holm's method over every pair (of the larger of p and p (t))"),
    "p_t": _l("p (t)", "the two-sided p-value of the clustered SE with Student t on the clusters"),
    "rank_note": _l("rank note", "why a rank interval is withheld or approximate"),
    "verdict": _l("verdict", "the verdict at the chosen level on the Holm-adjusted p"),
    "mde": _l("MDE", "the minimum detectable difference at the chosen level and power"),
    # agreement
    "pearson_r": _l("Pearson r", "Pearson's correlation of the two judges' scores"),
    "mean_abs_diff": _l("mean |A - B|", "the mean absolute difference of the two judges' scores"),
    # reliability and bias
    "score_full": _l("score, full panel", "the first headline metric with every judge"),
    "score_without": _l("score without", "the first headline metric without the left-out judge"),
    "rank_full": _l("rank, full panel", "the rank with every judge"),
    "rank_without": _l("rank without", "the rank without the left-out judge"),
    "rank_change": _l("rank change", "rank with every judge minus rank without (positive: it rises)"),
    "kendall_tau": _l("Kendall tau-b", "Kendall's tau-b between the two orders of the models"),
    "self_preference": _l("self-preference", "own-family gap minus other-contestants gap (above 0: favours its family)"),
    "own_family_gap": _l("gap, own family", "the judge's score minus the other judges' mean, on its family's items"),
    "other_contestants_gap": _l("gap, others", "the same gap on the items of contestants of other families"),
    "spearman_rho": _l("Spearman rho", "Spearman's correlation of score with response length"),
    "slope_per_log_char": _l("slope per log(chars)", "the slope of score on the log of response length"),
    "panel_a": _l("panel A", "the first panel's score"),
    "panel_b": _l("panel B", "the second panel's score"),
    "shift": _l("shift (B - A)", "the second panel's score minus the first's"),
    "rank_a": _l("rank A", "the rank under the first panel"),
    "rank_b": _l("rank B", "the rank under the second panel"),
    "answers_differ": _l("answers differ", "whether the two panels scored different answers"),
    "retest_sd": _l("retest s.d.", "the standard deviation of a judge's verdicts given again"),
    "noise_share": _l("noise share", "the share of score variance that is retest noise"),
    # standard errors
    "se": _l("SE", "the standard error, every item its own cluster"),
    "clustered_se": _l("clustered SE", "the standard error resampling whole clusters"),
    "design_effect": _l("design effect", "the clustered variance over the item-level variance"),
    "cluster_bootstrap": _l("cluster bootstrap", "the estimate's interval resampling whole clusters"),
    "clustered_t": _l("clustered SE, t", "the estimate with the clustered SE and Student t on clusters minus strata"),
    "bounded": _l("Wilson", "Wilson's interval on the effective number of items (items over the design effect)"),
    "within_item_variance": _l("within-item variance", "the variance of an item's repeated answers"),
    # planning
    "basis": _l("basis", "what the variance of the difference is taken from"),
    "n_now": _l("n now", "the pilot's items"),
    "n_clusters_now": _l("clusters now", "the pilot's clusters"),
    "var_d": _l("Var(d)", "the variance of the item-score difference, per item"),
    "mde_now": _l("MDE now", "the minimum detectable difference with the pilot's items"),
    "items_needed": _l("items needed", "the items needed to detect the difference"),
    "items_needed_10%": _l("items needed, 10%", "the 10th percentile of the items needed over a cluster bootstrap of the pilot"),
    "items_needed_90%": _l("items needed, 90%", "the 90th percentile of the items needed over a cluster bootstrap of the pilot"),
    "clusters_needed": _l("clusters needed", "the clusters needed to detect the difference"),
    "repeats_now": _l("repeats now", "the pilot's answers per item"),
    "omega2": _l("between-item var.", "the variance between items, repeats' noise removed"),
    "sigma2_a": _l("within-item var. A", "model A's within-item variance"),
    "sigma2_b": _l("within-item var. B", "model B's within-item variance"),
    # estimate (no call made)
    "stage": _l("stage", "the pipeline stage"),
    "mode": _l("mode", "live calls or batch"),
    "calls": _l("calls", "the calls the stage makes"),
    "already_done": _l("done", "calls already made (in the stores)"),
    "to_make": _l("to make", "calls not yet made"),
    "est_input_tokens": _l("input tok. (est.)", "estimated input tokens (characters / 3.3, or / 1.5 for CJK)"),
    "max_output_tokens": _l("output tok. (max)", "output tokens at most"),
    "max_total_cost_usd": _l("cost (max)", "the cost at most in US dollars, calls made live"),
    "max_total_cost_batch_usd": _l("batch cost (max)", "the cost at most in US dollars, in batch mode"),
    "cost_usd": _l("cost (USD)", "the cost in US dollars"),
    "input_tokens": _l("input tokens", "input tokens the endpoints reported"),
    "output_tokens": _l("output tokens", "output tokens the endpoints reported"),
    "spent_usd": _l("spent (USD)", "what the run's calls cost"),
    "state": _l("state", "where the run stands"),
    # the run report's usage, latency and reasoning tables
    "ci_low": _l("CI low", "the lower end of the 95% interval"),
    "ci_high": _l("CI high", "the upper end of the 95% interval"),
    "estimated_usage_calls": _l("calls, usage estimated", "calls whose token usage was estimated, not reported"),
    "first_token_s": _l("first token (s)", "seconds to the first token"),
    "total_s": _l("total (s)", "seconds to the whole reply"),
    "output_tokens_per_s": _l("output tokens/s", "output tokens per second"),
    "with_reasoning": _l("with reasoning", "calls that returned reasoning"),
    "reasoning_chars": _l("reasoning chars", "characters of reasoning returned"),
    "think_block_kept": _l("think block kept", "replies whose think block was kept"),
    "think_block_stripped": _l("think block stripped", "replies whose think block was stripped"),
    # benchmarks' own tables
    "task_id": _l("task", "the task's id"),
    "award_rate": _l("award rate", "the share of the item's points awarded"),
}

# Headers a table's layout gives a column in its context (the judges' "mean" is their mean score).
IN_CONTEXT: tuple[str, ...] = ("mean score", CLUSTER_CI, WILSON_CI)

# Headers a table builds from its own settings: ``{}`` stands for that part.
TEMPLATES: tuple[str, ...] = (
    "{} " + CI, "{}: " + CLUSTER_CI, "{}: " + WILSON_CI, T_CI, "MDE ({} power)", "share |A - B| > {}", "items needed, {} repeats", "{} [95% CI]",
)

# Abbreviations a header may hold, defined under every table that shows one.
ABBREVIATIONS: dict[str, str] = {
    "CI": "confidence interval (percentile bootstrap)",
    "n": "number of items an estimate rests on",
    "SE": "standard error",
    "MDE": "minimum detectable difference",
    "P(first)": "probability of ranking first",
    "p (Holm)": "p-value adjusted by Holm's method",
    "p (t)": "p-value of the clustered standard error with Student t",
    "t": "Student t on the clusters, with the clustered standard error",
    "rho": "correlation",
    "tau-b": "Kendall's rank correlation",
    "s.d.": "standard deviation",
    "Var(d)": "variance of the item-score difference",
    "USD": "US dollars",
    "est.": "estimated",
    "tok.": "tokens",
    "var.": "variance",
}

# Values shown in place of a machine name (the records keep the machine name).
VALUES: dict[str, str] = {
    "alpha": "Krippendorff's alpha (interval)",
    "offset": "offset from the panel mean",
}


def header(name: Any) -> str:
    """The header every view shows for a column named ``name`` (its machine name if none)."""
    text = str(name)
    found = LABELS.get(text)
    if found is not None:
        return found.header
    if text.startswith("items_needed_K="):
        return f"items needed, {text.split('=', 1)[1]} repeats"
    first, _, rest = text.partition(" ")   # a flattened two-level column: "total_s median"
    if rest and first in LABELS:
        return f"{LABELS[first].header} {rest}"
    return text


def estimate_title(name: str) -> str:
    """The title of an estimate's cell: its header and the interval it carries."""
    return f"{header(name)} {CI}"


def value_text(value: Any) -> Any:
    """A cell's value as shown: a statistic's machine name in words (anything else unchanged)."""
    return VALUES.get(value, value) if isinstance(value, str) else value


def _template(pattern: str) -> re.Pattern[str]:
    return re.compile("^" + ".+".join(re.escape(part) for part in pattern.split("{}")) + "$")


_PATTERNS = tuple(_template(t) for t in TEMPLATES)


def known(text: str, extra: Iterable[str] = ()) -> bool:
    """Whether ``text`` is a header of the vocabulary (``extra``: words a table adds of its
    own source, a benchmark's metric labels)."""
    words = {label.header for label in LABELS.values()} | set(IN_CONTEXT) | set(extra)
    return text in words or any(p.match(text) for p in _PATTERNS)


def snake_case(text: str) -> bool:
    """A code name (``score_full``, ``n_own``): what a reader must never see as a header."""
    return bool(re.search(r"\b[a-z0-9]+_[a-z0-9_]+\b", text))


def abbreviations(headers: Sequence[str]) -> str:
    """The definitions of the abbreviations ``headers`` use, as one sentence (empty: none)."""
    used = []
    for short, meaning in ABBREVIATIONS.items():
        token = re.compile(r"(?<![\w.(])" + re.escape(short) + r"(?![\w(])")
        if any(token.search(h) for h in headers):
            used.append(f"{short}: {meaning}")
    return ("Abbreviations: " + "; ".join(used) + ".") if used else ""


def data_dictionary(columns: Iterable[str]) -> list[dict[str, str]]:
    """One row per machine column: its name, the header views show, and what it means."""
    rows = []
    for column in columns:
        base = _base(str(column))
        found = LABELS.get(base)
        suffix = str(column)[len(base):]
        meaning = found.meaning if found else ""
        if suffix in ("_ci_low", "_low"):
            meaning = f"lower end of the 95% interval of {header(base)}"
        elif suffix in ("_ci_high", "_high"):
            meaning = f"upper end of the 95% interval of {header(base)}"
        elif suffix == "_n":
            meaning = f"the number of items {header(base)} rests on"
        rows.append({"column": str(column), "header": header(column) if not suffix else header(base) + suffix.replace("_", " "),
                     "meaning": meaning})
    return rows


def _base(column: str) -> str:
    for suffix in ("_ci_low", "_ci_high", "_low", "_high", "_n"):
        if column.endswith(suffix) and column[: -len(suffix)]:
            return column[: -len(suffix)]
    return column


def metric_words(metrics: Iterable[Any]) -> Mapping[str, str]:
    """A benchmark's metrics by machine name -> the short word every table uses for it (the
    label's part before its colon: ``All``, ``Scored``)."""
    return {m.name: str(m.label).split(":")[0] for m in metrics}
