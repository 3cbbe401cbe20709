"""A compute budget for a shared server: a request's cost is estimated before it runs and refused above a limit
with the estimate in words and a cheaper choice; at most a few heavy computations run at once (stopping one from
outside at its checkpoints is `rollout_core.cancel`).

Cost model: every registered method owns its estimate (`MethodSpec.seconds`, in the method's module); this module
counts the request's size once (`workload`: positions as the explanation will count them, layers, heads, hidden
size, pooled outputs) and asks the registry, never naming a method. benchmarks/bench_method_costs.py prints each
method's estimate beside its measured time on the embedded models.
Settings: env `ROLLOUT_MAX_COMPUTE_SECONDS` (default 60) and `ROLLOUT_MAX_HEAVY_JOBS` (default 2).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from rollout_core import methods, settings
from rollout_core.errors import InputError
from rollout_core.methods._spec import Workload

HEAVY_SECONDS = 2.0
"""Requests estimated at this or more take one of the `ROLLOUT_MAX_HEAVY_JOBS` slots (and get a Stop)."""


class BudgetError(InputError):
    """A request would cost more than the server allows, or the server is busy; the message says what to do.
    `choice`: the cheaper method the message names (None: none fits), for a page to offer as a button."""

    def __init__(self, message: str, choice: str | None = None) -> None:
        super().__init__(message)
        self.choice = choice


def max_seconds() -> float:
    """The largest estimated cost a request may have: env ROLLOUT_MAX_COMPUTE_SECONDS (default 60, above 0)."""
    return float(settings.number("ROLLOUT_MAX_COMPUTE_SECONDS"))


def max_heavy_jobs() -> int:
    """How many heavy computations may run at once: env ROLLOUT_MAX_HEAVY_JOBS (default 2, at least 1)."""
    return int(settings.number("ROLLOUT_MAX_HEAVY_JOBS"))


def estimate_seconds(method: str, workload: Workload) -> float:
    """Estimated seconds of `method` on `workload`, the method's own estimate (`MethodSpec.seconds`)."""
    return methods.get(method).seconds(workload)


def in_words(seconds: float) -> str:
    """A duration as a person would say it: "under 0.1 s", "about 0.3 s", "about 5 s", "about 4 min", "about 2 h"."""
    if seconds < 0.1:
        return "under 0.1 s"
    if seconds < 0.95:
        return f"about {seconds:.1f} s"
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h"


def cheaper(method: str, workload: Workload, choices: tuple[str, ...], limit: float) -> list[tuple[str, float]]:
    """The methods among `choices` (other than `method`; in the caller's order of preference) that fit `limit` on
    `workload`, with their estimates: the cheaper choices a refusal or a page offers."""
    costs = [(name, estimate_seconds(name, workload)) for name in dict.fromkeys(choices) if name != method]
    return [(name, s) for name, s in costs if s <= limit]


def _fitting_size(method: str, workload: Workload, limit: float) -> int:
    """The most positions (roughly, within 10%) at which `method` fits `limit` on this model; 0: none."""
    fits = workload.tokens
    while fits > 1 and estimate_seconds(method, dataclasses.replace(workload, tokens=fits)) > limit:
        fits = int(fits * 0.9)
    return fits if estimate_seconds(method, dataclasses.replace(workload, tokens=fits)) <= limit else 0


def refusal(method: str, workload: Workload, seconds: float, limit: float, choices: tuple[str, ...]) -> BudgetError:
    """The refusal of `method` on `workload` (estimated `seconds`, over `limit`): one line naming a cheaper choice,
    the first of `choices` (the methods that can run here, in order of preference) that fits, and the input size
    that would fit with the same method."""
    spec = methods.get(method)
    size = _size_words(workload)
    first = cheaper(method, workload, choices, limit)[:1]
    offers = [f"use {methods.display_name(name)} ({in_words(s)})" for name, s in first]
    fits = _fitting_size(method, dataclasses.replace(workload, batch=1), limit / max(workload.batch, 1))
    if workload.batch > 1:
        offers.append("explain fewer rows")
    elif workload.image:
        offers.append("use a smaller image")
    elif fits:
        offers.append(f"shorten the text to about {fits} tokens")
    choice = " or ".join(offers) if offers else "choose a smaller input or another model"
    return BudgetError(f"{spec.title} on {size} through {workload.layers} layers would take "
                       f"{in_words(seconds)}, over this server's limit of {in_words(limit)}; {choice}",
                       choice=first[0][0] if first else None)


def _size_words(workload: Workload) -> str:
    """'257 patches', '40 tokens x 8 inputs'."""
    unit = "patches" if workload.image else "tokens"
    return f"{workload.tokens} {unit}" + (f" x {workload.batch} inputs" if workload.batch > 1 else "")


def before_run(handles: tuple[Any, ...], sizes: tuple[tuple[int, int], ...], method: str, start_layer: int = 0,
               end_layer: int | None = None, *, full_matrix: bool = False, discard: bool = False) -> str:
    """What explaining an input by `method` with each of the loaded `handles` will cost, in one line for a page to
    show before it runs: "Estimated about 3 s on this input (257 patches)" (the sum over the handles), saying when
    one of them is over the server's limit (that request will be refused). `sizes`: the input's (positions, pooled
    outputs) for each handle (`positions`); `discard`: a discard ratio above 0 is set. The estimate is the one the
    budget checks (`workload`, as `check_prepared` builds it)."""
    works = [workload(h, None, method, start_layer, end_layer, full_matrix=full_matrix, sized=sized, discard=discard)
             for h, sized in zip(handles, sizes)]
    each, limit = [estimate_seconds(method, w) for w in works], max_seconds()
    described = " and ".join(dict.fromkeys(_size_words(w) for w in works))
    over = f", over this server's limit of {in_words(limit)}: it would be refused" if max(each) > limit else ""
    return f"Estimated {in_words(sum(each))} on this input ({described}){over}."


def check(method: str, workload: Workload, *, limit: float | None = None, choices: tuple[str, ...] | None = None
          ) -> float:
    """The estimate of `estimate_seconds`; `BudgetError` (one line: the estimate, the limit and a cheaper choice
    among `choices`, default every registered method) when it is over `limit` (default: `max_seconds()`)."""
    limit = max_seconds() if limit is None else limit
    seconds = estimate_seconds(method, workload)
    if seconds <= limit:
        return seconds
    raise refusal(method, workload, seconds, limit, methods.names() if choices is None else choices)


def check_batches(method: str, batches: list[Workload], *, limit: float | None = None,
                  choices: tuple[str, ...] | None = None) -> float:
    """The summed estimate of `method` over `batches` (a corpus run: one `Workload` per batch, `corpus_batches`);
    over `limit` a `BudgetError` in one line naming the first of `choices` whose sum fits, and about how many rows
    would fit with this method."""
    limit = max_seconds() if limit is None else limit

    def total(name: str) -> float:
        return sum(estimate_seconds(name, w) for w in batches)

    seconds = total(method)
    if seconds <= limit:
        return seconds
    rows, longest = sum(w.batch for w in batches), max((w.tokens for w in batches), default=0)
    costs = ((name, total(name)) for name in dict.fromkeys(methods.names() if choices is None else choices)
             if name != method)
    first = next(((name, s) for name, s in costs if s <= limit), None)
    offers = [f"use {methods.display_name(first[0])} ({in_words(first[1])})"] if first else []
    if (fit := int(rows * limit / seconds)) >= 1:
        offers.append(f"explain about {fit} rows or fewer")
    unit = "patches" if batches[0].image else "tokens"
    raise BudgetError(f"{methods.get(method).title} on {rows} rows of up to {longest} {unit} would take "
                      f"{in_words(seconds)}, over this server's limit of {in_words(limit)}; "
                      + (" or ".join(offers) if offers else "choose fewer rows or another model"),
                      choice=first[0] if first else None)


def corpus_batches(handle: Any, texts: list[str], method: str, batch_size: int) -> list[Workload]:
    """The `Workload`s of explaining `texts` by `method` as the corpus engine batches them: sorted by length,
    `batch_size` at a time, each batch as long as its longest text."""
    lengths = sorted(positions(handle, text)[0] for text in texts)
    return [workload(handle, None, method, sized=(chunk[-1], _pooled(handle, chunk[-1])), batch=len(chunk))
            for chunk in (lengths[i:i + batch_size] for i in range(0, len(lengths), batch_size))]


def _pooled(handle: Any, tokens: int) -> int:
    """The positions the readout of `handle`'s model pools at `tokens` text positions."""
    from rollout_core.models import families

    return families.pooled_positions(handle, tokens)


def _hidden_size(config: Any) -> int:
    for key in ("hidden_size", "d_model", "n_embd", "dim"):
        if isinstance(getattr(config, key, None), int):
            return int(getattr(config, key))
    return 768


def positions(handle: Any, source: Any) -> tuple[int, int]:
    """(positions, pooled outputs) of `source` (a text, or an image for an image model) as the explanation will
    count them: text tokenised with the model's limit, images as the processed image's patch grid; outputs are
    the positions the model's readout pools."""
    from rollout_core.models import families

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
    return tokens, families.pooled_positions(handle, tokens, patches)


def workload(handle: Any, source: Any, method: str, start_layer: int = 0, end_layer: int | None = None, *,
             full_matrix: bool = False, sized: tuple[int, int] | None = None, batch: int = 1,
             discard: bool = False) -> Workload:
    """The `Workload` of explaining `source` with the loaded `handle` by `method` over the layer range (raised to
    the method's first readable layer, as the explanation does). `sized`: (positions, pooled outputs) when the
    caller counted them already (`positions(handle, source)`, or an encoded request's); `batch`: inputs."""
    tokens, outputs = positions(handle, source) if sized is None else sized
    spec = methods.get(method)
    first = spec.first_layer(handle) if spec.first_layer is not None else 0
    end = handle.num_layers if end_layer is None else end_layer
    return Workload(tokens=tokens, layers=max(end - max(start_layer, first), 1), model_layers=handle.num_layers,
                    heads=handle.num_heads, hidden=_hidden_size(handle.config), outputs=outputs,
                    image=handle.modality == "image", batch=batch, full_matrix=full_matrix, discard=discard)


def check_request(handle: Any, source: Any, method: str, start_layer: int = 0, end_layer: int | None = None, *,
                  full_matrix: bool = False, limit: float | None = None) -> float:
    """`check` for `method` on `source` with the loaded `handle` (its `workload`); a refusal names a cheaper
    method that can run on this model (`choices`)."""
    work = workload(handle, source, method, start_layer, end_layer, full_matrix=full_matrix)
    return check(method, work, limit=limit, choices=choices(handle))


def choices(handle: Any) -> tuple[str, ...]:
    """The methods that can run on `handle`, the model's measured default first, then in display order: what a
    refusal or a page offers as the cheaper choice."""
    from rollout_core.models import measured

    runnable = tuple(s.name for s in methods.runnable(handle))
    default = measured.default_method(handle.name, methods.names())
    return tuple(dict.fromkeys(((default,) if default in runnable else ()) + runnable))


def check_prepared(prepared: Any) -> float:
    """`check` for a request `rollout_core.explain.prepare` has encoded (its positions counted once, for the
    estimate and the explanation alike): its method, layer range and full-matrix choice as it will run."""
    o, handle = prepared.options, prepared.handle
    work = workload(handle, None, o.method, o.start_layer, o.end_layer, full_matrix=o.full_matrix,
                    sized=(prepared.tokens, prepared.outputs), batch=max(len(prepared.encoded), 1),
                    discard=o.discard_ratio > 0)
    return check(o.method, work, choices=choices(handle))


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
