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

import csv
import random
import re
from dataclasses import dataclass
from pathlib import Path

POSITIVE = "POSITIVE"
NEGATIVE = "NEGATIVE"
LABELS = (NEGATIVE, POSITIVE)
SPLITS = ("train", "validation", "test")
NATURAL_CSV = Path(__file__).resolve().parent / "natural_sentences.csv"
# A second hand-written set, written and committed before the implied-sentiment templates were added and
# never used to choose them: the honest measure of generalisation to natural text.
NATURAL_BLIND_CSV = NATURAL_CSV.with_name("natural_sentences_blind.csv")
NATURAL_SETS = {"natural": NATURAL_CSV, "natural_blind": NATURAL_BLIND_CSV}


@dataclass(frozen=True)
class TextExample:
    """One sentence, its label ("POSITIVE"/"NEGATIVE") and the character spans of the deciding words."""

    text: str
    label: str
    evidence: list[tuple[int, int]]


EXAMPLE_SENTENCES: list[str] = [
    "The food was cold and the waiter was rude.",
    "I loved this film, the acting was superb.",
    "The room was not clean and the bed was uncomfortable.",
    "The hotel looked old, but the staff were wonderfully kind.",
    "This phone is fast, reliable and worth every penny.",
    "Honestly, the plot was dull and the ending made no sense.",
]

# --- word lists --------------------------------------------------------------------------------------
# Polar adjectives shared by every domain, then each domain's own. (positive, negative)
_GENERIC_ADJ = (
    "good great excellent wonderful fantastic superb outstanding lovely brilliant amazing terrific "
    "marvellous splendid impressive perfect pleasant exceptional fabulous magnificent delightful incredible "
    "remarkable beautiful gorgeous awesome glorious sublime exquisite",
    "bad terrible awful horrible poor dreadful disappointing mediocre lousy appalling atrocious "
    "abysmal unpleasant subpar miserable pathetic dire horrendous rotten woeful nasty inferior unacceptable "
    "disgusting hopeless lame ugly",
)
_DOMAIN_ADJ = {
    "food": (
        "delicious tasty fresh flavorful juicy crispy tender scrumptious mouthwatering yummy succulent",
        "bland stale cold soggy greasy undercooked burnt tasteless overcooked inedible rubbery watery",
    ),
    "film": (
        "gripping moving hilarious captivating thrilling clever touching stunning engaging riveting "
        "charming funny",
        "boring dull predictable tedious confusing forgettable clumsy pointless shallow lifeless "
        "cringeworthy overlong",
    ),
    "service": (
        "friendly helpful attentive polite courteous welcoming prompt kind professional efficient "
        "cheerful generous",
        "rude slow unhelpful careless dismissive impolite arrogant inattentive sloppy incompetent "
        "unfriendly hostile",
    ),
    "product": (
        "reliable sturdy durable useful fast handy intuitive solid elegant responsive dependable "
        "flawless",
        "flimsy broken useless faulty defective unreliable clunky fragile buggy slow noisy overpriced",
    ),
    "hotel": (
        "clean spacious comfortable quiet cozy spotless bright luxurious tidy relaxing convenient "
        "charming",
        "dirty cramped noisy filthy shabby smelly uncomfortable dingy stuffy grimy damp gloomy",
    ),
    # The domains below reuse words of the lists above, so adding them moved no word between splits.
    "book": ("gripping moving clever touching engaging funny charming", "boring dull predictable tedious confusing shallow pointless"),
    "software": ("reliable fast intuitive responsive useful solid", "buggy slow unreliable clunky useless broken"),
    "travel": ("comfortable quiet convenient relaxing clean", "cramped noisy dirty uncomfortable slow"),
    "work": ("friendly helpful professional efficient engaging", "rude dismissive boring pointless unhelpful"),
}
# Verbs: (past tense, base form) for "I loved X" / "I did not love X".
_VERBS = (
    (("loved", "love"), ("enjoyed", "enjoy"), ("adored", "adore"), ("liked", "like"),
     ("appreciated", "appreciate"), ("cherished", "cherish"), ("treasured", "treasure"), ("valued", "value"), ("admired", "admire")),
    (("hated", "hate"), ("disliked", "dislike"), ("loathed", "loathe"), ("despised", "despise"),
     ("detested", "detest"), ("regretted", "regret"), ("deplored", "deplore"), ("abhorred", "abhor")),
)
# Polar nouns for "X was a masterpiece".
_NOUNS = (
    "masterpiece gem triumph delight treat joy winner bargain marvel pleasure revelation",
    "disaster mess nightmare letdown failure flop joke disgrace ripoff catastrophe shambles",
)
# Words most reviews use: always in the training split, so the held-out splits test rarer synonyms.
_CORE_TRAIN = {"good", "great", "bad", "terrible", "excellent", "awful", "poor", "loved", "hated", "liked",
               "enjoyed", "disaster", "mess", "nice"}

# Polar words that the base encoder's WordPiece vocabulary (all-MiniLM-L6-v2, uncased) splits into pieces.
# They train but are never held out: the encoder has no embedding of its own for them (e.g. "woeful" is
# "wo ##ef ##ul", as close to "wonderful" as to "terrible"), so held-out accuracy on them would measure
# the tokenizer, not whether the classifier generalises. tests/test_sentiment_data.py checks this list.
MULTI_PIECE_WORDS = frozenset("""
abhor abhorred abysmal adore appalling atrocious attentive buggy captivating cherish cherished clunky
courteous cringeworthy crispy dependable deplore deplored despise detest detested dingy dismissive flavorful
flimsy forgettable gloomy grimy horrendous impolite inattentive incompetent inedible letdown loathe loathed
lousy marvellous mediocre mouthwatering overcooked overlong overpriced ripoff riveting rubbery scrumptious
shabby shambles smelly soggy spotless stuffy subpar succulent tasteless tasty tedious treasured undercooked
unfriendly unhelpful woeful yummy
""".split())

NEGATIONS = ("not", "never", "hardly", "wasn't", "weren't", "isn't", "didn't")
_INTENSIFIERS = ("very", "really", "extremely", "quite", "truly", "incredibly", "absolutely", "so",
                 "remarkably", "genuinely", "thoroughly", "rather", "pretty", "surprisingly")
_NOUN_INTENSIFIERS = ("an absolute", "a total", "a real", "a complete", "a true")

# Subjects: (phrase, plural)
_ENTITIES = {
    "food": [("the food", 0), ("the pasta", 0), ("the soup", 0), ("the pizza", 0), ("the dessert", 0),
             ("the steak", 0), ("the curry", 0), ("the bread", 0), ("the coffee", 0), ("the salad", 0),
             ("the noodles", 1), ("the fries", 1), ("the burger", 0), ("the sushi", 0)],
    "film": [("the film", 0), ("the movie", 0), ("the plot", 0), ("the ending", 0), ("the script", 0),
             ("the acting", 0), ("the soundtrack", 0), ("the story", 0), ("the dialogue", 0),
             ("the performances", 1), ("the characters", 1), ("the sequel", 0), ("the show", 0)],
    "service": [("the waiter", 0), ("the staff", 1), ("the receptionist", 0), ("the service", 0),
                ("the manager", 0), ("the support team", 0), ("the driver", 0), ("the cashier", 0),
                ("the guide", 0), ("the waitress", 0), ("the technician", 0), ("the agent", 0)],
    "product": [("the phone", 0), ("the laptop", 0), ("the charger", 0), ("the blender", 0),
                ("the vacuum", 0), ("the headphones", 1), ("the app", 0), ("the battery", 0),
                ("the keyboard", 0), ("the printer", 0), ("the camera", 0), ("the speakers", 1)],
    "hotel": [("the room", 0), ("the hotel", 0), ("the bed", 0), ("the bathroom", 0), ("the lobby", 0),
              ("the pool", 0), ("the apartment", 0), ("the sheets", 1), ("the hostel", 0),
              ("the suite", 0), ("the towels", 1), ("the cabin", 0)],
    "book": [("the book", 0), ("the novel", 0), ("the memoir", 0), ("the biography", 0), ("the cookbook", 0),
             ("the writing", 0), ("the chapters", 1), ("the translation", 0), ("the thriller", 0)],
    "software": [("the software", 0), ("the update", 0), ("the program", 0), ("the website", 0),
                 ("the editor", 0), ("the plugin", 0), ("the game", 0), ("the tool", 0), ("the dashboard", 0)],
    "travel": [("the flight", 0), ("the train", 0), ("the trip", 0), ("the ferry", 0), ("the cruise", 0),
               ("the tour", 0), ("the bus", 0), ("the journey", 0), ("the airline", 0), ("the seats", 1)],
    "work": [("the team", 0), ("my manager", 0), ("the workshop", 0), ("the course", 0), ("the office", 0),
             ("my colleagues", 1), ("the new job", 0), ("the training", 0), ("the conference", 0)],
}
_EXPERIENCE_NOUNS = {
    "food": ("meal", "dinner", "lunch", "brunch"),
    "film": ("film", "evening", "watch", "night out"),
    "service": ("experience", "visit", "appointment", "encounter"),
    "product": ("purchase", "buy", "investment", "gadget"),
    "hotel": ("stay", "trip", "weekend", "holiday"),
    "book": ("read", "book", "story", "novel"),
    "software": ("tool", "upgrade", "product", "download"),
    "travel": ("trip", "journey", "flight", "holiday"),
    "work": ("job", "course", "week", "day"),
}
_NEUTRAL_SENTENCES = {
    "food": ("We went there on a Saturday evening", "I ordered the set menu",
             "My parents chose the restaurant", "We booked a table for four",
             "It was our first time at this place", "I stopped by after work"),
    "film": ("We watched it at the cinema downtown", "I saw it with my brother",
             "It runs for about two hours", "I streamed it on a Sunday",
             "It is based on a novel", "We went to the late screening"),
    "service": ("I called them on Monday morning", "We visited the branch in town",
                "I had an appointment at ten", "The shop was fairly busy",
                "I went in to return a jacket", "We waited at the counter"),
    "product": ("I bought it last month", "It arrived in a small box", "I use it every day",
                "It replaced my old one", "I ordered it online", "My friend gave it to me"),
    "hotel": ("We stayed for three nights", "The hotel is near the station", "We checked in late",
              "It was a business trip", "We booked it through an agency", "We arrived on Friday"),
    "book": ("I borrowed it from the library", "It came out last spring", "My sister lent it to me",
             "I read it on holiday", "It is the second in a series", "I picked it up at the airport"),
    "software": ("We installed it on Monday", "I tried the free version first", "Our team uses it for invoices",
                 "It runs on my work laptop", "I downloaded it last week", "The company switched to it in May"),
    "travel": ("We flew out on a Tuesday", "It was a ten-hour journey", "We travelled with two children",
               "We booked the tickets in March", "It was my first time abroad", "We took the early departure"),
    "work": ("I joined the company in January", "The course ran for six weeks", "We meet every Thursday",
             "I work in the finance department", "It was my second year there", "The workshop was held online"),
}
# Implied sentiment: clauses that decide the label through a consequence or a behaviour, with no polar word
# ("I sent it back the next day"). [brackets] mark the deciding phrase (the evidence), {s} the domain's
# subject; verbs are in the past or take "I"/"we", so any subject fits. Phrases are dealt to splits like the
# polar words. (positive, negative) for every domain, after the ones that fit every domain.
IMPLIED_PHRASES = {
    "any": (
        ("I [would not change a thing]", "I [have told everyone I know about it]", "I [was smiling the whole time]",
         "it [beat every expectation I had]", "I [would pay twice the price] for it", "I [keep coming back to it]",
         "[nothing went wrong] from start to finish", "I [have recommended it to half my street]",
         "I [would do it all again]", "I [wish I had found it sooner]", "I [keep telling people about it]",
         "I [am counting the days until next time]", "I [have gone back three times since]",
         "I [would pick it again] without thinking twice", "I [was sad when it ended]",
         "I [have no complaints whatsoever]"),
        ("I [want my money back]", "I [would not wish it on anyone]", "I [asked for a refund]",
         "I [wasted a whole afternoon] on it", "I [warned my friends to stay away]",
         "I [counted the minutes until it was over]", "I [will not make that mistake again]",
         "I [would rather have stayed at home]", "I [complained twice] and heard nothing",
         "I [have never been so glad to leave]", "[nobody I know would put up with it]",
         "I [filed a complaint] the same evening", "[it took weeks to get a reply]",
         "I [would not go near it again]", "I [left feeling cheated]", "I [will be telling everyone to avoid it]"),
    ),
    "food": (
        ("I [went back for seconds]", "[every plate came back empty]", "I [finished every last bite]",
         "we [booked again] before we had even left", "[the table fell silent] as soon as the food arrived",
         "we [ordered the same dish again] the next night", "we [asked for the name of the wine]",
         "I [ordered a second helping]", "we [tipped double]", "I [have dreamt about that sauce] ever since",
         "we [come here every Friday now]", "I [scraped the plate]"),
        ("I [left most of it] on the plate", "I [was sick all night] afterwards", "I [found a hair in it]",
         "we [paid and left] before the main course", "[nobody finished] their plate",
         "[half of it went in the bin]", "I [pushed it around the plate]",
         "we [stopped for a sandwich] on the way home", "I [could barely swallow it]",
         "we [waited ages] for a glass of water", "I [will be cooking at home] next time",
         "I [had a stomach ache] all night"),
    ),
    "film": (
        ("I [watched it twice] in one week", "[the whole cinema cheered] at the end",
         "I [could not look away] for a second", "I [forgot to check my phone] the whole time",
         "[the time went by in a flash]", "[I cried] at the end", "[I have seen it four times] now",
         "I [booked tickets for the second showing]", "I [have been humming the songs] all week",
         "I [immediately started the sequel]", "[the whole row was in tears]",
         "we [talked about it] all the way home"),
        ("I [kept checking my watch]", "[half the audience left] before the end",
         "I [dozed off] after twenty minutes", "we [switched it off] after an hour", "I [want those two hours back]",
         "I [cannot remember a single scene]", "I [skipped through the middle]",
         "[people were on their phones] the whole time", "I [guessed the twist] in the first ten minutes",
         "I [could not wait for it to finish]", "we [left at the interval]",
         "[several people were snoring] around us"),
    ),
    "service": (
        ("{s} [remembered our names] from last time", "{s} [fixed the problem on the spot]",
         "{s} [went the extra mile]", "{s} [stayed late to help us]", "{s} [got back to me] the same day",
         "{s} [gave us a free drink] for the wait", "{s} [waived the fee]", "{s} [walked us to the right door]",
         "{s} [knew exactly what to do]", "{s} [called to check] that all was well",
         "{s} [found a solution] within minutes", "{s} [made it right] straight away"),
        ("{s} [ignored us] for twenty minutes", "{s} [hung up on me] twice",
         "{s} [rolled their eyes] at my question", "{s} [got our order mixed up]",
         "{s} [left us standing at the door]", "I [had to explain the problem five times]",
         "{s} [blamed us] for their mistake", "{s} [put me on hold] for forty minutes",
         "{s} [talked over me] the whole time", "{s} [never showed up]", "{s} [argued with every request]",
         "{s} [closed the ticket] without reading it"),
    ),
    "product": (
        ("{s} [still runs as well as on day one]", "I [bought another one] for my parents",
         "{s} [survived a drop] onto concrete", "{s} [does exactly what it promises]",
         "{s} [paid for itself] within a month", "{s} [charged fully in half an hour]",
         "{s} [survived two years] of daily use", "I [threw out the old one] the day it arrived",
         "{s} [worked straight out of the box]", "{s} [has not missed a beat] in a year",
         "my kids [fight over who gets to use it]", "I [bought one for every room]"),
        ("{s} [fell apart] after a week", "I [sent it back] the next day", "{s} [gave up] after a fortnight",
         "{s} [overheated within minutes]", "{s} [came with a part missing]", "{s} [started leaking] on day two",
         "{s} [snapped] the first time I used it", "{s} [arrived with scratches] all over",
         "{s} [needed a restart] every hour", "{s} [buzzed] whenever it was on", "I [had to return it twice]",
         "{s} [melted] on the stove"),
    ),
    "hotel": (
        ("we [extended our stay] by two nights", "I [slept ten hours straight]",
         "we [would stay here again in a heartbeat]", "{s} [became our second home]",
         "[the staff knew us by name] by day two", "we [are already planning our return]",
         "[we will return] every summer", "I [did not hear a sound] all night",
         "[there were flowers in our room] every day", "we [left a long thank-you note]",
         "[housekeeping thought of everything]", "[our room was ready] two hours early"),
        ("we [checked out a day early]", "I [barely slept]", "we [found ants] in the bathroom",
         "[the key card failed] every evening", "we [moved to another hotel] after one night",
         "[there was hair in the shower]", "[the shower ran brown]", "we [were woken by drilling] at seven",
         "[the heating never came on]", "we [asked to change rooms] twice", "[the lift was out of order] all week",
         "[the pool was closed] the whole stay"),
    ),
    "book": (
        ("I [read it in a weekend]", "I [could not put it down]", "I [have already started rereading it]",
         "I [bought copies] for my friends", "I [stayed up until two] to finish it", "I [underlined half of it]",
         "I [missed my stop] because I was reading", "I [ordered everything else the author wrote]",
         "I [read the last page twice]", "[my copy is full of notes]", "I [pressed it on everyone] in my book club",
         "I [read it aloud] to my family"),
        ("I [abandoned it] after fifty pages", "I [skimmed the last chapters]",
         "[it is now propping up a table leg]", "I [kept losing track] of who was who",
         "I [donated it] the next day", "I [had to force myself] to finish it", "I [was relieved to reach the end]",
         "[it went back to the charity shop]", "I [returned it to the library] unfinished",
         "I [sold it] the next week", "I [checked how many pages were left] every few minutes",
         "I [put it away] after two chapters"),
    ),
    "software": (
        ("{s} [has not crashed once]", "{s} [handled thousands of files] without a hiccup",
         "I [switched the whole team to it]", "I [uninstalled the old one] the same day",
         "{s} [synced instantly] across all my devices", "{s} [cut our release time in half]",
         "I [paid for the full version] after one day", "{s} [imported everything] on the first try",
         "[our support tickets dropped by half]", "I [have not opened the old tool] since",
         "{s} [started in under a second]", "[the whole office switched] within a month"),
        ("{s} [crashed twice during the demo]", "{s} [lost all my settings]", "I [had to reinstall it three times]",
         "{s} [logged me out every hour]", "{s} [ate up all my memory]", "{s} [corrupted two of my files]",
         "{s} [deleted my work] without warning", "I [spent the weekend] repairing what it broke",
         "[every update broke something] new", "I [went back to the old version]",
         "[our whole team stopped using it]", "{s} [took ages to open]"),
    ),
    "travel": (
        ("we [caught every connection]", "[there was not a single delay] the whole way",
         "I [would take this route again]", "I [am already saving] for the next trip",
         "we [made it with time to spare]", "[the crew made everyone feel at ease]", "I [would fly with them again]",
         "we [arrived rested] and ready to go", "[every transfer went to plan]",
         "we [saw everything] on our list", "[our guide found us seats] in the shade", "I [slept the whole flight]"),
        ("we [missed our connection]", "{s} [got cancelled at the last minute]",
         "we [sat on the runway] for three hours", "[our bags ended up in another country]",
         "we [spent the night on the airport floor]", "I [will be driving] next time",
         "we [missed the first day] of the conference", "we [queued for two hours] at passport control",
         "[our seats had been given away]", "[my suitcase came back] with a wheel missing",
         "we [had to sleep in the car]", "[the coach broke down] twice"),
    ),
    "work": (
        ("{s} [finished the project ahead of schedule]", "I [got promoted] within a year",
         "I [actually look forward to Mondays] now", "[everyone stayed after the talk] to ask questions",
         "I [learned more in a day] than in a month of reading", "I [would sign up again] tomorrow",
         "I [stayed for eight years]", "[nobody has left the team] in three years",
         "I [use what I learned] every day", "I [left the course] full of ideas",
         "{s} [backed me up] in every meeting", "I [signed up for the next level]"),
        ("I [handed in my notice] after a month", "[half the team quit] within a year",
         "I [learned nothing] I did not already know", "we [redid the whole report] because of it",
         "I [dread Monday mornings] now", "[nobody listened] to a word I said", "I [was let go] after two weeks",
         "[nobody explained] what my job was", "I [stopped going] after the second week",
         "[the meetings ran late] every single day", "I [learned more from a video]",
         "I [started looking for a new job]"),
    ),
}
# Sentence templates, disjoint per split: {c} one clause; {c1} {c2} two clauses of the same polarity;
# contrast templates set c1 to the opposite polarity and let c2 decide; {f} a neutral sentence,
# {p} a neutral prefix, {t} a neutral tail.
_TEMPLATES = {
    "train": {
        "single": ("{C}.", "{p}, {c}.", "{C} {t}.", "{F}. {C}.", "{F}, and {c}."),
        "double": ("{C1} and {c2}.", "{C1}. {C2}.", "{C1}, and {c2} {t}."),
        "contrast": ("{C1}, but {c2}.", "Although {c1}, {c2}.", "{C1}. However, {c2}.",
                     "{p}, {c1}, but {c2}."),
    },
    "validation": {
        "single": ("{C}!", "{F}; {c}."),
        "double": ("{C1}, {c2}.", "{C1}; {c2}."),
        "contrast": ("{C1}, yet {c2}.", "Even though {c1}, {c2}."),
    },
    "test": {
        "single": ("{F}. {p}, {c}.", "{p}: {c}.", "{C}, {t}."),
        "double": ("{C1}, and also {c2}.", "{p}, {c1} and {c2}."),
        "contrast": ("{C1} but {c2}.", "{C1}. Still, {c2}.", "While {c1}, {c2}."),
    },
}
_PREFIXES = {
    "train": ("To be honest", "Overall", "In the end", "Frankly", "On our second visit", "This time"),
    "validation": ("All in all", "For what it's worth", "Last night"),
    "test": ("Honestly", "In short", "Looking back", "As it turned out"),
}
_TAILS = {
    "train": ("this time", "last weekend", "on our first visit", "from the start"),
    "validation": ("yesterday", "on a busy Friday"),
    "test": ("if I am honest", "as far as I could tell", "in my opinion"),
}


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _assign_splits() -> dict[str, str]:
    """Deal the polar words of every list round-robin: 1 to validation, 1 to test, 5 to train.

    Core and multi-piece words always go to train; a word in several lists keeps its first split, so
    splits stay disjoint.
    """
    lists = [_words(_GENERIC_ADJ[p]) for p in (0, 1)]
    lists += [_words(pair[p]) for pair in _DOMAIN_ADJ.values() for p in (0, 1)]
    lists += [tuple(past for past, _ in _VERBS[p]) for p in (0, 1)] + [_words(_NOUNS[p]) for p in (0, 1)]
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
_IMPLIED_EVIDENCE = frozenset(implied_evidence(p).lower() for pair in IMPLIED_PHRASES.values() for ps in pair for p in ps)


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
            domain: tuple(_keep(_words(_GENERIC_ADJ[p]) + _words(_DOMAIN_ADJ[domain][p]), split) for p in order)
            for domain in _DOMAIN_ADJ
        }
        self.generic = tuple(_keep(_words(_GENERIC_ADJ[p]), split) for p in order)
        self.verbs = tuple(_keep(_VERBS[p], split, key=lambda v: v[0]) for p in order)
        self.nouns = tuple(_keep(_words(_NOUNS[p]), split) for p in order)
        self.implied = {
            domain: tuple(_keep(IMPLIED_PHRASES["any"][p] + IMPLIED_PHRASES[domain][p], split, key=implied_evidence) for p in order)
            for domain in _DOMAIN_ADJ
        }
        self.templates = _TEMPLATES[split]

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
        kind = rng.choices(("single", "double", "contrast"), (4, 2, 3))[0]
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


def evidence_spans(text: str, words: list[str]) -> list[tuple[int, int]]:
    """Character spans of `words` (words or phrases) in `text`, each the next unused whole-word match."""
    spans: list[tuple[int, int]] = []
    for word in words:
        pattern = re.compile(r"(?<!\w)" + re.escape(word) + r"(?!\w)", re.IGNORECASE)
        match = next((m for m in pattern.finditer(text) if m.span() not in spans), None)
        if match is None:
            raise ValueError(f"evidence {word!r} is not a whole word of {text!r}")
        spans.append(match.span())
    return sorted(spans)


def natural(path: Path = NATURAL_CSV) -> list[TextExample]:
    """The hand-written natural sentences (columns text, label, evidence with words separated by "|")."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    examples = []
    for row in rows:
        if row["label"] not in LABELS:
            raise ValueError(f"label must be one of {LABELS}: {row}")
        words = [w.strip() for w in row["evidence"].split("|") if w.strip()]
        examples.append(TextExample(row["text"], row["label"], evidence_spans(row["text"], words)))
    return examples
