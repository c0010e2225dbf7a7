"""Tables (Markdown / LaTeX / CSV), figures and the whole report, on a synthetic MLflow study;
the report's attachment to the study's parent run leaves the run's status alone."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from ablate import tracking
from ablate.report.data.load import load_study_data
from ablate.report.render import formats
from ablate.report.render.build import build_report
from ablate.report.render.tables import build_tables
from ablate.study import Budget, EvalSpec, Study, arm

STEPS = 4


def tiny_study() -> Study:
    return Study(
        name="synth",
        base_models=["hopeless"],
        arms=[arm("grpo", "grpo", kl_coef=0.0), arm("dr_grpo", "dr_grpo")],
        seeds=[0, 1, 2],
        budget=Budget(max_steps=STEPS, prompts_per_step=2, group_size=2, max_new_tokens=16),
        eval=EvalSpec(every=2, n_samples=2, ks=(1, 2), max_problems=3),
        passk=None,
    )


def log_trial(parent: tracking.StudyRun, trial, rng, outcome="finished", close=True) -> None:
    tags = {
        "ablate.arm": trial.arm,
        "ablate.seed": str(trial.spec.seed),
        "ablate.model": trial.spec.model,
        "ablate.template": trial.spec.template,
    }
    tracker = parent.trial_tracker(trial.id, run_name=trial.id, tags=tags)
    lift = 0.1 if trial.arm == "dr_grpo" else 0.0
    for step in range(STEPS + 1):
        tracker.log_metrics(
            {
                "length/incorrect_mean": 10 + step,
                "entropy/mean": 0.1,
                "policy/ratio_var": 0.01 * step,
                "policy/seq_ratio_var": 0.001,
                "length/mean": 10 + step,
                "budget/generated_tokens": 100 * step,
            },
            step,
        )
        if step % 2 == 0:
            acc = 0.3 + lift * step / STEPS + rng.normal(0, 0.02)
            tracker.log_metrics(
                {
                    "eval/pass_at_1": acc,
                    "eval/pass_at_2": acc + 0.2,
                    "eval/budget_generated_tokens": 100 * step,
                },
                step,
            )
            tracker.log_samples(
                "eval",
                [
                    dict(
                        problem_id=p,
                        sample=s,
                        correct=bool(rng.random() < acc),
                        length=12,
                        truncated=False,
                    )
                    for p in range(3)
                    for s in range(2)
                ],
                step,
            )
    tracker.set_tags(
        {
            "ablate.outcome": outcome,
            "ablate.outcome_message": "" if outcome == "finished" else "NaN loss",
        }
    )
    if close:
        tracker.close("FINISHED")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    results, out = tmp_path_factory.mktemp("results"), tmp_path_factory.mktemp("reports")
    study, rng = tiny_study(), np.random.default_rng(0)
    uri = tracking.default_uri(results)
    store = tracking.open_store(uri)
    store.init()
    parent = store.open_study(study.name)
    trials = study.trials()
    for trial in trials[:-2]:  # dr_grpo seed 2 missing, dr_grpo seed 1 diverged
        log_trial(parent, trial, rng)
    log_trial(parent, trials[-2], rng, outcome="diverged")
    parent.close("FINISHED")
    folder = build_report(study, results, out, curve_axis="generated_tokens")
    return study, results, uri, folder


def test_report_writes_every_output(report):
    _, _, _, folder = report
    for name in ("report.md", "report.html"):
        assert (folder / name).is_file()
    tables = ("configuration", "main", "equal_tokens", "survival", "incomplete", "measures")
    for table in (*tables, "claims", "analytic", "dynamics", "headline"):
        for ext in ("md", "tex", "csv"):
            assert (folder / "tables" / f"{table}.{ext}").is_file()
    assert (folder / "tables" / "paper.tex").is_file()
    figures = ("learning_curves", "entropy", "ratio_variance_vs_length", "length_by_correctness")
    for fig in (*figures, "forest_plot"):
        assert (folder / "figures" / f"{fig}.png").stat().st_size > 1000
        assert (folder / "figures" / f"{fig}.pdf").read_bytes().startswith(b"%PDF")
    # one base model: base-model selection has nothing to compare, so no figure
    assert not (folder / "figures" / "base_model_selection.png").exists()


def test_html_is_self_contained(report):
    text = (report[3] / "report.html").read_text()
    assert text.count("data:image/png;base64,") >= 4
    assert "src='figures/" not in text and "<table>" in text


def test_incomplete_trials_are_listed_and_diverged_ones_are_their_own_outcome(report):
    folder = report[3]
    incomplete = pd.read_csv(folder / "tables" / "incomplete.csv")
    assert sorted(incomplete["status"]) == ["FINISHED", "MISSING"]
    assert set(incomplete["reason"]) == {"NaN loss", "no run (not started)"}
    main = pd.read_csv(folder / "tables" / "main.csv").set_index("arm")
    assert main.loc["grpo", "seeds"] == "3/3"
    assert main.loc["dr_grpo", "seeds"] == "2/3 (1 diverged, 1 failed/missing)"
    # seed 0 finished, seed 1 diverged (its own outcome), seed 2 missing: pass@1 and Δ are
    # seed 0's, the divergence columns count the diverged seed
    data = load_study_data(report[0], report[1], report[2])
    finished = data.trials[(data.trials["arm"] == "dr_grpo") & data.trials["complete"]]
    # the task-level reading averages the per-problem records of the final eval
    samples = data.samples[data.samples["trial_id"].isin(finished["trial_id"])]
    final = samples[samples["step"] == samples["step"].max()]["correct"].astype(float).mean()
    assert main.loc["dr_grpo", "pass@1"] == pytest.approx(final)
    assert main.loc["dr_grpo", "pass@1 N"] == 1 and np.isnan(main.loc["dr_grpo", "pass@1 low"])
    assert main.loc["dr_grpo", "Δ pass@1 N"] == 1  # seed 0, paired with grpo's
    assert main.loc["dr_grpo", "diverged"] == "1/2 vs 0/3"  # of the runs with an outcome
    survival = pd.read_csv(folder / "tables" / "survival.csv").set_index("arm")
    assert survival.loc["dr_grpo", ["planned", "finished", "diverged"]].tolist() == [3, 1, 1]


def parent_status(uri: str, study_name: str) -> str:
    from mlflow.tracking import MlflowClient

    run_id = tracking.open_store(uri).find_study(study_name).run_id
    return MlflowClient(uri).get_run(run_id).info.status


def test_report_is_attached_to_the_study_run(report):
    study, _, uri, _ = report
    store = tracking.open_store(uri)
    attached = store.list_artifacts(store.find_study(study.name).run_id, "report")
    assert "report/report.html" in attached and "report/tables" in attached
    figures = store.list_artifacts(store.find_study(study.name).run_id, "report/figures")
    assert {"report/figures/forest_plot.png", "report/figures/forest_plot.pdf"} <= set(figures)
    assert parent_status(uri, study.name) == "FINISHED"  # as it was


SYNTH_STUDY_FILE = f"""
from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name="synth",
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo", kl_coef=0.0), arm("dr_grpo", "dr_grpo")],
    seeds=[0, 1, 2],
    budget=Budget(max_steps={STEPS}, prompts_per_step=2, group_size=2, max_new_tokens=16),
    eval=EvalSpec(every=2, n_samples=2, ks=(1, 2), max_problems=3),
    passk=None,
)
"""


def test_ablate_report_leaves_a_study_still_training_elsewhere_running(tmp_path):
    """A report written while another runner trains a trial must not close the study's parent
    run: that runner closes it when it is done (the runner's rule, `runner._close_parent`)."""
    from ablate.commands.cli import main

    study_file = tmp_path / "synth.py"
    study_file.write_text(SYNTH_STUDY_FILE)
    study, rng, results = tiny_study(), np.random.default_rng(1), tmp_path / "results"
    uri = tracking.default_uri(results)
    store = tracking.open_store(uri)
    store.init()
    parent = store.open_study(study.name)
    trials = study.trials()
    for trial in trials[:-1]:
        log_trial(parent, trial, rng)
    log_trial(parent, trials[-1], rng, close=False)  # RUNNING in another runner
    argv = ["report", str(study_file), "--results", str(results), "--out", str(tmp_path / "r")]
    assert main(argv) == 0
    assert parent_status(uri, study.name) == "RUNNING"
    assert "report/report.md" in store.list_artifacts(parent.run_id, "report")


def test_an_unknown_curve_axis_is_one_line_before_anything_is_read(tmp_path, capsys):
    from ablate.commands.cli import main

    study_file = tmp_path / "synth.py"
    study_file.write_text(SYNTH_STUDY_FILE)
    argv = ["report", str(study_file), "--results", str(tmp_path / "none"), "--curve-axis", "x"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "curve axis 'x' is not one of step, generated_tokens" in err and "\n" not in err
    assert not (tmp_path / "none").exists()


def test_load_reads_curves_and_samples_and_caches_them(report):
    study, results, uri, _ = report
    data = load_study_data(study, results, uri)
    assert set(data.samples["step"]) == {0, 2, 4}
    assert len(data.samples) == 5 * 3 * 6  # 5 runs × 3 evals × 3 problems × 2 samples
    assert (results / study.name / "report_cache" / "history.parquet").is_file()
    curve = data.history[(data.history["metric"] == "eval/pass_at_1")]
    assert sorted(curve["step"].unique()) == [0, 2, 4]


_HEADER_CELL = re.compile(r"\\begin\{tabular\}\[b\]\{@\{\}[lr]@\{\}\}.*?\\end\{tabular\}")
_COLUMN_SPEC = re.compile(r"[lcr]|p\{[^}]*\}")


def _panels(tex: str) -> list[tuple[int, list[int]]]:
    """Per tabular (a wide table is split into panels): its column count and each row's."""
    tex = _HEADER_CELL.sub("HEADER", tex)  # a multi-line header is a tabular inside a cell
    out = []
    for body in tex.split(r"\begin{tabular}")[1:]:
        body = body.split(r"\end{tabular}")[0]
        spec = re.match(r"\{((?:[lcr]|p\{[^}]*\})+)\}", body).group(1)
        body = body[len(spec) + 2 :]
        rows = [r for r in body.split(r"\tabularnewline")[:-1]]
        out.append(
            (len(_COLUMN_SPEC.findall(spec)), [r.replace(r"\&", "").count("&") + 1 for r in rows])
        )
    return out


def test_latex_tables_are_balanced_with_one_column_count_per_panel(report):
    for tex_path in (report[3] / "tables").glob("*.tex"):
        tex = tex_path.read_text()
        assert tex.isascii(), tex_path.name  # pdflatex needs no Unicode support
        assert tex.count(r"\begin{tabular}") == tex.count(r"\end{tabular}") >= 1
        assert tex.count("{") == tex.count("}"), tex_path.name
        assert tex.count("$") % 2 == 0, tex_path.name
        panels = _panels(tex)
        for width, counts in panels:
            assert counts and set(counts) == {width}, tex_path.name
        assert tex.count(r"\toprule") == tex.count(r"\bottomrule") == len(panels)


def test_main_latex_shows_the_interval_ends_and_explains_the_marks(report):
    tex = (report[3] / "tables" / "main.tex").read_text()
    assert r"$\pm$" not in tex and re.search(r"\d\.\d+ \[\d\.\d+, \d\.\d+\]", tex)
    assert "Holm" in tex and "about the task" in tex and "verdict" in tex
    assert "Wilcoxon" not in tex and r"\textbf{" not in tex  # nothing here is significant


def test_report_opens_with_findings_then_the_forest_plot_then_the_tables(report):
    md = (report[3] / "report.md").read_text()
    order = ["## Findings", "## Every contrast, with", "## Effects at a glance", "## Arms and what"]
    assert [md.index(h) for h in order] == sorted(md.index(h) for h in order)
    assert md.index("## Arms and what") < md.index("## Final pass@1") < md.index("## Figures")
    assert "too few seeds" in md and "diverged" in md.split("## Arms and what")[0]
    assert "](figures/forest_plot.png)" in md.split("## Effects at a glance")[0]
    html = (report[3] / "report.html").read_text()
    found, forest = html.index("class='findings'"), html.index("alt='Every contrast")
    assert found < forest < html.index("<table>")


def test_headings_are_written_for_people_in_every_format(report):
    from ablate.report.render.tables import TABLES

    folder = report[3]
    names = {spec.name for spec in TABLES}
    md = (folder / "report.md").read_text()
    html = (folder / "report.html").read_text()
    tex = (folder / "tables" / "paper.tex").read_text()
    headings = re.findall(r"^#+ (.*)$", md, re.M) + re.findall(r"<h[23]>(.*?)</h[23]>", html)
    headings += re.findall(r"\\(?:sub)?section\*\{(.*?)\}\n", tex)
    assert len(headings) > 20
    for heading in headings:
        assert heading not in names and "_" not in heading and heading[0].isupper(), heading
    assert re.findall(r"alt='([^']*)'", html) and all(
        "_" not in alt for alt in re.findall(r"alt='([^']*)'", html)
    )


def test_cells_below_three_seeds_show_a_mean_only(report):
    study, results, uri, _ = report
    built = build_tables(load_study_data(study, results, uri))
    main = formats.to_markdown(next(t for t in built.tables if t.name == "main"))
    dr = next(line for line in main.splitlines() if line.startswith("| dr_grpo"))
    assert "n=2: too few seeds for an interval" in dr and "[" not in dr
    grpo = next(line for line in main.splitlines() if line.startswith("| grpo"))
    assert "(N=" not in main and re.search(r"\d\.\d+ \[\d\.\d+, \d\.\d+\]", grpo)


STUDY_FILE = """
from ablate.factors.finding import Finding
from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name={name!r},
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo", kl_coef=0.0), arm("dr_grpo", "dr_grpo")],
    seeds=[0, 1, 2],
    budget=Budget(max_steps=4, prompts_per_step=2, group_size=2, max_new_tokens=16),
    eval=EvalSpec(every=2, n_samples=2, ks=(1, 2), max_problems=3),
    passk=None,
    findings=[
        Finding(
            id={finding!r},
            paper="Some paper, §1: Dr. GRPO learns faster",
            statement="dr_grpo − grpo, pass@1: > 0",
            study={name!r},
            model="hopeless",
            arm="dr_grpo",
            reference="grpo",
            direction=+1,
            mechanism="entropy/mean",
        )
    ],
)
"""


def test_a_report_of_several_studies_writes_each_and_tests_their_findings_together(
    report, tmp_path, capsys
):
    from ablate.commands.cli import main
    from ablate.study import load_study

    study, results, _, _ = report
    files = {"synth": tmp_path / "synth.py", "never_ran": tmp_path / "never_ran.py"}
    for (name, path), finding in zip(files.items(), ("lift", "never"), strict=True):
        path.write_text(STUDY_FILE.format(name=name, finding=finding))
    declared = load_study(files["synth"])  # the fixture's study, with a finding declared
    assert [t.id for t in declared.trials()] == [t.id for t in study.trials()]
    out = tmp_path / "reports"
    args = ["report", *map(str, files.values()), "--results", str(results), "--out", str(out)]
    assert main(args) == 0
    assert "skipped: no runs of study 'never_ran'" in capsys.readouterr().err
    assert (out / "synth" / "report.html").is_file() and not (out / "never_ran").exists()
    claims = pd.read_csv(out / "tables" / "claims.csv").set_index("finding")
    assert list(claims.index) == ["lift", "never"]
    # dr_grpo: seed 0 finished, seed 1 diverged (pass@1 = 0), seed 2 missing: 2 seeds
    assert claims.loc["lift", ["seeds", "verdict"]].tolist() == [2, "not testable at this setting"]
    mechanism = claims.loc["lift", "mechanism (arm vs reference)"]
    assert mechanism == "entropy/mean: 0.1 vs 0.1; n=2: too few seeds for a test (needs 3)"
    assert claims.loc["never", "verdict"] == "not tested"
    for ext in ("md", "tex"):
        assert (out / "tables" / f"claims.{ext}").is_file()
    md = (out / "report.md").read_text()
    assert "[synth](synth/report.md)" in md and "never: study never_ran has no results." in md


def test_a_report_of_several_studies_none_of_which_ran_creates_nothing(tmp_path, capsys):
    from ablate.commands.cli import main

    results, out = tmp_path / "results", tmp_path / "reports"
    files = [tmp_path / "a.py", tmp_path / "b.py"]
    for path, finding in zip(files, ("fa", "fb"), strict=True):
        path.write_text(STUDY_FILE.format(name=path.stem, finding=finding))
    args = ["report", *map(str, files), "--results", str(results), "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "skipped: no runs of study 'a'" in err and "skipped: no runs of study 'b'" in err
    assert err.strip().splitlines()[-1].startswith("error: no study has a finished run in ")
    assert not out.exists() and not results.exists()
    files[1].write_text(STUDY_FILE.format(name="b", finding="fa"))
    assert main(args) == 2
    assert "finding 'fa' is declared by studies 'a' and 'b'" in capsys.readouterr().err
