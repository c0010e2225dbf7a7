"""The packed training forward: with ragged completions only the positions that predict a
completion token are computed. Their values are bit for bit those of the padded forward (the
row-wise kernels see the same rows), gradients equal to float rounding (the weight gradients'
sums skip the padding's exact zeros, in another order), padding's hidden states are zeros."""

from __future__ import annotations

import torch

from ablate.models import fast_llama
from ablate.testing import char_tokenizer, tiny_llama


def ragged_batch(tokenizer, prompts=4, group=8, width=7, steps=20, seed=0):
    """Left-padded prompts × `group` rows, right-padded completions of lengths 1..steps."""
    gen = torch.Generator().manual_seed(seed)
    pad = tokenizer.pad_token_id
    ids = torch.randint(4, 40, (prompts, width), generator=gen)
    mask = torch.ones(prompts, width, dtype=torch.long)
    for row in range(prompts):
        ids[row, :row], mask[row, :row] = pad, 0
    ids, mask = ids.repeat_interleave(group, 0), mask.repeat_interleave(group, 0)
    rows = prompts * group
    comp = torch.randint(4, 40, (rows, steps), generator=gen)
    lengths = torch.randint(1, steps + 1, (rows,), generator=gen)
    lengths[0] = steps  # the widest row sets the width
    comp_mask = (torch.arange(steps)[None] < lengths[:, None]).long()
    comp = comp.masked_fill(comp_mask == 0, pad)
    return torch.cat([ids, comp], 1), torch.cat([mask, comp_mask], 1), width


def padded_forward(model, ids, attn, width):
    """The forward before packing: every position computed (the completion mask all ones
    computes the same values at real positions; padding is never attended causally)."""
    dense = attn.clone()
    dense[:, width:] = 1
    return fast_llama.completion_hidden(model, ids, dense, width)


def loss_of(model, hidden, ids, attn, width):
    logits = fast_llama.logits_from_hidden(model, hidden)
    logp = torch.log_softmax(logits, -1).gather(-1, ids[:, width:, None]).squeeze(-1)
    return -(logp * attn[:, width:]).sum()


def test_packed_forward_equals_the_padded_one_bit_for_bit_at_real_positions():
    tokenizer = char_tokenizer()
    model = tiny_llama(seed=1, tokenizer=tokenizer).train()
    ids, attn, width = ragged_batch(tokenizer)
    real = attn[:, width:].bool()
    packed = fast_llama.completion_hidden(model, ids, attn, width)
    padded = padded_forward(model, ids, attn, width)
    assert torch.equal(packed[real], padded[real])
    # a position past a row's last token predicts nothing: zeros, not computed
    assert (packed[~real] == 0).all() and not (padded[~real] == 0).all()
    grads = []
    for hidden in (packed, padded):
        model.zero_grad(set_to_none=True)
        loss_of(model, hidden, ids, attn, width).backward(retain_graph=True)
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    for name, grad in grads[0].items():  # measured: within 5e-7 of each gradient's largest
        scale = float(grads[1][name].abs().max())
        torch.testing.assert_close(grad, grads[1][name], atol=1e-5 * scale, rtol=0, msg=name)


def test_equal_lengths_take_the_padded_path_and_length_one_rows_compute_nothing():
    tokenizer = char_tokenizer()
    model = tiny_llama(seed=2, tokenizer=tokenizer)
    ids, attn, width = ragged_batch(tokenizer, prompts=2, group=2, steps=5)
    attn[:, width:] = 1  # every completion full length: nothing to pack
    with torch.no_grad():
        full = fast_llama.completion_hidden(model, ids, attn, width)
        assert torch.equal(full, padded_forward(model, ids, attn, width))
        attn[:, width + 1 :] = 0  # every completion one token long: only the prompt pass
        short = fast_llama.completion_hidden(model, ids, attn, width)
    assert torch.equal(short[:, 0], full[:, 0]) and (short[:, 1:] == 0).all()


def test_packing_round_trips_positions():
    mask = torch.tensor([[1, 1, 0], [0, 0, 0], [1, 0, 1]], dtype=torch.bool)
    packing = fast_llama.Packing.of(mask)
    x = torch.arange(9.0).reshape(3, 3, 1)
    packed = packing.pack(x)
    assert packed.flatten().tolist() == [0.0, 1.0, 6.0, 8.0]
    back = packing.pad(packed)
    assert torch.equal(back, x * mask[..., None])
