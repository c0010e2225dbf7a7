"""What "GRPO" means where: the framework alias table, its spellings in arms and exports, and its
agreement with the TRL and verl export tables."""

from __future__ import annotations

import re

import pytest

from ablate import arm
from ablate.base.errors import ConfigError
from ablate.baselines import baseline
from ablate.commands.cli import main
from ablate.factors.algorithms import Algorithm
from ablate.peers import export_config
from ablate.peers.aliases import ALIASES, FACTOR_FIELDS, alias_algorithm, aliases

FRAMEWORKS = {
    "trl",
    "verl",
    "nemo_rl",
    "areal",
    "prime_rl",
    "skyrl",
    "slime",
    "tinker_cookbook",
    "nanochat",
}


def test_every_framework_of_the_issue_has_its_grpo():
    assert {a.framework for a in ALIASES if a.name == "grpo"} == FRAMEWORKS
    assert len(aliases()) == len(ALIASES)  # one entry per spelling


@pytest.mark.parametrize("alias", ALIASES, ids=lambda a: a.spelling)
def test_each_entry_is_a_valid_vector_read_at_a_named_version(alias):
    assert isinstance(alias.algorithm, Algorithm)
    assert set(alias.unchecked) <= set(FACTOR_FIELDS)
    assert not set(alias.unchecked) & set(alias.fields), "a field is read or unchecked, not both"
    # a commit (7+ hex digits after '@') or a released version in every source
    assert re.search(r"@ [0-9a-f]{7}|\d+\.\d+\.\d+", alias.source), alias.source


def test_the_group_statistics_are_the_ones_the_sources_use():
    stats = {a.framework: (a.algorithm.baseline, a.algorithm.scale) for a in ALIASES}
    for name in ("trl", "verl", "skyrl", "slime"):
        assert stats[name] == ("group_mean", "group_std"), name
    assert stats["nemo_rl"] == ("leave_one_out", "group_std")
    assert stats["areal"] == ("none", "token_whiten")  # batch whitening
    for name in ("prime_rl", "tinker_cookbook", "nanochat"):
        assert stats[name] == ("group_mean", "none"), name


def test_an_arm_and_a_preset_lookup_load_the_vector():
    nemo = alias_algorithm("grpo@nemo_rl")
    assert arm("nemo", "grpo@nemo_rl").algorithm == nemo == baseline("grpo@nemo_rl")
    assert (nemo.baseline, nemo.kl_coef, nemo.loss_agg) == ("leave_one_out", 0.01, "token_mean")
    changed = arm("nemo_no_kl", "grpo@nemo_rl", kl_coef=0.0).algorithm
    assert changed.kl_coef == 0.0 and changed.baseline == "leave_one_out"


def test_an_unknown_alias_lists_the_valid_ones():
    with pytest.raises(ConfigError, match=r"unknown framework alias 'grpo@megatron'.*grpo@trl"):
        baseline("grpo@megatron")


@pytest.mark.parametrize("target", ["trl", "verl"])
def test_the_alias_of_an_export_target_exports_exactly_to_it(target):
    # the alias table and the export table read the same trainer: its own grpo must come back
    # with every field exact (no approximation, no refusal)
    exported = export_config(alias_algorithm(f"grpo@{target}"), target, name=f"grpo@{target}")
    assert {line.kind for line in exported.lines} <= {"exact"}, [
        (line.field, line.note) for line in exported.lines if line.kind != "exact"
    ]


def test_the_cli_prints_every_alias_and_exports_one(capsys):
    assert main(["aliases", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    for spelling in aliases():
        assert f"| {spelling} |" in out
    assert main(["export", "grpo@verl", "--to", "verl"]) == 0
    assert "actor_rollout_ref.actor.clip_ratio_c=3.0" in capsys.readouterr().out
    assert main(["aliases", "--format", "csv"]) == 2
