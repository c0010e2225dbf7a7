"""A study's Pass@G phase: every base model × template measured before RL (`passk_sweep`),
cached per model weights, template, task and sampling settings."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ablate.models import load_model, resolve_model_path, weights_hash
from ablate.passk_sweep import passk_sweep
from ablate.records import SamplingParams
from ablate.rollout.hf import HFEngine
from ablate.study import Study
from ablate.tasks import get_task

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
            if cached.is_file():
                frames.append(pd.read_csv(cached))
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
            cached.parent.mkdir(parents=True, exist_ok=True)
            frame.to_csv(cached, index=False)
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)


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
