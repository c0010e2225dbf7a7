"""The off-policy corrections (`ablate.factors.rollout_corrections`) on hand-computed values, the
no-op without mismatch, their declared fields and checks, and the step stage that applies them."""

from __future__ import annotations

import math

import pytest
import torch

from ablate.base.errors import ConfigError
from ablate.base.records import Rollouts, ShapedBatch
from ablate.factors.algorithms import Algorithm
from ablate.factors.objective import policy_loss
from ablate.factors.rollout_corrections import ROLLOUT_CORRECTIONS
from ablate.stages.offpolicy import correct, pearson

# log ρ = trainer − engine per token; row 1's last token is padding
LOG_RHO = torch.tensor([[0.5, 2.0, -1.0], [0.2, -0.1, 0.0]], dtype=torch.float64)
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dtype=torch.float64)
ADV = torch.tensor([1.0, -1.0], dtype=torch.float64)


def run(name: str, lr=LOG_RHO, mask=MASK, adv=ADV, **fields):
    trainer = torch.zeros_like(lr)
    algo = Algorithm(rollout_correction=name, **fields)
    return ROLLOUT_CORRECTIONS.get(name)(trainer, trainer - lr, mask, adv, algo)


def effective(c, mask):
    w = mask if c.weights is None else c.weights
    return w * (1 if c.keep is None else c.keep) * mask


def test_token_truncate_caps_each_token_ratio():
    c = run("token_truncate", rollout_correction_cap=3.0)
    e = math.exp
    want = [[e(0.5), 3.0, e(-1.0)], [e(0.2), e(-0.1), 0.0]]
    torch.testing.assert_close(c.weights, torch.tensor(want, dtype=torch.float64))
    assert c.keep is None


def test_token_mis_zeroes_ratios_outside_the_band_with_separate_bounds():
    e = math.exp
    c = run("token_mis", rollout_correction_cap=3.0)  # band [1/3, 3]: e^2 out, e^-1 = 0.37 in
    want = [[e(0.5), 0.0, e(-1.0)], [e(0.2), e(-0.1), 0.0]]
    torch.testing.assert_close(c.weights, torch.tensor(want, dtype=torch.float64))
    c = run("token_mis", rollout_correction_cap=3.0, rollout_correction_floor=0.5)
    want = [[e(0.5), 0.0, 0.0], [e(0.2), e(-0.1), 0.0]]  # e^-1 < 0.5 now out
    torch.testing.assert_close(c.weights, torch.tensor(want, dtype=torch.float64))


def test_sequence_mask_weights_by_the_sequence_ratio_and_drops_above_the_cap():
    c = run("sequence_mask", rollout_correction_cap=3.0)
    # row 0: e^1.5 = 4.48 > 3 dropped; row 1: e^0.1 on its two tokens
    want = [[0.0, 0.0, 0.0], [math.exp(0.1), math.exp(0.1), 0.0]]
    torch.testing.assert_close(c.weights, torch.tensor(want, dtype=torch.float64))


def test_geo_rs_rejects_a_sequence_whose_geometric_mean_ratio_leaves_the_band():
    # geometric means: row 0 e^0.5 = 1.65, row 1 e^0.05 = 1.05; band [1/1.5, 1.5]
    c = run("geo_rs", rollout_correction_cap=1.5)
    assert c.weights is None
    assert (c.keep * MASK).tolist() == [[0, 0, 0], [1, 1, 0]]
    c = run("geo_rs", rollout_correction_cap=2.0, rollout_correction_floor=1.0)
    assert (c.keep * MASK).tolist() == [[1, 1, 1], [1, 1, 0]]
    c = run("geo_rs", rollout_correction_cap=1.6, rollout_correction_floor=1.0)  # e^.5 > 1.6
    assert (c.keep * MASK).tolist() == [[0, 0, 0], [1, 1, 0]]


def test_k3_rs_rejects_by_the_mean_k3_of_the_sequence():
    # row 0: mean(e^.5-1.5, e^2-3, e^-1) = 1.635; row 1: mean(e^.2-1.2, e^-.1-.9) = 0.0131
    c = run("k3_rs", rejection_k3_max=0.1)
    assert (c.keep * MASK).tolist() == [[0, 0, 0], [1, 1, 0]]
    c = run("k3_rs", rejection_k3_max=0.013)  # just below row 1's 0.01313
    assert (c.keep * MASK).sum().item() == 0


def test_opsm_masks_only_negative_advantage_sequences_beyond_delta():
    lr = torch.tensor([[-1.0, -1.0], [-1.0, -1.0], [0.5, 0.5]], dtype=torch.float64)
    mask = torch.ones(3, 2, dtype=torch.float64)
    adv = torch.tensor([-1.0, 1.0, -1.0], dtype=torch.float64)
    # mean KL(engine || trainer) per row: 1, 1, -0.5; δ = 0.2
    c = run("opsm", lr=lr, mask=mask, adv=adv, opsm_delta=0.2)
    assert c.weights.tolist() == [[0, 0], [1, 1], [1, 1]]
    c = run("opsm", lr=lr, mask=mask, adv=adv.unsqueeze(-1).expand(3, 2), opsm_delta=1.0)
    assert c.weights.tolist() == [[1, 1], [1, 1], [1, 1]]  # KL 1 <= δ 1 is kept (TRL's <=)


def test_m2po_rejects_the_largest_squared_log_ratios_until_the_mean_is_below_tau():
    # (log ρ)²: 0.25, 4, 1 | 0.04, 0.01; sorted 4, 1, .25, .04, .01: mean 1.06, then 1.3/4 =
    # 0.325 < 0.5 → one token (the 4) rejected
    c = run("m2po", m2po_threshold=0.5)
    assert (c.keep * MASK).tolist() == [[1, 0, 1], [1, 1, 0]]
    c = run("m2po", m2po_threshold=0.09)  # 0.3/3 = 0.1 is not below; 0.05/2 is: three out
    assert (c.keep * MASK).tolist() == [[0, 0, 0], [1, 1, 0]]
    c = run("m2po", m2po_threshold=1e-6)  # none below: all but one out (AReaL's rule)
    assert (c.keep * MASK).tolist() == [[0, 0, 0], [0, 1, 0]]


@pytest.mark.parametrize("name", ROLLOUT_CORRECTIONS.names())
def test_without_mismatch_every_weight_is_exactly_one_and_nothing_is_masked(name):
    g = torch.Generator().manual_seed(3)
    trainer = -torch.rand(6, 7, generator=g) * 4
    mask = (torch.arange(7) < torch.tensor([7, 3, 5, 1, 7, 2]).unsqueeze(-1)).float()
    adv = torch.randn(6, generator=g)
    fields = {"opsm_delta": 0.0} if name == "opsm" else {}
    algo = Algorithm(rollout_correction=name, **fields)
    c = ROLLOUT_CORRECTIONS.get(name)(trainer, trainer.clone(), mask, adv, algo)
    assert torch.equal(effective(c, mask), mask)
    logp = trainer + 0.1 * torch.randn(6, 7, generator=g)
    plain, _ = policy_loss(logp, trainer, adv, mask, Algorithm())
    weighted, _ = policy_loss(
        logp,
        trainer,
        adv,
        mask * (1 if c.keep is None else c.keep),
        Algorithm(),
        is_weights=c.weights,
    )
    assert weighted.item() == plain.item()


class Reads:
    def __init__(self, algo: Algorithm) -> None:
        self._algo, self.read = algo, set()

    def __getattr__(self, name: str):
        self.read.add(name)
        return getattr(self._algo, name)


@pytest.mark.parametrize("name", ROLLOUT_CORRECTIONS.names())
def test_each_correction_reads_exactly_the_fields_it_declares(name):
    algo = Reads(Algorithm(rollout_correction=name))
    ROLLOUT_CORRECTIONS.get(name)(LOG_RHO, torch.zeros_like(LOG_RHO), MASK, ADV, algo)
    assert algo.read == {r.field for r in ROLLOUT_CORRECTIONS.reads(name)}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"rollout_correction": "token_mis", "rollout_correction_cap": 1.0}, "cap=1.0 must be"),
        ({"rollout_correction": "geo_rs", "rollout_correction_cap": 0.5}, "cap=0.5 must be"),
        ({"rollout_correction": "token_truncate", "rollout_correction_cap": -2.0}, ">= 1"),
        ({"rollout_correction": "token_mis", "rollout_correction_floor": -0.1}, "floor=-0.1"),
        ({"rollout_correction": "geo_rs", "rollout_correction_floor": 1.2}, "(0, 1]"),
        ({"rollout_correction": "k3_rs", "rejection_k3_max": -0.01}, "> 0"),
        ({"rollout_correction": "opsm", "opsm_delta": -1.0}, ">= 0"),
        ({"rollout_correction": "m2po", "m2po_threshold": 0.0}, "> 0"),
        ({"rollout_correction": "none", "opsm_delta": 0.1}, "does nothing"),
    ],
)
def test_bad_levels_are_one_line_errors_before_compute(fields, message):
    with pytest.raises(ConfigError) as err:
        Algorithm(**fields)
    problems = str(err.value).splitlines()[1:]
    assert len(problems) == 1 and message in problems[0]


def _shaped(trainer: torch.Tensor, engine: torch.Tensor, mask: torch.Tensor, exact: bool):
    b, t = trainer.shape
    r = Rollouts(
        prompt_ids=torch.zeros(b, 1, dtype=torch.long),
        prompt_mask=torch.ones(b, 1, dtype=torch.long),
        completion_ids=torch.ones(b, t, dtype=torch.long),
        completion_mask=mask,
        logprobs=engine,
        entropy=None,
        lengths=mask.sum(-1).long(),
        truncated=torch.zeros(b, dtype=torch.bool),
        group_ids=torch.arange(b) // 2,
        problem_ids=[str(i) for i in range(b)],
        prompts=["p"] * b,
        texts=["c"] * b,
        logprobs_exact=exact,
    )
    z = torch.zeros(b)
    return ShapedBatch(r, z, None, z, mask.clone(), trainer, None, metrics={"x": 1.0})


def test_the_stage_is_the_identity_without_correction_or_mismatch():
    trainer = -torch.rand(4, 3)
    batch = _shaped(trainer, trainer.clone(), torch.ones(4, 3), exact=True)
    assert correct(batch, torch.zeros(4), Algorithm()) is batch


def test_the_stage_rejects_into_the_loss_mask_and_logs_the_diagnostics():
    mask = torch.ones(2, 3)
    trainer = torch.zeros(2, 3)
    engine = -LOG_RHO.float()
    batch = _shaped(trainer, engine, mask, exact=False)
    out = correct(
        batch, ADV.float(), Algorithm(rollout_correction="m2po", m2po_threshold=0.5), staleness=2
    )
    assert out.loss_mask.tolist() == [[1, 0, 1], [1, 1, 1]]
    assert out.is_weights is None
    m = out.metrics
    assert m["x"] == 1.0 and m["offpolicy/staleness"] == 2.0
    assert m["offpolicy/masked_frac"] == pytest.approx(1 / 6)
    assert m["offpolicy/masked_seq_frac"] == pytest.approx(1 / 2)
    assert m["offpolicy/changed_frac"] == pytest.approx(1 / 6)
    assert m["offpolicy/logp_diff_max"] == pytest.approx(2.0)
    assert m["offpolicy/logp_diff_mean"] == pytest.approx((0.5 + 2 + 1 + 0.2 + 0.1) / 6)
    k3 = sum(math.exp(x) - 1 - x for x in (0.5, 2.0, -1.0, 0.2, -0.1, 0.0)) / 6
    assert m["offpolicy/k3_kl"] == pytest.approx(k3, rel=1e-6)
    assert m["offpolicy/mismatched_frac"] == pytest.approx(5 / 6)  # every gap but the 0.0
    assert m["offpolicy/ess"] == pytest.approx(1 / (6 / 5), rel=1e-6)  # five ones and a zero
    tis = correct(batch, ADV.float(), Algorithm(rollout_correction="token_truncate"))
    assert tis.metrics["offpolicy/clipped_frac"] == pytest.approx(1 / 6)  # e^2 > 3 only
    assert tis.loss_mask.tolist() == mask.tolist()


def test_pearson_is_one_on_equal_probabilities_and_matches_its_definition():
    x = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)
    assert pearson(x, x.clone()) == 1.0
    y = torch.tensor([0.2, 0.4, 0.3], dtype=torch.float64)
    xc, yc = x - x.mean(), y - y.mean()
    want = float((xc * yc).sum() / (xc.norm() * yc.norm()))
    assert pearson(x, y) == pytest.approx(want)


def _keys(spelling: str, target: str) -> dict[str, object]:
    from ablate.peers import export_config
    from ablate.peers.aliases import alias_algorithm

    exported = export_config(alias_algorithm(spelling), target, name=spelling)
    return {k: v for line in exported.lines for k, v in line.keys.items()}


def test_verl_presets_export_back_to_their_rollout_corr_settings():
    rc = "algorithm.rollout_correction."
    geo = _keys("bypass_ppo_clip_geo_rs@verl", "verl")
    assert (geo[rc + "rollout_rs"], geo[rc + "rollout_rs_threshold"]) == (
        "seq_mean_k1",
        "0.999_1.001",
    )
    assert geo[rc + "rollout_is"] is None
    icepop = _keys("bypass_pg_token_icepop@verl", "verl")
    assert (icepop[rc + "rollout_is"], icepop[rc + "rollout_is_threshold"]) == ("token", "0.5_5")
    k3 = _keys("decoupled_k3_rs@verl", "verl")
    assert (k3[rc + "rollout_rs"], k3[rc + "rollout_rs_threshold"]) == ("seq_mean_k3", 0.01)


def test_trl_spellings_export_back_to_their_mode():
    mask = _keys("token_mask@trl", "trl")
    assert mask["vllm_importance_sampling_mode"] == "token_mask"
    assert mask["vllm_importance_sampling_clip_min"] == 1e-10
    assert _keys("off_policy_mask_threshold@trl", "trl")["off_policy_mask_threshold"] == 0.5


def test_effective_sample_size_is_one_uniform_one_over_n_for_one_token_zero_for_none():
    from ablate.stages.offpolicy import effective_sample_size

    assert effective_sample_size(torch.full((4,), 0.7, dtype=torch.float64)) == pytest.approx(1.0)
    assert effective_sample_size(torch.tensor([0.0, 0.0, 3.0, 0.0])) == pytest.approx(0.25)
    assert effective_sample_size(torch.zeros(5)) == 0.0  # every token rejected: nothing learned
    w = torch.tensor([0.5, 1.0, 2.0, 0.25], dtype=torch.float64)
    verl = 1.0 / float(((w / w.mean()) ** 2).mean())  # rollout_is_eff_sample_size
    assert effective_sample_size(w) == pytest.approx(verl, rel=1e-12)
