"""What defines a zoo model: its size, its pretraining run, how it is measured and (for a
ladder) which rungs are picked from the run's checkpoints. A recipe is plain frozen data; its
content hash names its cache folder, so a changed recipe can never reuse stale weights."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

#: Bump when the build code changes what a recipe produces (invalidates every cached build).
BUILD_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class ModelSize:
    """A Llama-architecture causal LM with tied embeddings (Llama, not Qwen2: for a Qwen2 config,
    transformers' AutoTokenizer swaps in Qwen2's tokenizer for the char tokenizer)."""

    hidden: int = 128
    intermediate: int = 512
    layers: int = 2
    heads: int = 4
    max_positions: int = 192


@dataclass(frozen=True, kw_only=True)
class PassKMeasure:
    """How the zoo measures a checkpoint's Pass@1 / Pass@8: fixed eval problems and a fixed
    sampling seed (part of `ZooRecipe.content_hash`, which hashes the values, not the name)."""

    problems: int = 64
    samples: int = 8
    temperature: float = 1.0
    max_new_tokens: int = 80
    seed: int = 1234
    #: The training template first; the others show template sensitivity.
    templates: tuple[str, ...] = ("plain",)


@dataclass(frozen=True, kw_only=True)
class PretrainSpec:
    """Supervised pretraining on freshly generated worked solutions (loss on completion tokens
    only). The defaults are the recipe the shipped `ladder` models were pretrained with
    (`catalog.RECIPES` overrides only `max_steps`)."""

    task: str = "arithmetic"
    task_options: tuple[tuple[str, object], ...] = (("layout", "pre"),)
    template: str = "plain"
    seed: int = 0
    lr: float = 1e-3
    warmup_steps: int = 50
    batch_size: int = 128
    grad_clip: float = 1.0
    weight_decay: float = 0.0
    max_steps: int = 900
    #: Torch intra-op threads. Part of the recipe: the weights differ with the thread count
    #: (measured); 1 thread is also ~3x faster than 2 when another process shares the 2 cores.
    threads: int = 1


@dataclass(frozen=True, kw_only=True)
class Band:
    """`low <= metric <= high` for metric "pass1" or "pass8" under the training template."""

    metric: str
    low: float
    high: float

    def holds(self, measured: dict[str, float]) -> bool:
        return self.low <= measured[self.metric] <= self.high


@dataclass(frozen=True, kw_only=True)
class Rung:
    """A ladder rung: the checkpoint inside every band whose `metric` is nearest `target`."""

    name: str
    description: str
    bands: tuple[Band, ...]
    metric: str
    target: float

    def in_band(self, measured: dict[str, float]) -> bool:
        return all(band.holds(measured) for band in self.bands)

    def distance(self, measured: dict[str, float]) -> float:
        return abs(measured[self.metric] - self.target)


@dataclass(frozen=True, kw_only=True)
class AlignSpec:
    """A further phase on a built zoo model that makes it confident, as instruction tuning
    makes a base model: rounds of rejection-sampling fine-tuning (sample the model's own answers
    to training problems, keep the correct ones, fine-tune on them; "expert iteration", as in
    STaR, Zelikman et al. 2022). Each round sharpens the distribution toward the answers the
    model already gets right: Pass@1 rises and entropy falls while Pass@8 barely moves."""

    source: str = "rl_ready"
    rounds: int = 2
    problems: int = 512
    """Training problems sampled per round."""
    samples: int = 8
    """Completions per problem (temperature 1, the training template)."""
    steps: int = 150
    """Fine-tuning steps per round, each on `batch_size` kept completions drawn at random."""
    batch_size: int = 64
    lr: float = 2e-4
    seed: int = 0


@dataclass(frozen=True, kw_only=True)
class ZooRecipe:
    """A named build. With `rungs`, one run is checkpointed every `checkpoint_every` steps and
    each rung is picked by measurement; without, the final weights are the model `name`."""

    name: str
    description: str
    size: ModelSize = field(default_factory=ModelSize)
    pretrain: PretrainSpec = field(default_factory=PretrainSpec)
    eval: PassKMeasure = field(default_factory=PassKMeasure)
    rungs: tuple[Rung, ...] = ()
    checkpoint_every: int = 50
    #: Checkpoint every `dense_every` steps while the last measurement is inside `dense_while`:
    #: capability jumps within ~50 steps, so the steep part is sampled where it is measured.
    dense_every: int | None = None
    dense_while: Band | None = None
    #: Stop the run early once a checkpoint's Pass@1 reaches this (the top rung is then found).
    stop_at_pass1: float | None = None
    #: Instead of pretraining: start from zoo model `align.source` and align it (`pretrain`
    #: then gives only the task, template and threads).
    align: AlignSpec | None = None

    def as_dict(self) -> dict:
        fields = asdict(self)
        if fields["align"] is None:  # recipes from before aligning keep their content hash
            del fields["align"]
        return {"build_version": BUILD_VERSION, **fields}

    def content_hash(self) -> str:
        """sha256 of the canonical JSON of everything that determines the built weights."""
        canonical = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def next_checkpoint(self, step: int, measured: dict[str, float] | None) -> int:
        """The step of the checkpoint after the one at `step` (measured as `measured`)."""
        dense = self.dense_every and self.dense_while and measured
        if dense and self.dense_while.holds(measured):
            return step + self.dense_every
        return step + self.checkpoint_every

    def output_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.rungs) or (self.name,)
