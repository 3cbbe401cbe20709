"""Attention knockout Shapley values: how much the explained class needs the information each token passes on.

A token is knocked out when no other position may attend to it, in every layer (its key is masked for every query
but its own; the attention renormalises over the rest): nothing of its content then reaches the read-out through
attention (Geva et al. 2023, Wang et al. 2023 block information flow the same way). The game: a coalition is the
set of readable tokens (special tokens always readable), its value the log odds of the explained class. A token's
score is its Shapley value in that game, estimated from antithetic pairs of random orders (each order and its
reverse): it credits each of two redundant words ("cold and rude") and a negation ("not a failure") alike, which a
single knockout (only the drop when one token goes) misses. Efficiency holds exactly for any set of orders: the
scores sum to v(all readable) - v(specials only).
"""
from __future__ import annotations

from typing import Any, Callable

import torch

KNOCKOUT_BATCH = 64
"""Coalitions run per forward pass."""
ORDERS = 8
"""Random orders per input (4 antithetic pairs); each costs one forward of the input per removable token."""


def knockout_masks(readable: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(K, 1, n, n) additive attention masks from (K, n) bool `readable`: a query may attend to itself and to the
    readable keys only."""
    k, n = readable.shape
    allowed = readable[:, None, :].expand(k, n, n) | torch.eye(n, dtype=torch.bool, device=readable.device)
    return torch.zeros(k, 1, n, n, dtype=dtype, device=readable.device).masked_fill(~allowed[:, None],
                                                                                     torch.finfo(dtype).min)


def log_odds(logits: torch.Tensor, target: int) -> torch.Tensor:
    """(K,) log p / (1 - p) of class `target` under the softmax of (K, C) logits."""
    log_p = torch.log_softmax(logits.double(), dim=-1)
    others = torch.logsumexp(torch.cat([log_p[:, :target], log_p[:, target + 1:]], dim=-1), dim=-1)
    return log_p[:, target] - others


def coalition_values(run: Callable[[dict[str, torch.Tensor]], torch.Tensor], inputs: dict[str, torch.Tensor],
                     readable: torch.Tensor, target: int, dtype: torch.dtype,
                     batch: int = KNOCKOUT_BATCH) -> torch.Tensor:
    """(K,) the value of each coalition: the target's log odds when only `readable[k]` (K, n) can be attended to.
    `inputs`: one sample's keyword inputs (batch 1, no attention mask); `run` maps keyword inputs to logits."""
    from rollout_core.cancel import checkpoint

    values = []
    for start in range(0, len(readable), batch):
        checkpoint()
        chunk = readable[start:start + batch]
        copies = {key: value.expand(len(chunk), *value.shape[1:]) for key, value in inputs.items()}
        copies["attention_mask"] = knockout_masks(chunk, dtype)
        with torch.no_grad():
            values.append(log_odds(run(copies), target))
    return torch.cat(values)


def random_orders(removable: torch.Tensor, count: int = ORDERS, seed: int = 0) -> list[torch.Tensor]:
    """`count` orders of the removable positions, in antithetic pairs (an order, then its reverse)."""
    positions = removable.nonzero().flatten()
    generator = torch.Generator().manual_seed(seed)
    orders: list[torch.Tensor] = []
    for k in range(count):
        orders.append(orders[-1].flip(0) if k % 2 else positions[torch.randperm(len(positions), generator=generator)])
    return orders


def order_coalitions(removable: torch.Tensor, orders: list[torch.Tensor]) -> torch.Tensor:
    """(len(orders) * (m + 1), n) bool: for each order, the coalitions as its tokens become readable one by one
    (the first: the always-readable tokens alone)."""
    rows = []
    for order in orders:
        readable = ~removable.clone()
        rows.append(readable.clone())
        for position in order:
            readable[position] = True
            rows.append(readable.clone())
    return torch.stack(rows)


def shapley_from_orders(values: torch.Tensor, orders: list[torch.Tensor], n: int) -> torch.Tensor:
    """(n,) the mean marginal value of each position over `orders`, from `values` of `order_coalitions`."""
    scores = torch.zeros(n, dtype=torch.float64)
    m = len(orders[0]) if orders else 0
    for k, order in enumerate(orders):
        chain = values[k * (m + 1):(k + 1) * (m + 1)].double().cpu()
        scores[order.cpu()] += chain[1:] - chain[:-1]
    return scores / max(len(orders), 1)


def knockout_shapley(run: Callable[[dict[str, torch.Tensor]], Any], inputs: dict[str, torch.Tensor],
                     removable: torch.Tensor, target: int, dtype: torch.dtype, count: int = ORDERS) -> torch.Tensor:
    """(n,) the sampled Shapley value of each removable position of one sample (0 elsewhere)."""
    orders = random_orders(removable.cpu(), count)
    # every order starts at the specials alone and ends with all readable: run each distinct coalition once
    distinct, where = torch.unique(order_coalitions(removable.cpu(), orders), dim=0, return_inverse=True)
    values = coalition_values(run, inputs, distinct.to(removable.device), target, dtype)
    return shapley_from_orders(values.cpu()[where], orders, removable.shape[0])
