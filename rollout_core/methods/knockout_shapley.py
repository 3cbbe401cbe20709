"""Attention knockout Shapley: each token's Shapley value in the game where a coalition is the set of tokens the
others may attend to (in every layer) and its value the explained class's log odds (rollout_core.maths.knockout).
Class-specific and causal: it measures what the prediction loses without a token's information, not how much
attention the token receives."""
from rollout_core.methods._rows import one_map
from rollout_core.methods._cost import forward_seconds, pass_seconds
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec, Workload


def _bidirectional(handle):
    """The game blocks tokens from being attended to by every other token: bidirectional attention only."""
    from rollout_core.errors import UnsupportedModelError

    if not getattr(handle.config, "is_decoder", False):
        return None
    return UnsupportedModelError("attention knockout Shapley is available for text classifiers with "
                                 "bidirectional attention (BERT-like)")


def compute(method_input: MethodInput) -> MethodOutput:
    """The knockout Shapley value of each token, repeated for each layer of the range (one map of the model)."""
    import torch

    from rollout_core.maths.knockout import knockout_shapley

    m = method_input
    ids = m.inputs["input_ids"]
    real = torch.ones_like(ids, dtype=torch.bool) if m.mask is None else m.mask.bool()
    special = torch.isin(ids, torch.tensor(m.handle.processor.all_special_ids, device=ids.device))
    dtype = next(m.handle.model.parameters()).dtype
    scores = []
    for b in range(ids.shape[0]):
        n = int(real[b].sum())
        one = {key: value[b:b + 1, :n] for key, value in m.inputs.items() if key != "attention_mask"}
        row = knockout_shapley(lambda kw: m.handle.model(**kw).logits, one, (~special[b, :n]), int(m.target_index[b]),
                               dtype)
        scores.append(torch.nn.functional.pad(row, (0, ids.shape[1] - n)))
    return one_map(torch.stack(scores), method_input)



COALITION_SHARE = 1.25
"""One coalition's run, in units of one input's forward pass (its products and masked attention; the coalitions run
KNOCKOUT_BATCH to a pass, so the per-layer overhead is shared: measured)."""


def cost(w: Workload) -> float:
    """About ORDERS distinct coalitions per token (every order adds the tokens one by one), each a model run,
    KNOCKOUT_BATCH of them per forward pass."""
    from rollout_core.maths.knockout import KNOCKOUT_BATCH, ORDERS

    coalitions = ORDERS * max(w.tokens - 2, 1)
    passes = -(-coalitions // KNOCKOUT_BATCH)
    return forward_seconds(w) + w.batch * COALITION_SHARE * passes * pass_seconds(w, coalitions / passes)


METHOD = MethodSpec(
    name="knockout_shapley",
    title="Attention knockout Shapley (causal)",
    phrase="attention knockout Shapley values (class-specific, causal, whole model)",
    description="Blocks tokens from being attended to, in every layer, in random orders, and credits each token "
                "with its average effect on the class's log odds (a Shapley value); one signed map of the model, "
                "about 8 model runs per token.",
    use_when="A causal check of what a text classifier's prediction needs; costs about 8 model runs per token, so for "
             "short texts.",
    explains="What the explained class's log odds lose when an input cannot be attended to (a Shapley value; "
             "signed).",
    class_specific=True,
    signed=True,
    needs_classes=True,
    uses_head_fusion=False,
    uses_residual=False,
    uses_discard=False,
    cumulative=False,
    layered=False,
    modalities=("text",),
    requires=_bidirectional,
    cost=cost,
    compute=compute,
)
