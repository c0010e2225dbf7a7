"""The off-policy study's vLLM row and its reference row (`studies/offpolicy.py`: no mismatch and
vLLM, each under no correction, TIS, MIS/IcePop, geo_rs and OPSM), on its budget and 5 seeds:
what the real engine's mismatch is on a CPU, and which corrections act on it. Run with
`.venv-vllm/bin/ablate run studies/offpolicy_vllm.py` (after `make install-vllm`).
"""

import dataclasses

from offpolicy import STUDY as OFFPOLICY

STUDY = dataclasses.replace(
    OFFPOLICY,
    name="offpolicy_vllm",
    arms=[a for a in OFFPOLICY.arms if a.name.startswith(("none_", "vllm_"))],
)
