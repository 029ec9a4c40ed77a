"""WildTrace contestant repeats (``repeats: K``): K answers per task, each judged by the
full panel; every number over item-level means; K = 1 exactly today's run."""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import evalnb
from evalnb.app.main import main
from evalnb.stats import metrics, intervals as stats
from evalnb.core.errors import ConfigError, DataError, FingerprintMismatch
from evalnb.records.stores import JsonlStore
from evalnb.core.types import Metric
from evalnb.pipeline.accounting import estimate
from evalnb.evidence.items_html import show
from evalnb.pages.statistics import uncertainty_rows
from tests.conftest import deterministic_responder, offline_params, openai_params, sample_tasks
from tests.fakeserver import FakeLLMServer, RecordedRequest, Refusal, Text

K = 3


def varying_responder():
    """A different answer each time a question is asked (the prompt is the same every repeat):
    the n-th ask of a question answers with n in the text, so the judges' totals (a hash of
    their prompt, which holds the answer) differ by repeat; the second ask of wt-sample-01's
    question is refused."""
    asked: Counter[str] = Counter()
    lock = threading.Lock()
    refused_question = sample_tasks()[0]["question_text"].split("\n", 1)[0]

    def respond(request: RecordedRequest) -> Text | Refusal:
        if request.prompt.startswith("STRICT grader."):
            return deterministic_responder(request)
        question = request.prompt.split("Question: ", 1)[1].split("\n", 1)[0]
        with lock:
            asked[question] += 1
            n = asked[question]
        if question == refused_question and n == 2:
            return Refusal()
        return Text(f"Answer {n} to: {question}")
    return respond


@pytest.fixture(scope="module")
def repeated_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("repeats")
    with FakeLLMServer() as server:
        server.responder = varying_responder()
        run = evalnb.open_run(openai_params(tmp, server.url, repeats=K))
        evalnb.generate(run)
        evalnb.judge(run)
        evalnb.aggregate(run)
        run.close()
    return tmp / "run"


def hand_computed(run_dir: Path) -> dict[str, list[float | None]]:
    """Each task's per-repeat scores, from the stored records alone: the panel mean of
    clamp(total / rubric points) for an ok answer, 0 for any other final status; None for a
    repeat answered ok without a full panel (there is none here)."""
    points = {t["task_id"]: sum(i["points"] for i in t["ground_truth"]["scoring_rubric"]) for t in sample_tasks()}
    generated = JsonlStore(run_dir / "generate.jsonl").load()
    judged = JsonlStore(run_dir / "judge.jsonl").load()
    out: dict[str, list[float | None]] = {}
    for task_id in points:
        for n in range(1, K + 1):
            key = task_id if n == 1 else f"{task_id}#{n}"
            record = generated[key]
            assert record["repeat"] == n and record["task_id"] == task_id
            if record["status"] != "ok":
                out.setdefault(task_id, []).append(0.0)
                continue
            totals = [judged[f"{key}::judge{j}"]["total"] for j in (1, 2, 3)]
            out.setdefault(task_id, []).append(float(np.mean([min(1.0, max(0.0, t / points[task_id]))
                                                              for t in totals])))
    return out


def test_k3_numbers_against_numpy_from_the_records(repeated_run: Path) -> None:
    scores = json.loads((repeated_run / "scores.json").read_text())
    per_repeat = hand_computed(repeated_run)
    generated = JsonlStore(repeated_run / "generate.jsonl").load()
    statuses = {tid: [generated[tid if n == 1 else f"{tid}#{n}"]["status"] for n in range(1, K + 1)]
                for tid in per_repeat}
    assert statuses["wt-sample-01"].count("refused") == 1                      # one repeat refused
    assert len(set(json.dumps(per_repeat[t]) for t in per_repeat if "ok" in statuses[t])) > 1
    assert any(len(set(v)) > 1 for v in per_repeat.values())                    # repeats differ
    ooc = [t for t, s in statuses.items() if "out_of_context" in s]
    assert ooc and all(statuses[t] == ["out_of_context"] * K for t in ooc)      # decided once, every repeat

    ids = list(per_repeat)
    matrix = np.array([per_repeat[t] for t in ids]).T                           # repeats x tasks
    item_means = matrix.mean(axis=0)
    rows = {r["task_id"]: r for r in scores["tasks"]}
    assert [rows[t]["score"] for t in ids] == pytest.approx(list(item_means))
    assert scores["all_tasks_overall"] == pytest.approx(item_means.mean())
    ok = np.array([[s == "ok" for s in statuses[t]] for t in ids]).T
    scored_means = [matrix[ok[:, j], j].mean() for j in range(len(ids)) if ok[:, j].any()]
    assert scores["scored_overall"] == pytest.approx(np.mean(scored_means))
    assert scores["scored_n"] == len(scored_means)
    assert scores["metrics"]["coverage"]["value"] == pytest.approx(ok.mean())

    # within-item variance: all_tasks over every task (non-ok repeats 0), scored over ok repeats
    within = scores["repeats"]["within_item_variance"]
    assert within["all_tasks"]["value"] == pytest.approx(np.var(matrix, axis=0, ddof=1).mean())
    scored_var = [np.var(matrix[ok[:, j], j], ddof=1) for j in range(len(ids)) if ok[:, j].sum() >= 2]
    assert within["scored"] == {"value": pytest.approx(np.mean(scored_var)), "n_items": len(scored_var)}
    unc = scores["uncertainty"]["metrics"]
    assert unc["all_tasks"]["within_item_variance"] == pytest.approx(within["all_tasks"]["value"])

    # SE over item means (Miller's recommendation), and clustered by document against statsmodels
    import statsmodels.api as sm

    assert unc["all_tasks"]["se"] == pytest.approx(np.std(item_means, ddof=1) / np.sqrt(len(ids)))
    assert unc["scored"]["se"] == pytest.approx(np.std(scored_means, ddof=1) / np.sqrt(len(scored_means)))
    docs = [rows[t]["corpus_file"] for t in ids]
    fit = sm.OLS(item_means, np.ones(len(ids))).fit(cov_type="cluster", cov_kwds={"groups": np.unique(
        docs, return_inverse=True)[1]})
    assert unc["all_tasks"]["clustered_se"] == pytest.approx(float(fit.bse[0]))

    # the bootstrap resamples tasks with all their repeats: the item-mean bootstrap, written here
    # from its recipe (numpy's default_rng(seed), integers(0, n, size=(n_boot, n)), one stratum),
    # so it is pinned to rounding: resampling the repeats again within tasks (about a fifth wider
    # at K = 3) would fail it
    ci = scores["metrics"]["all_tasks"]["ci"]
    assert ci["repeats"] == K and "with all their repeats" in ci["method"]
    rng = np.random.default_rng(ci["seed"])
    draws = item_means[rng.integers(0, len(ids), size=(ci["n_boot"], len(ids)))].mean(axis=1)
    assert (ci["low"], ci["high"]) == pytest.approx(tuple(np.quantile(draws, [0.025, 0.975])), abs=1e-12)

    shown = {row["metric"]: row for row in uncertainty_rows(scores)}   # the report's standard-errors table
    assert shown["all_tasks"]["repeats"] == K
    assert shown["all_tasks"]["within_item_variance"] == within["all_tasks"]["value"]
    for name in ("all_tasks", "scored"):
        assert "not the protocol's single-answer number" in scores["metrics"][name]["label"]
    assert scores["repeats"]["k"] == K
    assert sum(scores["repeats"]["answer_status_counts"].values()) == K * len(ids)
    assert rows["wt-sample-01"]["status"] == "ok"
    assert [a["status"] for a in rows["wt-sample-01"]["repeats"]].count("refused") == 1


def test_k3_run_verifies_and_shows_every_answer(repeated_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(repeated_run)]) == 0
    assert capsys.readouterr().out == ""
    generated = JsonlStore(repeated_run / "generate.jsonl").load()
    page = (repeated_run / "tasks.html").read_text()
    text = str(show(repeated_run, "wt-sample-02"))
    for n in range(1, K + 1):
        answer = generated["wt-sample-02" if n == 1 else f"wt-sample-02#{n}"]["text"]
        assert answer in text and answer in page
        assert f"repeat {n}: response" in text
    assert "repeat 2: judge1" in text


def test_a_failed_judge_of_one_repeat_is_resumable_never_a_zero(server: FakeLLMServer, tmp_path: Path) -> None:
    """One judge fails on one answer (repeat 2 of a task): that task, and the run, wait for it;
    the rerun asks that judge that one question and nothing else."""
    answers = varying_responder()
    failing = sample_tasks()[1]["question_text"].split("\n", 1)[0]

    def respond(request: RecordedRequest) -> Text | Refusal:
        if request.prompt.startswith("STRICT grader.") and request.model == "judge-2" \
                and f"RESPONSE:\nAnswer 2 to: {failing}" in request.prompt:
            return Text("I will not give a number.")
        return answers(request)
    server.responder = respond
    params = openai_params(tmp_path, server.url, repeats=K)
    run = evalnb.open_run(params)
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.aggregate(run)
    scores = json.loads(run.path("scores.json").read_text())
    row = next(r for r in scores["tasks"] if r["task_id"] == "wt-sample-02")
    assert scores["complete"] is False and scores["all_tasks_overall"] is None
    assert scores["resumable"] == {"generation": 0, "judge_calls": 1}
    assert row["score"] is None and [a["score"] is None for a in row["repeats"]].count(True) == 1
    run.close()
    before = len(server.requests)
    server.responder = deterministic_responder
    again = evalnb.open_run(params)
    evalnb.generate(again)
    evalnb.judge(again)
    evalnb.aggregate(again)
    assert len(server.requests) - before == 1
    assert json.loads(again.path("scores.json").read_text())["complete"] is True


def test_k1_is_byte_identical_to_no_key(tmp_path: Path) -> None:
    files = ("scores.json", "evidence.json", "tasks.html", "config.json", "fingerprint.json")
    clock = ("started_at", "elapsed_s")   # when a call ran: the only fields two runs may differ in

    def unclocked(value: object) -> object:
        if isinstance(value, dict):
            return {k: unclocked(v) for k, v in value.items() if k not in clock}
        return [unclocked(v) for v in value] if isinstance(value, list) else value

    def made(**extra: object) -> dict[str, object]:
        shutil.rmtree(tmp_path / "run", ignore_errors=True)
        run = evalnb.open_run(offline_params(tmp_path, **extra))
        evalnb.generate(run)
        evalnb.judge(run)
        evalnb.aggregate(run)
        run.close()
        out: dict[str, object] = {name: run.path(name).read_bytes() for name in files}
        out["responses.json"] = unclocked(json.loads(run.path("responses.json").read_text()))
        for stage in ("generate", "judge"):   # every store line, in order, but for the clock
            out[stage] = [unclocked(json.loads(line)) for line in run.path(f"{stage}.jsonl").read_text().splitlines()]
        return out

    without = made()
    assert made(repeats=1) == without
    assert not any("repeat" in record for record in without["generate"])   # type: ignore[attr-defined]
    scores = json.loads(without["scores.json"])   # type: ignore[arg-type]
    assert "repeats" not in scores and "repeats" not in scores["config"]


def test_changing_k_is_refused_on_resume(tmp_path: Path) -> None:
    params = openai_params(tmp_path, "http://127.0.0.1:9")
    evalnb.open_run(params)
    with pytest.raises(FingerprintMismatch, match=r"(?s)refusing to resume.*repeats: <absent> -> 3"):
        evalnb.open_run(params | {"repeats": 3})
    shutil.rmtree(tmp_path / "run")
    evalnb.open_run(params | {"repeats": 3})
    with pytest.raises(FingerprintMismatch, match=r"repeats: 3 -> 2"):
        evalnb.open_run(params | {"repeats": 2})
    run = evalnb.open_run(params | {"repeats": 3})
    assert run.benchmark.repeats == 3 and "not the protocol" in run.summary().loc["repeats"].iloc[0]


def test_estimate_counts_k_times_the_calls(tmp_path: Path) -> None:
    def counts(k: int) -> dict[str, tuple[int, int, int]]:
        run = evalnb.open_run(openai_params(tmp_path / str(k), "http://127.0.0.1:9", repeats=k))
        rows = estimate(run.config, run.benchmark, run.tasks, run.dir)
        return {f"{r['stage']} {r['model']}": (r["calls"], r["to_make"], r["est_input_tokens"]) for r in rows}
    one, three = counts(1), counts(3)
    assert one["generate contestant-x"][:2] == (12, 11)          # the long document: no call
    assert three == {key: (3 * c, 3 * m, pytest.approx(3 * t, abs=3)) for key, (c, m, t) in one.items()}


@pytest.mark.parametrize("value", [0, -1, "3", True, 1.5, None])
def test_repeats_must_be_a_positive_integer(tmp_path: Path, value: object) -> None:
    with pytest.raises(ConfigError, match=r"repeats: expected a positive integer"):
        evalnb.open_run(offline_params(tmp_path, repeats=value))


def test_repeats_refused_with_imported_answers_and_on_a_clashing_task_id(tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({t["task_id"]: "an answer" for t in sample_tasks()}))
    with pytest.raises(ConfigError, match=r"repeats: .*one answer per task"):
        evalnb.open_run(offline_params(tmp_path, responses=str(answers), repeats=2))
    tasks = sample_tasks()
    tasks[1]["task_id"] = f"{tasks[0]['task_id']}#2"
    (tmp_path / "d.json").write_text(json.dumps(tasks))
    with pytest.raises(DataError, match=r"task_id.*repeat 2 of task 'wt-sample-01'"):
        evalnb.open_run(offline_params(tmp_path, data=str(tmp_path / "d.json"), repeats=2))


def test_item_mean_is_the_mean_of_item_means_and_the_cell_mean_at_one_repeat() -> None:
    rng = np.random.default_rng(3)
    values = rng.random((3, 40))
    values[rng.random((3, 40)) < 0.3] = np.nan
    values[:, 5] = np.nan
    fn, form_metric = metrics.item_mean(), Metric("s", "s", metrics.item_mean())
    per_item = [np.mean(col[~np.isnan(col)]) for col in values.T if (~np.isnan(col)).any()]
    expected = np.mean(per_item)
    assert float(fn(values, {})) == pytest.approx(float(expected))
    from evalnb.stats.clustered import form_of
    form = form_of(form_metric.fn, values, {})
    assert form is not None and form.value() == pytest.approx(float(expected))
    one = values[:1]
    plain = Metric("s", "s", metrics.mean(missing="exclude"))
    a = stats.metric_intervals(one, [form_metric], n_boot=500, seed=1)["s"]
    b = stats.metric_intervals(one, [plain], n_boot=500, seed=1)["s"]
    assert (a.mean, a.low, a.high) == (b.mean, b.low, b.high)                  # bit for bit
    assert float(metrics.count_items_scored()(values, {})) == int((~np.isnan(values)).any(axis=0).sum())
