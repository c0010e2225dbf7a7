"""The supported-factor matrix against TRL and verl, and `ablate export`."""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import warnings
from typing import get_args, get_type_hints

import pytest

from ablate.base.errors import ConfigError
from ablate.baselines import baseline, baseline_names
from ablate.commands.cli import main
from ablate.factors.algorithms import Algorithm
from ablate.factors.objective import FACTORS
from ablate.factors.surrogates import SURROGATES
from ablate.peers import PEERS, PeerBudget, export_config, matrix_rows
from ablate.peers.export import hydra_value
from ablate.peers.model import field_names, value_classes

#: Fields only some registry entries read: a table may leave them out (like a new surrogate's
#: value), and then refuses them as unmapped; every other field must be mapped.
ENTRY_FIELDS = {name for registry in FACTORS.values() for name in registry.fields_read()}


@pytest.mark.parametrize("target", sorted(PEERS))
def test_every_field_and_value_class_has_an_entry(target):
    table = PEERS[target].TABLE
    assert set(table) <= set(field_names())  # no entry for a field that is gone
    assert set(field_names()) - set(table) <= ENTRY_FIELDS  # a new plain field must be mapped
    for name in table:
        labels = [label for label, _ in value_classes(name)]
        assert set(table[name]) <= set(labels), name
        if name not in FACTORS:  # a factor's new value (a surrogate) may wait for its mapping
            assert set(table[name]) == set(labels), name
        for label in table[name]:
            variants = table[name][label]
            assert variants and not variants[-1].when, f"{name}={label}: no unconditional variant"
            for v in variants:
                assert v.kind in ("exact", "approximate", "cannot", "moot")
                if v.kind != "exact":
                    assert v.note, f"{target} {name}={label}: {v.kind} without a reason"
                for other, allowed in v.when.items():
                    known = {lab for lab, _ in value_classes(other)}
                    assert set(allowed) <= known, f"{name}={label}: when {other}={allowed}"


@pytest.mark.parametrize("target", sorted(PEERS))
def test_a_mapped_surrogates_fields_are_mapped(target):
    """A surrogate a table maps has every field it reads (its registry declaration) mapped."""
    table = PEERS[target].TABLE
    for name in table["surrogate"]:
        for rule in SURROGATES.reads(name):
            assert rule.field in table, f"{target}: surrogate={name!r} reads {rule.field}"


def test_value_classes_are_the_literal_values_and_booleans():
    hints = get_type_hints(Algorithm)
    for name in field_names():
        labels = [label for label, _ in value_classes(name)]
        values = get_args(hints[name])
        if values and all(isinstance(v, str) for v in values):
            assert labels == list(values)
        elif hints[name] is bool:
            assert labels == ["True", "False"]


def _grid():
    """Every valid combination of the fused factors (surrogate × aggregation × ratio × baseline
    × scale) and of the KL placement."""
    axes = {
        "surrogate": SURROGATES.names(),
        "loss_agg": get_args(get_type_hints(Algorithm)["loss_agg"]),
        "ratio_level": ("token", "sequence", "sequence_token"),
        "baseline": ("group_mean", "leave_one_out", "none"),
        "scale": ("group_std", "batch_std", "batch_centred_std", "token_whiten", "none"),
        "kl_in": ("loss", "reward"),
    }
    for combo in itertools.product(*axes.values()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                yield Algorithm(kl_coef=0.01, **dict(zip(axes, combo, strict=True)))
            except ConfigError:
                continue


def test_every_valid_combination_exports_or_is_refused_with_reasons():
    """No combination reaches a table gap, a moot entry nobody refuses, or two fields setting
    one key to different values (those raise LookupError / RuntimeError)."""
    outcomes = {"trl": [0, 0], "verl": [0, 0]}
    for algo in _grid():
        for target in PEERS:
            try:
                export_config(algo, target, name="x")
                outcomes[target][0] += 1
            except ConfigError as exc:
                assert "\n  - " in str(exc)
                outcomes[target][1] += 1
    assert all(ok > 0 and refused > 0 for ok, refused in outcomes.values()), outcomes


GRPO_TRL = {
    "scale_rewards": "group",
    "importance_sampling_level": "token",
    "epsilon": 0.2,
    "epsilon_high": 0.2,
    "delta": None,
    "loss_type": "grpo",
    "beta": 0.04,
    "use_bias_correction_kl": False,
    "entropy_coef": 0.0,
    "mask_truncated_completions": False,
    "vllm_importance_sampling_correction": False,
    "num_iterations": 1,
    "steps_per_generation": 1,
}


def test_grpo_to_trl():
    export = export_config(baseline("grpo"), "trl", name="grpo")
    assert export.keys == GRPO_TRL
    assert export.budget == {
        "num_generations": 8,
        "max_completion_length": 80,
        "per_device_train_batch_size": 64,
        "gradient_accumulation_steps": 1,
    }
    approximate = {line.field: line.note for line in export.lines if line.kind == "approximate"}
    assert list(approximate) == ["std_eps"] and "1e-4" in approximate["std_eps"]


def test_dr_grpo_to_trl():
    export = export_config(baseline("dr_grpo"), "trl", name="dr_grpo")
    expected = {**GRPO_TRL, "scale_rewards": "none", "loss_type": "dr_grpo", "beta": 0.0}
    del expected["use_bias_correction_kl"]  # no KL term
    assert export.keys == expected
    assert not any(line.kind == "approximate" for line in export.lines)  # std_eps is unread


def test_dapo_to_trl_refuses_dynamic_sampling_and_exports_the_rest():
    with pytest.raises(ConfigError, match=r"dynamic_sampling=True: GRPOTrainer neither") as info:
        export_config(baseline("dapo"), "trl", name="dapo")
    assert str(info.value).count("\n  - ") == 1  # the only field TRL cannot express
    algo = dataclasses.replace(baseline("dapo"), dynamic_sampling=False)
    export = export_config(algo, "trl", name="dapo", budget=PeerBudget(max_new_tokens=100))
    expected = {
        **GRPO_TRL,
        "epsilon_high": 0.28,
        "loss_type": "dapo",
        "beta": 0.0,
        "reward_weights": [1.0, 1.0],  # the task's reward, then the overlong punishment
        "steps_per_generation": 16,
    }
    del expected["use_bias_correction_kl"]  # no KL term
    assert export.keys == expected
    assert export.budget["per_device_train_batch_size"] == 4  # 8 x 8 completions / 16
    overlong = next(line for line in export.lines if line.field == "overlong_buffer")
    assert "max_completion_len=100, soft_punish_cache=20" in overlong.note  # 20% of 100
    token_mean = next(line for line in export.lines if line.field == "loss_agg")
    assert token_mean.kind == "approximate"  # 16 minibatches: TRL's normaliser differs


def test_dapo_to_verl_at_dapos_scale():
    budget = PeerBudget(prompts=512, group=16, max_new_tokens=20480)
    keys = export_config(baseline("dapo"), "verl", name="dapo", budget=budget).keys
    a = "actor_rollout_ref.actor."
    expected = {
        "algorithm.adv_estimator": "grpo",
        "algorithm.norm_adv_by_std_in_grpo": True,
        a + "policy_loss.loss_mode": "vanilla",
        a + "clip_ratio_low": 0.2,
        a + "clip_ratio_high": 0.28,
        a + "clip_ratio_c": 1e9,
        a + "loss_agg_mode": "token-mean",
        a + "use_kl_loss": False,
        "algorithm.use_kl_in_reward": False,
        a + "entropy_coeff": 0.0,
        "algorithm.filter_groups.enable": True,
        "algorithm.filter_groups.metric": "acc",
        "reward.reward_manager.name": "dapo",
        "+reward.reward_kwargs.overlong_buffer_cfg.enable": True,
        "+reward.reward_kwargs.overlong_buffer_cfg.len": 4096,
        "+reward.reward_kwargs.overlong_buffer_cfg.log": False,
        "+reward.reward_kwargs.max_resp_len": 20480,
        "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor": 1.0,
        "algorithm.rollout_correction.rollout_is": None,
        "algorithm.rollout_correction.rollout_rs": None,
        a + "ppo_epochs": 1,
        a + "ppo_mini_batch_size": 32,
    }
    assert keys == expected


def test_verl_refuses_a_mini_batch_of_part_of_a_prompt():
    with pytest.raises(ConfigError, match=r"minibatches=16: verl's mini-batch is whole prompts"):
        export_config(baseline("dapo"), "verl", name="dapo", budget=PeerBudget(prompts=8))


@pytest.mark.parametrize(
    ("changes", "target", "fields"),
    [
        ({"loss_agg": "prompt_mean"}, "trl", ["loss_agg='prompt_mean'"]),
        ({"loss_agg": "prompt_mean"}, "verl", ["loss_agg='prompt_mean'"]),
        ({"scale": "token_whiten", "kl_estimator": "k2"}, "trl", ["scale=", "kl_estimator='k2'"]),
        ({"baseline": "leave_one_out"}, "verl", ["baseline='leave_one_out'"]),
        ({"mask_truncated": True}, "verl", ["mask_truncated=True"]),
    ],
)
def test_what_a_peer_cannot_express_is_refused_by_name(changes, target, fields):
    algo = dataclasses.replace(baseline("grpo"), **changes)
    with pytest.raises(ConfigError) as info:
        export_config(algo, target, name="grpo")
    message = str(info.value)
    assert all(f"  - {f}" in message for f in fields), message


def test_gae_is_refused_by_trl_once_and_approximate_in_verl():
    with pytest.raises(ConfigError) as info:
        export_config(baseline("ppo"), "trl", name="ppo")
    assert "advantage='gae': GRPOTrainer has no critic" in str(info.value)
    assert "gae_lambda" not in str(info.value)  # the critic's fields fall with it
    export = export_config(baseline("ppo"), "verl", name="ppo")
    assert export.keys["algorithm.adv_estimator"] == "gae" and export.keys["algorithm.lam"] == 0.95
    kinds = {line.field: line.kind for line in export.lines}
    assert kinds["advantage"] == kinds["vf_coef"] == "approximate"


@pytest.mark.parametrize("name", baseline_names())
def test_every_preset_exports_or_names_its_refusals(name):
    for target in PEERS:
        try:
            export = export_config(baseline(name), target, name=name, budget=PeerBudget(64))
        except ConfigError as exc:
            assert str(exc).startswith(f"{PEERS[target].NAME} ") and f"{name!r}" in str(exc)
        else:
            assert export.keys


def test_hydra_values():
    assert [hydra_value(v) for v in (None, True, 0.28, "token-mean", "1e-10_3.0")] == [
        "null",
        "true",
        "0.28",
        "token-mean",
        '"1e-10_3.0"',
    ]


# --- the CLI -----------------------------------------------------------------------------------
def test_matrix_prints_every_field(capsys):
    assert main(["matrix", "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0][:2] == ["field", "value"] and len(rows) == 1 + len(matrix_rows())
    assert {r[0] for r in rows[1:]} == set(field_names())
    cispo = next(r for r in rows if r[:2] == ["surrogate", "cispo"])
    assert "loss_mode='cispo'" in cispo[3]


def test_matrix_as_a_table_and_as_markdown(capsys):
    assert main(["matrix"]) == 0
    assert "prompt_mean" in capsys.readouterr().out
    assert main(["matrix", "--format", "markdown"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| field | value |") and len(out) == 2 + len(matrix_rows())
    assert main(["matrix", "--format", "html"]) == 2


def test_export_command_prints_trl_kwargs_and_verl_overrides(capsys):
    assert main(["export", "--to", "trl", "grpo"]) == 0
    out = capsys.readouterr().out
    assert 'loss_type="grpo",' in out and "# approximate: std_eps=1e-06" in out
    assert (
        main(["export", "--to", "verl", "dapo", "--prompts", "512", "--set", "clip_high=0.3"]) == 0
    )
    out = capsys.readouterr().out
    assert "actor_rollout_ref.actor.clip_ratio_high=0.3\n" in out
    assert "actor_rollout_ref.actor.ppo_mini_batch_size=32\n" in out


def test_export_command_refusals_are_one_error(capsys):
    assert main(["export", "--to", "trl", "scalerl"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: TRL 1.16.0 cannot run 'scalerl'") and "Traceback" not in err
    assert "loss_agg='prompt_mean'" in err and "retire_pass_rate=0.9" in err
    assert main(["export", "--to", "megatron", "grpo"]) == 2
    assert "unknown export target 'megatron'" in capsys.readouterr().err
    assert main(["export", "--to", "trl", "grpo", "--set", "clip=0.3"]) == 2
    assert "error: --set" in capsys.readouterr().err


# --- the exported TRL config, in TRL (a one-step run takes ~5 s) -----------------------------
def _trl_config(export, out_dir, **extra):
    from trl import GRPOConfig

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return GRPOConfig(
            output_dir=str(out_dir),
            use_cpu=True,
            bf16=False,
            report_to="none",
            **export.keys,
            **export.budget,
            **extra,
        )


def test_every_trl_export_is_a_valid_grpo_config(tmp_path):
    pytest.importorskip("trl")
    built = 0
    for name in baseline_names():
        algo = dataclasses.replace(baseline(name), dynamic_sampling=False)
        try:
            export = export_config(algo, "trl", name=name)
        except ConfigError:
            continue
        config = _trl_config(export, tmp_path)
        for key, value in export.keys.items():
            assert getattr(config, key) == value, (name, key)
        built += 1
    assert built >= 6  # grpo, dr_grpo, dapo, gspo, sapo, lite_ppo, cispo


def test_an_exported_config_trains_one_trl_step(tmp_path):
    pytest.importorskip("trl")
    from devtools.bench.trl_step import arithmetic_trainer

    budget = PeerBudget(prompts=2, group=4, max_new_tokens=8)
    export = export_config(baseline("grpo"), "trl", name="grpo", budget=budget)
    args = _trl_config(export, tmp_path, max_steps=1, logging_steps=1, save_strategy="no")
    lengths: list[int] = []
    trainer = arithmetic_trainer(args, "rl_ready", lengths, problems=16)
    trainer.train()
    assert trainer.state.global_step == 1 and len(lengths) == 8
    logged = trainer.state.log_history[0]
    assert logged["kl"] >= 0 and "loss" in logged  # beta=0.04: TRL computed the KL term
