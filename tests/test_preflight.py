"""Preflight: a damaged base model, an unreadable dataset or an unwritable results folder is one
ConfigError line naming it, raised before anything is written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ablate.base.errors import ConfigError
from ablate.commands.cli import main
from ablate.models import zoo_path
from ablate.study import Study, arm, preflight

GSM8K = Path(__file__).parent / "fixtures" / "gsm8k_small.jsonl"


def _copy_zoo(tmp_path: Path, name: str = "model") -> Path:
    folder = tmp_path / name
    shutil.copytree(zoo_path("rl_ready"), folder)
    return folder


def _truncate(folder: Path) -> None:
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])


def _random_bytes(folder: Path) -> None:
    (folder / "model.safetensors").write_bytes(os.urandom(50_000))


def _empty_config(folder: Path) -> None:
    (folder / "config.json").write_text("")


def _invalid_config(folder: Path) -> None:
    (folder / "config.json").write_text('{"model_type": ')


def _no_tokenizer(folder: Path) -> None:
    (folder / "tokenizer.json").unlink()
    (folder / "tokenizer_config.json").unlink()


DAMAGE = [
    (_truncate, "model.safetensors is truncated or not a safetensors file"),
    (_random_bytes, "model.safetensors is truncated or not a safetensors file"),
    (_empty_config, "config.json is empty"),
    (_invalid_config, "config.json: Expecting value"),
    (_no_tokenizer, "no tokenizer files"),
]


@pytest.mark.parametrize(("damage", "reason"), DAMAGE, ids=[d.__name__ for d, _ in DAMAGE])
def test_a_damaged_model_folder_is_one_line_naming_it(tmp_path, damage, reason):
    folder = _copy_zoo(tmp_path)
    damage(folder)
    with pytest.raises(ConfigError) as err:
        preflight.check_models([str(folder)])
    message = str(err.value)
    assert message.startswith(f"base model {folder}: {reason}") and "\n" not in message


def test_every_bad_model_is_listed_in_one_error(tmp_path):
    good, empty, broken = (_copy_zoo(tmp_path, n) for n in ("good", "empty", "broken"))
    _empty_config(empty)
    _random_bytes(broken)
    with pytest.raises(ConfigError) as err:
        preflight.check_models([str(good), str(empty), "rl_ready", str(broken)])
    message = str(err.value)
    assert message.startswith("2 base models cannot load: ")
    assert f"{empty}: config.json is empty" in message and f"{broken}: model.safetensors" in message
    assert str(good) not in message


def test_a_model_that_loaded_is_not_loaded_again_until_its_files_change(tmp_path, monkeypatch):
    import ablate.models

    folder = _copy_zoo(tmp_path)
    loads = []
    real = ablate.models.load_model
    monkeypatch.setattr(ablate.models, "load_model", lambda p: loads.append(p) or real(p))
    preflight.check_models([str(folder)])
    preflight.check_models([str(folder), str(folder)])
    assert len(loads) == 1
    _empty_config(folder)  # a changed file is checked again
    with pytest.raises(ConfigError, match=r"config\.json is empty"):
        preflight.check_models([str(folder)])


def test_an_unknown_model_is_reported_by_name():
    with pytest.raises(ConfigError, match="base model no/such/folder: 'no/such/folder' is neither"):
        preflight.check_models(["no/such/folder"])


@pytest.mark.parametrize(
    ("content", "reason"),
    [("", "is empty"), ("not json{\n", "cannot read")],
    ids=["empty", "unparsable"],
)
def test_an_unreadable_dataset_names_its_file(tmp_path, content, reason):
    data = tmp_path / "train.jsonl"
    data.write_text(content)
    with pytest.raises(ConfigError) as err:
        preflight.check_task_data("gsm8k", {"path": str(data), "n_eval": 2})
    assert str(data) in str(err.value) and reason in str(err.value)
    assert "\n" not in str(err.value)


def test_a_readable_dataset_passes():
    preflight.check_task_data("gsm8k", {"path": str(GSM8K), "n_eval": 3})


def test_a_results_dir_that_is_a_file_is_refused(tmp_path):
    file = tmp_path / "results"
    file.write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        preflight.check_results_dir(file)


def test_a_new_results_dir_is_checked_but_not_created(tmp_path):
    root = tmp_path / "a" / "b"
    assert preflight.check_results_dir(root) == root.resolve()
    assert not (tmp_path / "a").exists() and list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux procfs")
def test_an_unwritable_results_dir_is_refused_at_once():
    # procfs refuses new files even to root, where chmod would not
    proc = Path("/proc/self").resolve()
    with pytest.raises(ConfigError, match=f"{proc} is not writable"):
        preflight.check_results_dir(proc)
    with pytest.raises(ConfigError, match="cannot be created in /proc"):
        preflight.check_results_dir("/proc/ablate-results/x")


def test_preflight_study_reports_every_problem_and_creates_nothing(tmp_path):
    folder = _copy_zoo(tmp_path)
    _truncate(folder)
    data = tmp_path / "empty.jsonl"
    data.write_text("")
    results = tmp_path / "results"
    results_file = tmp_path / "file"
    results_file.write_text("")
    study = Study(
        name="bad",
        base_models=[str(folder)],
        arms=[arm("a", "grpo")],
        task="gsm8k",
        task_options={"path": str(data), "n_eval": 1},
    )
    # at once, without the model and data problems: nothing is loaded for an unusable folder
    with pytest.raises(ConfigError, match=r"is a file: pass --results a folder$"):
        preflight.preflight_study(study, results_file)
    with pytest.raises(ConfigError) as err:
        preflight.preflight_study(study, results)
    message = str(err.value)
    assert f"{folder}: model.safetensors" in message and f"{data} is empty" in message
    assert not results.exists()


STUDY_COMMANDS = {
    "run": ["run", "{study}", "--results", "{results}"],
    "demo": ["demo", "--study", "{study}", "--results", "{results}"],
    "worker": ["worker", "{study}", "--results", "{results}", "--storage", "sqlite:///{db}"],
    "tune": ["tune", "{study}", "--results", "{results}"],
}


@pytest.mark.parametrize("command", list(STUDY_COMMANDS))
def test_study_commands_with_a_damaged_model_are_one_line_and_write_nothing(
    tmp_path, capsys, command
):
    folder = _copy_zoo(tmp_path)
    _random_bytes(folder)
    study = tmp_path / "study.py"
    study.write_text(
        "from ablate.study import SearchSpace, Study, arm\n"
        f"STUDY = Study(name='s', base_models=[{str(folder)!r}], arms=[arm('a', 'grpo')],\n"
        "              search={'lr': SearchSpace(low=1e-5, high=1e-4, target='optim')})\n"
    )
    results, db = tmp_path / "results", tmp_path / "optuna.db"
    args = [a.format(study=study, results=results, db=db) for a in STUDY_COMMANDS[command]]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        f"error: base model {folder}: model.safetensors is truncated or not a safetensors file"
    )
    assert not results.exists() and not db.exists()


def test_train_and_passk_with_a_damaged_model_are_one_line(tmp_path, capsys):
    folder = _copy_zoo(tmp_path)
    _empty_config(folder)
    out = tmp_path / "out" / "passk.csv"
    assert main(["train", "--model", str(folder), "--steps", "1"]) == 2
    passk = ["passk", "--models", f"rl_ready,{folder}", "--n", "2", "--k", "1"]
    assert main([*passk, "--max-problems", "2", "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"error: base model {folder}: config.json is empty"] * 2
    assert not out.parent.exists()
