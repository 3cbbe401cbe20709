"""Generated everyday reviews for training default-text (issue 27): many shapes, not one template family.

Each review is one to four sentences about one of many products and services, built from banks of hand-written
pieces: plain verdicts, aspects with polar predicates, implied outcomes with no polar word ("stopped working after
three days", "we have used it every day since"), concessions where the minor point comes first or last ("not
cheap, but worth it"), contrast across sentences ("At first ... Now ..."), sarcasm (a glowing word over a bad
outcome: "Great, it broke again"), expectations met or missed, negated negatives ("can't fault it"), and neutral
filler (how it was bought, facts, schedules). NEUTRAL items (statements with no opinion) get the soft target
(0.5, 0.5), so the model learns to stay near the middle on them instead of a third class. Optionally, short
verdicts use words of human-rated lexicons (VADER's, package `vaderSentiment`; AFINN's, package `afinn`; both
read from their wheels) as distant supervision for words the banks lack.

`generate(n, seed)` returns `Review`s with a target probability of POSITIVE (0, 1 or 0.5). Nothing here is
drawn from the hand-written evaluation sets.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Review:
    text: str
    positive: float  # target probability of POSITIVE: 1.0, 0.0, or 0.5 for a neutral statement
    shape: str


# ---- things reviewed: (noun phrase, aspects that fit it) ----------------------------------------------------------
THINGS = {
    "kitchen": ["the toaster", "this coffee grinder", "the microwave", "this frying pan", "the dishwasher",
                "this rice cooker", "the knife set", "the food processor", "this juicer", "the stand mixer"],
    "electronics": ["this phone", "the tablet", "these earbuds", "the smartwatch", "this laptop", "the router",
                    "the e-reader", "this speaker", "the monitor", "the webcam", "this charger", "the camera",
                    "the games console", "this keyboard", "the mouse", "the television"],
    "home": ["the armchair", "this duvet", "the curtains", "the bookshelf", "this rug", "the dining table",
             "the ceiling fan", "this heater", "the shower head", "the wardrobe", "this pillow", "the lamp"],
    "clothes": ["these boots", "the raincoat", "this dress", "the jeans", "these trainers", "the winter coat",
                "this jumper", "the sandals", "this handbag", "the suit", "these gloves", "the swimsuit"],
    "outdoor": ["the lawnmower", "this barbecue", "the sleeping bag", "the hiking poles", "this kayak",
                "the garden chairs", "the bike lock", "this scooter", "the paddling pool", "the camping stove"],
    "food": ["the restaurant", "this bistro", "the takeaway", "the sushi place", "the bakery", "the steakhouse",
             "this food truck", "the tea room", "the curry house", "the brunch spot", "the pub", "the noodle bar"],
    "stay": ["the hotel", "this guesthouse", "the holiday cottage", "the hostel", "the resort", "this campsite",
             "the B&B", "the apartment we rented", "the lodge", "the motel"],
    "service": ["the garage", "the cleaning company", "the removal firm", "the electrician", "the vet",
                "the physiotherapist", "the estate agent", "the locksmith", "the tailor", "the nail salon",
                "the barber", "the accountant", "the driving instructor", "the window cleaner", "the roofer"],
    "travel": ["the airline", "the ferry", "the coach company", "the train service", "the car hire firm",
               "the cruise", "the tour", "the airport shuttle", "the night bus"],
    "media": ["the novel", "this film", "the series", "the album", "the podcast", "this game", "the musical",
              "the documentary", "the play", "the audiobook", "the comedy show"],
    "software": ["the app", "this program", "the website", "the banking app", "the photo editor",
                 "the online store", "the booking system", "the fitness tracker app", "the password manager",
                 "the video call software"],
    "learning": ["the course", "the workshop", "the language school", "the tutor", "the textbook",
                 "the cooking class", "the evening class", "the training day"],
}

# Aspects per kind: (aspect noun phrase, positive predicates, negative predicates).
_GENERAL_POS = ["is excellent", "is superb", "is great", "is really good", "is brilliant", "is outstanding",
                "is spot on", "is impressive", "is first class", "is lovely", "is perfect", "could not be better",
                "is better than I hoped", "is top notch", "is fantastic", "is very good indeed", "is a joy",
                "isn't bad at all", "never lets me down", "is not at all disappointing", "is hard to beat"]
_GENERAL_NEG = ["is awful", "is poor", "is terrible", "is disappointing", "is dreadful", "is mediocre",
                "is a letdown", "is not good enough", "is shocking", "is rubbish", "is pretty bad", "is weak",
                "is a joke", "is far worse than advertised", "is abysmal", "leaves a lot to be desired",
                "isn't any good", "is not worth the money", "was never right from day one", "is not what I hoped"]
ASPECTS = {
    "kitchen": [("the build quality", _GENERAL_POS, _GENERAL_NEG),
                ("it", ["heats up in seconds", "cleans in no time", "cooks evenly", "is easy to clean",
                        "is whisper quiet"],
                 ["burns everything", "takes forever to heat up", "is impossible to clean", "rattles like mad",
                  "scratched after one use"])],
    "electronics": [("the battery", ["lasts for days", "charges quickly", "easily gets me through the day"],
                     ["dies by mid-afternoon", "drains overnight", "barely lasts an hour", "swelled up"]),
                    ("the screen", ["is bright and sharp", "is gorgeous", "is crisp"],
                     ["is dim and washed out", "scratches easily", "has dead pixels", "flickers"]),
                    ("the sound", ["is rich and clear", "is crisp", "is surprisingly full"],
                     ["is tinny", "is muffled", "crackles at any volume", "cuts out constantly"]),
                    ("it", ["just works", "pairs instantly", "has never crashed", "is quick and responsive"],
                     ["freezes constantly", "keeps disconnecting", "overheats", "lags all the time",
                      "won't turn on half the time"])],
    "home": [("it", ["is comfortable", "looks stylish", "feels solid", "fits perfectly", "keeps the room cosy"],
              ["wobbles", "sags already", "feels flimsy", "arrived damaged", "smells of chemicals"])],
    "clothes": [("the fit", ["is perfect", "is spot on", "is flattering"],
                 ["is all wrong", "is way too small", "is baggy and shapeless"]),
                ("the material", ["feels soft", "is lovely and warm", "is hard wearing"],
                 ["feels cheap", "is scratchy", "pills after one wash", "is see-through"]),
                ("they", ["are comfortable all day", "kept my feet dry", "still look new"],
                 ["gave me blisters", "leaked at the seams", "fell apart", "lost their shape"])],
    "outdoor": [("it", ["is sturdy", "survived the whole summer", "is easy to put up", "works a treat"],
                 ["rusted within weeks", "snapped", "blew over", "is a nightmare to assemble"])],
    "food": [("the food", ["was delicious", "was fresh and tasty", "was cooked to perfection", "was generous"],
              ["was bland", "was cold", "was greasy", "was overcooked", "was inedible", "was stale"]),
             ("the service", ["was friendly", "was quick", "was attentive", "was warm and welcoming"],
              ["was slow", "was rude", "was chaotic", "was indifferent", "was painfully slow"]),
             ("the portions", ["were huge", "were generous"], ["were tiny", "were stingy"])],
    "stay": [("the room", ["was spotless", "was spacious", "was quiet and comfortable", "had a lovely view"],
              ["was filthy", "was cramped", "was noisy", "smelled damp", "was tired and dated"]),
             ("the staff", ["were helpful", "were kind", "couldn't do enough for us", "were welcoming"],
              ["were rude", "were unhelpful", "ignored us", "were nowhere to be found"]),
             ("breakfast", ["was excellent", "was plentiful", "was delicious"],
              ["was miserable", "was cold", "ran out by eight"])],
    "service": [("they", ["were punctual", "did a tidy job", "were honest about the price", "explained everything",
                          "finished ahead of schedule"],
                 ["turned up late", "left a mess", "overcharged us", "never called back", "botched the job",
                  "cancelled twice"])],
    "travel": [("the staff", ["were helpful", "were cheerful", "were professional"],
                ["were rude", "were useless", "shrugged at every question"]),
               ("it", ["left on time", "was smooth", "was comfortable", "arrived early"],
                ["was delayed for hours", "was overcrowded", "was cancelled at the last minute", "was filthy"])],
    "media": [("the plot", ["is gripping", "is clever", "kept me guessing"],
               ["is predictable", "makes no sense", "drags", "is a mess"]),
              ("the ending", ["is perfect", "is moving", "is satisfying"],
               ["is rushed", "is a cop-out", "falls flat"]),
              ("the acting", ["is superb", "is convincing"], ["is wooden", "is hammy", "is flat"])],
    "software": [("it", ["is intuitive", "is fast", "syncs perfectly", "has never lost my data",
                         "saves me hours every week"],
                  ["crashes constantly", "is painfully slow", "lost all my data", "is full of bugs",
                   "logs me out every five minutes", "drains my battery"])],
    "learning": [("the teacher", ["is patient", "is inspiring", "explains things clearly"],
                  ["is disorganised", "rushes everything", "reads off the slides"]),
                 ("the material", ["is well structured", "is practical", "is up to date"],
                  ["is out of date", "is confusing", "is full of mistakes"])],
}

# Whole-review verdicts (no subject needed).
VERDICT_POS = [
    "Love it.", "Highly recommended.", "Would buy again.", "Worth every penny.", "Five stars.", "Ten out of ten.",
    "Couldn't be happier.", "An absolute gem.", "I'm delighted with it.", "Money well spent.",
    "Best purchase this year.",
    "I'd recommend it to anyone.", "No complaints at all.", "Can't fault it.", "Not bad at all.", "Really pleased.",
    "Exceeded my expectations.", "Does the job brilliantly.", "We will definitely be back.", "A real treat.",
    "Very happy customer.", "Impressed.", "So glad I chose this one.", "It's a keeper.", "Great value.",
    "Better than the expensive ones.", "Nothing to complain about.", "Perfect.", "Thoroughly enjoyed it.",
    "I'm a fan.", "Top marks.", "It was a pleasure from start to finish.", "Quality stuff.", "Pleasantly surprised.",
    "Hard to fault.", "I keep recommending it to friends.", "It has made my life easier.", "Worth the wait.",
    "Would happily go again.", "Solid and reliable.", "Brilliant value for money.", "A lovely experience overall.",
    "Can't recommend them enough.", "Exactly what I was looking for.", "Happy with my purchase.", "Spot on.",
    "Genuinely impressed.", "I'm very pleased I went with them.", "It's made a real difference.",
    "I'll be a customer for life.", "Lived up to the hype.", "Delightful from start to finish.",
    "Honestly one of the best things I've bought.", "Good honest service.", "Everything went smoothly.",
]
VERDICT_NEG = [
    "Avoid.", "Total waste of money.", "Never again.", "Don't bother.", "One star is generous.", "Very disappointed.",
    "Not worth it.", "Nothing special.", "Not great.", "I want my money back.", "A complete letdown.",
    "Save your money.", "I regret it.", "Would not recommend.", "Steer clear.", "What a shambles.", "Not impressed.",
    "Utterly useless.", "Overpriced and underwhelming.", "Rip-off.", "Worst purchase I've made in years.",
    "Poor value.", "A huge disappointment.", "It's not fit for purpose.", "I expected much better.",
    "Frankly, a mess.", "Zero stars if I could.", "Cheaply made.", "Not what was advertised.", "Stay away.",
    "I wouldn't go back.", "Buyer beware.", "Shoddy.", "Deeply frustrating.", "Not good enough.",
    "I gave up on it.", "Sadly, it didn't work for me.", "It went straight back.", "A waste of an evening.",
    "Not as described.", "Complete rubbish.", "I can't believe I paid for this.", "They've lost a customer.",
    "What a letdown.", "It's a no from me.", "Fell well short.", "Avoid at all costs.", "Pretty poor, really.",
    "It just isn't good.", "Never buying from them again.", "Absolutely dreadful service.",
    "Not a patch on the old one.",
]
# Implied outcomes: no polar word, the consequence decides. {thing} is the reviewed thing, {time} a span.
IMPLIED_POS = [
    "We have used it every day since.", "I've already ordered a second one.", "I've bought one for my sister too.",
    "My {person} asked where I got it.", "It still works like new after {time}.", "We're going back next month.",
    "We've booked again for next year.", "I've recommended it to everyone at work.", "I read it in one evening.",
    "The kids ask for it every weekend.", "I haven't touched my old one since.", "It paid for itself in {time}.",
    "We stayed an extra night.", "I finished it in two days and started it again.", "I use it more than my car.",
    "It's the first thing I pack for every trip.", "We were back the following weekend.",
    "I've had it {time} and it still looks brand new.", "My {person} wants one now.",
    "They fixed it the same day.", "It arrived a day early and was set up in minutes.",
    "I've been back four times this month.", "I no longer need the expensive version.",
    "I've slept through the night ever since.", "Our electricity bill went down noticeably.",
    "The queue outside tells you everything.", "I'd pay double for it.", "I cancelled my other subscriptions.",
    "We've already told all our friends about it.", "I went back the next day to buy another.",
    "It has survived two house moves and a toddler.", "Everyone at the party asked for the recipe.",
    "I ended up watching the whole series in a weekend.", "I haven't had a single problem in {time}.",
    "The difference was obvious from the first day.", "It sorted out a problem I'd had for years.",
    "I stopped looking at other brands.", "We'll be using them for every job from now on.",
    "My {person} has borrowed it so often that I bought a second one.", "I keep finding excuses to use it.",
    "The whole family fought over who got to use it first.", "I'm on my third order already.",
    "They called back within the hour, as promised.", "It arrived the next morning, well packed.",
    "They sorted it out in one phone call.", "I got the job, thanks in part to this course.",
    "I've worn them every day since they arrived.", "Our dog won't sleep anywhere else now.",
    "I've lost six kilos since I started using it.", "It was over far too soon.",
    "The time flew by.", "I laughed from start to finish.", "I've booked them again for the spring.",
    "We gave them a tip on top of the bill.", "It's the only one that has ever fitted me properly.",
    "They went out of their way to help.", "It took the stress out of the whole move.",
    "I can finally hear the television again.", "The kids were quiet for the entire trip.",
]
IMPLIED_NEG = [
    "It stopped working after {time}.", "I sent it back the next day.", "It went in the bin after {time}.",
    "We walked out halfway through.", "I had to call them {count} times.", "Still no refund after {time}.",
    "It broke within {time}.", "We waited {wait} for our food.", "I fell asleep twenty minutes in.",
    "We ended up buying a different one.", "The handle came off in my hand.", "It lasted {time}.",
    "I had to take it back twice.", "I'm still waiting for a reply.", "We checked out a day early.",
    "The second one broke too.", "It's been sitting in the cupboard since {time} after we got it.",
    "Nobody turned up.", "The battery swelled after {time}.", "It shrank two sizes in the first wash.",
    "I gave up and uninstalled it.", "We had to find another hotel.", "My {person} refused to use it.",
    "I'll be asking for a refund.", "It took {wait} to get through to anyone.", "The screen cracked on day one.",
    "I had to redo the whole job myself.", "I couldn't finish it.", "The zip broke on the first day.",
    "We were the only table they forgot.", "It was cancelled the night before with no explanation.",
    "It's already showing cracks.", "I've had to restart it every morning.", "The refund took {time}.",
    "It started making a grinding noise after {time}.", "The paint was chipped when it arrived.",
    "We had to leave before the main course.", "It ended up in the charity shop.",
    "I had to buy a replacement within {time}.", "The colour ran in the first wash.", "We never got our deposit back.",
    "Nobody could tell us when it would be fixed.", "I spent the whole evening on hold.",
    "Half the parts were missing.", "It took three visits to get it right, and it still isn't.",
    "It switched itself off halfway through every cycle.", "I walked out after the first hour.",
    "My feet were bleeding by lunchtime.", "The rain came straight through the seams.",
    "We were kept awake all night by the noise.", "They billed me for work they never did.",
    "The promised callback never came.", "The update wiped all my photos.",
    "I couldn't get past the first chapter.", "My {person} fell asleep before the end.",
    "It lost a wheel on the first outing.", "We found hair in the soup.", "The delivery driver left it in a puddle.",
    "It arrived a month late and in pieces.", "I had to ask three times for a glass of water.",
    "The lid no longer closes.", "It overheats if you leave it on for more than ten minutes.",
    "It needed two new batteries in the first week.", "We got food poisoning.",
    "The second half of the book is just filler.", "They kept the deposit and stopped answering.",
]
TIME = ["two days", "three days", "a week", "ten days", "two weeks", "a month", "six weeks", "three months",
        "a year", "a fortnight", "one use", "a single trip"]
LONG_TIME = ["two years", "three years", "five years", "eighteen months", "a year of daily use", "a decade"]
WAIT = ["an hour", "over an hour", "forty-five minutes", "ninety minutes", "two hours"]
COUNT = ["three", "four", "five", "six", "seven"]
PERSON = ["wife", "husband", "mum", "dad", "son", "daughter", "neighbour", "friend", "partner", "colleague",
          "brother", "flatmate", "boss"]

# Minor points for concessions: (minor negative ... but positive) and (minor positive ... but negative).
MINOR_NEG = ["It's not cheap", "It's a bit pricey", "Delivery was slow", "The box was battered", "It's a little heavy",
             "The instructions are useless", "It took a while to set up", "It's louder than I'd like",
             "The colour is slightly off", "Parking is a pain", "The wait was long", "It's no beauty",
             "The menu is short", "The room was small", "It's basic", "The app is clunky",
             "The first chapter is slow", "It's a bit fiddly", "The seats were cramped",
             "It's not the fastest", "There were a few teething problems"]
MINOR_POS = ["It looks nice", "The packaging is lovely", "The price is tempting", "Delivery was quick",
             "The staff were polite", "The photos look great", "It's well designed on paper", "The location is good",
             "The menu sounds great", "It's cheap", "It's light", "The trailer was exciting", "The box is pretty",
             "The website is slick", "The idea is clever", "It started well", "The first week was fine",
             "The reviews were glowing", "It's a well-known brand", "The setting is beautiful"]
CONCESSION_POS = ["but it's worth every penny", "but it does the job perfectly", "but I love it",
                  "but the quality makes up for it", "but it's been worth it", "but we'd go back in a heartbeat",
                  "but I'm really happy with it", "but it works beautifully", "but the result was excellent",
                  "but that's my only complaint", "but honestly it was worth the hassle", "but it won me over"]
CONCESSION_NEG = ["but that's where the good news ends", "but it broke within a week", "but it's useless",
                  "but it simply doesn't work", "but the quality is appalling", "but I'd never buy it again",
                  "but everything else was a disaster", "but it fell apart almost immediately",
                  "but it's all style and no substance", "but that's about all it has going for it",
                  "but the reality was a letdown", "but I'm sending it back"]
# Sarcasm: a glowing frame around a bad outcome (label NEGATIVE).
SARCASM = [
    "Great, {bad}.", "Oh wonderful, {bad}.", "Brilliant. {Bad}.", "Just what I needed: {bad}.", "Fantastic, {bad}.",
    "Thanks a lot, {bad}.", "Perfect, {bad}.", "Lovely. {Bad}.", "Amazing how {bad}.", "Well done, {bad}.",
    "Five stars for {badging}.", "Ten out of ten for {badging}.", "Highly recommended if you enjoy {badging}.",
    "Perfect if you like {badging}.", "Love {badging}. Said no one ever.", "Nothing says quality like {badging}.",
    "What a bargain: {bad}.", "Top notch, {bad}.", "Superb. {Bad}. Again.",
]
BAD_EVENTS = [("it broke on the second day", "it breaking on the second day"),
              ("the delivery came a week late", "waiting a week for a late delivery"),
              ("it crashed in the middle of my work", "losing an afternoon of work"),
              ("the food arrived cold", "cold food"),
              ("the train was cancelled again", "cancelled trains"),
              ("the battery died before lunch", "a battery that dies before lunch"),
              ("the update deleted my settings", "updates that delete your settings"),
              ("the strap snapped on day one", "straps that snap on day one"),
              ("the room smelled of smoke", "rooms that smell of smoke"),
              ("nobody answered the phone", "nobody answering the phone"),
              ("I got charged twice", "being charged twice"),
              ("the heel came off in the rain", "heels that come off in the rain"),
              ("the printer jammed again", "a printer that jams every other page"),
              ("it leaked all over the floor", "mopping the floor every morning"),
              ("the flight was delayed five hours", "five hour delays"),
              ("they lost my booking", "bookings that vanish"),
              ("it stopped charging after a week", "a charger that quits after a week")]
GOOD_EVENTS = ["it arrived a day early", "they refunded me the same day", "it works perfectly", "the table was ready",
               "it fits like a glove", "the upgrade was free", "it's exactly as described", "it survived the drop",
               "the train was on time", "they fixed it in ten minutes", "the battery lasts all week"]
# Expectations: met or missed.
EXPECT_POS = ["I didn't expect much, {pos}.", "I had my doubts, {pos}.", "I was sceptical at first, {pos}.",
              "I nearly didn't buy it, {pos}.", "I expected the worst after the reviews, {pos}."]
EXPECT_NEG = ["I had high hopes, {neg}.", "I really wanted to like it, {neg}.", "I expected so much more, {neg}.",
              "Everyone raved about it, {neg}.", "I was so excited to try it, {neg}."]
EXPECT_POS_TAIL = ["but it turned out to be brilliant", "but it has won me over", "but I was proved wrong",
                   "but it's been fantastic", "but it's now my favourite"]
EXPECT_NEG_TAIL = ["but it was a letdown", "but it fell flat", "but it didn't live up to it", "but it was dreadful",
                   "but it was a real disappointment"]
# Contrast across sentences: the later sentence decides.
TURN_TO_POS = ["Now I can't imagine life without it.", "A month later, I love it.", "Now it's my go-to.",
               "Now I use it every day.", "By the end I was completely won over."]
TURN_TO_NEG = ["Then it started falling apart.", "A month later, it's useless.", "Then the problems began.",
               "By the end I just wanted to leave.", "Then it stopped working altogether."]
FIRST_POS = ["At first I loved it.", "The first impression was great.", "It started off well.",
             "The first week was wonderful.", "It looked perfect out of the box."]
FIRST_NEG = ["At first I hated it.", "The first impression wasn't great.", "It got off to a rocky start.",
             "The first week was frustrating.", "Out of the box it looked cheap."]
# Neutral pieces: inside reviews (no lean) and standalone NEUTRAL statements.
CONTEXT = ["I bought it for my {person}'s birthday.", "We went there on a Tuesday evening.",
           "I ordered it online last month.", "We stayed for {nights} nights in {month}.",
           "I've been using it for {time}.", "It came in a plain brown box.", "We booked it through a friend.",
           "I use it mostly at weekends.", "We were a group of {count}.", "I picked the grey one.",
           "It replaced an older model.", "We visited with the kids.", "I read it on holiday.",
           "This was our second visit.", "I found it through a search online.", "It cost about {price}."]
NEUTRAL_TEMPLATES = [
    "The {place} opens at {hour} on {day}s.", "The {vehicle} to {town} leaves at {clock} from platform {n}.",
    "The meeting has been moved to {day} at {clock}.", "The council will discuss the {topic} plan on {day}.",
    "The {thing} comes in {colour} and {colour2}.", "{Thing_cap} measures {n}0 by {n}5 centimetres.",
    "The {place} is closed on {day}s.", "The {event} takes place every {month}.",
    "Tickets go on sale on the {ordinal} of {month}.", "The report was published on {day}.",
    "The {vehicle} takes about {n}0 minutes.", "The {place} is next to the {place2}.",
    "Prices will change from {month}.", "The company has {n}00 employees.", "The {event} starts at {clock}.",
    "The museum was founded in 18{n}{n}.", "The road will be closed between {clock} and {clock2}.",
    "The forecast says rain in the afternoon.", "The minister will visit {town} on {day}.",
    "The package includes a cable and a manual.", "Delivery takes {n} to {n2} working days.",
    "The course lasts {n} weeks.", "The town has about {n}0,000 residents.", "{Thing_cap} weighs {n} kilograms.",
    "The election results are expected on {day}.", "The library holds about {n}0,000 books.",
    "Our train arrives at {clock}.", "I ordered the {colour} one in size {n}.", "We arrived on {day} evening.",
    "The school term starts on the {ordinal} of {month}.", "The bank changed its opening hours in {month}.",
    "The {thing} has {n} settings and a timer.", "The new bridge will connect {town} and {town2}.",
    "The film is shown at {clock} and {clock2}.", "The central bank meets again in {month}.",
    "The shop sells {thing}s and spare parts.", "The hotel has {n}0 rooms on four floors.",
    "Most of the visitors came from {town}.", "The study followed {n}00 patients for two years.",
    "The {vehicle} stops at {town} and {town2}.", "Our order number ends in {n}{n}.",
    "The building was renovated in 19{n}{n}.", "The {event} was postponed until {month}.",
    "The team will play {town} on {day}.", "The price includes breakfast and parking.",
    "Registration closes on {day}.", "The office is on the {ordinal} floor.",
    "We took the {vehicle} from {town} on {day} morning.", "It was my first time ordering from them.",
    "Unemployment fell slightly in {month}, according to official figures.",
    "The store moved to a bigger site last year.", "The {thing} was delivered on {day}.",
]
PLACE = ["library", "post office", "pharmacy", "swimming pool", "town hall", "market", "museum", "gym", "bakery",
         "station", "supermarket", "dentist's surgery"]
TOWN = ["Leeds", "Bristol", "Dublin", "Glasgow", "York", "Cardiff", "Oxford", "Brighton", "Bath", "Norwich"]
DAY = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTH = ["January", "March", "April", "June", "July", "August", "September", "October", "November", "December"]
VEHICLE = ["train", "bus", "ferry", "coach", "flight", "tram"]
EVENT = ["festival", "market", "marathon", "book fair", "concert", "parade", "match"]
TOPIC = ["housing", "parking", "transport", "recycling", "budget", "school"]
COLOUR = ["black", "white", "blue", "green", "red", "grey", "silver"]
ORDINAL = ["first", "second", "fifth", "tenth", "fifteenth", "twentieth"]
PRICE = ["forty pounds", "twenty euros", "sixty dollars", "a hundred pounds", "fifteen euros"]
# ---- generator v4 (issue 27, second round): shapes the v3 banks lack, used only with version >= 4 -----------------
# Comparisons and similes: the reference point decides ("I've had better coffee from a vending machine").
COMPARE_NEG = ["I've had better {food} from a {lowly}.", "My old one from the supermarket did a better job.",
               "The cheap one I had before was better in every way.", "It feels like a toy.",
               "It tastes like it came out of a packet.", "It sounds like a tin can full of bolts.",
               "You'd get more comfort sitting on the floor.", "A paper bag would keep the rain out better.",
               "My phone takes better pictures.", "The free version was better.",
               "It's like paying for a hotel and getting a hostel."]
COMPARE_POS = ["It's better than the one I paid twice as much for.", "It puts the big brands to shame.",
               "It feels like something that costs three times as much.", "It beats every other one I've tried.",
               "I'd put it up against any of the expensive ones.", "It makes my old one look like a toy.",
               "The branded version can't touch it.",
               "It's as good as the restaurant down the road, at half the price."]
FOOD = ["coffee", "curry", "chips", "bread", "sushi", "burgers", "soup"]
LOWLY = ["vending machine", "hospital canteen", "motorway services", "school canteen",
         "corner shop"]
# Regret, wishes and unmet standards (NEGATIVE); their mirror images (POSITIVE).
WISH_NEG = ["I wish I had {regret}.", "I should have {regret}.", "Next time I'll know to {regret_inf}.",
            "I expected more from {standard}.", "You'd expect better from {standard}.",
            "Nothing about it feels {worth}.", "There's nothing here that's {worth}.",
            "I can't think of one reason to buy it.", "Hard to see who this is for."]
WISH_POS = ["My only regret is not buying it sooner.", "I wish I'd found them years ago.",
            "I should have done this ages ago.", "Nothing was too much trouble.", "Not a single thing went wrong.",
            "There isn't one thing I'd change.", "I can't think of a single thing to complain about.",
            "I only wish they had a branch nearer to home."]
REGRET = [("read the reviews first", "read the reviews first"), ("gone elsewhere", "go elsewhere"),
          ("kept my old one", "keep the old one"), ("saved my money", "save my money"),
          ("listened to my {person}", "listen to my {person}"), ("checked the small print", "check the small print")]
STANDARD = ["a place with this many awards", "a company this size",
            "something at this price", "a hotel with five stars on the door", "a shop that calls itself premium"]
WORTH = ["worth the money", "well made", "finished", "worth the wait", "like a premium product"]
# Looks versus function: an attractive surface with a failed core job (NEGATIVE), and the reverse (POSITIVE).
SURFACE = ["nice-looking", "stylish", "pretty", "beautifully packaged", "shiny", "well-designed"]
CORE_FAIL = {"default": ["doesn't do the one thing it's for", "stopped working within a month",
                         "can't do its basic job", "falls apart if you look at it"],
             "electronics": ["can't hold a charge", "won't stay connected"],
             "clothes": ["lets the rain straight in", "falls apart in the wash"],
             "kitchen": ["can't boil water evenly", "burns everything you put in it"],
             "food": ["serves food you wouldn't give a dog"], "stay": ["has beds like concrete"]}
CORE_OK = ["has never once let me down", "does exactly what it should, every single day",
           "has outlasted everything else I own", "just keeps going"]
SURFACE_NEG = ["It's a {surface} {noun} that {fail}.", "{Minor}, and that's all it does well.",
               "{Minor}, and that's the end of the good news.", "Sure, {minor}. It also {fail}.",
               "Yes, {minor}. Shame it {fail}.", "Lovely to look at, but it {fail}."]
SURFACE_POS = ["It's an ugly old {noun} that {ok}.", "It's no looker, but it {ok}.",
               "Sure, {minor_neg}. It also {ok}.", "{Easy} to use, even for {novice}.",
               "{Easy} to set up, even for {novice}."]
EASY = ["Simple", "Easy", "Straightforward", "Painless"]
NOVICE = ["a complete beginner", "my eighty-year-old {person}",
          "someone who never reads instructions", "a total technophobe"]
# "Five stars for X alone" is sincere praise, unlike the sarcasm frames around a bad event.
ALONE_POS = ["Five stars for {good} alone.", "Worth it for {good} alone.", "{Good} alone is worth the price.",
             "I'd go back just for {good}.", "Come for {good}, stay for everything else."]
ALONE_NEG = ["One star, and that's for {good}.", "The only thing worth mentioning is {good}.",
             "Apart from {good}, there's nothing to say for it."]
GOOD_ASPECTS = ["the view", "the desserts", "the staff", "the location", "the sound",
                "the battery life", "the build quality", "the breakfast", "the soundtrack"]
# People's conduct and everyday events that imply the verdict without a polar word.
CONDUCT_POS = ["They talked me out of the pricier option.", "They explained every step in plain language.",
               "They didn't charge me for the extra hour.", "They remembered our names on the second night.",
               "Our {pet} chewed through two others, and hasn't touched this one.",
               "After trying {count} others, this is the one we kept.", "They rang to check everything was still fine.",
               "The driver carried it all the way upstairs.", "The chef came out to ask how everything was.",
               "They fitted us in the same afternoon."]
CONDUCT_NEG = ["The {role} was texting through half of it.", "Nobody apologised.",
               "The {role} never once looked up from the screen.", "We had to clear our own table.",
               "It gave up at the first {test}.",
               "The {role} rolled their eyes when I asked a question.", "They blamed me for their mistake.",
               "Half of it was still frozen in the middle.", "It was covered in someone else's fingerprints.",
               "I found the same thing for half the price next door."]
PET = ["cat", "dog", "rabbit", "toddler", "puppy"]
ROLE = ["trainer", "receptionist", "waiter", "salesman", "guide", "technician", "instructor", "cashier"]
TEST = ["sign of rain", "bump in the road", "hot wash", "real workout", "cold morning"]
OPENERS = ["", "", "", "", "Honestly, ", "To be fair, ", "Overall, ", "In short, ", "All in all, ", "Well, ",
           "So, ", "Basically, ", "Frankly, ", "Bottom line: ", "To sum up, "]
CONTRAST_NEG = ["However, ", "Unfortunately, ", "Sadly, ", "But ", "Then again, ", "On the other hand, ",
                "The problem is that ", "Shame that "]
CONTRAST_POS = ["Still, ", "That said, ", "But ", "Even so, ", "Despite that, ", "In the end, ", "Luckily, ",
                "Thankfully, ", "On the plus side, "]
# v5: turns that say only "the next part counts", drawn for both labels: in v3/v4 "Still," and "That said," only
# ever led to a POSITIVE turn and "However," to a NEGATIVE one, so the marker alone gave the label away (AttnLRP on
# default-text put its top score on "Still" in the generated test set's "X was nasty. Still, I would recommend Y").
TURNS = ["Still, ", "That said, ", "But ", "Even so, ", "However, ", "Then again, ", "On the other hand, ",
         "Despite that, ", "In the end, ", "Mind you, "]


def vader_words(min_abs: float = 2.0, max_std: float = 1.0) -> dict[bool, list[str]]:
    """Alphabetic words of VADER's lexicon (mean rating of ten people, -4..4) with a clear sign, by polarity.

    Only words of four letters or more (the lexicon's short entries are mostly chat acronyms). Empty lists when
    the package `vaderSentiment` is not installed.
    """
    import importlib.util
    spec = importlib.util.find_spec("vaderSentiment")
    if spec is None:
        return {True: [], False: []}
    path = Path(spec.submodule_search_locations[0]) / "vader_lexicon.txt"
    out: dict[bool, list[str]] = {True: [], False: []}
    for line in path.read_text(encoding="utf-8").splitlines():
        word, mean, std = line.split("\t")[:3]
        if re.fullmatch(r"[a-z]{4,}", word) and abs(float(mean)) >= min_abs and float(std) <= max_std:
            out[float(mean) > 0].append(word)
    return out


def afinn_words(min_abs: int = 2) -> dict[bool, list[str]]:
    """Alphabetic words of four letters or more of AFINN-165 (Finn Nielsen's list, integer ratings -5..5, ODbL) with
    |rating| >= `min_abs`, by polarity. Empty lists when the package `afinn` is not installed."""
    import importlib.util
    spec = importlib.util.find_spec("afinn")
    if spec is None:
        return {True: [], False: []}
    path = Path(spec.submodule_search_locations[0]) / "data" / "AFINN-en-165.txt"
    out: dict[bool, list[str]] = {True: [], False: []}
    for line in path.read_text(encoding="utf-8").splitlines():
        word, rating = line.rsplit("\t", 1)
        if re.fullmatch(r"[a-z]{4,}", word) and abs(int(rating)) >= min_abs:
            out[int(rating) > 0].append(word)
    return out


def lexicon_words(vader: bool, afinn: bool, exclude: frozenset[str] = frozenset()) -> dict[bool, list[str]]:
    """The words of the chosen lexicons by polarity, VADER's first, each once; a word the lexicons rate with
    opposite signs is dropped, and so is every word in `exclude` (e.g. rollout_core.data.sentiment.held_out_words,
    so the generated test keeps words training never saw)."""
    sources = ([vader_words()] if vader else []) + ([afinn_words()] if afinn else [])
    signs: dict[str, set[bool]] = {}
    for source in sources:
        for positive, words in source.items():
            for word in words:
                signs.setdefault(word, set()).add(positive)
    return {positive: [w for w, s in signs.items() if s == {positive} and w not in exclude]
            for positive in (True, False)}


_ADJECTIVE_ENDINGS = ("able", "ible", "ful", "less", "ous", "ive", "ic", "al", "ent", "ant", "ing", "ed", "y", "ish")
VADER_FRAMES = ["One word: {w}.", "{W}, that's the only way to describe it.", "In a word, {w}.",
                "The whole thing felt {w}.", "{W}. That sums it up.", "My verdict? {W}."]


class _Writer:
    def __init__(self, rng: random.Random, lexicon: dict[bool, list[str]] | None, version: int = 3) -> None:
        self.rng = rng
        self.lexicon = lexicon or {True: [], False: []}
        self.version = version

    def fill(self, text: str) -> str:
        r = self.rng
        slots = {"time": lambda: r.choice(TIME), "wait": lambda: r.choice(WAIT), "count": lambda: r.choice(COUNT),
                 "person": lambda: r.choice(PERSON), "nights": lambda: r.choice(COUNT),
                 "month": lambda: r.choice(MONTH),
                 "price": lambda: r.choice(PRICE), "place": lambda: r.choice(PLACE), "place2": lambda: r.choice(PLACE),
                 "town": lambda: r.choice(TOWN), "town2": lambda: r.choice(TOWN), "day": lambda: r.choice(DAY),
                 "hour": lambda: r.choice(["nine", "ten", "eight", "half past nine"]),
                 "clock": lambda: f"{r.randint(6, 21)}:{r.choice(['00', '15', '30', '45'])}",
                 "clock2": lambda: f"{r.randint(6, 21)}:{r.choice(['05', '20', '40', '50'])}",
                 "vehicle": lambda: r.choice(VEHICLE), "event": lambda: r.choice(EVENT),
                 "topic": lambda: r.choice(TOPIC),
                 "colour": lambda: r.choice(COLOUR), "colour2": lambda: r.choice(COLOUR),
                 "ordinal": lambda: r.choice(ORDINAL), "n": lambda: str(r.randint(2, 9)),
                 "food": lambda: r.choice(FOOD), "lowly": lambda: r.choice(LOWLY), "pet": lambda: r.choice(PET),
                 "role": lambda: r.choice(ROLE), "test": lambda: r.choice(TEST),
                 "standard": lambda: r.choice(STANDARD), "worth": lambda: r.choice(WORTH),
                 "n2": lambda: str(r.randint(10, 14)),
                 "thing": lambda: r.choice(THINGS[r.choice(list(THINGS))]).split(" ", 1)[1],
                 "Thing_cap": lambda: "The " + r.choice(THINGS[r.choice(list(THINGS))]).split(" ", 1)[1]}
        return re.sub(r"\{(\w+)\}", lambda m: slots[m.group(1)]() if m.group(1) in slots else m.group(0), text)

    # --- pieces --------------------------------------------------------------------------------------------------
    def aspect(self, kind: str, positive: bool, thing: str) -> str:
        r = self.rng
        noun, pos, neg = r.choice(ASPECTS[kind] + [("it", _GENERAL_POS, _GENERAL_NEG)])
        predicate = r.choice(pos if positive else neg)
        adjectives = self.lexicon[positive] and [w for w in self.lexicon[positive] if w.endswith(_ADJECTIVE_ENDINGS)]
        if adjectives and r.random() < 0.2:
            predicate = f"is {r.choice(('', '', 'really ', 'very ', 'quite ', 'just '))}{r.choice(adjectives)}"
        subject = thing if noun == "it" and r.random() < 0.5 else noun
        if subject in ("they",) and predicate.startswith("is "):
            predicate = "are " + predicate[3:]
        return _cap(f"{subject} {predicate}.")

    def verdict(self, positive: bool) -> str:
        r = self.rng
        words = self.lexicon[positive]
        if words and r.random() < 0.15:
            w = r.choice(words)
            return r.choice(VADER_FRAMES).replace("{W}", w.capitalize()).replace("{w}", w)
        return r.choice(VERDICT_POS if positive else VERDICT_NEG)

    def implied(self, positive: bool) -> str:
        r = self.rng
        text = r.choice(IMPLIED_POS if positive else IMPLIED_NEG)
        if positive and "{time}" in text:
            text = text.replace("{time}", r.choice(LONG_TIME))
        return self.fill(text)

    def _claim(self, kind: str, positive: bool, thing: str) -> str:
        """One sentence that states the polarity: an aspect, a verdict or an implied outcome (v4: also a
        comparison, a wish or regret, or people's conduct)."""
        if self.version >= 4 and self.rng.random() < 0.25:
            return self.indirect(positive)
        choice = self.rng.choices(("aspect", "verdict", "implied"), (4, 2, 3))[0]
        if choice == "aspect":
            return self.aspect(kind, positive, thing)
        if choice == "verdict":
            return self.verdict(positive)
        return self.implied(positive)

    def indirect(self, positive: bool) -> str:
        """v4: a comparison, a wish or regret, or people's conduct that implies the verdict."""
        r = self.rng
        bank = r.choice(((COMPARE_POS, COMPARE_NEG), (WISH_POS, WISH_NEG), (CONDUCT_POS, CONDUCT_NEG)))
        text = r.choice(bank[0] if positive else bank[1])
        if "{regret" in text:
            done, infinitive = r.choice(REGRET)
            text = text.replace("{regret}", done).replace("{regret_inf}", infinitive)
        return self.fill(text)

    def neutral(self) -> str:
        return self.fill(self.rng.choice(NEUTRAL_TEMPLATES + CONTEXT))

    # --- shapes: each returns the review text for the label `positive` ------------------------------------------
    def plain(self, kind, positive, thing):
        r = self.rng
        n = r.choice((1, 1, 2, 2, 3))
        sentences: list[str] = []
        while len(sentences) < n:
            sentence = self._claim(kind, positive, thing)
            if sentence not in sentences:
                sentences.append(sentence)
        if r.random() < 0.35:
            sentences.insert(r.randrange(len(sentences) + 1), self.fill(r.choice(CONTEXT)))
        return " ".join(sentences)

    def concession(self, kind, positive, thing):
        r = self.rng
        minor = r.choice(MINOR_NEG if positive else MINOR_POS)
        major = r.choice(CONCESSION_POS if positive else CONCESSION_NEG)
        form = r.randrange(4)
        if form == 0:
            text = f"{minor}, {major}."
        elif form == 1:  # minor last: "Great X. Only downside: Y."
            lead = self._claim(kind, positive, thing)
            tail = minor[0].lower() + minor[1:]
            labels = (['Only downside:', 'My one gripe:', 'The only catch:', 'Minor niggle:'] if positive
                      else ['The one good thing:', 'Only upside:', 'The single plus:', 'To be fair,'])
            text = f"{lead} {r.choice(labels)} {tail}."
        elif form == 2:
            text = f"{minor}. {self.turn(positive)}{_low(self._claim(kind, positive, thing))}"
        else:
            text = f"Although {_low(minor)}, {_low(self._claim(kind, positive, thing))}"
        return text

    def turn(self, positive: bool) -> str:
        """The marker before the deciding sentence; from v5 mostly one that does not depend on the label."""
        r = self.rng
        if self.version >= 5 and r.random() < 0.75:
            return r.choice(TURNS)
        return r.choice(CONTRAST_POS if positive else CONTRAST_NEG)

    def contrast(self, kind, positive, thing):
        r = self.rng
        first = self._claim(kind, not positive, thing)
        second = self._claim(kind, positive, thing)
        marker = self.turn(positive)
        if r.random() < 0.4:
            start = r.choice(FIRST_NEG if positive else FIRST_POS)
            return f"{start} {r.choice(TURN_TO_POS if positive else TURN_TO_NEG)}"
        return f"{first} {marker}{_low(second)}"

    def sarcasm(self, kind, positive, thing):
        """A glowing frame around a bad outcome; for a positive label the same plain frames around a good one, so
        the outcome, not "Great," decides."""
        r = self.rng
        if positive:
            good = r.choice(GOOD_EVENTS)
            return r.choice(SARCASM[:6]).replace("{bad}", good).replace("{Bad}", _cap(good))
        bad, badging = r.choice(BAD_EVENTS)
        text = r.choice(SARCASM)
        return text.replace("{bad}", bad).replace("{Bad}", _cap(bad)).replace("{badging}", badging)

    def expectation(self, kind, positive, thing):
        r = self.rng
        if positive:
            return r.choice(EXPECT_POS).replace("{pos}", r.choice(EXPECT_POS_TAIL))
        return r.choice(EXPECT_NEG).replace("{neg}", r.choice(EXPECT_NEG_TAIL))

    def surface(self, kind, positive, thing):
        """v4: looks against function ("a stylish lamp that can't do its basic job"; "no looker, but it ...")."""
        r = self.rng
        noun = thing.split(" ", 1)[1]
        if positive:
            text = r.choice(SURFACE_POS).replace("{ok}", r.choice(CORE_OK)).replace("{noun}", noun)
            text = text.replace("{minor_neg}", _low(r.choice(MINOR_NEG))).replace("{Easy}", r.choice(EASY))
            return text.replace("{novice}", r.choice(NOVICE))
        fail = r.choice(CORE_FAIL.get(kind, []) + CORE_FAIL["default"])
        minor = r.choice(MINOR_POS)
        text = r.choice(SURFACE_NEG).replace("{fail}", fail).replace("{noun}", noun)
        return text.replace("{surface}", r.choice(SURFACE)).replace("{Minor}", minor).replace("{minor}", _low(minor))

    def alone(self, kind, positive, thing):
        """v4: "Five stars for the view alone" (sincere) and "One star, and that's for the view"."""
        r = self.rng
        good = r.choice(GOOD_ASPECTS)
        text = r.choice(ALONE_POS if positive else ALONE_NEG)
        return text.replace("{good}", good).replace("{Good}", _cap(good))

    def indirect_review(self, kind, positive, thing):
        """v4: an indirect claim, alone or with a plain one or a neutral context sentence."""
        r = self.rng
        sentences = [self.indirect(positive)]
        extra = r.random()
        if extra < 0.3:
            sentences.append(self._claim(kind, positive, thing))
        elif extra < 0.5:
            sentences.insert(0, self.fill(r.choice(CONTEXT)))
        return " ".join(sentences)

    def turn_in_sentence(self, kind, positive, thing):
        """v4: two aspects in one sentence, the one after "but" decides ("The plot drags, but the ending is
        superb.")."""
        first = self.aspect(kind, not positive, thing)[:-1]
        second = self.aspect(kind, positive, thing)
        return f"{first}, {self.rng.choice(('but', 'but', 'yet', 'though'))} {_low(second)}"

    def review(self, positive: bool) -> Review:
        r = self.rng
        kind = r.choice(list(THINGS))
        thing = r.choice(THINGS[kind])
        shapes = {"plain": 5, "concession": 3, "contrast": 3, "expectation": 1, "sarcasm": 1.6 if positive else 2}
        if self.version >= 4:
            shapes |= {"surface": 1.2, "alone": 0.6, "indirect_review": 2, "turn_in_sentence": 1.2}
        shape = r.choices(list(shapes), list(shapes.values()))[0]
        text = getattr(self, shape)(kind, positive, thing)
        if r.random() < 0.2:
            text = self.fill(r.choice(CONTEXT)) + " " + text
        opener = r.choice(OPENERS)
        if opener:
            text = opener + _low(text)
        return Review(self.fill(text), 1.0 if positive else 0.0, shape)

    def neutral_item(self) -> Review:
        r = self.rng
        text = " ".join(self.neutral() for _ in range(r.choice((1, 1, 2))))
        return Review(text, 0.5, "neutral")


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _low(text: str) -> str:
    """Lower-case the first letter unless it starts a name-like word ("I", "I'm")."""
    return text if re.match(r"I\b|I'", text) else text[:1].lower() + text[1:]


def generate(n: int, seed: int = 0, neutral_share: float = 0.15, vader: bool = False,
             version: int = 3, afinn: bool = False, exclude: frozenset[str] = frozenset()) -> list[Review]:
    """`n` reviews: `neutral_share` of them neutral (target 0.5), the rest half positive, half negative; seeded.
    `version` 3 is the generator of the first issue-27 round; 4 adds the v4 banks (comparisons, regret, looks
    against function, "for X alone", people's conduct, the turn inside one sentence). `vader` / `afinn` add those
    lexicons' words (without the words in `exclude`) to verdicts and aspects."""
    rng = random.Random(f"reviews:{seed}")
    writer = _Writer(rng, lexicon_words(vader, afinn, exclude) if vader or afinn else None, version)
    n_neutral = round(n * neutral_share)
    kinds = [None] * n_neutral + [i % 2 == 1 for i in range(n - n_neutral)]
    rng.shuffle(kinds)
    return [writer.neutral_item() if k is None else writer.review(k) for k in kinds]
