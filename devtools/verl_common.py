"""What the verl cross-checks share (`python -m devtools verl-parity`: `verl_parity` for the
losses and advantages, `verl_rollout_parity` for the rollout corrections): importing verl with
the modules it never calls stubbed, the aggregation names, verl's actor config for an
`Algorithm`, and the one comparison line. Below both, so neither imports the other back."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from unittest import mock

import torch

TOL = 1e-6
STUBBED = ("ray", "codetiming", "pybind11", "flash_attn", "liger_kernel", "peft", "vllm")
STUBBED += ("sglang", "wandb", "datasets", "pyarrow", "hydra", "torchdata", "megatron", "dill")
STUBBED += ("tensordict",)


class _Stub(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return mock.MagicMock(name=f"{self.__name__}.{name}")


class _StubFinder:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Stub(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        return None


def import_verl():
    """verl's core_algos and actor config module, with the modules they never call stubbed; a
    ConfigError saying how to get verl when it is not on the path.

    The stubs stay installed for the rest of the process (core_algos may import them late), so
    they go in only once verl is known to be there: a failed check leaves the process as it was
    (stubbed `datasets` or `pyarrow` would break anything else it runs)."""
    from ablate.base.errors import ConfigError

    hint = "see `python -m devtools verl-parity --help` for the three commands that unpack it"
    if importlib.util.find_spec("verl") is None:
        raise ConfigError(f"verl-parity needs verl 0.9.1 on PYTHONPATH; {hint}")
    finder = _StubFinder()
    sys.meta_path.insert(0, finder)
    try:
        core_algos = importlib.import_module("verl.trainer.ppo.core_algos")
        actor = importlib.import_module("verl.workers.config.actor")
    except ImportError as exc:
        sys.meta_path.remove(finder)
        raise ConfigError(f"verl-parity could not import verl ({exc}); {hint}") from None
    return core_algos, actor


AGGS = {  # ablate loss_agg -> verl loss_agg_mode
    "token_mean": "token-mean",
    "seq_mean_token_mean": "seq-mean-token-mean",
    "seq_mean_token_sum": "seq-mean-token-sum",
    "seq_mean_token_sum_norm": "seq-mean-token-sum-norm",
    "token_sum": "token-sum",
}


def verl_config(actor, loss_mode: str, verl_fields: dict, algo, **extra):
    return actor.ActorConfig(
        **extra,
        strategy="fsdp",
        rollout_n=1,
        ppo_micro_batch_size_per_gpu=1,
        clip_ratio=0.2,
        clip_ratio_low=algo.clip_low,
        clip_ratio_high=algo.clip_high,
        tau_pos=algo.sapo_tau_pos,
        tau_neg=algo.sapo_tau_neg,
        policy_loss=actor.PolicyLossConfig(loss_mode=loss_mode, **verl_fields),
        global_batch_info={},
    )


def compare(name: str, a: torch.Tensor, b: torch.Tensor) -> bool:
    err = float((a - b).abs().max())
    ok = err <= TOL
    print(f"{'ok  ' if ok else 'FAIL'} {name:58s} max|diff| = {err:.2e}")
    return ok
