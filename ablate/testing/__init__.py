"""Test helpers shipped with the package (like `optuna.testing`): a character tokenizer, tiny
random Llama models, `ScriptedEngine` (a `RolloutEngine` returning scripted completions) and a
toy task + template with the interfaces of `ablate.tasks` / `ablate.tasks.templates`."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ablate.base.records import Rollouts, SamplingParams
from ablate.rollout.base import checked_request
from ablate.tasks.base import Problem, Verdict

#: Characters of the test tokenizer: digits, arithmetic, a little punctuation, lowercase letters.
DEFAULT_ALPHABET = "0123456789+-*/=()., ?:!#\n<>abcdefghijklmnopqrstuvwxyz"


def char_tokenizer(alphabet: str = DEFAULT_ALPHABET):
    """The zoo's character tokenizer (`ablate.models.tokenizer`) over a small vocabulary: the
    special tokens (ids 0-3), then `alphabet` in its own order, so a tiny model needs only
    4 + len(alphabet) embedding rows."""
    from ablate.models.tokenizer import SPECIAL_TOKENS, tokenizer_from_vocab

    chars = list(dict.fromkeys(alphabet))
    return tokenizer_from_vocab({t: i for i, t in enumerate([*SPECIAL_TOKENS, *chars])})


#: The two benchmark sizes of the tiny zoo (random weights here).
TINY_CONFIGS: dict[str, dict[str, int]] = {
    "0.53M": dict(hidden_size=128, intermediate_size=512, num_hidden_layers=2),
    "4.2M": dict(hidden_size=256, intermediate_size=1024, num_hidden_layers=4),
}


def tiny_llama(seed: int = 0, vocab: int = 64, *, size: str = "0.53M", tokenizer=None):
    """A randomly initialised `LlamaForCausalLM` (eval mode, fp32); `tokenizer` sets its vocab
    size and special-token ids."""
    from transformers import LlamaConfig, LlamaForCausalLM

    if tokenizer is not None:
        vocab = len(tokenizer)
    config = LlamaConfig(
        vocab_size=vocab,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        pad_token_id=getattr(tokenizer, "pad_token_id", 0),
        bos_token_id=getattr(tokenizer, "bos_token_id", 1),
        eos_token_id=getattr(tokenizer, "eos_token_id", 2),
        **TINY_CONFIGS[size],
    )
    with torch.random.fork_rng(devices=[]):  # leave the caller's global RNG untouched
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.eval()


# -- a rollout engine that returns scripted completions ------------------------------------------

Script = Mapping[str, Sequence[str]] | Callable[[str, int, int], str]


class ScriptedEngine:
    """A `RolloutEngine` whose completions are scripted, for tests that need no model.

    `script` is either a mapping prompt -> completions (sample j of a prompt takes the next
    completion of its list, cycling, continuing across calls) or a function
    `(prompt, sample_index, call_index) -> completion`. Completions are cut after the first
    stop string, or at `max_new_tokens` tokens (then `truncated`); otherwise an EOS token ends
    them. Without a tokenizer each character is one token (id `ord(c) + 3`; 0 pad, 1 BOS, 2 EOS).
    Log-probs are deterministic (-0.1 to -0.7, repeating) and entropies 1.0; `logprobs_exact` is
    False, so a trainer recomputes old log-probs from its model.
    """

    def __init__(self, script: Script, tokenizer=None) -> None:
        self.script = script
        self.tokenizer = tokenizer
        self.calls = 0
        self._next_index: dict[str, int] = {}
        if tokenizer is None:
            self.pad_id, self.bos_id, self.eos_id = 0, 1, 2
        else:
            self.eos_id = int(tokenizer.eos_token_id)
            pad = tokenizer.pad_token_id
            self.pad_id = int(pad) if pad is not None else self.eos_id
            self.bos_id = tokenizer.bos_token_id

    def encode(self, text: str, *, prompt: bool) -> list[int]:
        if self.tokenizer is not None:
            return list(self.tokenizer(text, add_special_tokens=prompt)["input_ids"])
        return ([self.bos_id] if prompt else []) + [ord(c) + 3 for c in text]

    def sync_weights(self, model: Any) -> None:
        """Scripted completions do not depend on the weights."""

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        sampling: SamplingParams,
        *,
        problem_ids: Sequence[str] | None = None,
    ) -> Rollouts:
        prompts, ids_per_prompt = checked_request(prompts, n, problem_ids)
        texts, completions, truncated = [], [], []
        for prompt in prompts:
            for j in range(n):
                text, ids, cut = self._complete(prompt, j, sampling)
                texts.append(text)
                completions.append(ids)
                truncated.append(cut)
        self.calls += 1
        prompt_rows = [self.encode(p, prompt=True) for p in prompts for _ in range(n)]
        return self._rollouts(
            prompt_rows, completions, texts, truncated, prompts, ids_per_prompt, n
        )

    def _scripted_text(self, prompt: str, sample_index: int) -> str:
        if callable(self.script):
            return self.script(prompt, sample_index, self.calls)
        options = self.script[prompt]
        if not options:
            raise ValueError(f"no scripted completions for prompt {prompt!r}")
        index = self._next_index.get(prompt, 0)
        self._next_index[prompt] = index + 1
        return options[index % len(options)]

    def _complete(
        self, prompt: str, j: int, sampling: SamplingParams
    ) -> tuple[str, list[int], bool]:
        """(text, token ids, truncated) for sample j of `prompt`."""
        text = self._scripted_text(prompt, j)
        ends = [text.find(s) + len(s) for s in sampling.stop if s in text]
        if ends:
            text = text[: min(ends)]
        ids = self.encode(text, prompt=False)
        stopped, limit = bool(ends), sampling.max_new_tokens
        # Without a stop string, the EOS token needs a slot within the budget as well.
        if len(ids) > limit or (not stopped and len(ids) >= limit):
            ids = ids[:limit]
            return self._decode(ids, text), ids, True
        return text, ids if stopped else [*ids, self.eos_id], False

    def _decode(self, ids: list[int], text: str) -> str:
        if self.tokenizer is not None:
            return self.tokenizer.decode(ids, skip_special_tokens=True)
        return text[: len(ids)]

    def _rollouts(self, prompt_rows, completions, texts, truncated, prompts, problem_ids, n):
        lengths = torch.tensor([len(c) for c in completions], dtype=torch.long)
        width_p = max(len(r) for r in prompt_rows) if prompt_rows else 0
        width_c = int(lengths.max()) if len(completions) else 0
        batch = len(completions)
        prompt_ids = torch.full((batch, width_p), self.pad_id, dtype=torch.long)
        prompt_mask = torch.zeros((batch, width_p), dtype=torch.long)
        completion_ids = torch.full((batch, width_c), self.pad_id, dtype=torch.long)
        for b, (row, ids) in enumerate(zip(prompt_rows, completions, strict=True)):
            prompt_ids[b, width_p - len(row) :] = torch.tensor(row, dtype=torch.long)
            prompt_mask[b, width_p - len(row) :] = 1
            completion_ids[b, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        mask = (torch.arange(width_c)[None, :] < lengths[:, None]).float()
        pattern = -0.1 * (1 + torch.arange(width_c) % 7).float()
        return Rollouts(
            prompt_ids=prompt_ids,
            prompt_mask=prompt_mask,
            completion_ids=completion_ids,
            completion_mask=mask,
            logprobs=pattern[None, :] * mask,
            entropy=mask.clone(),
            lengths=lengths,
            truncated=torch.tensor(truncated, dtype=torch.bool),
            group_ids=torch.arange(len(prompts)).repeat_interleave(n),
            problem_ids=[pid for pid in problem_ids for _ in range(n)],
            prompts=[p for p in prompts for _ in range(n)],
            texts=texts,
            logprobs_exact=False,
            pad_id=self.pad_id,
        )


# -- a toy task and template with the interfaces of ablate.tasks / ablate.tasks.templates ------


@dataclass(frozen=True)
class ToyTemplate:
    """`Q: {question}\\nA:` prompts; the answer is the text after `=` up to a newline."""

    name: str = "toy"
    stop: tuple[str, ...] = ("\n",)

    def render(self, question: str) -> str:
        return f"Q: {question}\nA:"

    def extract(self, completion: str) -> str | None:
        match = re.search(r"=\s*(-?\d+)", completion)
        return match.group(1) if match else None

    def write_answer(self, answer: str) -> str:
        return f" ={answer}\n"


@dataclass
class ToyTask:
    """Additions `a+b` for the given pairs; `verify` raising for a completion containing
    `"boom"` is reported as a verdict with `error` set (as a real verifier time-out would be)."""

    pairs: Sequence[tuple[int, int]] = ((1, 2), (3, 4), (5, 6))
    name: str = "toy"

    def problems(self, split: str = "eval") -> list[Problem]:
        return [
            Problem(id=f"toy-{split}-{i}", question=f"{a}+{b}", answer=str(a + b))
            for i, (a, b) in enumerate(self.pairs)
        ]

    def verify(self, problem: Problem, completion: str, template) -> Verdict:
        if "boom" in completion:
            return Verdict(0.0, False, None, False, error="verifier crashed")
        answer = template.extract(completion)
        correct = answer == problem.answer
        return Verdict(float(correct), correct, answer, answer is not None)


def zoo_model_built(name: str) -> bool:
    """Whether zoo model `name` is built (shipped or cached), for tests that skip without it."""
    from ablate.base.errors import ConfigError
    from ablate.models import zoo_path

    try:
        zoo_path(name)
    except ConfigError:
        return False
    return True


def cycle_script(completions: Sequence[str]) -> Callable[[str, int, int], str]:
    """A script giving sample j of every prompt `completions[j % len(completions)]`."""
    options = list(completions)
    return lambda _prompt, j, _call: options[j % len(options)]


def study_data(
    runs: Sequence[tuple],
    *,
    algorithms: Mapping[str, Any],
    reference: str,
    passk: Any = None,
    replicates: Mapping[str, str] | None = None,
    effect_of_interest: float | None = None,
    group_size: int = 8,
    max_new_tokens: int = 80,
    samples: Mapping[tuple[str, int], Any] | None = None,
    **fields: Any,
):
    """A `report.load.StudyData` built in memory, for report tests without MLflow.

    `runs`: (arm, model, seed, {metric: [value at step 0, 1, ...] or {step: value}}[, outcome])
    with outcome "finished" (default), "diverged" (at its last step) or "failed"; the template is
    "plain". `algorithms`: arm -> Algorithm. `samples`: (arm, seed) -> a [J problems][K samples]
    array of 0/1 eval outcomes at the trial's last step (problem ids p0, p1, ...). `fields`:
    further `StudyData` fields (equivalence_margin, positive_control, primary, ...)."""
    import dataclasses

    import pandas as pd

    from ablate.report.data.load import StudyData

    keys = ["trial_id", "arm", "model", "template", "seed"]
    trials, history, sample_rows = [], [], []
    for i, (arm, model, seed, curves, *rest) in enumerate(runs):
        outcome = rest[0] if rest else "finished"
        steps = [
            step for c in curves.values() for step in (c if isinstance(c, dict) else range(len(c)))
        ]
        row = dict(trial_id=f"t{i}", arm=arm, model=model, template="plain", seed=seed)
        algo = {f"algo.{k}": v for k, v in dataclasses.asdict(algorithms[arm]).items()}
        trials.append({**row, **algo, **_trial_state(i, outcome, max(steps, default=0))})
        for metric, values in curves.items():
            items = values.items() if isinstance(values, dict) else enumerate(values)
            history += [{**row, "step": st, "metric": metric, "value": float(v)} for st, v in items]
        sample_rows += _sample_rows(row, max(steps, default=0), (samples or {}).get((arm, seed)))
    return StudyData(
        "synthetic",
        reference,
        pd.DataFrame(trials),
        pd.DataFrame(history, columns=[*keys, "step", "metric", "value"]),
        pd.DataFrame(sample_rows),
        passk if passk is not None else pd.DataFrame(),
        group_size,
        max_new_tokens,
        algorithms=dict(algorithms),
        replicates=dict(replicates or {}),
        effect_of_interest=effect_of_interest,
        **fields,
    )


def _trial_state(i: int, outcome: str, last: int) -> dict:
    reason = f"diverged at step {last}: loss is not finite"
    return {
        "status": "FINISHED" if outcome != "failed" else "FAILED",
        "outcome": outcome,
        "reason": {"finished": "", "diverged": reason}.get(outcome, "error"),
        "run_id": f"r{i}",
        "complete": outcome == "finished",
        "diverged_step": last if outcome == "diverged" else float("nan"),
    }


def _sample_rows(row: dict, step: int, outcomes: Any) -> list[dict]:
    """Eval sample records of one trial at `step` from its [J][K] 0/1 outcomes (None: none)."""
    return [
        {**row, "step": step, "problem_id": f"p{j}", "sample": k}
        | {"correct": bool(c), "length": 10, "truncated": False}
        for j, per_problem in enumerate([] if outcomes is None else outcomes)
        for k, c in enumerate(per_problem)
    ]


def study_ledger(uri: str, study_name: str) -> dict[str, Any]:
    """What a study left in its results store (any, by URI), for exactly-once checks: `runs`
    (trial id -> list of (run id, status), so a trial run twice shows two entries) and `rows`
    (trial id -> metric -> step -> how many rows the store holds)."""
    from ablate import tracking

    store = tracking.open_store(uri)
    table = store.runs(study_name)
    runs: dict[str, list[tuple[str, str]]] = {}
    rows: dict[str, dict[str, dict[int, int]]] = {}
    for _, run in table.runs.iterrows():
        runs.setdefault(run["trial_id"], []).append((run["run_id"], run["status"]))
        per_key = rows.setdefault(run["trial_id"], {})
        for key in table.metrics_of(run["run_id"]):
            counts = store.metric_rows_per_step(run["run_id"], key)
            if counts:
                per_key[key] = counts
    return {"runs": runs, "rows": rows}


def exactly_once_problems(
    ledger: dict[str, Any], trial_ids: Sequence[str], steps: Sequence[int], key: str
) -> list[str]:
    """Every way `ledger` breaks "each trial FINISHED exactly once, each (metric, step) exactly
    once, and `key` logged at every step of `steps`"; [] when it holds."""
    problems = []
    for trial_id in trial_ids:
        runs = ledger["runs"].get(trial_id, [])
        if [status for _, status in runs] != ["FINISHED"]:
            problems.append(f"{trial_id}: runs {runs}, expected one FINISHED")
        for metric, counts in ledger["rows"].get(trial_id, {}).items():
            twice = sorted(step for step, n in counts.items() if n > 1)
            if twice:
                problems.append(f"{trial_id}: {metric} logged more than once at steps {twice}")
        logged = ledger["rows"].get(trial_id, {}).get(key, {})
        missing = sorted(set(steps) - set(logged))
        if missing:
            problems.append(f"{trial_id}: {key} missing at steps {missing}")
    return problems


__all__ = [
    "ScriptedEngine",
    "ToyTask",
    "ToyTemplate",
    "char_tokenizer",
    "cycle_script",
    "exactly_once_problems",
    "study_data",
    "study_ledger",
    "tiny_llama",
    "zoo_model_built",
]
