"""Launcher "local": the trials train on this machine, one after another or in `--workers N`
processes, by the runner itself (`ablate.study.runner.run_study` with no `launch`)."""

from __future__ import annotations

from dataclasses import dataclass

from ablate.launch.registry import LaunchRequest, register_launcher


@dataclass(frozen=True, kw_only=True)
class LocalOptions:
    """Nothing to set: `ablate run --workers N` says how many processes share the trials."""


@register_launcher(
    "local",
    options=LocalOptions,
    summary="this machine, one trial after another or in --workers N processes",
    workers=True,
    until_decided=True,
)
def build(request: LaunchRequest) -> None:
    """None: the runner trains the trials itself."""
    del request
