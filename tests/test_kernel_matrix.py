"""The kernel-matrix tool really hands a child process another CPU's kernels."""

from __future__ import annotations

import pytest

from devtools.kernel_matrix import KERNEL_SETS, numpy_disabled, probe

DISPATCH = ["X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR"]


def test_numpy_targets_above_the_level_are_switched_off_where_the_cpu_has_them():
    every = dict.fromkeys(DISPATCH, True)
    assert numpy_disabled("X86_V3", DISPATCH, every) == ["X86_V4", "AVX512_ICL", "AVX512_SPR"]
    assert numpy_disabled("X86_V2", DISPATCH, every) == DISPATCH  # the baseline: all off
    assert numpy_disabled(None, DISPATCH, every) == []
    amd_avx2 = {"X86_V3": True, "X86_V4": False, "AVX512_ICL": False, "AVX512_SPR": False}
    assert numpy_disabled("X86_V3", DISPATCH, amd_avx2) == []  # numpy refuses absent ones


def test_a_child_under_the_generic_set_runs_torch_default_kernels_and_no_numpy_targets():
    native = probe(KERNEL_SETS["native"]).split()
    if native[0] == "DEFAULT":
        pytest.skip("this CPU has no vector kernels to switch off")
    torch_level, numpy_targets = probe(KERNEL_SETS["generic"]).split()
    assert torch_level == "DEFAULT" and numpy_targets == "-"
    assert probe(KERNEL_SETS["amd-zen"]).split()[0] in ("AVX2", "DEFAULT")
