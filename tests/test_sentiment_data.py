"""The generated sentiment data: deterministic, honest splits, evidence that points at the deciding words."""
import csv
import importlib.resources
import json
import re

import pytest

from rollout_core.data import sentiment

# An independent lexicon, written here by hand (not imported): every word that may decide a label.
POSITIVE_WORDS = set("""
good great excellent wonderful fantastic superb outstanding lovely brilliant amazing terrific marvellous
splendid impressive perfect pleasant exceptional fabulous magnificent delightful nice incredible remarkable
beautiful gorgeous awesome glorious sublime exquisite delicious tasty fresh
flavorful juicy crispy tender scrumptious mouthwatering yummy succulent gripping moving hilarious captivating
thrilling clever touching stunning engaging riveting charming funny friendly helpful attentive polite courteous
welcoming prompt kind professional efficient cheerful generous reliable sturdy durable useful fast handy
intuitive solid elegant responsive dependable flawless clean spacious comfortable quiet cozy spotless bright
luxurious tidy relaxing convenient masterpiece gem triumph delight treat joy winner bargain marvel pleasure
revelation recommend loved love enjoyed enjoy adored adore liked like appreciated appreciate cherished cherish
treasured treasure valued value admired admire
""".split())
NEGATIVE_WORDS = set("""
bad terrible awful horrible poor dreadful disappointing mediocre lousy appalling atrocious abysmal unpleasant
subpar miserable pathetic dire horrendous rotten woeful nasty inferior unacceptable disgusting hopeless lame
ugly bland stale cold soggy greasy undercooked burnt
tasteless overcooked inedible rubbery watery boring dull predictable tedious confusing forgettable clumsy
pointless shallow lifeless cringeworthy overlong rude slow unhelpful careless dismissive impolite arrogant
inattentive sloppy incompetent unfriendly hostile flimsy broken useless faulty defective unreliable clunky
fragile buggy noisy overpriced dirty cramped filthy shabby smelly uncomfortable dingy stuffy grimy damp gloomy
disaster mess nightmare letdown failure flop joke disgrace ripoff catastrophe shambles hated hate disliked
dislike loathed loathe despised despise detested detest regretted regret deplored deplore abhorred abhor
""".split())
NEGATION_WORDS = {"not", "never", "hardly", "wasn't", "weren't", "isn't", "didn't"}
# Implied-sentiment phrases: their deciding part, and its polarity from the list it is written in.
IMPLIED = {sentiment.implied_evidence(phrase).lower(): positive
           for pair in sentiment.IMPLIED_PHRASES.values() for positive, phrases in zip((True, False), pair)
           for phrase in phrases}


def _ngrams(text, n):
    words = re.findall(r"[a-z']+", text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _polar_words(examples):
    words = set()
    for example in examples:
        for start, end in example.evidence:
            word = example.text[start:end].lower()
            if word not in NEGATION_WORDS and word != "recommend":
                words.add(word)
    return words


@pytest.fixture(scope="module")
def splits():
    return {split: sentiment.generate(600, seed=3, split=split) for split in sentiment.SPLITS}


def test_generation_is_deterministic_per_seed():
    assert sentiment.generate(80, seed=5, split="train") == sentiment.generate(80, seed=5, split="train")
    assert sentiment.generate(80, seed=5, split="train") != sentiment.generate(80, seed=6, split="train")
    assert sentiment.generate(80, seed=5) == sentiment.generate(80, seed=5, split="test")


def test_labels_are_balanced_and_sentences_varied(splits):
    for examples in splits.values():
        labels = [e.label for e in examples]
        assert labels.count("POSITIVE") == labels.count("NEGATIVE") == 300
        assert len({e.text for e in examples}) > 0.95 * len(examples)
    assert len(sentiment.generate(7, seed=0)) == 7


def test_unknown_split_is_refused():
    with pytest.raises(ValueError, match="split"):
        sentiment.generate(3, split="dev")


def test_splits_share_no_deciding_word_and_no_sentence(splits):
    words = {split: _polar_words(examples) for split, examples in splits.items()}
    texts = {split: {e.text for e in examples} for split, examples in splits.items()}
    for a, b in (("train", "test"), ("train", "validation"), ("validation", "test")):
        assert words[a].isdisjoint(words[b]), words[a] & words[b]
        assert texts[a].isdisjoint(texts[b])
    assert len(words["test"]) >= 20  # the held-out split is not a handful of words


def test_held_out_deciding_words_are_single_wordpieces_of_the_base_encoder(splits):
    """MULTI_PIECE_WORDS is exactly the multi-piece polar words, and none of them is held out."""
    base = pytest.importorskip("rollout_core.build.text_model").base_model_dir()
    vocab = set((base / "vocab.txt").read_text(encoding="utf-8").split("\n"))
    assert sentiment.MULTI_PIECE_WORDS == {w for w in POSITIVE_WORDS | NEGATIVE_WORDS if w not in vocab}
    for split in ("validation", "test"):
        assert all(w in vocab for w in _polar_words(splits[split]) - set(IMPLIED))


def test_evidence_spans_are_whole_vocabulary_words_or_implied_phrases(splits):
    vocabulary = POSITIVE_WORDS | NEGATIVE_WORDS | NEGATION_WORDS | set(IMPLIED)
    for examples in splits.values():
        for example in examples:
            assert example.evidence, example
            assert example.evidence == sorted(example.evidence)
            for start, end in example.evidence:
                word = example.text[start:end]
                assert word.lower() in vocabulary, (word, example.text)
                assert start == 0 or not example.text[start - 1].isalnum()
                assert end == len(example.text) or not example.text[end].isalnum()


def test_label_follows_the_evidence_with_negations_flipping(splits):
    """Each polar evidence word, flipped by a negation just before it, agrees with the label."""
    negated = {"POSITIVE": 0, "NEGATIVE": 0}
    for examples in splits.values():
        for example in examples:
            pending_negation = False
            for start, end in example.evidence:
                word = example.text[start:end].lower()
                if word in NEGATION_WORDS:
                    pending_negation = True
                    continue
                positive = IMPLIED[word] if word in IMPLIED else (word in POSITIVE_WORDS) != pending_negation
                assert ("POSITIVE" if positive else "NEGATIVE") == example.label, example
                negated[example.label] += pending_negation
                pending_negation = False
            assert not pending_negation, example  # a negation always comes with its word
    assert min(negated.values()) >= 100  # negations flip both ways, and often


def test_implied_phrases_have_no_polar_word_and_copy_no_natural_sentence(splits):
    """Implied clauses decide without a lexicon word, and none is a copy of a hand-written natural sentence."""
    natural_grams = set().union(*(_ngrams(e.text, 4) for path in sentiment.NATURAL_SETS.values()
                                  for e in sentiment.natural(path)))
    for pair in sentiment.IMPLIED_PHRASES.values():
        for phrase in pair[0] + pair[1]:
            words = set(re.findall(r"[a-z']+", phrase.lower()))
            assert not words & (POSITIVE_WORDS | NEGATIVE_WORDS), phrase
            assert not _ngrams(re.sub(r"[\[\]]|\{s\}", "", phrase), 4) & natural_grams, phrase
    implied = {split: {e.text[s:t].lower() for e in examples for s, t in e.evidence} & set(IMPLIED)
               for split, examples in splits.items()}
    assert len(implied["test"]) >= 15 and len(implied["train"]) >= 30  # held out, and not a handful
    share = sum(any(e.text[s:t].lower() in IMPLIED for s, t in e.evidence) for e in splits["train"]) / 600
    assert 0.05 < share < 0.5  # implied clauses are common, but polar words still dominate


def test_in_contrasts_only_the_second_clause_decides(splits):
    contrasts = 0
    for examples in splits.values():
        for example in examples:
            match = re.search(r"\bbut\b|\byet\b|\bHowever\b|\bStill\b", example.text) or (
                re.match(r"(Although|Even though|While) [^,]*,", example.text))
            if match:
                contrasts += 1
                assert all(start >= match.end() for start, _ in example.evidence), example
    assert contrasts >= 300


@pytest.mark.parametrize("path", sentiment.NATURAL_SETS.values(), ids=sentiment.NATURAL_SETS)
def test_natural_csv_is_well_formed_and_balanced(path):
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["text", "label", "evidence"]
    examples = sentiment.natural(path)
    assert len(examples) == len(rows) >= 60
    labels = [e.label for e in examples]
    assert abs(labels.count("POSITIVE") - labels.count("NEGATIVE")) <= 2
    assert len({e.text for e in examples}) == len(examples)
    for example, row in zip(examples, rows):
        found = sorted(example.text[s:e].lower() for s, e in example.evidence)
        assert found == sorted(w.strip().lower() for w in row["evidence"].split("|")), example
    assert sum(bool(re.search(r"\b(not|never|no|nobody)\b|n't", e.text)) for e in examples) >= 8
    assert sum(" but " in e.text for e in examples) >= 5


def test_natural_sets_share_no_sentence():
    original, blind = ({e.text.lower() for e in sentiment.natural(p)} for p in sentiment.NATURAL_SETS.values())
    assert original.isdisjoint(blind)


def test_natural_rejects_evidence_that_is_not_in_the_text(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label,evidence\nThe soup was cold.,NEGATIVE,hot\n", encoding="utf-8")
    with pytest.raises(ValueError, match="hot"):
        sentiment.natural(bad)
    bad.write_text("text,label,evidence\nThe soup was cold.,MEH,cold\n", encoding="utf-8")
    with pytest.raises(ValueError, match="label"):
        sentiment.natural(bad)


def test_evidence_spans_match_whole_words_and_repeated_words():
    text = "Not bad, not bad at all; the notebook was fine."
    assert sentiment.evidence_spans(text, ["not", "not"]) == [(0, 3), (9, 12)]
    with pytest.raises(ValueError):
        sentiment.evidence_spans(text, ["not", "not", "not"])  # "notebook" is not the word "not"


def test_example_sentences():
    examples = sentiment.EXAMPLE_SENTENCES
    assert 5 <= len(examples) <= 8
    assert "The food was cold and the waiter was rude." in examples
    assert any(" but " in s for s in examples)
    assert any(re.search(r"\b(not|never|hardly)\b|n't", s) for s in examples)


def test_word_lists_ship_as_package_data_and_hold_the_hand_lexicon():
    """The lists live in sentiment_words.json, read as package data: every list is there and non-empty, the
    polar lists hold exactly the hand lexicon above (so a lost, cut or changed list fails here), positive and
    negative are disjoint, and templates and filler are disjoint across splits."""
    words = importlib.resources.files("rollout_core.data").joinpath("sentiment_words.json")
    data = json.loads(words.read_text("utf-8"))
    domains = {"food", "film", "service", "product", "hotel", "book", "software", "travel", "work"}
    assert set(data["entities"]) == set(data["experience_nouns"]) == set(data["neutral_sentences"]) == domains
    assert set(data["adjectives"]) == set(data["implied_phrases"]) == domains | {"any"}
    assert set(data["templates"]) == set(data["prefixes"]) == set(data["tails"]) == set(sentiment.SPLITS)

    def leaves(node):
        if isinstance(node, dict):
            for value in node.values():
                yield from leaves(value)
        else:
            yield node

    assert all(isinstance(leaf, str) or len(leaf) > 0 for leaf in leaves(data))

    def polar(side):
        words = {w for pair in data["adjectives"].values() for w in pair[side]}
        return words | {w for forms in data["verbs"][side] for w in forms} | set(data["nouns"][side])

    assert polar("positive") | {"recommend", "nice"} == POSITIVE_WORDS
    assert polar("negative") == NEGATIVE_WORDS
    implied = {side: {sentiment.implied_evidence(p).lower() for pair in data["implied_phrases"].values()
                      for p in pair[side]} for side in ("positive", "negative")}
    assert implied["positive"] and implied["negative"] and not implied["positive"] & implied["negative"]
    assert all(p.count("[") == p.count("]") == 1 for pair in data["implied_phrases"].values()
               for side in pair.values() for p in side)
    for key in ("prefixes", "tails"):
        seen = [set(data[key][split]) for split in sentiment.SPLITS]
        assert not (seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2]), key
    templates = [{t for kind in data["templates"][split].values() for t in kind} for split in sentiment.SPLITS]
    assert not (templates[0] & templates[1] or templates[0] & templates[2] or templates[1] & templates[2])


MINOR = re.compile(r"(My only complaint|The only downside|My one complaint|The only thing I did not like|"
                   r"The only good thing|The one positive|The only thing I liked) (?:is|was) that ([^.]*)\.")


def test_minor_clauses_never_decide_and_oppose_the_label(splits):
    """"X was great. My only complaint is that Y": the label is X's, Y is the opposite polarity and holds no
    evidence. Only the train split has these templates, so the held-out splits are the sets measured before."""
    found = 0
    for example in splits["train"]:
        for match in MINOR.finditer(example.text):
            found += 1
            complaint = match.group(1) in ("My only complaint", "The only downside", "My one complaint",
                                           "The only thing I did not like")
            assert example.label == ("POSITIVE" if complaint else "NEGATIVE"), example
            start, end = match.span(2)
            assert not any(s < end and start < e for s, e in example.evidence), example
            assert example.evidence, example
    assert found >= 40
    assert not any(MINOR.search(e.text) for split in ("validation", "test") for e in splits[split])
