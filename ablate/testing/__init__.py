"""Test helpers shipped with the package (like `optuna.testing`): a character tokenizer, tiny
random Llama models and `ScriptedEngine` (`models`); a toy task and template with the interfaces
of `ablate.tasks` (`toys`); in-memory study data for report tests and a store's exactly-once
ledger (`studies`); a command's one error line (`cli_output`); a clock a test advances
(`clock`); checks of a rollout engine against the trainer (`engine_checks`, imported on its
own: the vLLM lane's tests and `make gpu-check` run them)."""

from ablate.testing.cli_output import one_error
from ablate.testing.clock import ManualClock
from ablate.testing.models import ScriptedEngine, char_tokenizer, tiny_llama
from ablate.testing.studies import exactly_once_problems, study_data, study_ledger
from ablate.testing.toys import ToyTask, ToyTemplate, cycle_script, zoo_model_built

__all__ = [
    "ManualClock",
    "ScriptedEngine",
    "ToyTask",
    "ToyTemplate",
    "char_tokenizer",
    "cycle_script",
    "exactly_once_problems",
    "one_error",
    "study_data",
    "study_ledger",
    "tiny_llama",
    "zoo_model_built",
]
