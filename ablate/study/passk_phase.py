"""A study's Pass@G phase: every base model × template measured before RL (`passk_sweep`),
cached per model weights, template, task and sampling settings. A cache file is written whole
(temporary name, fsync, rename) and read back only when whole: an empty or partial one (from an
older version, a copy, a bad disk) is measured again with a warning naming it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ablate.base import durable
from ablate.base.records import SamplingParams
from ablate.models import load_model, resolve_model_path, weights_hash
from ablate.rollout.hf import HFEngine
from ablate.study.elicit_phase import elicitation_phase
from ablate.study.study import Study
from ablate.tasks import get_task
from ablate.trial.passk_sweep import SWEEP_COLUMNS, passk_sweep

if TYPE_CHECKING:
    import pandas as pd


def passk_phase(study: Study, cache_dir: Path, progress=None) -> pd.DataFrame:
    """Pass@k of every base model × template before RL, cached per model/template/task/n."""
    import pandas as pd

    p = study.passk
    frames = []
    # every model any trial starts from (extra cells included): gain vs base Pass@G needs them
    models = list(dict.fromkeys(model for _, model, _, _ in study.cells()))
    for model in models:
        for template in p.templates or study.templates:
            # the weights, not only the folder: a model rebuilt in place is measured again
            where = f"{resolve_model_path(model)}@{weights_hash(model)}"
            key = _passk_key(study, where, template)
            cached = cache_dir / f"{key}.csv"
            frame = read_cached(cached, p.ks)
            if frame is not None:
                frames.append(frame)
                continue
            sampling = SamplingParams(
                max_new_tokens=study.budget.max_new_tokens,
                temperature=p.temperature,
                seed=study.seeds[0],
            )
            frame = passk_sweep(
                [model],
                [template],
                get_task(study.task, **dict(study.task_options)),
                n=p.n,
                ks=p.ks,
                sampling=sampling,
                max_problems=p.max_problems,
                engine_factory=lambda name: HFEngine(*load_model(name)),
                progress=progress,
            )
            # a kill or a full disk never leaves half a cell for later runs to read
            durable.write_atomic(cached, frame.to_csv(index=False))
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def base_phases(study: Study, paths: dict[str, Path], parent, hooks) -> None:
    """Pass@G of every base model × template and, where declared, the best-elicited base; both
    cached in the results folder (`paths["passk"]`), written to the study's folder and attached
    to its parent run. `hooks`: the runner's (`on_phase`, `on_passk`)."""

    if hooks.on_phase is not None:
        hooks.on_phase("passk")
    table = passk_phase(study, paths["passk"], hooks.on_passk)  # cached per cell
    parent.attach(durable.write_atomic(paths["study"] / "passk.csv", table.to_csv(index=False)))
    if study.passk.elicit is not None:  # the best-elicited base, cached per model
        table = elicitation_phase(study, paths["passk"], hooks.on_passk)
        csv = durable.write_atomic(paths["study"] / "elicitation.csv", table.to_csv(index=False))
        parent.attach(csv)


def read_cached(path: Path, ks) -> pd.DataFrame | None:
    """The cached cell at `path`: one whole row per k, or None (missing, or empty or partial
    with a warning naming the file: the cell is measured again)."""
    import pandas as pd

    def parse(file: Path) -> pd.DataFrame:
        frame = pd.read_csv(file)
        if list(frame.columns) != list(SWEEP_COLUMNS):
            raise ValueError(f"columns {list(frame.columns)[:4]}..., not the sweep's")
        if sorted(frame["k"].dropna().tolist()) != sorted(ks):
            raise ValueError(f"rows for k = {frame['k'].tolist()}, not {list(ks)}")
        if frame[list(MEASURED)].isna().any().any():
            raise ValueError("a row is cut short")
        return frame

    return durable.read_valid(path, parse, "its Pass@G cell is measured again")


#: The columns a whole cached row holds a value in.
MEASURED = ("model", "template", "k", "pass_at_k", "n_problems", "n_samples")


def _passk_key(study: Study, model_path: str, template: str) -> str:
    p = study.passk
    blob = json.dumps(
        [
            model_path,
            template,
            study.task,
            sorted(study.task_options.items()),
            p.n,
            list(p.ks),
            p.max_problems,
            p.temperature,
            study.budget.max_new_tokens,
            study.seeds[0],
        ],
        default=repr,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
