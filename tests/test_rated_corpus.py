"""training.rated, the reader of the VADER paper's human-rated sentences: labels from the mean rating with a margin,
an ambiguous band dropped, duplicates kept once, and balanced seeded samples. Runs on a small hand-made folder."""
from collections import Counter

import pytest

from training import rated

LINES = {
    "amazon": ["1_1\t2.5\tgreat little blender, worth every penny.",
               "1_2\t-1.0\tstopped working after a week.",
               "1_3\t0.1\tthe box contains the jug and the lid.",
               "1_4\t0.6\tit is fine i guess.",
               "1_5\t-0.3\tshipping took four days.",
               "1_6\tnot-a-number\tbroken line",
               "just one field"],
    "movies": ["1\t3.1\tA joy from start to finish &amp; beyond.",
               "2\t-2.2\tTwo  hours I will never get back.",
               "3\t1.4\tGREAT little blender, worth every penny.",
               "4\t-0.2\tThe film opens in Paris."],
    "nyt": ["1_1\t0.25\tThe council meets on Tuesday.",
            "1_2\t-1.5\tThe plan is a disgrace.",
            "1_3\t-1.2\tThe film opens in Paris."],
    "tweets": ["1\t1.0\tLoving the new phone!"],
}


@pytest.fixture
def folder(tmp_path):
    for source, lines in LINES.items():
        (tmp_path / rated.SOURCES[source]).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def test_read_parses_well_formed_lines_and_cleans_text(folder):
    rows = rated.read(folder / rated.SOURCES["movies"])
    assert rows == [("A joy from start to finish & beyond.", 3.1), ("Two hours I will never get back.", -2.2),
                    ("GREAT little blender, worth every penny.", 1.4), ("The film opens in Paris.", -0.2)]
    assert len(rated.read(folder / rated.SOURCES["amazon"])) == 5


@pytest.mark.parametrize("rating, expected", [(2.5, 1.0), (1.0, 1.0), (0.99, None), (0.26, None), (0.25, 0.5),
                                              (0.0, 0.5), (-0.25, 0.5), (-0.5, None), (-1.0, 0.0), (-3.9, 0.0)])
def test_target_margin_and_neutral_band(rating, expected):
    assert rated.target(rating) == expected


def test_load_labels_drops_ambiguous_and_keeps_duplicates_once(folder):
    rows = dict(rated.load(folder=folder))
    assert rows == {
        "great little blender, worth every penny.": 1.0,  # also in movies (1.4, same label): kept once
        "stopped working after a week.": 0.0,
        "the box contains the jug and the lid.": 0.5,
        "A joy from start to finish & beyond.": 1.0,
        "Two hours I will never get back.": 0.0,
        "The council meets on Tuesday.": 0.5,
        "The plan is a disgrace.": 0.0,
        "Loving the new phone!": 1.0,
    }  # "it is fine" (0.6) and "shipping" (-0.3) ambiguous; "The film opens in Paris." rated -0.2 and -1.2: dropped
    assert dict(rated.load(("nyt",), folder=folder)) == {"The council meets on Tuesday.": 0.5,
                                                         "The plan is a disgrace.": 0.0,
                                                         "The film opens in Paris.": 0.0}


def test_sample_is_balanced_seeded_and_drawn_from_the_corpus(folder):
    picked = rated.sample(6, seed=3, neutral_share=1 / 3, folder=folder)
    assert Counter(t for _, t in picked) == {1.0: 2, 0.0: 2, 0.5: 2}
    assert set(picked) <= set(rated.load(folder=folder))
    assert picked == rated.sample(6, seed=3, neutral_share=1 / 3, folder=folder)
    assert {text for text, _ in rated.sample(4, seed=0, neutral_share=0, folder=folder)} <= {
        text for text, target in rated.load(folder=folder) if target != 0.5}


def test_corpus_dir_uses_a_complete_cache_without_downloading(folder, monkeypatch):
    monkeypatch.setattr(rated.subprocess, "run", lambda *a, **k: pytest.fail("downloaded"))
    assert rated.corpus_dir(folder) == folder
