"""`VLLMEngine` where vLLM is not installed (the main venv): one line that says how to get it.
The engine itself is tested against the real engine in the vLLM lane (tests/vllm_lane/)."""

from __future__ import annotations

import importlib.util

import pytest

from ablate.base.errors import ConfigError
from ablate.testing import char_tokenizer, tiny_llama


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed")
def test_without_vllm_construction_is_a_one_line_config_error_naming_both_installs():
    from ablate.rollout.vllm import VLLMEngine

    with pytest.raises(ConfigError) as info:
        VLLMEngine(tiny_llama(), char_tokenizer())
    message = str(info.value)
    assert "\n" not in message
    assert "ablate[vllm]" in message and "make install-vllm" in message
