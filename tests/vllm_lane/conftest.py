"""The vLLM lane (`make test-vllm`): tests against the real engine, vLLM's CPU build, in
`.venv-vllm`. Every module here is marked `vllm` (`pytestmark`; deselected by `make test`);
here vLLM must import: a lane without it fails, never skips."""

from __future__ import annotations

import gc

import pytest

from ablate.models import load_model


@pytest.fixture(scope="session")
def vllm_module():
    """The real vllm: importable and the CPU build (the lane tests nothing without it)."""
    import vllm
    from vllm.platforms import current_platform

    assert current_platform.is_cpu(), "the vLLM lane runs vLLM's CPU build"
    return vllm


@pytest.fixture
def zoo_model():
    """A fresh copy of the zoo's rl_ready rung and its tokenizer (tests change its weights)."""
    return load_model("rl_ready")


def rss_mib() -> float:
    """This process's resident memory, MiB (what an engine holds on the CPU)."""
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
