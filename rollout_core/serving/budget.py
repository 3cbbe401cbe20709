"""A compute budget for a shared server: a request's cost is estimated before it runs and refused above a limit
with the estimate in words and a cheaper choice; at most a few heavy computations run at once (stopping one from
outside at its checkpoints is `rollout_core.cancel`).

Cost model: the only method whose cost explodes is attention flow (the others are one forward pass, plus one
backward pass for gradient rollout, and are not limited); its estimate is the method's own,
`rollout_core.methods.flow.cost_seconds` (the problems it solves, times seconds per graph edge): about
layers^2 * n^3 / 2 edge visits for the explained row of every layer prefix, exact on text, mass-pruned on images
(benchmarks/RESULTS.md: estimate vs measured on default-text and default-image).
Settings: env `ROLLOUT_MAX_COMPUTE_SECONDS` (default 60) and `ROLLOUT_MAX_HEAVY_JOBS` (default 2).
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from rollout_core import settings
from rollout_core.errors import InputError

HEAVY_SECONDS = 2.0
"""Requests estimated at this or more take one of the `ROLLOUT_MAX_HEAVY_JOBS` slots."""


class BudgetError(InputError):
    """A request would cost more than the server allows, or the server is busy; the message says what to do."""


def max_seconds() -> float:
    """The largest estimated cost a request may have: env ROLLOUT_MAX_COMPUTE_SECONDS (default 60, above 0)."""
    return float(settings.number("ROLLOUT_MAX_COMPUTE_SECONDS"))


def max_heavy_jobs() -> int:
    """How many heavy computations may run at once: env ROLLOUT_MAX_HEAVY_JOBS (default 2, at least 1)."""
    return int(settings.number("ROLLOUT_MAX_HEAVY_JOBS"))


def estimate_seconds(method: str, tokens: int, layers: int, *, image: bool = False, outputs: int = 1,
                     full_matrix: bool = False) -> float:
    """Estimated seconds of `method` on `tokens` positions through `layers` layers (0 for the cheap methods);
    `outputs`: the positions the readout pools (1: one position); `full_matrix`: the whole final matrix too."""
    if method != "flow":
        return 0.0
    from rollout_core.methods.flow import cost_seconds

    return cost_seconds(tokens, layers, outputs=outputs, image=image, full_matrix=full_matrix)


def in_words(seconds: float) -> str:
    """A duration as a person would say it: "about 5 s", "about 4 min", "about 2 h"."""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h"


def check(method: str, tokens: int, layers: int, *, image: bool = False, outputs: int = 1, full_matrix: bool = False,
          limit: float | None = None) -> float:
    """The estimate of `estimate_seconds`; `BudgetError` naming it and a cheaper choice when it is over `limit`
    (default: `max_seconds()`)."""
    limit = max_seconds() if limit is None else limit

    def cost(n: int) -> float:
        return estimate_seconds(method, n, layers, image=image, outputs=outputs, full_matrix=full_matrix)

    seconds = cost(tokens)
    if seconds <= limit:
        return seconds
    unit = "patches" if image else "tokens"
    fits = tokens
    while fits > 1 and cost(fits) > limit:
        fits = int(fits * 0.9)
    shorter = "a smaller image" if image else f"shorten the text to about {fits} tokens"
    raise BudgetError(f"{method} on {tokens} {unit} through {layers} layers would take {in_words(seconds)}, over "
                      f"this server's limit of {in_words(limit)}; use rollout (under a second) or {shorter}")


def check_request(handle: Any, source: Any, method: str, start_layer: int = 0, end_layer: int | None = None, *,
                  full_matrix: bool = False) -> float:
    """`check` for `method` on `source` (a text, or an image for an image model) with the loaded `handle`:
    the positions are counted as the explanation will (text: tokenised with the model's limit; images: the
    patch grid of the processed image), and so are the positions the model's readout pools."""
    if method != "flow":
        return 0.0
    from rollout_core.models import families

    layers = (handle.num_layers if end_layer is None else end_layer) - start_layer
    spec = families.spec_for(handle.config)
    patches = None
    if handle.modality == "image":
        from rollout_core.inputs.images import load_image, model_pixels

        pixels = model_pixels(handle.processor, load_image(source))
        layout = families.image_layout(handle.config, int(pixels.shape[-2]), int(pixels.shape[-1]))
        tokens, patches = layout.num_tokens, layout.patch_positions
    else:
        from rollout_core.inputs.text import encode_text, model_max_length, normalise_text

        limit = model_max_length(handle.processor, handle.config, spec.position_offset)
        tokens = len(encode_text(handle.processor, normalise_text(str(source)), limit).input_ids)
    outputs = families.pooled_positions(handle, tokens, patches)
    return check(method, tokens, layers, image=handle.modality == "image", outputs=outputs, full_matrix=full_matrix)


def check_prepared(prepared: Any) -> float:
    """`check` for a request `rollout_core.explain.prepare` has encoded (its positions counted once, for the
    estimate and the explanation alike): its method, layer range and full-matrix choice as it will run."""
    o = prepared.options
    return check(o.method, prepared.tokens, o.layers, image=prepared.handle.modality == "image",
                 outputs=prepared.outputs, full_matrix=o.full_matrix)


@dataclass(frozen=True)
class Place:
    """Where a waiting heavy job stands: `ahead` jobs queued before it; `own` when a job of the same owner runs
    (an owner runs one heavy job at a time)."""

    ahead: int
    own: bool


class _HeavyQueue:
    """`size` slots handed out first come, first served, at most one per owner at a time (a job without an owner
    has no such limit); waiters know how many are queued before them and whether their owner's other job runs.
    A waiter held back only by its own owner's running job does not hold back the waiters behind it."""

    def __init__(self, size: int) -> None:
        self.size, self.running, self.waiting = size, 0, []
        self.owners: dict[str, int] = {}
        self.changed = threading.Condition()

    def _busy(self, owner: str | None) -> bool:
        return owner is not None and self.owners.get(owner, 0) > 0

    def _place(self, ticket: tuple[object, str | None]) -> Place:
        """Called with the lock held."""
        index = self.waiting.index(ticket)
        ahead = sum(1 for _, other in self.waiting[:index] if not self._busy(other))
        return Place(ahead, self._busy(ticket[1]))

    def _take(self, owner: str | None) -> None:
        self.running += 1
        if owner is not None:
            self.owners[owner] = self.owners.get(owner, 0) + 1

    def acquire(self, wait: float, on_wait: Callable[[Place], None] | None, owner: str | None = None) -> None:
        ticket, deadline, shown = (object(), owner), time.monotonic() + wait, None
        with self.changed:
            self.waiting.append(ticket)
        try:
            while True:
                with self.changed:
                    place = self._place(ticket)
                    if place.ahead == 0 and not place.own and self.running < self.size:
                        self.waiting.remove(ticket)
                        self._take(owner)
                        self.changed.notify_all()
                        return
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise BudgetError(_busy_message(place, self.size))
                    if place == shown or on_wait is None:
                        self.changed.wait(remaining)
                        continue
                on_wait(place)  # outside the lock: the callback may take its time
                shown = place
        except BaseException:
            with self.changed:
                if ticket in self.waiting:
                    self.waiting.remove(ticket)
                self.changed.notify_all()
            raise

    def release(self, owner: str | None = None) -> None:
        with self.changed:
            self.running -= 1
            if owner is not None:
                self.owners[owner] -= 1
                if not self.owners[owner]:
                    del self.owners[owner]
            self.changed.notify_all()


def _busy_message(place: Place, size: int) -> str:
    if place.own:
        return ("your other long computation (in another tab or page) is still running, and each visitor runs one "
                "at a time; try again when it is done, or choose a cheaper method (rollout)")
    return (f"the server is busy with {size} long computations; try again in a minute or choose a cheaper method "
            "(rollout)")


_QUEUES_LOCK = threading.Lock()
_QUEUES: dict[int, _HeavyQueue] = {}


def _queue() -> _HeavyQueue:
    size = max_heavy_jobs()
    with _QUEUES_LOCK:
        return _QUEUES.setdefault(size, _HeavyQueue(size))


def place_in_words(place: Place) -> str:
    """A waiter's place in the heavy-job queue: "you are next", "1 job ahead of you", "your other long computation
    runs first"."""
    if place.own:
        return "your other long computation (in another tab or page) runs first: one at a time per visitor"
    if place.ahead == 0:
        return "you are next in the queue"
    return f"{place.ahead} job{'s' if place.ahead != 1 else ''} ahead of you in the queue"


@contextmanager
def heavy_slot(wait: float = 30.0, on_wait: Callable[[Place], None] | None = None,
               owner: str | None = None) -> Iterator[None]:
    """Hold one of the server's `max_heavy_jobs()` slots for the block, first come, first served, at most one at a
    time for `owner` (a visitor: None, no such limit). While none can be had, call `on_wait(place)` each time the
    waiter's `Place` changes (to say so); after `wait` seconds raise `BudgetError`."""
    queue = _queue()
    queue.acquire(wait, on_wait, owner)
    try:
        yield
    finally:
        queue.release(owner)
