"""Running the judges' retest study (:mod:`evalnb.judges.retest`) in the judge stage
notebook; its table and the run's other judge statistics (:mod:`evalnb.judges.scores`,
stored in scores.json) in the report.

The study runs only once the protocol is complete (every answer in, every verdict in), so
its sample is drawn from a set that no longer changes and nothing it does can touch a
protocol verdict. Its calls go through the stage path every call takes (the retry policy,
pacing, the spending ceiling, batch mode where an endpoint is set to it) into
``judge_retest.jsonl``; running the cell again resumes it. A failed retest call stays
resumable work of the study; the run's exit status is the protocol's alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalnb.records import lock
from evalnb.views.progress import say
from evalnb.judges import retest as study
from evalnb.judges import scores as judge_stats
from evalnb.judges.scores import stored_columns
from evalnb.pipeline.run import Run, scores
from evalnb.pipeline.stages import _stage, judge_status_table, judgements, judge_names, responses

if TYPE_CHECKING:
    import pandas as pd


def protocol_pending(run: Run) -> int:
    """Protocol calls still to make: answers not final, verdicts not in."""
    answers = responses(run)
    generation = sum(1 for call in run.benchmark.generation_calls()
                     if call.key not in answers or not run.benchmark.generation_done(answers[call.key]))
    verdicts = judgements(run)
    judging = sum(1 for call in run.benchmark.judge_calls(answers)
                  if call.key not in verdicts or not run.benchmark.judge_done(verdicts[call.key]))
    return generation + judging


def judge_retest(run: Run) -> pd.DataFrame | None:
    """The retest study's calls (``judge_retest`` in the parameters; None without it): made
    once the protocol is complete, resumed where it stopped."""
    spec = run.config.judge_retest
    if not spec:
        return None
    pending = protocol_pending(run)
    if pending:
        say(f"judge_retest: waits for the protocol ({pending} calls still to make); run this stage again then")
        return None
    with lock.holding(run.dir, "evalnb.judge_retest"):
        calls = study.retest_calls(spec, run.benchmark.judge_calls(responses(run)), judgements(run),
                                   run.benchmark.judge_done)
        _stage(run, study.STAGE, calls, dict(run.config.judge_roles()), run.benchmark.judge_done)
    return judge_status_table(study.store_records(run.dir).values(), judge_names(run))


def judge_retest_table(run: Run) -> pd.DataFrame | None:
    """Per judge: answers retested, verdicts, the test-retest SD and the share of its score
    variance that is noise (and, for a panel, of the item score's), from scores.json (None:
    no retest study)."""
    import pandas as pd

    from evalnb.views.tables import intervals_layout, readable

    section = scores(run).get(study.SECTION)
    if not section:
        return None
    rows = [{"judge": judge, "answers": j["answers"], "verdicts": j["verdicts"], "failed": j["failed"],
             **stored_columns("retest_sd", j["retest_sd"]), **stored_columns("noise_share", j["noise_share"]),
             **({"note": j["note"]} if j.get("note") else {})}   # few answers: the interval is approximate
            for judge, j in section["judges"].items()]
    if "panel_noise_share" in section:
        rows.append({"judge": "panel (item score)", **stored_columns("retest_sd", None),
                     **stored_columns("noise_share", section["panel_noise_share"])})
    return readable(pd.DataFrame(rows).set_index("judge"), intervals_layout(["retest_sd", "noise_share"]))


def _section(run: Run) -> dict[str, Any]:
    return scores(run).get(judge_stats.SECTION) or {}


def run_reliability(run: Run) -> pd.DataFrame | None:
    """Krippendorff's alpha over the panel and each judge's offset from the panel mean, each
    with its interval (None: the run has no panel)."""
    import pandas as pd

    from evalnb.views.tables import intervals_layout, readable

    section = _section(run)
    if "alpha" not in section:
        return None
    rows = [{"number": "Krippendorff's alpha (interval)", "judge": "panel", **stored_columns("estimate", section["alpha"]),
             "n": section["alpha"]["n"], **({"note": section["alpha"]["note"]} if section["alpha"].get("note") else {})}]
    rows += [{"number": "offset from the panel mean", "judge": label, **stored_columns("estimate", o), "n": o["n"]}
             for label, o in section["offsets"].items()]
    return readable(pd.DataFrame(rows).set_index(["number", "judge"]), intervals_layout(["estimate"], n={"estimate": "n"}))


def run_length_bias(run: Run) -> pd.DataFrame | None:
    """Per judge: Spearman's rho of score with response length and the slope of score on
    log(length), with intervals (None: no per-judge verdicts with their responses)."""
    import pandas as pd

    from evalnb.views.tables import intervals_layout, readable

    section = _section(run).get("length")
    if not section:
        return None
    rows = [{"judge": label, **stored_columns("spearman_rho", v["spearman_rho"]),
             **stored_columns("slope_per_log_char", v["slope_per_log_char"]), "n": v["spearman_rho"]["n"]}
            for label, v in section.items()]
    return readable(pd.DataFrame(rows).set_index("judge"), intervals_layout(["spearman_rho", "slope_per_log_char"], n={"spearman_rho": "n"}))
