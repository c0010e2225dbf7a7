"""One RL step, traced: the ablate calls the step's own module makes while it runs, and which
of them re-enter a stage of the pipeline the step had already left (sample -> forward -> shape
-> estimate -> update -> account -> log). tests/test_architecture.py asserts that a real step
calls each stage once, in order, climbing back only to sync the engine's weights."""

from __future__ import annotations

import sys

#: The stages of one RL step in pipeline order, by the modules that implement them.
STAGES = (
    ("sample", ("ablate.stages.batch", "ablate.rollout", "ablate.tasks", "ablate.tasks.templates")),
    ("forward", ("ablate.stages.forward",)),
    ("shape", ("ablate.stages.shaping",)),
    (
        "estimate",
        ("ablate.factors.estimators", "ablate.factors.critic", "ablate.factors.advantages"),
    ),
    ("update", ("ablate.stages.update", "ablate.factors.objective", "ablate.factors.surrogates")),
    ("account", ("ablate.stages.compute",)),
    ("log", ("ablate.stages.diagnostics",)),
)


def stage_of(module: str) -> int | None:
    for index, (_, prefixes) in enumerate(STAGES):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


def step_calls(run_step, step_module: str) -> list[tuple[str, str]]:
    """(module, function) of every ablate call the step's own module makes while `run_step()`
    runs, in order (records, the step's own helpers and setup properties included)."""
    calls: list[tuple[str, str]] = []

    def profile(frame, event, arg):
        caller = frame.f_back
        if event != "call" or caller is None:
            return
        if caller.f_globals.get("__name__") != step_module:
            return
        callee = frame.f_globals.get("__name__", "")
        if callee.startswith("ablate") and callee != step_module:
            calls.append((callee, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        run_step()
    finally:
        sys.setprofile(None)
    return calls


def climbs_back(calls: list[tuple[str, str]]) -> list[str]:
    """The calls into a stage earlier than one the step had already reached."""
    reached, out = -1, []
    for module, function in calls:
        stage = stage_of(module)
        if stage is None:
            continue  # records, setup: data, not a stage
        if stage < reached:
            out.append(f"{module}.{function} ({STAGES[stage][0]} after {STAGES[reached][0]})")
        reached = max(reached, stage)
    return out
