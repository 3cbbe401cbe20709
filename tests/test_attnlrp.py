"""AttnLRP: the rules against hand-written LRP propagation (numpy, no autograd), conservation on tiny BERT and
ViT models, the model unchanged after the rules' block, and the method through explain_* and the CLI."""
from __future__ import annotations

import contextlib
import copy
import json
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from torch import nn

from rollout_core import cli
from rollout_core.explain import explain_image, explain_text
from rollout_core.maths.lrp import attnlrp_rules, rules


def test_layer_norm_gelu_linear_match_hand_propagation():
    torch.manual_seed(0)
    net = nn.Sequential(nn.LayerNorm(4), nn.GELU(), nn.Linear(4, 1, bias=False)).double()
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([1.5, -0.5, 2.0, 0.7]))
        net[0].bias.zero_()
    x = torch.tensor([[0.3, -1.2, 2.0, 0.4]], dtype=torch.float64, requires_grad=True)
    with rules(net, []):
        y = net(x)
        y.sum().backward()
    got = (x * x.grad).detach().numpy()[0]
    # by hand: the linear layer's epsilon rule (eps -> 0), GELU's identity rule, LayerNorm with its std frozen
    xs = x.detach().numpy()[0]
    w_ln, w = net[0].weight.detach().numpy(), net[2].weight.detach().numpy()[0]
    std = np.sqrt(((xs - xs.mean()) ** 2).mean() + net[0].eps)
    h = (xs - xs.mean()) / std * w_ln
    a = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in h])  # exact GELU
    out = float(a @ w)
    r_a = a * w / out * out  # linear: share z_j / sum z of the output's relevance (= the output)
    r_h = r_a  # identity rule: the activation passes relevance unchanged
    m = (np.eye(4) - 1 / 4) / std * w_ln[:, None]  # h = m x (row j = output j) with the std held constant
    r_x = np.array([sum(m[j, i] * xs[i] / h[j] * r_h[j] for j in range(4)) for i in range(4)])
    assert np.allclose(got, r_x, atol=1e-12)
    assert np.isclose(got.sum(), y.item(), atol=1e-12)  # no bias: everything is conserved


class _Attention(nn.Module):
    """One head of softmax attention, written out: o = softmax(Q Kᵀ / sqrt(d)) V."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(d, d, bias=False) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.q(x) @ self.k(x).transpose(-1, -2) / np.sqrt(x.shape[-1])
        return torch.softmax(scores, -1) @ self.v(x)


def _hand_attention_lrp(x: np.ndarray, wq: np.ndarray, wk: np.ndarray, wv: np.ndarray, row: int, col: int):
    """AttnLRP by hand for the output o[row, col]: uniform rule on both products, the softmax rule
    R_s = s (R_A - A sum R_A), epsilon rule (eps -> 0) on the projections. Returns (R_x, o[row, col])."""
    n, d = x.shape
    q, k, v = x @ wq.T, x @ wk.T, x @ wv.T
    s = q @ k.T / np.sqrt(d)
    att = np.exp(s - s.max(1, keepdims=True))
    att /= att.sum(1, keepdims=True)
    o = att @ v
    r_o = np.zeros((n, d))
    r_o[row, col] = o[row, col]
    r_att, r_v = np.zeros((n, n)), np.zeros((n, d))
    for i in range(n):
        for j in range(n):
            for c in range(d):
                share = att[i, j] * v[j, c] / o[i, c] * r_o[i, c]
                r_att[i, j] += share / 2
                r_v[j, c] += share / 2
    r_s = s * (r_att - att * r_att.sum(1, keepdims=True))
    r_q, r_k = np.zeros((n, d)), np.zeros((n, d))
    for i in range(n):
        for j in range(n):
            for c in range(d):
                share = q[i, c] * k[j, c] / np.sqrt(d) / s[i, j] * r_s[i, j]
                r_q[i, c] += share / 2
                r_k[j, c] += share / 2
    r_x = np.zeros((n, d))
    for proj, w, r in ((q, wq, r_q), (k, wk, r_k), (v, wv, r_v)):
        for t in range(n):
            for c in range(d):
                for e in range(d):
                    r_x[t, e] += x[t, e] * w[c, e] / proj[t, c] * r[t, c]
    return r_x, o[row, col]


def test_softmax_attention_matches_hand_propagation():
    torch.manual_seed(1)
    att = _Attention(2).double()
    x = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    with rules(att, [(att.q, 4.0), (att.k, 4.0), (att.v, 2.0)]):
        out = att(x)[1, 0]
        out.backward()
    got = (x * x.grad).detach().numpy()
    want, value = _hand_attention_lrp(x.detach().numpy(), *(p.weight.detach().numpy() for p in (att.q, att.k, att.v)),
                                      row=1, col=0)
    assert np.isclose(out.item(), value)
    assert np.allclose(got, want, atol=1e-10)
    x.grad = None
    att(x)[1, 0].backward()  # after the block: the ordinary gradient, which differs
    assert not np.allclose((x * x.grad).detach().numpy(), want, atol=1e-4)


def _softmax_absorbed(att: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """What the softmax rule keeps: sum R_A - sum R_scores, with R_scores = x (R_A - A sum R_A) (the rule is
    shift invariant per row, so x = log A stands for the scores). R_A is half of A g: g is A's gradient, and
    the uniform rule at A V gives A half (the rules realise that half at Q and K, downstream of A)."""
    r_att = att * grad / 2
    r_in = torch.log(att) * (r_att - att * r_att.sum(-1, keepdim=True))
    return (r_att.sum() - r_in.sum()).detach()


def _zero_biases(model: nn.Module) -> nn.Module:
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.zero_()
    return model.double()


def _relevance(model: nn.Module, inputs: dict, target: int, lrp: bool = True):
    ctx = attnlrp_rules(model) if lrp else contextlib.nullcontext()
    with ctx:
        out = model(**inputs, output_attentions=True, output_hidden_states=True, return_dict=True)
        for a in out.attentions:
            a.retain_grad()
        embedded = out.hidden_states[0]
        embedded.retain_grad()
        logit = out.logits[0, target]
        logit.backward()
    relevance = (embedded * embedded.grad).sum(-1)[0].detach()
    absorbed = sum(_softmax_absorbed(a, a.grad) for a in out.attentions)
    return relevance, float(absorbed), logit.item()


@pytest.mark.parametrize("kind", ["bert", "distilbert", "vit", "deit"])
def test_relevance_is_conserved_on_tiny_models(tiny_handle, kind):
    """Biases zeroed, float64: input relevance + what the softmaxes absorb (their rule is a Taylor expansion at
    the scores, not conservative) = the logit, to 1e-6 of it: round-off only, as every other rule is exactly
    linear once the biases are zero; the model runs in float64, but ViT's eager attention takes its softmax in
    float32 (BERT's balance holds to ~1e-15).
    Plain gradient x input (no rules) misses the same balance by far more."""
    model = _zero_biases(copy.deepcopy(tiny_handle(kind).model))  # a copy: the session's handle stays intact
    torch.manual_seed(0)
    if kind in ("bert", "distilbert"):
        inputs = {"input_ids": torch.tensor([[2, 7, 9, 11, 5, 3]])}
    else:
        inputs = {"pixel_values": torch.randn(1, 3, 32, 32, dtype=torch.float64)}
    relevance, absorbed, logit = _relevance(model, inputs, target=1)
    assert abs(relevance.sum().item() + absorbed - logit) < 1e-6 * abs(logit)
    plain, absorbed_plain, _ = _relevance(model, inputs, target=1, lrp=False)
    assert abs(plain.sum().item() + absorbed_plain - logit) > 1e-3 * abs(logit)


def test_model_outputs_unchanged_inside_and_after_the_rules(tiny_handle):
    model = tiny_handle("bert").model
    ids = torch.tensor([[2, 7, 9, 11, 3]])
    before = model(input_ids=ids).logits.detach().clone()
    hooks = {n: (dict(m._forward_hooks), dict(m._forward_pre_hooks)) for n, m in model.named_modules()}
    with attnlrp_rules(model):
        inside = model(input_ids=ids).logits.detach().clone()
    after = model(input_ids=ids).logits.detach()
    assert torch.equal(before, inside) and torch.equal(before, after)
    # the same hooks as before (transformers installs its own output-capturing hooks on a first
    # output_attentions call, so "no hooks at all" depends on which test ran first)
    assert {n: (dict(m._forward_hooks), dict(m._forward_pre_hooks)) for n, m in model.named_modules()} == hooks


def test_rules_leave_other_threads_alone(tiny_handle):
    model = tiny_handle("bert").model
    ids = torch.tensor([[2, 7, 9, 11, 3]])

    def input_x_gradient() -> torch.Tensor:
        out = model(input_ids=ids, output_hidden_states=True, return_dict=True)
        grad, = torch.autograd.grad(out.logits[0, 0], out.hidden_states[0])
        return (grad * out.hidden_states[0]).sum(-1).detach()

    plain = input_x_gradient()
    with attnlrp_rules(model):
        inside = input_x_gradient()
        with ThreadPoolExecutor(1) as pool:
            other = pool.submit(input_x_gradient).result()
    assert torch.equal(other, plain) and not torch.allclose(inside, plain)


def _direct(handle, inputs: dict, target: int) -> np.ndarray:
    with attnlrp_rules(handle.model):
        out = handle.model(**inputs, output_hidden_states=True, return_dict=True)
        emb = out.hidden_states[0]
        grad, = torch.autograd.grad(out.logits[0, target], emb)
    return (emb * grad).sum(-1)[0].detach().double().numpy()


def test_explain_text_and_image_give_the_relevance(tiny_handle):
    text = tiny_handle("bert")
    e = explain_text(text, "the cat sat", method="attnlrp", target="POSITIVE")
    ids = text.processor("the cat sat", return_tensors="pt")["input_ids"]
    label = text.config.label2id["POSITIVE"]
    assert np.allclose(e.scores, _direct(text, {"input_ids": ids}, label), atol=1e-6)
    assert e.layer_scores.shape == (text.num_layers, len(e.tokens))
    assert np.allclose(e.layer_scores, e.scores[None, :])  # one map: the same at every layer of the slider
    other = explain_text(text, "the cat sat", method="attnlrp", target="NEGATIVE")
    assert not np.allclose(other.scores, e.scores)  # class-specific
    image = tiny_handle("vit")
    picture = (np.random.default_rng(0).random((32, 32, 3)) * 255).astype(np.uint8)
    e = explain_image(image, picture, method="attnlrp", target=0)
    pixels = image.processor(images=picture, return_tensors="pt")["pixel_values"]
    assert np.allclose(e.scores, _direct(image, {"pixel_values": pixels}, 0), atol=1e-6)
    assert e.score_map().shape == e.grid and e.settings["method"] == "attnlrp"


def _main(capsys, *args: str) -> tuple[int, str, str]:
    try:
        status = cli.main(list(args))
    except SystemExit as stop:
        status = stop.code
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_method_attnlrp(capsys, tiny_model_dir):
    status, out, _ = _main(capsys, "text", "the cat sat", "--model", str(tiny_model_dir("bert")), "--json",
                           "--method", "attnlrp")
    data = json.loads(out)
    assert status == 0 and data["settings"]["method"] == "attnlrp" and len(data["scores"]) == len(data["tokens"])
    status, _, err = _main(capsys, "text", "the cat sat", "--model", str(tiny_model_dir("gpt2")),
                           "--method", "attnlrp")
    assert status == 2 and err.count("\n") == 1 and "AttnLRP is available for BERT-like" in err


def test_attnlrp_is_worded_as_one_map_not_raw_attention(tiny_handle):
    from rollout_core.figures._common import slider_label
    from rollout_core.summary import summarize

    e = explain_text(tiny_handle("bert"), "the food was cold", method="attnlrp")
    text = summarize(e)
    assert "AttnLRP" in text and "raw attention" not in text
    assert slider_label("attnlrp") == "Layer"  # not "cumulative rollout": it has one map, not per-layer results
    assert slider_label("rollout", "alti").startswith("Layer (cumulative")
