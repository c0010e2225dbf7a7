"""A study's results store → tidy pandas frames: the report's one data contract (`StudyData`).

- `trials`: one row per planned trial (missing ones included): trial_id, arm, model, template,
  seed, status (FINISHED / FAILED / KILLED / RUNNING / MISSING), outcome, reason, run_id, complete
  (bool: finished), diverged_step (NaN unless diverged), engine, the arm's fields (`algo.*`).
- `algorithms`: arm -> its `Algorithm`; `replicates`: A/A replicate arm -> the arm it replicates.
- `history`: trial_id, arm, model, template, seed, step, metric, value (every logged curve).
- `samples`: trial_id, arm, model, template, seed, step, problem_id, sample, correct, length,
  truncated (per-sample eval outcomes, from the `samples/eval_step*.parquet` artifacts).
- `passk`: the study's base Pass@k table (`results/<study>/passk.csv`).
- `elicitation`: the best-elicited base's per-problem rates (`results/<study>/elicitation.csv`,
  `ablate.study.elicit_phase.COLUMNS`); empty when the study declares no elicitation grid.
Frames are cached on disk under `results/<study>/report_cache/`, keyed by the runs' ids, status
and end times, so a second report of an unchanged study reads no metric history from the store.
The store is read through the tracking port (`StudyStore`, `RunTable`), whichever it is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import re
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ablate import tracking
from ablate.base import durable
from ablate.base.errors import AblateError
from ablate.factors.algorithms import RENAMED, Algorithm
from ablate.factors.eval_spec import CurveSpec, EvalSpec
from ablate.factors.spec import Budget, Optim
from ablate.study.identity import identified_trials
from ablate.study.study import Study
from ablate.study.tuning import FILE as TUNING_FILE
from ablate.study.tuning import RECIPES_FILE, TuneSpec, chosen_values, shared_setting
from ablate.tracking import RunTable, StudyStore

KEYS = ["trial_id", "arm", "model", "template", "seed"]
SAMPLE_COLUMNS = ["problem_id", "sample", "correct", "length", "truncated"]
_EVAL_FILE = re.compile(r"eval_step(\d+)\.parquet$")


@dataclass(frozen=True)
class StudyData:
    name: str
    reference_arm: str
    trials: pd.DataFrame
    history: pd.DataFrame
    samples: pd.DataFrame
    passk: pd.DataFrame
    group_size: int = 0
    max_new_tokens: int = 0
    algorithms: Mapping[str, Algorithm] = field(default_factory=dict)
    replicates: Mapping[str, str] = field(default_factory=dict)
    effect_of_interest: float | None = None
    curves: CurveSpec | None = None
    equivalence_margin: float | None = None  # None: effect_of_interest
    primary: str = "equal steps"
    looks: tuple[int, ...] = ()
    spending: str = "obrien_fleming"
    positive_control: str | None = None
    graded_control: str | None = None
    control_effects: Mapping[str, float] = field(default_factory=dict)  # declared, by arm
    elicitation: pd.DataFrame = field(default_factory=pd.DataFrame)
    eval_samples: int = 0  # K: samples per eval problem
    task: str = ""
    budget: Budget | None = None  # the trials' training budget, for the report's opening
    optim: Optim | None = None
    eval_spec: EvalSpec | None = None
    tune: TuneSpec | None = None  # the declared per-arm tuning (None: one shared setting)
    tuning: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Every tuning trial's setting and score (`ablate.study.tune_phase.COLUMNS`)."""
    recipes: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Per-problem pass rates of the final checkpoints under each eval recipe
    (`ablate.study.recipe_phase.COLUMNS`); empty without `EvalSpec.robustness`."""
    shared: Mapping[str, Any] = field(default_factory=dict)
    """The study's own values of the tuned params (an untuned arm's setting)."""

    def chosen(self) -> dict[str, dict[str, float]]:
        """arm -> its tuned values (an A/A replicate: its twin's); empty without tuning."""
        picked = chosen_values(self.tuning)
        return picked | {a: picked[t] for a, t in self.replicates.items() if t in picked}

    @property
    def margin(self) -> float | None:
        """The declared equivalence margin (TOST), else the effect of interest."""
        return self.equivalence_margin or self.effect_of_interest

    def complete(self) -> pd.DataFrame:
        return self.trials[self.trials["complete"].astype(bool)]

    def diverged(self) -> pd.DataFrame:
        return self.trials[self.trials["outcome"] == "diverged"]

    def algorithm(self, arm: str) -> Algorithm:
        """The arm's algorithm (rebuilt from the `algo.*` columns when not given: pandas turns
        None into NaN there, so NaN is read back as None)."""
        if arm in self.algorithms:
            return self.algorithms[arm]
        row = self.trials[self.trials["arm"] == arm].iloc[0]
        values = {
            c[len("algo.") :]: (None if _is_nan(row[c]) else row[c])
            for c in self.trials.columns
            if c.startswith("algo.")
        }
        return _algorithm_from(values)

    @property
    def compared_arms(self) -> list[str]:
        """Arms in study order, A/A replicates and the controls left out."""
        arms = list(dict.fromkeys(self.trials["arm"]))
        controls = (self.positive_control, self.graded_control)
        return [a for a in arms if a not in self.replicates and a not in controls]


def _is_nan(value: object) -> bool:
    return isinstance(value, float) and value != value


def _algorithm_from(values: dict) -> Algorithm:

    names = {f.name for f in dataclasses.fields(Algorithm)} | set(RENAMED)
    clean = {k: (v.item() if hasattr(v, "item") else v) for k, v in values.items() if k in names}
    # a run saved before a rename: a set old field is refused with its new spelling, an unset one
    # (None) is dropped
    clean = {k: v for k, v in clean.items() if k not in RENAMED or v is not None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # inert-factor warnings were shown when the study loaded
        return Algorithm(**clean)


def planned_trials(study: Study, chosen: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The study's expanded grid with each arm's algorithm fields (`algo.*`), at each tuned
    arm's `chosen` values."""
    algos = {a.name: dataclasses.asdict(a.algorithm) for a in study.arms}
    rows = []
    for t in _identified(study, chosen):
        row = dict(trial_id=t.id, arm=t.arm, model=t.spec.model, template=t.spec.template)
        row.update(seed=t.spec.seed, model_weights=t.spec.model_weights, engine=t.spec.engine)
        row.update({f"algo.{k}": v for k, v in algos[t.arm].items()})
        rows.append(row)
    return pd.DataFrame(rows)


def _identified(study: Study, chosen: Mapping[str, Any] | None = None) -> list:
    """Trials with their base models' weights hashes (as the runner ids them); without them
    when a model folder is gone (runs are then matched by cell)."""
    try:
        return identified_trials(study, chosen=chosen)
    except AblateError:
        return study.trials(chosen)


def _other_weights(trial: pd.Series, run: pd.Series) -> bool:
    """A run matched by cell that was trained from different base weights (a rebuilt model)."""
    mine, theirs = trial.get("model_weights") or "", run.get("model_weights")
    return bool(mine) and isinstance(theirs, str) and bool(theirs) and theirs != mine


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _reason(run: pd.Series) -> str:
    return _text(run.get("outcome_message")) or _text(run.get("outcome"))


def _cell(arm: object, model: object, template: object, seed: object) -> tuple[str, ...]:
    return (str(arm), str(model), str(template), str(seed))


def _runs_by_cell(runs: pd.DataFrame) -> dict[tuple[str, ...], pd.Series]:
    cell = ["arm", "model", "template", "seed"]
    known = runs[cell].notna().all(axis=1)  # runs without the cell tags match no cell
    return {_cell(*(r[c] for c in cell)): r for _, r in runs[known].iterrows()}


def trial_table(planned: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """`planned` joined to their runs (`RunTable.runs`), by trial id, else by (arm, model,
    template, seed) (ids hash the code's config classes, so a code change renames them). A
    trial counts as complete only if its run is FINISHED with outcome `finished` (a diverged or
    failed run is listed, never averaged)."""
    by_id = {r.trial_id: r for _, r in runs.iterrows()} if len(runs) else {}
    by_cell = _runs_by_cell(runs)
    out = planned.copy()
    status, outcome, reason, run_id = [], [], [], []
    for _, trial in out.iterrows():
        run = by_id.get(trial["trial_id"])
        if run is None:
            run = by_cell.get(_cell(*(trial[k] for k in KEYS[1:])))
            if run is not None and _other_weights(trial, run):
                run = None
        if run is None:
            status.append("MISSING"), outcome.append("missing"), run_id.append(None)
            reason.append("no run (not started)")
            continue
        status.append(run["status"]), run_id.append(run["run_id"])
        outcome.append(_text(run.get("outcome")).lower() or "unknown")
        if run["status"] not in ("FINISHED", "FAILED", "KILLED"):
            reason.append(f"run not finished (status {run['status']})")
        else:
            reason.append(_reason(run) if outcome[-1] != "finished" else "")
    out["status"], out["outcome"], out["reason"], out["run_id"] = status, outcome, reason, run_id
    out["complete"] = (out["status"] == "FINISHED") & (out["outcome"] == "finished")
    out["diverged_step"] = [_diverged_step(o, r) for o, r in zip(outcome, reason, strict=True)]
    return out


_DIVERGED_AT = re.compile(r"diverged at step (\d+)")


def _diverged_step(outcome: str, reason: str) -> float:
    if outcome != "diverged":
        return float("nan")
    found = _DIVERGED_AT.search(reason or "")
    return float(found.group(1)) if found else float("nan")


def load_history(store: StudyStore, trials: pd.DataFrame, runs: RunTable) -> pd.DataFrame:
    """Every metric curve of every trial that has a run, as a long frame."""
    frames = []
    for _, trial in trials[trials["run_id"].notna()].iterrows():
        for metric in runs.metrics_of(trial["run_id"]):
            curve = store.metric_history(trial["run_id"], metric)
            frame = pd.DataFrame(curve, columns=["step", "value"])
            frame["metric"] = metric
            for key in KEYS:
                frame[key] = trial[key]
            frames.append(frame)
    columns = [*KEYS, "step", "metric", "value"]
    return (
        pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)
    )


def load_samples(store: StudyStore, trials: pd.DataFrame) -> pd.DataFrame:
    """Per-sample eval outcomes of every trial that has a run (all eval steps)."""
    frames = []
    for _, trial in trials[trials["run_id"].notna()].iterrows():
        if not store.list_artifacts(trial["run_id"], "samples"):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            folder = store.download_artifacts(trial["run_id"], "samples", tmp)
            for path in sorted(folder.glob("eval_step*.parquet")):
                frame = pd.read_parquet(path)
                frame = frame[[c for c in SAMPLE_COLUMNS if c in frame.columns]].copy()
                frame["step"] = int(_EVAL_FILE.search(path.name).group(1))
                for key in KEYS:
                    frame[key] = trial[key]
                frames.append(frame)
    columns = [*KEYS, "step", *SAMPLE_COLUMNS]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True).reindex(columns=columns)


def read_passk(results_dir: Path, study_name: str, name: str = "passk.csv") -> pd.DataFrame:
    """A base-model phase's table; a damaged one is a `StoreError` naming it."""
    path = results_dir / study_name / name
    fix = "delete it: the next `ablate run` of the study writes it again from its cache"
    read = durable.read_whole(path, lambda text: pd.read_csv(io.StringIO(text)), fix)
    return pd.DataFrame() if read is None else read


def _cache_key(trials: pd.DataFrame, runs: pd.DataFrame) -> str:
    """Changes when any trial's run, status or end time changes."""
    end = dict(zip(runs["run_id"], runs["end_time"], strict=True)) if "end_time" in runs else {}
    rows = trials[["trial_id", "run_id", "status"]].astype(str).to_csv(index=False)
    text = rows + json.dumps({str(k): str(v) for k, v in end.items()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cached(folder: Path, key: str, build: dict) -> dict[str, pd.DataFrame]:
    """Read the frames named in `build` from `folder` when its key matches, else build them."""
    stamp = folder / "key.json"
    found = durable.read_valid(stamp, lambda p: json.loads(p.read_text()), "it is built again")
    if isinstance(found, dict) and found.get("key") == key:
        try:
            return {name: pd.read_parquet(folder / f"{name}.parquet") for name in build}
        except (OSError, ValueError):
            pass  # a broken cache is rebuilt
    frames = {name: make() for name, make in build.items()}
    folder.mkdir(parents=True, exist_ok=True)
    for name, frame in frames.items():
        frame.to_parquet(folder / f"{name}.parquet", index=False)
    durable.write_atomic(stamp, json.dumps({"key": key}))
    return frames


def load_study_data(
    study: Study, results_dir: str | Path = "results", tracking_uri: str | None = None
) -> StudyData:
    results_dir = Path(results_dir)
    store = tracking.open_store(tracking_uri or tracking.default_uri(results_dir))
    runs = store.runs(study.name).one_per_trial()  # a trial restarted into a new run: one
    tuning = read_passk(results_dir, study.name, TUNING_FILE) if study.tune else pd.DataFrame()
    chosen = chosen_values(tuning)
    chosen |= {a.name: chosen[a.replicate_of] for a in study.arms if a.replicate_of in chosen}
    trials = trial_table(planned_trials(study, chosen), runs.runs)
    build = {
        "history": lambda: load_history(store, trials, runs),
        "samples": lambda: load_samples(store, trials),
    }
    key = _cache_key(trials, runs.runs)
    frames = _cached(results_dir / study.name / "report_cache", key, build)
    return StudyData(
        name=study.name,
        reference_arm=study.reference_arm,
        trials=trials,
        history=frames["history"],
        samples=frames["samples"],
        passk=read_passk(results_dir, study.name),
        elicitation=read_passk(results_dir, study.name, "elicitation.csv"),
        group_size=study.budget.group_size,
        max_new_tokens=study.budget.max_new_tokens,
        algorithms={a.name: a.algorithm for a in study.arms},
        replicates={a.name: a.replicate_of for a in study.arms if a.replicate_of},
        effect_of_interest=study.effect_of_interest,
        curves=study.curves,
        equivalence_margin=study.equivalence_margin,
        primary=study.primary,
        looks=tuple(study.looks),
        spending=study.spending,
        positive_control=study.positive_control,
        graded_control=study.graded_control,
        control_effects=dict(study.control_effects),
        eval_samples=study.eval.n_samples,
        task=study.task,
        budget=study.budget,
        optim=study.optim,
        eval_spec=study.eval,
        tune=study.tune,
        tuning=tuning,
        recipes=read_passk(results_dir, study.name, RECIPES_FILE),
        shared=_shared(study),
    )


def _shared(study: Study) -> dict[str, Any]:
    """The study's own values of the params its `tune` (or nothing) names."""
    names = list(study.tune.params) if study.tune else ["lr"]
    return shared_setting(study.optim, study.arm(study.reference_arm).algorithm, names)
