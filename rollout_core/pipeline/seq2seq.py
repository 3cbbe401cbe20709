"""Encoder-decoder models: greedy generation, then one teacher-forced pass; the source map goes through
the decoder self-attention and the cross-attention (`decoder_to_source`) into the encoder rollout."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import torch

from rollout_core import capture, methods
from rollout_core.explanation import Explanation
from rollout_core.inputs.text import EncodedText, pad_batch, pad_token_id
from rollout_core.maths.fusion import fuse_heads
from rollout_core.maths.rollout import attention_rollout, augment_layer, layer_attention
from rollout_core.models.handle import ModelHandle
from rollout_core.options import Options
from rollout_core.pipeline import to_device
from rollout_core.pipeline.assemble import text_explanation
from rollout_core.pipeline.batch import _build
from rollout_core.pipeline.heads import causal_head

SEQ2SEQ_MAX_NEW_TOKENS = 20


def decoder_to_source(
    decoder_attentions: Sequence[torch.Tensor], cross_attentions: Sequence[torch.Tensor], *,
    head_fusion: str = "mean", residual_weight: float = 1.0,
) -> torch.Tensor:
    """(B, m, n): share of each encoder output j in each decoder output i, rows summing to 1.

    A decoder layer l mixes decoder states with its self-attention (residual-augmented, Ã_l) and then
    adds encoder outputs through its cross-attention C_l (head-fused). In the attention-only linear
    network d_l = Ã_l d_(l-1) + C_l h_enc the encoder content of the decoder states is S_L h_enc with
    S_0 = 0, S_l = Ã_l S_(l-1) + C_l; each row of S_L sums to L and is divided by L. With one layer of
    self-attention after the cross-attention this is R_dec · C (not R_decᵀ · C); a test builds that
    network. Multiply by the encoder rollout R_enc on the right to reach the source tokens.
    """
    total = None
    for self_att, cross in zip(decoder_attentions, cross_attentions):
        mixed = augment_layer(fuse_heads(self_att, head_fusion), residual_weight=residual_weight)
        c = fuse_heads(cross, head_fusion).to(mixed.dtype)
        total = c if total is None else mixed @ total + c
    return total / len(cross_attentions)


def explain_seq2seq(handle: ModelHandle, enc: EncodedText, opts: Options, target: Any, limit: int) -> Explanation:
    """Encoder-decoder: the greedy output is generated, then one teacher-forced pass gives encoder,
    decoder and cross-attentions. The explained row over the source is the target decoder position's row
    of `decoder_to_source`, carried through the encoder rollout (or the raw encoder layer, "attention")."""
    tokenizer = handle.processor
    inputs = to_device(pad_batch([enc], pad_token_id(tokenizer)), handle.device)
    with torch.no_grad():
        generated = handle.model.generate(**inputs, max_new_tokens=SEQ2SEQ_MAX_NEW_TOKENS, do_sample=False,
                                          num_beams=1)
    decoder_ids = generated[:, :-1] if generated.shape[1] > 1 else generated
    captured = capture.run(handle.model, {**inputs, "decoder_input_ids": decoder_ids}, num_layers=handle.num_layers)
    real_dec = torch.ones(decoder_ids.shape, dtype=torch.bool, device=handle.device)
    result = causal_head(tokenizer)(captured.outputs, real_dec, [target])
    position = result.targets[0]
    to_source = decoder_to_source(captured.decoder_attentions, captured.cross_attentions,
                                  head_fusion=opts.head_fusion, residual_weight=opts.residual_weight)
    s, e = opts.start_layer, opts.end_layer
    atts = captured.attentions
    layer_att = layer_attention(atts, head_fusion=opts.head_fusion)[s:e]
    cumulative = layer_att if not methods.get(opts.method).cumulative else attention_rollout(
        atts, head_fusion=opts.head_fusion, residual_weight=opts.residual_weight, discard_ratio=opts.discard_ratio,
        start_layer=s, end_layer=e, all_layers=True)
    w = to_source[:, position].to(cumulative.dtype)
    layer_rows = torch.einsum("bi,lbij->lbj", w, cumulative)
    decoder_tokens = tokenizer.convert_ids_to_tokens(decoder_ids[0].tolist())
    explained = replace(result, weights=w, descriptions=[
        f"decoder position {position} ({decoder_tokens[position]!r}) carried to the source through the decoder "
        f"self-attention and cross-attention; {result.descriptions[0]}"])
    batch = _build(  # the pooling ("first") is not read: the explained row is the head's (`weights`)
        inputs["attention_mask"].bool(), explained, "first", "full", layer_rows=layer_rows,
        layer_attention_scores=torch.einsum("bi,lbij->lbj", w, layer_att.to(w.dtype)), matrix=cumulative[-1],
        layer_attention=layer_att, head_attention=torch.stack(atts[s:e]) if opts.keep_heads else None,
    )
    decoder_rollout = attention_rollout(captured.decoder_attentions, head_fusion=opts.head_fusion,
                                        residual_weight=opts.residual_weight)
    explanation = text_explanation(handle, enc, batch, 0, opts, limit, None)
    explanation.extras.update(
        decoder_tokens=decoder_tokens,
        generated_text=tokenizer.decode(generated[0].tolist(), skip_special_tokens=True),
        decoder_position=position,
        decoder_to_source=to_source[0].detach().cpu().double().numpy(),
        decoder_matrix=decoder_rollout[0].detach().cpu().double().numpy(),
    )
    return explanation
