"""The base model's template sensitivity before RL: per model, each prompt template's Pass@k against
the model's first template, from the Pass@G phase (claim 5 and the templates table)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import norm

from ablate.report.stats import inference


def template_contrasts(passk: pd.DataFrame, k: int = 1) -> pd.DataFrame:
    """Per model, each template against the model's first template: Δ pass@k, a normal CI from
    the two reported CIs (treated as independent: conservative for shared problems), p-value and
    its Holm adjustment across all contrasts."""

    rows = []
    p = passk[passk["k"] == k]
    for model, cell in p.groupby("model", sort=False):
        ref = cell.iloc[0]
        for _, other in cell.iloc[1:].iterrows():
            se = np.hypot(*((r["ci_high"] - r["ci_low"]) / (2 * 1.96) for r in (ref, other)))
            d = other["pass_at_k"] - ref["pass_at_k"]
            pv = 2 * norm.sf(abs(d) / se) if se > 0 else float("nan")  # no width: no test
            rows.append(dict(model=model, template=other["template"], ref=ref["template"], diff=d))
            rows[-1].update(low=d - 1.96 * se, high=d + 1.96 * se, p=pv, n=int(ref["n_problems"]))
    out = pd.DataFrame(rows)
    if len(out):
        out["p_holm"] = inference.holm(out["p"].to_numpy())
    return out
