"""Human-rated sentences for training default-text: the VADER paper's ground-truth corpora.

The vaderSentiment 3.3.2 source distribution on PyPI (MIT) carries
`additional_resources/hutto_ICWSM_2014.tar.gz` (Hutto & Gilbert, ICWSM 2014): Amazon review sentences, Pang & Lee
movie-review snippets, New York Times editorial sentences and tweets, each rated by about 20 people from -4 to +4.
Each `*_GroundTruth.txt` line is `id<TAB>mean rating<TAB>text`. The wheel lacks these files, so training downloads
the sdist once with pip into a cache folder (training only: the product never downloads anything, and only trained
weights are committed). A mean rating at least `margin` from zero is a polar label; one within `neutral_within` of
zero is a neutral statement at the soft target 0.5 (as training.reviews' NEUTRAL sentences); the band between is
ambiguous and dropped.
"""
from __future__ import annotations

import html
import io
import random
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from training.sampling import balanced

SDIST = "vaderSentiment==3.3.2"
ARCHIVE = "additional_resources/hutto_ICWSM_2014.tar.gz"
SOURCES = {
    "amazon": "amazonReviewSnippets_GroundTruth.txt",
    "movies": "movieReviewSnippets_GroundTruth.txt",
    "nyt": "nytEditorialSnippets_GroundTruth.txt",
    "tweets": "tweets_GroundTruth.txt",
}
CACHE = Path.home() / ".cache" / "rollout-dashboard" / "training" / "hutto_ICWSM_2014"


def corpus_dir(cache: Path = CACHE) -> Path:
    """The folder holding the ground-truth files, downloading and unpacking the sdist the first time."""
    if all((cache / name).is_file() for name in SOURCES.values()):
        return cache
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", SDIST,
                        "-d", tmp], check=True, capture_output=True)
        sdist = next(Path(tmp).glob("vaderSentiment-*.tar.gz"))
        with tarfile.open(sdist) as outer:
            member = next(m for m in outer.getmembers() if m.name.endswith(ARCHIVE))
            inner = io.BytesIO(outer.extractfile(member).read())
        cache.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=inner) as corpora:
            for member in corpora.getmembers():
                name = Path(member.name).name
                if member.isfile() and name in SOURCES.values():
                    (cache / name).write_bytes(corpora.extractfile(member).read())
    return cache


def read(path: Path) -> list[tuple[str, float]]:
    """(text, mean rating) for every well-formed line of a ground-truth file."""
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) != 3:
            continue
        try:
            rating = float(parts[1])
        except ValueError:
            continue
        text = re.sub(r"\s+", " ", html.unescape(parts[2]).replace("''", '"')).strip()
        if text:
            rows.append((text, rating))
    return rows


def target(rating: float, margin: float = 1.0, neutral_within: float = 0.25) -> float | None:
    """Target probability of POSITIVE for a mean rating: 1 or 0 beyond `margin`, 0.5 within `neutral_within` of
    zero, None (dropped) between."""
    if rating >= margin:
        return 1.0
    if rating <= -margin:
        return 0.0
    if abs(rating) <= neutral_within:
        return 0.5
    return None


def load(sources: tuple[str, ...] = tuple(SOURCES), folder: Path | None = None, margin: float = 1.0,
         neutral_within: float = 0.25) -> list[tuple[str, float]]:
    """(text, target) for the labelled lines of `sources`; a text seen twice (ignoring case and spacing) is kept
    once, and dropped when its ratings disagree on the target."""
    folder = folder or corpus_dir()
    targets: dict[str, tuple[str, float | None]] = {}
    for source in sources:
        for text, rating in read(folder / SOURCES[source]):
            key, value = text.lower(), target(rating, margin, neutral_within)
            if key in targets and targets[key][1] != value:
                targets[key] = (text, None)
            else:
                targets.setdefault(key, (text, value))
    return [(text, value) for text, value in targets.values() if value is not None]


def sample(n: int, seed: int = 0, sources: tuple[str, ...] = tuple(SOURCES), neutral_share: float = 0.15,
           folder: Path | None = None) -> list[tuple[str, float]]:
    """`n` labelled texts: `neutral_share` neutral, the rest half positive and half negative (fewer if a class runs
    out)."""
    return balanced(load(sources, folder), n, random.Random(f"rated:{seed}"), neutral_share)
