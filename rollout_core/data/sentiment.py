"""Generated sentiment sentences with ground truth: which words decide each label.

Sentences are built from clause frames filled from word lists (positive/negative adjectives, verbs and
nouns, negations that flip, intensifiers, neutral filler, "but"-style contrasts where the second clause
decides) and from implied-sentiment clauses, consequences with no polar word ("I sent it back the next
day"), over several domains (food, film, service, product, hotel, book, software, travel, work). Every
`TextExample` records the character spans of the words that decide its label: the polar words of the
deciding clause(s) and the negations that flip them, or the deciding phrase of an implied clause. Those
spans are the ground truth for judging explanations.

Splits are honest: train, validation and test draw their polar words and implied phrases from disjoint
subsets (a word seen in training never decides a test sentence) and use disjoint sentence templates and
filler phrases. Held-out polar words are single WordPiece tokens of the base encoder (see MULTI_PIECE_WORDS).
"""
from __future__ import annotations

import importlib.resources
import json
import random
import re

from rollout_core.data.sentiment_sets import (  # noqa: F401 (re-exported: the public names of this module)
    LABELS, MIXED_REVIEWS_CSV, NATURAL_BLIND_CSV, NATURAL_CSV, NATURAL_SETS, NEGATIVE, POSITIVE, TextExample,
    evidence_spans, mixed_reviews, natural,
)

SPLITS = ("train", "validation", "test")

EXAMPLE_SENTENCES: list[str] = [
    "The food was cold and the waiter was rude.",
    "I loved this film, the acting was superb.",
    "The room was not clean and the bed was uncomfortable.",
    "The hotel looked old, but the staff were wonderfully kind.",
    "This phone is fast, reliable and worth every penny.",
    "Honestly, the plot was dull and the ending made no sense.",
]

# --- word lists: sentiment_words.json beside this file, read once --------------------------------------
_LISTS = json.loads(importlib.resources.files(__package__).joinpath("sentiment_words.json").read_text("utf-8"))


def _pair(entry: dict) -> tuple[tuple, tuple]:
    """A {positive, negative} entry of the file as (positive, negative) tuples (lists inside become tuples)."""
    def frozen(x):
        return tuple(frozen(i) for i in x) if isinstance(x, list) else x
    return frozen(entry["positive"]), frozen(entry["negative"])


# Polar adjectives shared by every domain, then each domain's own (positive, negative). The domains after
# "hotel" (book, software, travel, work) reuse words of the lists before, so adding them moved no word
# between splits.
_GENERIC_ADJ = _pair(_LISTS["adjectives"]["any"])
_DOMAIN_ADJ = {domain: _pair(pair) for domain, pair in _LISTS["adjectives"].items() if domain != "any"}
# Verbs: (past tense, base form) for "I loved X" / "I did not love X".
_VERBS = _pair(_LISTS["verbs"])
# Polar nouns for "X was a masterpiece".
_NOUNS = _pair(_LISTS["nouns"])
# Words most reviews use: always in the training split, so the held-out splits test rarer synonyms.
_CORE_TRAIN = set(_LISTS["core_train"])

# Polar words that the base encoder's WordPiece vocabulary (all-MiniLM-L6-v2, uncased) splits into pieces.
# They train but are never held out: the encoder has no embedding of its own for them (e.g. "woeful" is
# "wo ##ef ##ul", as close to "wonderful" as to "terrible"), so held-out accuracy on them would measure
# the tokenizer, not whether the classifier generalises. tests/test_sentiment_data.py checks this list.
MULTI_PIECE_WORDS = frozenset(_LISTS["multi_piece_words"])

NEGATIONS = ("not", "never", "hardly", "wasn't", "weren't", "isn't", "didn't")
_INTENSIFIERS = tuple(_LISTS["intensifiers"])
_NOUN_INTENSIFIERS = tuple(_LISTS["noun_intensifiers"])

# Subjects: (phrase, plural) per domain; experience nouns ("a lovely meal"), neutral filler sentences.
_ENTITIES = {domain: [tuple(e) for e in entities] for domain, entities in _LISTS["entities"].items()}
_EXPERIENCE_NOUNS = {domain: tuple(nouns) for domain, nouns in _LISTS["experience_nouns"].items()}
_NEUTRAL_SENTENCES = {domain: tuple(sentences) for domain, sentences in _LISTS["neutral_sentences"].items()}
# Implied sentiment: clauses that decide the label through a consequence or a behaviour, with no polar word
# ("I sent it back the next day"). [brackets] mark the deciding phrase (the evidence), {s} the domain's
# subject; verbs are in the past or take "I"/"we", so any subject fits. Phrases are dealt to splits like the
# polar words. (positive, negative) for every domain, after the ones that fit every domain ("any").
IMPLIED_PHRASES = {domain: _pair(pair) for domain, pair in _LISTS["implied_phrases"].items()}
# Sentence templates, disjoint per split: {c} one clause; {c1} {c2} two clauses of the same polarity;
# contrast and minor templates set c1 to the opposite polarity and let c2 decide (minor ones, "My only
# complaint is that {c1}", are keyed by the label: minor_positive, minor_negative); {f} a neutral sentence,
# {p} a neutral prefix, {t} a neutral tail.
_TEMPLATES = {split: {kind: tuple(t) for kind, t in kinds.items()} for split, kinds in _LISTS["templates"].items()}
_PREFIXES = {split: tuple(p) for split, p in _LISTS["prefixes"].items()}
_TAILS = {split: tuple(t) for split, t in _LISTS["tails"].items()}


def _assign_splits() -> dict[str, str]:
    """Deal the polar words of every list round-robin: 1 to validation, 1 to test, 5 to train.

    Core and multi-piece words always go to train; a word in several lists keeps its first split, so
    splits stay disjoint.
    """
    lists = [_GENERIC_ADJ[p] for p in (0, 1)]
    lists += [pair[p] for pair in _DOMAIN_ADJ.values() for p in (0, 1)]
    lists += [tuple(past for past, _ in _VERBS[p]) for p in (0, 1)] + [_NOUNS[p] for p in (0, 1)]
    lists += [tuple(map(implied_evidence, pair[p])) for pair in IMPLIED_PHRASES.values() for p in (0, 1)]
    deal = ("validation", "test") + ("train",) * 5
    whole_verbs = {past for pair in _VERBS for past, base in pair if base in MULTI_PIECE_WORDS}
    assigned = {word: "train" for word in _CORE_TRAIN | MULTI_PIECE_WORDS | whole_verbs}
    for words in lists:
        fresh = [w for w in words if w not in assigned]
        assigned.update({w: deal[i % len(deal)] for i, w in enumerate(fresh)})
    return assigned


def implied_evidence(phrase: str) -> str:
    """The deciding phrase of an implied-sentiment clause: its [bracketed] part."""
    return re.search(r"\[([^\]]+)\]", phrase).group(1)


_SPLIT_OF = _assign_splits()


def held_out_words() -> frozenset[str]:
    """The polar words and implied phrases that decide validation and test sentences (never train ones): what a
    training set built from other sources must leave out to keep the generated test honest."""
    return frozenset(word for word, split in _SPLIT_OF.items() if split != "train")
_IMPLIED_EVIDENCE = frozenset(implied_evidence(p).lower() for pair in IMPLIED_PHRASES.values() for ps in pair
                              for p in ps)


def decided_by_implied(example: TextExample) -> bool:
    """Whether an implied-sentiment phrase is among the deciding evidence (to report that harder part apart)."""
    return any(example.text[start:end].lower() in _IMPLIED_EVIDENCE for start, end in example.evidence)


def _keep(words: tuple, split: str, key=lambda w: w) -> tuple:
    kept = tuple(w for w in words if _SPLIT_OF[key(w)] == split)
    if not kept:
        raise AssertionError(f"word list {words[:3]}... has nothing in split {split!r}")
    return kept


class _Sentence:
    """Accumulates text pieces and the character spans of the evidence pieces."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.evidence: list[tuple[int, int]] = []
        self.length = 0

    def add(self, piece: str, evidence: bool = False) -> None:
        if evidence:
            self.evidence.append((self.length, self.length + len(piece)))
        self.parts.append(piece)
        self.length += len(piece)

    def text(self) -> str:
        joined = "".join(self.parts)
        return joined[:1].upper() + joined[1:]


class _Generator:
    """Fills clause frames from the word subsets of one split."""

    def __init__(self, split: str, rng: random.Random) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        self.rng = rng
        self.split = split
        # The lists are written (positive, negative); these are indexed by polarity: [False] negative, [True] positive.
        order = (1, 0)
        self.adjectives = {
            domain: tuple(_keep(_GENERIC_ADJ[p] + _DOMAIN_ADJ[domain][p], split) for p in order)
            for domain in _DOMAIN_ADJ
        }
        self.generic = tuple(_keep(_GENERIC_ADJ[p], split) for p in order)
        self.verbs = tuple(_keep(_VERBS[p], split, key=lambda v: v[0]) for p in order)
        self.nouns = tuple(_keep(_NOUNS[p], split) for p in order)
        self.implied = {
            domain: tuple(_keep(IMPLIED_PHRASES["any"][p] + IMPLIED_PHRASES[domain][p], split, key=implied_evidence)
                          for p in order)
            for domain in _DOMAIN_ADJ
        }
        self.templates = _TEMPLATES[split]
        # Kinds of sentence and their weights. "minor" (a deciding clause plus a minor opposite one: "My only
        # complaint is that ...") is drawn only where the split has its templates (train), so the other splits
        # make the same draws as before it existed.
        self.kinds = {"single": 4, "double": 2, "contrast": 3}
        if "minor_positive" in self.templates:
            self.kinds["minor"] = 2

    # A clause is a list of (piece, is_evidence); `positive` is the polarity the clause must express.
    def clause(self, domain: str, positive: bool) -> list[tuple[str, bool]]:
        rng = self.rng
        negate = rng.random() < 0.3
        polar = positive != negate  # polarity of the polar word itself
        kind = rng.choices(("copula", "noun", "verb", "experience", "recommend", "implied"), (6, 1, 2, 1.5, 0.7, 1))[0]
        subject, plural = rng.choice(_ENTITIES[domain]) if rng.random() > 0.08 else ("it", 0)
        if kind == "implied":  # never negated: "I did not send it back" says little either way
            phrase = rng.choice(self.implied[domain][positive]).replace("{s}", subject)
            return [(piece, i % 2 == 1) for i, piece in enumerate(re.split(r"[\[\]]", phrase)) if piece]
        be = "were" if plural else "was"
        if kind == "noun" and plural:
            kind = "copula"
        if kind == "recommend" and not polar:
            kind = "verb"
        if kind == "copula":
            adj = rng.choice(self.adjectives[domain][polar])
            out = [(subject + " ", False)]
            if negate:
                out += self._negated_be(be)
                if out[-2][0] in ("not", be + "n't") and rng.random() < 0.25:
                    out.append((rng.choice(("very", "particularly", "especially")) + " ", False))
            else:
                out.append((be + " ", False))
                if rng.random() < 0.5:
                    out.append((rng.choice(_INTENSIFIERS) + " ", False))
            return out + [(adj, True)]
        if kind == "noun":
            noun = rng.choice(self.nouns[polar])
            out = [(subject + " ", False)] + (self._negated_be(be) if negate else [(be + " ", False)])
            if not negate and rng.random() < 0.4:
                article = rng.choice(_NOUN_INTENSIFIERS) + " "
            else:
                article = "an " if noun[0] in "aeiou" else "a "
            return out + [(article, False), (noun, True)]
        if kind == "verb":
            past, base = rng.choice(self.verbs[polar])
            out = [(rng.choice(("I", "we")) + " ", False)]
            if negate:
                form = rng.choice(("did not", "didn't", "never"))
                if form == "did not":
                    out += [("did ", False), ("not", True), (" ", False), (base, True)]
                else:
                    out += [(form, True), (" ", False), (past if form == "never" else base, True)]
            else:
                if rng.random() < 0.3:
                    out.append((rng.choice(("really", "truly", "absolutely", "thoroughly")) + " ", False))
                out.append((past, True))
            return out + [(" " + subject, False)]
        if kind == "experience":
            adj = rng.choice(self.generic[polar])
            noun = rng.choice(_EXPERIENCE_NOUNS[domain])
            article = "an " if adj[0] in "aeiou" else "a "
            out = [("it ", False)] + (self._negated_be("was") if negate else [("was ", False)])
            return out + [(article, False), (adj, True), (" " + noun, False)]
        # recommend (polar is positive here; a negation makes it negative)
        out = [(rng.choice(("I", "we")) + " would ", False)]
        if negate:
            out += [(rng.choice(("not", "never")), True), (" ", False)]
        elif rng.random() < 0.4:
            out.append((rng.choice(("happily", "definitely", "gladly")) + " ", False))
        return out + [("recommend", True), (" " + subject, False)]

    def _negated_be(self, be: str) -> list[tuple[str, bool]]:
        form = self.rng.choice(("not", "never", "hardly", "n't"))
        if form == "n't":
            return [(be + "n't", True), (" ", False)]
        return [(be + " ", False), (form, True), (" ", False)]

    def sentence(self, positive: bool) -> TextExample:
        rng = self.rng
        domain = rng.choice(tuple(_ENTITIES))
        kind = rng.choices(tuple(self.kinds), tuple(self.kinds.values()))[0]
        if kind == "minor":
            template = rng.choice(self.templates["minor_positive" if positive else "minor_negative"])
        else:
            template = rng.choice(self.templates[kind])
        clauses = {
            "c": self.clause(domain, positive),
            "c1": self.clause(domain, positive if kind == "double" else not positive),
            "c2": self.clause(domain, positive),
        }
        deciding = {"c", "c2"} | ({"c1"} if kind == "double" else set())
        out = _Sentence()
        for literal, field in re.findall(r"([^{]*)(?:\{(\w+)\})?", template):
            out.add(literal)
            if not field:
                continue
            name = field.lower()
            if name == "p":
                out.add(rng.choice(_PREFIXES[self.split]))
            elif name == "t":
                out.add(rng.choice(_TAILS[self.split]))
            elif name == "f":
                out.add(rng.choice(_NEUTRAL_SENTENCES[domain]))
            else:
                pieces = clauses[name]
                for i, (piece, evidence) in enumerate(pieces):
                    if i == 0 and field[0].isupper():
                        piece = piece[:1].upper() + piece[1:]
                    out.add(piece, evidence and name in deciding)
        return TextExample(out.text(), POSITIVE if positive else NEGATIVE, out.evidence)


def generate(n: int, seed: int = 0, split: str = "test") -> list[TextExample]:
    """`n` sentences of one split, half positive and half negative (odd n: one more negative), seeded."""
    rng = random.Random(f"sentiment:{split}:{seed}")
    generator = _Generator(split, rng)
    labels = [i % 2 == 1 for i in range(n)]
    rng.shuffle(labels)
    return [generator.sentence(positive) for positive in labels]
