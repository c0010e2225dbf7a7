"""ablate.models: the char tokenizer, model folders that reload offline, load_model, recipes."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import string

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ablate.base.errors import ConfigError
from ablate.models import (
    load_model,
    model_location,
    resolve_model_path,
    store,
    weights_hash,
    zoo_names,
)
from ablate.models.pretrain import IGNORE_INDEX, CorpusLine, build_model, encode_batch
from ablate.models.recipe import ModelSize
from ablate.models.store import SHIPPED_DIR, save_checkpoint
from ablate.models.tokenizer import SPECIAL_TOKENS, build_char_tokenizer, char_vocab
from ablate.tasks import get_task, synthetic_charset
from ablate.tasks.templates import get_template, template_names

MICRO = ModelSize(hidden=32, intermediate=64, layers=1, heads=2, max_positions=192)
TRICKY = "Question: 28 + 65 =\n\tAnswer:  28+65=93;#### 93 . , ! ? <b> {x} \\boxed{1}\n\n"


@pytest.fixture(scope="module")
def tokenizer():
    return build_char_tokenizer(synthetic_charset())


@pytest.fixture(scope="module")
def saved_micro_model(tmp_path_factory, tokenizer):
    folder = tmp_path_factory.mktemp("micro-model")
    model = build_model(MICRO, tokenizer, seed=0)
    save_checkpoint(model, tokenizer, folder, {"name": "micro"})
    return model, folder


def synthetic_texts() -> list[str]:
    """Prompt + worked solution of every synthetic task variant under every template."""
    tasks = [
        get_task("arithmetic", layout="pre"),
        get_task("arithmetic", layout="tail", shuffle_steps=True),
        get_task("countdown"),
    ]
    texts, rng = [], random.Random(0)
    for task in tasks:
        for problem in task.problems("eval")[:5]:
            for name in template_names():
                template = get_template(name)
                texts.append(template.render(problem.question))
                texts.append(task.sample_solution(problem, template, rng))
    return texts


def test_round_trip_every_task_text_after_reload(saved_micro_model, monkeypatch):
    # A Llama config sits in the folder: AutoTokenizer must keep our tokenizer (with a Qwen2
    # config it swaps in Qwen2's and silently drops spaces).
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    reloaded = AutoTokenizer.from_pretrained(saved_micro_model[1], local_files_only=True)
    texts = [TRICKY, string.printable, *synthetic_texts()]
    assert any(" " in t and "\n" in t for t in texts)
    for text in texts:
        ids = reloaded(text)["input_ids"]
        assert len(ids) == len(text) + 1  # one token per character, plus <bos>
        assert reloaded.unk_token_id not in ids
        assert reloaded.decode(ids, skip_special_tokens=True) == text


def test_encoding_prepends_bos_and_specials_have_fixed_ids(tokenizer):
    ids = tokenizer("ab")["input_ids"]
    assert ids[0] == tokenizer.bos_token_id
    assert [tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id] == [0, 1, 2]
    assert tokenizer.decode(tokenizer("é")["input_ids"][1:]) == "<unk>"


def test_vocab_ids_do_not_depend_on_charset_order():
    assert char_vocab("zyx\n") == char_vocab("\nxyz")
    assert list(char_vocab())[: len(SPECIAL_TOKENS)] == list(SPECIAL_TOKENS)
    with pytest.raises(ValueError, match="single characters"):
        char_vocab(["ab"])


def test_reloaded_model_gives_identical_logits(saved_micro_model, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model, folder = saved_micro_model
    reloaded = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    assert reloaded.config.model_type == "llama"
    loaded, tok = load_model(str(folder))
    ids = tok([TRICKY], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        expected = model.eval()(ids).logits
        assert torch.equal(reloaded.eval()(ids).logits, expected)
        assert torch.equal(loaded(ids).logits, expected)
    assert (folder / "model.safetensors").is_file()


def test_sizes_have_the_documented_parameter_counts(tokenizer):
    small = build_model(ModelSize(), tokenizer, seed=0)
    large = build_model(ModelSize(hidden=256, intermediate=1024, layers=4), tokenizer, seed=0)
    assert small.config.tie_word_embeddings
    assert 0.52e6 < small.num_parameters() < 0.55e6
    assert 4.1e6 < large.num_parameters() < 4.3e6


def test_loss_covers_completion_and_eos_only(tokenizer):
    batch = encode_batch([CorpusLine("Q:1+2\n", "3"), CorpusLine("Q:10", " 5;#### 5")], tokenizer)
    labels, ids = batch["labels"], batch["input_ids"]
    assert labels[0].ne(IGNORE_INDEX).sum() == 2  # "3" + <eos>
    assert labels[1].ne(IGNORE_INDEX).sum() == len(" 5;#### 5") + 1
    first = labels[0].ne(IGNORE_INDEX).nonzero().flatten().tolist()
    assert ids[0, first].tolist() == [tokenizer.convert_tokens_to_ids("3"), 2]
    assert batch["attention_mask"][0].sum() == 1 + 6 + 2  # bos + prompt + completion + eos


def test_unknown_model_is_a_config_error_listing_the_zoo():
    with pytest.raises(ConfigError) as info:
        load_model("no-such-model")
    for name in ("hopeless", "mid", "rl_ready", "saturated"):
        assert name in zoo_names() and name in str(info.value)


def test_unbuilt_size_says_how_to_build_it(monkeypatch, tmp_path):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match="ablate zoo build base-4m"):
        resolve_model_path("base-4m")


def test_weights_hash_of_a_shipped_rung_is_the_sha256_of_its_weights_file(monkeypatch, tmp_path):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    weights = (SHIPPED_DIR / "rl_ready" / "model.safetensors").read_bytes()
    assert weights_hash("rl_ready") == hashlib.sha256(weights).hexdigest()
    assert weights_hash("rl_ready") != weights_hash("mid")


def test_weights_hash_is_cached_until_a_file_changes(monkeypatch, tmp_path):
    folder = shutil.copytree(SHIPPED_DIR / "rl_ready", tmp_path / "copy")
    weights = folder / "model.safetensors"
    day = 86_400
    os.utime(weights, (1e9, 1e9))  # old: past the racy window, so the hash is cached
    first = weights_hash(folder)
    assert first == weights_hash("rl_ready")
    assert model_location(folder) == ("path", folder.resolve())
    monkeypatch.setattr(store, "_hash_files", lambda files: pytest.fail("hashed twice"))
    assert weights_hash(str(folder)) == first
    monkeypatch.undo()
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one byte: same size, so only the mtime tells
    weights.write_bytes(bytes(data))
    os.utime(weights, (1e9 + day, 1e9 + day))
    assert weights_hash(folder) == hashlib.sha256(bytes(data)).hexdigest() != first


def test_a_just_written_weights_file_is_hashed_again_each_time(monkeypatch, tmp_path):
    folder = shutil.copytree(SHIPPED_DIR / "mid", tmp_path / "fresh")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes())  # copytree kept the shipped (old) mtime
    calls = []
    real = store._hash_files
    monkeypatch.setattr(store, "_hash_files", lambda files: calls.append(1) or real(files))
    # Written just now: a same-size rewrite within the mtime granularity would go unseen.
    assert weights_hash(folder) == weights_hash(folder)
    assert len(calls) == 2


def test_weights_hash_covers_every_shard_in_name_order(saved_micro_model, tmp_path):
    folder = shutil.copytree(saved_micro_model[1], tmp_path / "sharded")
    (folder / "model.safetensors").rename(folder / "model-00002-of-00002.safetensors")
    (folder / "model-00001-of-00002.safetensors").write_bytes(b"first shard")
    expected = hashlib.sha256(
        b"first shard" + (folder / "model-00002-of-00002.safetensors").read_bytes()
    )
    assert weights_hash(folder) == expected.hexdigest()


def test_weights_hash_of_a_bin_checkpoint_skips_trainer_files(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"weights")
    (tmp_path / "training_args.bin").write_bytes(b"arguments")
    assert weights_hash(tmp_path) == hashlib.sha256(b"weights").hexdigest()


def test_weights_hash_of_a_bad_name_or_weightless_folder_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="neither a zoo model"):
        weights_hash(tmp_path / "nowhere")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="holds no weights"):
        weights_hash(tmp_path)
