"""The offline character-level tokenizer every zoo model uses: one token per character, built
with `tokenizers` and wrapped as a `transformers` fast tokenizer, so it saves and loads with
`save_pretrained` / `AutoTokenizer.from_pretrained` like any Hugging Face tokenizer."""

from __future__ import annotations

import string
from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
#: Special tokens first, so their ids (0..3) are the same in every vocabulary.
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)


def char_vocab(chars: Iterable[str] = ()) -> dict[str, int]:
    """Token -> id: the specials, then every printable ASCII character plus `chars`, sorted, so
    the same character set always gives the same ids whatever order it was listed in."""
    extra = set(chars)
    bad = [c for c in extra if len(c) != 1]
    if bad:
        raise ValueError(f"char_vocab takes single characters, got {bad[:5]!r}")
    # string.printable includes space, \t, \n, \r, \x0b, \x0c: whitespace must round-trip.
    alphabet = sorted((set(string.printable) | extra) - set(SPECIAL_TOKENS))
    return {token: i for i, token in enumerate([*SPECIAL_TOKENS, *alphabet])}


def build_char_tokenizer(chars: Iterable[str] = ()) -> PreTrainedTokenizerFast:
    """A fast tokenizer splitting text into single characters (newlines and spaces included),
    over `char_vocab(chars)`."""
    return tokenizer_from_vocab(char_vocab(chars))


def tokenizer_from_vocab(vocab: dict[str, int]) -> PreTrainedTokenizerFast:
    """The character tokenizer over `vocab` (the special tokens included).

    Encoding prepends `<bos>` (like Llama tokenizers) so a prompt encodes exactly as it did in
    pretraining; decoding concatenates characters with no inserted spaces. Characters outside
    the vocabulary map to `<unk>`.
    """
    backend = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    # `[\s\S]` rather than `.`: Oniguruma's `.` does not match a newline.
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A",
        pair=f"{BOS} $A $B",
        special_tokens=[(BOS, vocab[BOS])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        # The default clean-up would delete the space before punctuation: "a ." -> "a.".
        clean_up_tokenization_spaces=False,
        padding_side="left",
    )
