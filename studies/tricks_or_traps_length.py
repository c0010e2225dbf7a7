"""The Dr. GRPO length bias revisited (Liu et al. 2025, Dr. GRPO §3.1; the seed tutorial's §5)
where it can act: the 'tail' layout's rung writes a mandatory check after its answer, then
0-2 optional re-check lines that do not change the reward, so an answer the check shows wrong
is followed by a length choice that costs nothing. GRPO's 1/|o| weights a long wrong answer's
negative advantage less than a short one's; Dr. GRPO's constant does not. 80 steps: the bias,
if any, grows over training."""

from tricks_or_traps import tricks_study

from ablate.study import Budget

STUDY = tricks_study(
    "tricks_or_traps_length",
    ["grpo4", "dr_grpo4"],
    base_models=["tail_ready"],
    task_options={"layout": "tail"},
    budget=Budget(max_steps=80, prompts_per_step=8, group_size=8, max_new_tokens=96),
)
