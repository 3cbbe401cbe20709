"""Explain a corpus in batches into a folder of Parquet chunks, resumable, on local threads or Ray actors.

The batches are explained by `rollout_core.serving.workers.map_items` (threads of this process, or Ray actors that
each load the model once); this process writes every chunk, whatever the engine, into a `folder.ResultFolder`:
one run at a time, each chunk whole and recorded with its ids and checksum, so a rerun explains exactly the rows
the folder does not hold (see `rollout_core.corpus.folder`). Rows whose cell cannot be explained are skipped and
listed (`rollout_core.corpus.cells`).
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import torch
from tqdm import tqdm

from rollout_core import methods
from rollout_core.compare import word_scores, word_shares
from rollout_core.corpus import cells as corpus_cells
from rollout_core.corpus.folder import Lost, open_for_writing
from rollout_core.corpus.folder import read_results  # noqa: F401  (the folder's reader, where callers look for it)
from rollout_core.errors import InputError
from rollout_core.explain import explain_image, explain_texts, text_batches
from rollout_core.explanation_data import Prediction
from rollout_core.inputs.text import model_max_length, token_counts
from rollout_core.models import families
from rollout_core.models.handle import ModelHandle
from rollout_core.models.loading import load_model
from rollout_core.serving.workers import map_items

TOP_K = 5
SCHEMA_VERSION = 2
PRECISIONS = ("float32", "int8")

SCHEMA = pa.schema([
    ("id", pa.string()), ("kind", pa.string()), ("text", pa.string()), ("label", pa.string()),
    ("prediction", pa.string()), ("probability", pa.float32()),
    ("top_words", pa.list_(pa.string())), ("top_shares", pa.list_(pa.float32())),
    ("words", pa.list_(pa.string())), ("starts", pa.list_(pa.int32())), ("ends", pa.list_(pa.int32())),
    ("scores", pa.list_(pa.float32())),
])


def explain_rows(model: Any, rows: pd.DataFrame, method: str, batch_size: int, top_k: int = TOP_K) -> pa.Table:
    """Explain `rows` (id, text or image, label) and return one output row per input row (SCHEMA).

    Texts: the words of the text with their summed shares (`compare.word_shares`) and character spans.
    Images: the patches ("patch r,c") with their shares; `text` holds the image's id, spans are empty.
    """
    images = "image" in rows.columns
    out: dict[str, list] = {name: [] for name in SCHEMA.names}
    for row_id, text, label, (prediction, units) in zip(
            rows["id"], rows["id"] if images else rows["text"], rows["label"], _units(model, rows, method, batch_size)):
        best = sorted(range(len(units)), key=lambda i: -units[i][3])[:top_k]
        out["id"].append(str(row_id))
        out["kind"].append("image" if images else "text")
        out["text"].append(str(text))
        out["label"].append(None if label is None or pd.isna(label) else str(label))
        out["prediction"].append(prediction[0].label if prediction else None)
        out["probability"].append(prediction[0].probability if prediction else None)
        out["top_words"].append([units[i][0] for i in best])
        out["top_shares"].append([units[i][3] for i in best])
        out["words"].append([w for w, _, _, _ in units])
        out["starts"].append([] if images else [s for _, s, _, _ in units])
        out["ends"].append([] if images else [e for _, _, e, _ in units])
        out["scores"].append([v for _, _, _, v in units])
    return pa.Table.from_pydict(out, schema=SCHEMA)


Units = list[tuple[str, int, int, float]]  # (word or patch, start, end, share): what a row shows


def _units(model: Any, rows: pd.DataFrame, method: str, batch_size: int) -> Iterator[tuple[list[Prediction] | None,
                                                                                           Units]]:
    """Each row's prediction and units, in row order.

    Texts go straight from each batch's tensors to the word shares (`explain.text_batches`, the batches
    `explain_texts` computes, without its per-row Explanation objects and settings); images and encoder-decoder
    models through their Explanations. The values are the same either way."""
    if "image" in rows.columns:
        for image in rows["image"]:
            expl = explain_image(model, image, method=method)
            yield expl.prediction, [(t, -1, -1, float(v)) for t, v in zip(expl.display_tokens(), expl.display_scores())]
        return
    texts = list(rows["text"])
    handle = model if isinstance(model, ModelHandle) else load_model(model)
    if handle.task == "seq2seq":
        yield from ((e.prediction, word_scores(e)) for e in explain_texts(handle, texts, method=method,
                                                                          batch_size=batch_size))
        return
    for encoded, result in text_batches(handle, texts, method=method, batch_size=batch_size):
        scores = result.scores.detach().to("cpu", torch.float64).numpy()  # as `BatchResult.arrays`, once per batch
        for b, enc in enumerate(encoded):
            yield result.predictions[b], word_shares(enc.text, enc.offsets, enc.special, scores[b, :len(enc.input_ids)])


def model_label(model: Any) -> str:
    """The name a result folder records for `model` (a registry name, hub id, folder, or a loaded handle)."""
    return str(getattr(model, "name", model))


def check_precision(precision: str, method: str) -> None:
    """Refuse a precision other than PRECISIONS, and int8 with a method that does not read the attention weights
    alone (`MethodSpec.attention_only`: the others differentiate the model or read its linear weights, which int8
    layers do not offer)."""
    if precision not in PRECISIONS:
        raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision == "int8" and not methods.get(method).attention_only:
        int8 = ", ".join(s.name for s in methods.all_methods() if s.attention_only)
        raise InputError(f"precision int8 works with the methods {int8}, not {method!r}")


def at_precision(handle: ModelHandle, precision: str) -> ModelHandle:
    """`handle` itself for float32; for int8 a copy whose `nn.Linear` layers are dynamically quantized
    (`torch.ao.quantization.quantize_dynamic`: int8 weights, one scale per output channel; activations quantized
    per batch at run time. Per channel: default-text, 512 sentences, half the share error of one scale per
    tensor and 98.6% vs 96.7% of the predictions kept, at the same speed).
    The shared handle is left as it is. The copy keeps the hooks the model holds (transformers records the
    attentions with hooks), so make it while no other thread is explaining with the handle, as `_row_explainer`
    does before its worker starts."""
    if precision == "float32":
        return handle
    model = copy.deepcopy(handle.model)
    with warnings.catch_warnings():  # torch 2.x points to torchao for new code; this API still works as documented
        warnings.simplefilter("ignore")
        spec = {torch.nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig}
        model = torch.ao.quantization.quantize_dynamic(model, spec, dtype=torch.qint8, inplace=True)
    return dataclasses.replace(handle, model=model)


Progress = Callable[[int], None]  # called with the number of rows just explained, after every batch


def length_order(model: Any, rows: pd.DataFrame) -> np.ndarray:
    """Positions of `rows` by token count (stable), so that a batch holds texts of similar lengths and pads
    little (generated sentences, batch 64: 1.41x the real tokens in input order, 1.12x sorted); images keep
    their order (one size)."""
    if "image" in rows.columns or rows.empty:
        return np.arange(len(rows))
    handle = model if isinstance(model, ModelHandle) else load_model(model)
    limit = model_max_length(handle.processor, handle.config, families.spec_for(handle.config).position_offset, None)
    return np.argsort(token_counts(handle.processor, [str(t) for t in rows["text"]], limit), kind="stable")


def _row_explainer(model: Any, method: str, batch_size: int, top_k: int,
                   precision: str = "float32") -> Callable[[pd.DataFrame], pa.Table]:
    """A worker's function: `explain_rows` of one batch with `model` (a handle, or a name a Ray actor loads once)
    at `precision` (the int8 copy made here, once per worker, before the worker explains anything)."""
    handle = at_precision(model if isinstance(model, ModelHandle) else load_model(model), precision)
    return lambda batch: explain_rows(handle, batch, method, batch_size, top_k)


def explain_in_batches(model: Any, rows: pd.DataFrame, method: str, batch_size: int, top_k: int = TOP_K,
                       progress: Progress | None = None, workers: int = 1) -> pa.Table:
    """`explain_rows` over `rows` in batches of `batch_size` of similar lengths (`length_order`) on `workers`
    threads, calling `progress` after each batch; the rows come back in input order."""
    return next(explain_chunks(model, [rows], method, batch_size, top_k, progress, workers))


def explain_chunks(model: Any, chunks: list[pd.DataFrame], method: str, batch_size: int, top_k: int = TOP_K,
                   progress: Progress | None = None, workers: int = 1, *, engine: str = "local",
                   address: str | None = None, precision: str = "float32") -> Iterator[pa.Table]:
    """`explain_in_batches` of each of `chunks`, in order, with the batches of all chunks queued on one set of
    `workers` (`map_items`: threads, or Ray actors with `engine="ray"`): while a chunk is written the workers go on
    with the next one, instead of waiting at every chunk's end for its last batch and its writing.

    Texts are batched by length when this process holds the model (a handle, or the local engine); Ray given a
    model name keeps the input order, so that the model is loaded by the actors alone."""
    sort = engine == "local" or isinstance(model, ModelHandle)
    orders = [length_order(model, rows) if sort else np.arange(len(rows)) for rows in chunks]
    batches = [[rows.iloc[order[first:first + batch_size]] for first in range(0, len(rows), batch_size)]
               for rows, order in zip(chunks, orders)]
    worker_model = model if engine == "local" else model_label(model)
    make = functools.partial(_row_explainer, worker_model, method, batch_size, top_k, precision)
    with map_items(make, [b for c in batches for b in c], engine=engine, workers=workers, address=address) as tables:
        for order, chunk_batches in zip(orders, batches):
            done = []
            for batch in chunk_batches:
                done.append(next(tables))
                if progress is not None:
                    progress(len(batch))
            yield pa.concat_tables(done).take(np.argsort(order))


@dataclasses.dataclass(frozen=True)
class RunReport:
    """What a `run_corpus` call left in its folder."""

    out: Path
    held: int  # rows the folder holds now (each id once)
    written: int  # rows this run wrote
    lost: tuple[Lost, ...]  # recorded chunks found missing or damaged (their rows were explained again)
    adopted: int  # chunks of a folder from before the journal, recorded as found
    cells: corpus_cells.Cells  # the rows skipped and cut

    def lines(self) -> list[str]:
        """The run's summary for a person: what the folder holds, and every row not explained as given."""
        lines = [f"{self.out} holds {corpus_cells.count(self.held, 'row')} ({self.written:,} written by this run)"]
        for lost in self.lost:
            rows = "its rows" if lost.rows is None else f"its {corpus_cells.count(lost.rows, 'row')}"
            lines.append(f"{lost.name} was {lost.why}: {rows} were explained again")
        if self.adopted:
            lines.append(f"{corpus_cells.count(self.adopted, 'chunk')} written before the folder kept a journal "
                         "checked and recorded")
        lines.extend(corpus_cells.describe(self.cells))
        if len(self.cells.skipped):
            lines.append(f"the skipped rows are listed in {self.out / 'skipped.csv'}")
        return lines


def run_corpus(model: Any, corpus: pd.DataFrame, out_dir: str | Path, *, method: str = "rollout",
               batch_size: int = 16, chunk_rows: int = 256, top_k: int = TOP_K, workers: int = 2,
               precision: str = "float32", engine: str = "local", address: str | None = None,
               progress: Callable[[int, int], None] | None = None) -> RunReport:
    """Explain every row of `corpus` not yet in `out_dir` into Parquet chunks; what the folder holds then.

    `engine` "local": `workers` threads explain whole batches, each with one torch thread (1: the calling thread
    with torch's own thread count); "ray": `workers` Ray actors (RAY_ADDRESS or `address`: a cluster), each loading
    the model by its name. Either way this process writes the chunks, so a Ray run resumes as a local one does.
    `precision` "int8": the model's linear layers in int8 (`at_precision`; faster, approximate, recorded in the
    manifest); "float32": exact. Rows with a missing, empty or non-text cell are skipped (`RunReport.cells`,
    `skipped.csv`); texts over `cells.MAX_TEXT_CHARS` characters are cut there.

    `progress(done, to_do)` is called after every batch; without it a progress bar with rate and time left goes
    to stderr.
    """
    if batch_size < 1 or chunk_rows < 1 or workers < 1:
        raise InputError("batch_size, chunk_rows and workers must be >= 1")
    check_precision(precision, method)
    facts = {"model": model_label(model), "method": method, "top_k": top_k, "schema": SCHEMA_VERSION}
    if precision != "float32":  # float32 folders keep the manifest they had before the option existed
        facts["precision"] = precision
    cells = corpus_cells.usable(corpus)
    with open_for_writing(Path(out_dir), facts) as folder:
        folder.write_skipped(cells.skipped)
        todo = cells.rows[~cells.rows["id"].astype(str).isin(folder.done_ids())]
        if engine == "local" and not todo.empty and not isinstance(model, ModelHandle):
            model = load_model(model)
        bar = None if progress is not None else tqdm(total=len(todo), unit="row", file=sys.stderr, smoothing=0.1)
        done = written = 0

        def advance(rows: int) -> None:
            nonlocal done
            done += rows
            if bar is not None:
                bar.update(rows)
            else:
                progress(done, len(todo))

        try:
            chunks = [todo.iloc[first:first + chunk_rows] for first in range(0, len(todo), chunk_rows)]
            for table in explain_chunks(model, chunks, method, batch_size, top_k, advance, workers, engine=engine,
                                        address=address, precision=precision):
                written += len(folder.write_chunk(table).ids)
        finally:
            if bar is not None:
                bar.close()
        return RunReport(folder.path, folder.rows(), written, tuple(folder.lost), folder.adopted, cells)

