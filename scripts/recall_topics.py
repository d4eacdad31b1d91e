"""The material :mod:`make_recall_data` draws conversations from: topics, slot values and small talk.

A topic is one thing a person tells a friend over the weeks (a new dog, a trip, a change of mind),
with several ways to say it, several ways a later question can ask about it (paraphrased: the
question's words are mostly *not* the statement's), and *distractors*: lines on the same subject
that share its words but do not answer the question, placed in other sessions so a search that
only counts shared words finds the wrong turn.

Placeholders: ``{A}`` the teller, ``{B}`` the friend, other ``{name}`` slots come from :data:`SLOTS`.
Statement templates are the teller's turns; ``ask`` templates are the friend's turn right before
(so an answer like "Yes, we went there last week" is only understood with its neighbour).
"""

from __future__ import annotations

from typing import Any

SLOTS: dict[str, list[str]] = {
    "breed": ["beagle", "border collie", "greyhound", "dachshund", "labrador", "corgi", "whippet", "spaniel"],
    "pet": ["Biscuit", "Pepper", "Juniper", "Mochi", "Waffles", "Clementine", "Noodle", "Ziggy", "Olive"],
    "company": [
        "Halvorsen Freight",
        "Brightwater Labs",
        "Copperleaf Health",
        "Northgate Studios",
        "Elmstead Bank",
        "Quillfield Media",
        "Ravenpoint Energy",
        "Saltmarsh Games",
    ],
    "team": ["data platform", "mobile", "customer research", "payments", "logistics planning", "design systems"],
    "city": [
        "Lisbon",
        "Kyoto",
        "Reykjavik",
        "Montreal",
        "Ljubljana",
        "Oaxaca",
        "Tallinn",
        "Hobart",
        "Porto",
        "Marrakesh",
        "Valparaiso",
        "Bergen",
        "Hanoi",
        "Cork",
    ],
    "sight": [
        "old tram ride up the hill",
        "night market",
        "glacier hike",
        "harbour at sunrise",
        "cathedral roof tour",
        "street food tour",
        "hot springs",
        "castle ruins",
    ],
    "instrument": ["cello", "ukulele", "piano", "trumpet", "banjo", "violin", "drum kit", "saxophone"],
    "song": [
        "Clair de Lune",
        "Hallelujah",
        "a Bach minuet",
        "Blackbird",
        "Moon River",
        "Für Elise",
        "the Pink Panther theme",
        "Autumn Leaves",
    ],
    "vehicle": ["old Volvo", "motorbike", "camper van", "hatchback", "pickup truck", "little Fiat"],
    "cuisine": ["Sichuan", "Ethiopian", "Korean barbecue", "Peruvian", "Georgian", "Sri Lankan", "Oaxacan", "Thai"],
    "hate": ["cilantro", "olives", "blue cheese", "mushrooms", "anchovies", "licorice"],
    "book": [
        "The Salt Road",
        "A Map of Small Hours",
        "Winter Orchard",
        "The Glass Cartographer",
        "Nine Lanterns",
        "The Quiet Engine",
        "Harbour of Bees",
    ],
    "author": ["Ines Moretti", "Tomas Velde", "Priya Castellan", "Olu Adebayo", "Hana Kessler", "Marek Duda"],
    "bodypart": ["ankle", "wrist", "knee", "shoulder", "thumb"],
    "sport": ["five-a-side football", "bouldering", "volleyball", "trail running", "badminton", "ultimate frisbee"],
    "neighbourhood": ["Riverside", "the Old Quarter", "Millbrook", "Eastfield", "Harbour Hill", "Greenway Park"],
    "sibling": ["Talia", "Ruben", "Nadia", "Oskar", "Fern", "Dario", "Imogen", "Callum"],
    "gift": [
        "a record player",
        "a fishing rod",
        "a chess set",
        "a bread maker",
        "noise-cancelling headphones",
        "a telescope",
        "a leather satchel",
    ],
    "allergen": ["shellfish", "peanuts", "sesame", "kiwi", "pollen from birch trees", "cats"],
    "subject": [
        "astronomy",
        "furniture restoration",
        "accounting",
        "Italian cooking",
        "marine biology",
        "creative writing",
        "pottery",
    ],
    "org": ["food bank", "animal shelter", "community garden", "literacy centre", "repair café", "hospice"],
    "plant": ["orchid", "lemon tree", "cactus", "fiddle-leaf fig", "bonsai juniper", "jasmine"],
    "show": [
        "The Lighthouse Keepers",
        "Deep Orbit",
        "Harrow Street",
        "The Last Ferry",
        "Copper Valley",
        "Midnight Bakery",
    ],
    "colour": ["sage green", "pale yellow", "dusty blue", "terracotta", "lavender", "soft grey"],
    "race": ["city half marathon", "harbour 10k", "mountain trail race", "charity fun run", "canal marathon"],
    "finish": ["1 hour 52 minutes", "48 minutes", "2 hours 10 minutes", "under 4 hours", "56 minutes"],
    "kid": ["Ava", "Leo", "Maisie", "Theo", "Ivy", "Jonah", "Rosa", "Felix"],
    "item": ["laptop charger", "reading glasses", "umbrella", "wallet", "house keys", "headphones"],
    "band": ["The Paper Kites", "Vulfpeck", "Khruangbin", "Alvvays", "Hiatus Kaiyote", "Big Thief", "Fleet Foxes"],
    "venue": ["the Roundhouse", "the old tram depot", "Harbour Arena", "the botanical gardens", "the Corn Exchange"],
    "dish": ["pierogi", "lasagne", "jollof rice", "dumplings", "paella", "moussaka", "pho", "banana bread"],
    "language": ["Portuguese", "Japanese", "Dutch", "Greek", "Swahili", "Korean", "Turkish"],
    "meat": ["bacon", "burgers", "roast chicken", "salami", "steak"],
    "device": ["laptop", "phone", "tablet", "e-reader", "smartwatch"],
    "restaurant": ["Luma", "The Fig Tree", "Osteria Nove", "Sable", "Kin Kitchen", "The Anchor"],
    "place": ["ramen bar", "taco truck", "climbing gym", "jazz club", "bookshop café", "dim sum place"],
    "street": ["Fifth Street", "Mercer Lane", "the canal", "Baker Road", "the market square"],
    "gear": ["hiking boots", "rain jacket", "camera lens", "backpack", "travel adapter", "sleeping bag"],
    "partner": ["Sam", "Jordan", "Alex", "Robin", "Casey", "Morgan"],
    "number": ["fifth", "tenth", "seventh", "third", "twelfth"],
    "boardgame": ["Wingspan", "Catan", "Azul", "Ticket to Ride", "Carcassonne"],
    "degree": ["nursing", "architecture", "law", "data science", "veterinary medicine"],
}

# Each topic: say (first statement, by A), optional ask (B's question before an indirect answer),
# later (a follow-up statement in a later session: multi-session / change of mind), questions
# (type, template, which statements are evidence: "say", "later" or both), distractors.
TOPICS: list[dict[str, Any]] = [
    {
        "id": "pet",
        "say": [
            "We finally brought a {breed} home from the rescue centre, the kids named her {pet}.",
            "Big news: there's a {breed} puppy in our flat now. We're calling her {pet}.",
            "Meet {pet}! A {breed} we adopted on Saturday, she's already stolen my spot on the sofa.",
        ],
        "questions": [
            ("single", "What did {A}'s household call the animal they took in?", ["say"]),
            ("single", "Which breed is the dog {A} adopted?", ["say"]),
            ("single", "What is the name of {A}'s new four-legged family member?", ["say"]),
        ],
        "distract": [
            "My neighbour's {breed} barked all night, I barely slept.",
            "Did you see that video of a {breed} learning to skateboard? The kids love it.",
            "We're dog-sitting for my cousin this week, it's chaos.",
        ],
    },
    {
        "id": "job",
        "say": [
            "I said yes to {company}! I'll be running their {team} group from next month.",
            "So I signed the contract with {company} — heading up the {team} team.",
            "Handed in my notice today. Starting at {company} soon, leading {team}.",
        ],
        "questions": [
            ("single", "Which employer is {A} going to work for?", ["say"]),
            ("single", "What group will {A} be in charge of at the new workplace?", ["say"]),
            ("temporal", "When did {A} accept the new position?", ["say"]),
        ],
        "distract": [
            "Work has been a slog, our manager keeps moving the deadlines.",
            "A recruiter from {company} keeps messaging my colleague, it's getting silly.",
            "I have a performance review on Tuesday, wish me luck.",
        ],
    },
    {
        "id": "trip",
        "say": [
            "Just landed back from {city}. The {sight} was the highlight, honestly unreal.",
            "Home from {city}! Still dreaming about the {sight}.",
            "We're back from our week in {city}, the {sight} was worth the whole trip.",
        ],
        "questions": [
            ("single", "Where did {A} go on holiday {month}?", ["say"]),
            ("single", "What was the best part of {A}'s visit to {city}?", ["say"]),
            ("temporal", "When did {A} get back from {city}?", ["say"]),
        ],
        "distract": [
            "Flights to {city} are so expensive right now, maybe next year.",
            "My brother keeps sending me photos from his holiday, so jealous.",
            "Do you know anyone who has been to {city}? A friend is planning a trip.",
        ],
        "repeat": 2,
    },
    {
        "id": "gear",
        "say": [
            "Picked up a new {gear} at the outdoor shop today, ready for the trip.",
            "Finally bought a proper {gear} for travelling.",
        ],
        "questions": [("relative", "What did {A} buy {gap} before the trip to {city}?", ["say"])],
        "distract": [
            "My old {gear} is falling apart, I should really replace it one day.",
            "The outdoor shop near work is closing down, everything is half price.",
        ],
        "needs": "trip",
    },
    {
        "id": "instrument",
        "say": [
            "I signed up for {instrument} lessons, Thursday evenings with a teacher down the road.",
            "Treated myself to {instrument} lessons, first one is on Thursday.",
        ],
        "later": [
            "Played {song} all the way through on the {instrument} without stopping!",
            "Small win: I can finally get through {song} on the {instrument}.",
        ],
        "questions": [
            ("multi", "What is {A} learning to play, and which piece did they finally manage?", ["say", "later"]),
            ("single", "What tune did {A} finally get through without mistakes?", ["later"]),
            ("single", "Which day of the week are {A}'s music classes?", ["say"]),
        ],
        "distract": [
            "There was a street musician with a {instrument} outside the station, so good.",
            "My nephew wants to learn music but the lessons are so expensive.",
        ],
    },
    {
        "id": "vehicle",
        "say": [
            "I'm thinking of selling my {vehicle}, the repairs are eating my savings.",
            "Honestly I might get rid of the {vehicle}, it costs a fortune to keep running.",
        ],
        "later": [
            "Change of plan, I'm keeping the {vehicle} after all — the mechanic fixed it for cheap.",
            "Never mind about selling, the {vehicle} stays. Got it repaired and it runs great.",
        ],
        "questions": [
            ("change", "Did {A} end up getting rid of their vehicle?", ["say", "later"]),
            ("change", "What did {A} finally decide about the {vehicle}?", ["later"]),
        ],
        "distract": [
            "Someone scratched the {vehicle} parked next to mine, what a mess.",
            "Petrol prices are ridiculous this month.",
        ],
    },
    {
        "id": "cuisine",
        "say": [
            "I could eat {cuisine} food every single day, the spicier the better.",
            "Nothing beats {cuisine} cooking for me, it's my comfort food.",
        ],
        "questions": [
            ("preference", "What kind of food would be a safe bet if I take {A} out to dinner?", ["say"]),
            ("preference", "Which cuisine is {A}'s favourite?", ["say"]),
        ],
        "distract": [
            "We tried a new {cuisine} place but it was closed for renovation.",
            "I'm trying to eat less takeaway this month.",
        ],
    },
    {
        "id": "hate",
        "say": [
            "Please never put {hate} near me, I can't stand the taste.",
            "I pick every bit of {hate} out of my food, it's disgusting to me.",
        ],
        "questions": [("preference", "Which ingredient does {A} refuse to eat?", ["say"])],
        "distract": ["The recipe called for {hate} but I didn't have any."],
    },
    {
        "id": "book",
        "say": [
            "I'm halfway through {book} by {author} and I can't put it down.",
            "Started {book} ({author}) on the train, it's gripping.",
        ],
        "questions": [
            ("single", "What novel has {A} been absorbed in?", ["say"]),
            ("single", "Who wrote the book {A} was reading on the train?", ["say"]),
        ],
        "distract": ["The library fined me for a late book again.", "My book club picked something awful this month."],
    },
    {
        "id": "injury",
        "say": [
            "I twisted my {bodypart} playing {sport} on Saturday, it's swollen like a balloon.",
            "Hurt my {bodypart} at {sport}, the physio says two weeks of rest.",
        ],
        "questions": [
            ("single", "How did {A} get hurt?", ["say"]),
            ("single", "Which part of {A}'s body was injured?", ["say"]),
        ],
        "distract": [
            "My {bodypart} always aches when it rains, getting old.",
            "We should watch the {sport} final together.",
        ],
    },
    {
        "id": "move",
        "say": [
            "We got the flat! Moving to {neighbourhood} at the end of the month.",
            "The lease is signed — we're relocating to {neighbourhood}.",
        ],
        "questions": [
            ("single", "Which part of town is {A} moving to?", ["say"]),
            ("temporal", "When did {A} sign for the new place?", ["say"]),
        ],
        "distract": [
            "Rents in {neighbourhood} have gone up again.",
            "Moving boxes everywhere at my cousin's, they're moving too.",
        ],
    },
    {
        "id": "wedding",
        "say": [
            "My {sibling_rel} {sibling} is getting married next spring, I'm the best person!",
            "{sibling} just got engaged — I'm so happy for my {sibling_rel}.",
        ],
        "questions": [
            ("single", "Whose engagement did {A} celebrate?", ["say"]),
            ("single", "Which family member of {A} is planning a wedding?", ["say"]),
        ],
        "distract": [
            "Wedding season again, three invitations on the fridge.",
            "My colleague's engagement party was fun but way too loud.",
        ],
    },
    {
        "id": "indirect",
        "ask": [
            "Have you been to that new {place} on {street} yet?",
            "Did you ever try the {place} on {street} I told you about?",
        ],
        "say": [
            "Yes! We went there last week, the {dish} was incredible.",
            "We finally went on Friday — loved it, ordered the {dish} twice.",
        ],
        "questions": [
            ("indirect", "What did {A} think of the {place} on {street}?", ["say"]),
            ("indirect", "What did {A} order at the new {place}?", ["say"]),
        ],
        "distract": [
            "There's a {place} opening near the office, looks busy.",
            "We walked along {street} looking for parking for ages.",
        ],
    },
    {
        "id": "gift",
        "say": [
            "Got Dad {gift} for his birthday, he was grinning all evening.",
            "For my father's birthday I went with {gift}. He loved it.",
        ],
        "questions": [("single", "What present did {A} give their dad?", ["say"])],
        "distract": [
            "Birthday shopping is stressful, I never know what to buy.",
            "My dad's friend has {gift} and never uses it.",
        ],
    },
    {
        "id": "allergy",
        "say": [
            "The tests came back: I'm allergic to {allergen}. That explains a lot.",
            "Doctor confirmed it, {allergen} allergy. No more of that for me.",
        ],
        "questions": [
            ("single", "What did {A} find out they react badly to?", ["say"]),
            ("single", "What medical result did {A} get from the tests?", ["say"]),
        ],
        "distract": [
            "The hay fever this year is brutal for everyone at work.",
            "My friend's kid has an allergy too, it's so hard to eat out.",
        ],
    },
    {
        "id": "course",
        "say": [
            "I enrolled in an evening class on {subject} at the community college.",
            "Started a night course in {subject}, homework already!",
        ],
        "questions": [("single", "What is {A} studying after work?", ["say"])],
        "distract": ["The community college car park is always full.", "My old teacher from school just retired."],
    },
    {
        "id": "volunteer",
        "say": [
            "I've been helping out at the {org} on Sunday mornings, really rewarding.",
            "Signed up to volunteer at the {org}, my first shift was great.",
        ],
        "questions": [("single", "Where does {A} give their time for free?", ["say"])],
        "distract": ["The {org} on our street is asking for donations."],
    },
    {
        "id": "plant",
        "say": [
            "My {plant} finally flowered after three years of nothing!",
            "You won't believe it, the {plant} on the balcony is blooming.",
        ],
        "questions": [("single", "Which plant of {A}'s finally blossomed?", ["say"])],
        "distract": ["I killed another basil plant, I'm hopeless.", "The garden centre had a sale on {plant}s."],
    },
    {
        "id": "show",
        "say": [
            "We binged all of {show} over the weekend, that finale!",
            "Finished {show} last night, I need a second season now.",
        ],
        "questions": [("single", "What series did {A} watch in one go?", ["say"])],
        "distract": [
            "Everyone at work talks about TV shows I haven't seen.",
            "Our streaming subscription expired, so no telly this week.",
        ],
    },
    {
        "id": "nursery",
        "say": [
            "We painted the baby's room {colour} this weekend, it looks so calm.",
            "The nursery is done — {colour} walls and a little star lamp.",
        ],
        "questions": [("single", "What colour did {A} choose for the baby's bedroom?", ["say"])],
        "distract": [
            "The paint shop had hundreds of shades, I was overwhelmed.",
            "Our landlord won't let us paint the walls.",
        ],
    },
    {
        "id": "race",
        "say": ["I registered for the {race}, training starts now!", "Signed up for the {race}. No backing out."],
        "later": [
            "Crossed the line at the {race} in {finish}! Legs are jelly.",
            "Done! Finished the {race}, {finish}, I cried a bit at the end.",
        ],
        "questions": [
            ("multi", "How long did it take {A} to complete the running event they signed up for?", ["later"]),
            ("multi", "Which race did {A} enter and how did it go?", ["say", "later"]),
            ("temporal", "When did {A} run the {race}?", ["later"]),
        ],
        "distract": [
            "Saw loads of runners in the park this morning, some big event.",
            "My running shoes are worn out already.",
        ],
    },
    {
        "id": "tooth",
        "say": [
            "{kid} lost a front tooth at breakfast today, the tooth fairy owes her big.",
            "Milestone: {kid}'s first wobbly tooth finally came out!",
        ],
        "questions": [("single", "Which of {A}'s children lost a tooth?", ["say"])],
        "distract": ["Dentist appointment tomorrow, dreading it.", "{kid} wants a pet hamster now, no way."],
    },
    {
        "id": "lost",
        "say": [
            "Left my {item} on the train AGAIN. Lost property has it, thankfully.",
            "I can't find my {item} anywhere, I think I left them at the café.",
        ],
        "questions": [("single", "What did {A} misplace?", ["say"])],
        "distract": ["The train was so crowded I had to stand the whole way."],
    },
    {
        "id": "concert",
        "say": [
            "Saw {band} live at {venue} last night, what a show!",
            "{band} played {venue} and we were right at the front.",
        ],
        "questions": [
            ("single", "Which group did {A} see perform {month}?", ["say"]),
            ("single", "Where did {A} watch {band} play?", ["say"]),
        ],
        "distract": [
            "Tickets for {band} sold out in minutes, so annoying.",
            "The neighbours were blasting music until 2am.",
        ],
        "repeat": 2,
    },
    {
        "id": "recipe",
        "say": [
            "I finally nailed Grandma's {dish} recipe, tasted just like hers.",
            "Made my grandmother's {dish} from her handwritten card — perfect first try.",
        ],
        "questions": [("single", "What family dish did {A} manage to recreate?", ["say"])],
        "distract": ["Burnt the {dish} tonight, ordered pizza instead."],
    },
    {
        "id": "language",
        "say": [
            "I'm doing {language} on an app every morning before work, 60-day streak.",
            "Trying to pick up {language} before our next holiday.",
        ],
        "questions": [("single", "Which foreign language is {A} practising?", ["say"])],
        "distract": ["The new hire at work speaks four languages, I'm in awe."],
    },
    {
        "id": "vegetarian",
        "say": ["I'm going vegetarian from this month, wish me luck.", "Decided to stop eating meat. Day one today!"],
        "later": [
            "Okay I caved, I missed {meat} way too much. Back to eating meat.",
            "The veggie experiment is over. {meat} won.",
        ],
        "questions": [
            ("change", "Is {A} still avoiding meat?", ["say", "later"]),
            ("change", "Why did {A} stop the diet they had started?", ["later"]),
        ],
        "distract": ["There's a vegetarian place near the station that's always full."],
    },
    {
        "id": "device",
        "say": [
            "My {device} died for good, so I ordered a refurbished one.",
            "RIP my {device}. Screen went black and never came back.",
        ],
        "questions": [("single", "What gadget of {A}'s broke?", ["say"])],
        "distract": ["My mum keeps asking me to fix her {device}."],
    },
    {
        "id": "anniversary",
        "say": [
            "It's our {number} anniversary on Friday, {partner} booked a table at {restaurant}.",
            "{partner} and I are celebrating our {number} anniversary — dinner at {restaurant}!",
        ],
        "questions": [
            ("single", "Where are {A} and their partner going for their anniversary meal?", ["say"]),
            ("single", "Which anniversary are {A} and {partner} celebrating?", ["say"]),
        ],
        "distract": [
            "{restaurant} got a bad review in the paper, apparently.",
            "My parents' anniversary is coming up, need a card.",
        ],
    },
    {
        "id": "boardgame",
        "say": [
            "Game night was {boardgame} and I won for the first time ever!",
            "We've been obsessed with {boardgame} lately, playing it every Friday.",
        ],
        "questions": [("preference", "What tabletop game does {A} enjoy?", ["say"])],
        "distract": ["Lost all the pieces of our old chess set."],
    },
    {
        "id": "degree",
        "say": [
            "Thinking of going back to uni to study {degree}.",
            "I've been looking at part-time {degree} programmes.",
        ],
        "later": ["I applied for the {degree} course, fingers crossed!", "Application for {degree} is in. Scary!"],
        "questions": [
            ("change", "What subject is {A} hoping to get a degree in?", ["say", "later"]),
            ("multi", "Did {A} actually apply to go back to university?", ["later"]),
        ],
        "distract": ["Student loans are terrifying these days."],
    },
]

SIBLING_REL = ["sister", "brother", "cousin"]

#: Small talk: openers, everyday lines (which share common words with the topics), reactions.
OPENERS = [
    "Hey!",
    "Morning!",
    "Hi hi",
    "Long time no chat!",
    "Evening :)",
    "Hey you",
    "Hello!",
    "Yo",
    "Hiya",
    "Good morning",
    "How's it going?",
    "Happy Friday!",
    "Ugh, Mondays.",
    "Are you free later?",
]
SMALL_TALK = [
    "The weather has been so grey all week.",
    "Work was busy but fine.",
    "I finally cleaned the kitchen.",
    "Traffic was awful this morning.",
    "We had pizza for dinner, very lazy.",
    "I slept ten hours, amazing.",
    "The kids have a school trip next week.",
    "I need a holiday so badly.",
    "My phone battery is dying constantly.",
    "Did you watch the match last night?",
    "I'm trying to drink more water.",
    "The gym was packed today.",
    "We went for a long walk by the river.",
    "My boss is on holiday so it's quiet.",
    "Coffee number three already.",
    "I made soup, it was mostly okay.",
    "The train was late again.",
    "Our heating broke, brr.",
    "I'm reading a lot more lately.",
    "We visited my parents on Sunday.",
    "I have so much laundry to do.",
    "The dog next door escaped again.",
    "I bought way too many plants.",
    "Saw a great film at the cinema.",
    "My team at work is finally hiring.",
    "It's been raining for three days straight.",
    "I'm thinking about a haircut.",
    "The market had lovely strawberries.",
    "We're saving up for a trip.",
    "I keep forgetting to call the dentist.",
    "Tried a new recipe, not bad.",
    "The car needs a wash.",
    "My cousin is visiting next month.",
    "I started journaling again.",
    "We painted the fence.",
    "Running late, talk later?",
    "The neighbours had a party.",
    "I fixed the wobbly table finally.",
    "Music festival tickets went on sale.",
    "Lunch was a sad sandwich.",
    "I'm knitting a scarf, slowly.",
]
REACTIONS = [
    "Haha, same.",
    "Oh no!",
    "That's amazing!",
    "Wow, really?",
    "Love that for you.",
    "Ugh, sorry.",
    "Tell me everything.",
    "No way!",
    "Fair enough.",
    "So jealous.",
    "Sounds lovely.",
    "Good for you!",
    "That's wild.",
    "Oof.",
    "Ha, classic.",
    "Nice one!",
    "Aw, that's sweet.",
    "Keep me posted!",
    "I'd love to hear more.",
    "Seriously?",
]
CLOSERS = ["Anyway, gotta run!", "Talk soon!", "Catch up later x", "Night!", "Speak tomorrow?", "Bye for now!"]

PEOPLE = [
    ("Maya", "Jonas"),
    ("Priya", "Tom"),
    ("Elena", "Kwame"),
    ("Hugo", "Sofia"),
    ("Aisha", "Ben"),
    ("Lars", "Mei"),
    ("Carmen", "Dev"),
    ("Noor", "Felipe"),
    ("Grace", "Yusuf"),
    ("Ines", "Oliver"),
]

# The conversation a fact starts (dataset format 2): the friend picks the topic up and the teller talks
# on about it, as people do, without restating what a question asks ({A} the teller, {B} the friend;
# lines alternate B, A, B, A and a fact is followed by the first two or all four).  These turns share
# the fact's subject, and often its words, so the turn that holds the answer has neighbours on the
# same subject to be told apart from.
TALK: dict[str, list[str]] = {
    "pet": [
        "Oh my goodness, a dog! How are the kids taking it?",
        "They fight over who gets to walk her. I give it a month before that novelty wears off.",
        "Is she house-trained yet?",
        "Mostly. We had one accident on the rug, but she's learning fast. The rescue centre said she's about two.",
    ],
    "job": [
        "Congratulations!! That's a big step. How did the interviews go in the end?",
        "Four rounds, the last one with the whole team. I was shaking, but they seemed to like me.",
        "Will the commute be worse than now?",
        "A bit longer, but I can work from home on Fridays, so it evens out.",
    ],
    "trip": [
        "Welcome back! Was the weather kind to you?",
        "Mostly sunny, one day of rain where we hid in a museum. The food alone was worth the flight.",
        "Did you get any good photos of {city}?",
        "Hundreds. I'll send you the best ones once I've sorted through them.",
    ],
    "gear": [
        "Ooh, shopping before a trip is the best part.",
        "It was on sale too. The staff talked me out of the expensive one.",
        "Smart. You always overpack though.",
        "Not this time, I'm going carry-on only. Wish me luck.",
    ],
    "instrument": [
        "No way, that's brilliant. Have you played anything before?",
        "A bit of recorder at school, so basically nothing. My fingers don't do what I tell them yet.",
        "Is the teacher nice?",
        "Very patient. She laughs at my mistakes but in a kind way, and she makes me practise scales.",
    ],
    "vehicle": [
        "Really? I thought you loved that thing.",
        "I do, but the garage bills keep coming. Last month it was the brakes, this month the exhaust.",
        "Would you get another one or go without?",
        "No idea yet. The bus is fine for work, it's the weekends that worry me.",
    ],
    "cuisine": [
        "Ha, you and your spicy food. Remember when you made me try that chilli?",
        "I still maintain it was mild. You cried a little.",
        "I did not cry, my eyes were watering. Big difference.",
        "Sure. Next time I'm choosing the restaurant and you can order something plain.",
    ],
    "hate": [
        "Noted! Is it the taste or the texture?",
        "Both, honestly. Even a tiny bit ruins the whole plate for me.",
        "My mum puts it in everything, you'd hate her cooking.",
        "Then I'll bring my own sandwich when we visit, no offence to her.",
    ],
    "book": [
        "Oh, what's it about? I need something new to read.",
        "A family that runs a lighthouse, told from three points of view. The middle drags, then it grabs you.",
        "Is it sad? I can't do sad right now.",
        "A little bittersweet, but the ending is hopeful. I'll lend it to you when I'm done.",
    ],
    "injury": [
        "Ouch!! Have you seen a doctor?",
        "Went to urgent care, they said nothing is broken, just a bad sprain. Ice and rest for two weeks.",
        "So no more games for a while then.",
        "Nope, benched. The team is already short of players, they're not happy with me.",
    ],
    "move": [
        "Amazing news!! Is it bigger than your current place?",
        "An extra bedroom and a tiny balcony. The kitchen is old but we can live with it.",
        "Do you need help carrying boxes?",
        "Yes please, I'll bribe you with pizza. We're hiring a van for the big furniture.",
    ],
    "wedding": [
        "Aww, congratulations to them! Do you have to give a speech?",
        "I do, and I'm terrified. I've started collecting embarrassing childhood stories.",
        "Keep it short, nobody remembers the long ones.",
        "Good advice. Three minutes, two jokes, one sentimental bit, done.",
    ],
    "indirect": [
        "I've been meaning to try it, is it expensive?",
        "Not bad at all, and the portions are huge. We took leftovers home.",
        "Did you have to book a table?",
        "We walked in on a Tuesday, but I'd book for a weekend. It was packed when we left.",
    ],
    "gift": [
        "Aww, that's so sweet. Was it hard to find?",
        "I looked in three shops before giving up and ordering it online. It arrived the day before, just in time.",
        "Did the rest of the family chip in?",
        "My brother promised to pay half. Still waiting on that, as usual.",
    ],
    "allergy": [
        "Oh no, that must be a relief and a pain at the same time.",
        "Exactly. At least I know why I've felt rubbish for months. The doctor gave me a list of things to avoid.",
        "Do you need to carry medication now?",
        "Antihistamines in my bag at all times, and an inhaler just in case.",
    ],
    "course": [
        "Good for you! How many evenings a week?",
        "Just Wednesdays, two hours. There's homework though, which I did not expect at my age.",
        "Are the other people in the class nice?",
        "A real mix, a retired teacher, two students and a guy who works nights. We go for a drink after.",
    ],
    "volunteer": [
        "That's lovely. How did you get into it?",
        "A friend asked me to cover for her once and I just kept going back. The people there are wonderful.",
        "Is it tiring?",
        "Some weeks, yes. But I always leave in a better mood than I arrived.",
    ],
    "plant": [
        "After three years! What did you change?",
        "Moved it to the kitchen window and stopped drowning it. Apparently I was the problem all along.",
        "Send me a photo!",
        "Will do, it's honestly the proudest I've been of anything this year.",
    ],
    "show": [
        "Oh, is it worth starting? Everyone keeps talking about it.",
        "The first two episodes are slow, but stick with it. The last season is the best one.",
        "No spoilers please!",
        "My lips are sealed. Just know you'll want the whole weekend free.",
    ],
    "nursery": [
        "That sounds beautiful. Did you do it yourselves?",
        "Two coats, two very sore backs. We also put up shelves, one of them is slightly wonky.",
        "How long until the baby arrives?",
        "Seven weeks. The cot is built, the wardrobe is next on the list.",
    ],
    "race": [
        "Wow, how far have you run before?",
        "Ten kilometres once, two years ago, and I walked some of it. So this will be a stretch.",
        "Do you have a training plan?",
        "Three runs a week, one long one on Sundays. My legs already hate me.",
    ],
    "tooth": [
        "Aww, a milestone! Was she brave about it?",
        "She was thrilled, kept showing the gap to everyone at school. Very proud of herself.",
        "What's the going rate from the tooth fairy these days?",
        "Apparently a pound is not enough anymore according to her classmates. Inflation hits everyone.",
    ],
    "lost": [
        "Again?! You need a checklist before you get off.",
        "I know, I know. I was half asleep and my stop came up faster than I expected.",
        "At least people hand things in.",
        "True, I got lucky. I had to fill in a form and describe it in detail to get it back.",
    ],
    "concert": [
        "Jealous! How was the sound?",
        "Loud in the best way. They played all the old songs and two new ones.",
        "Did you get a t-shirt?",
        "Of course, and a poster. The queue for the merch stand was longer than the one for drinks.",
    ],
    "recipe": [
        "That's so special. Did you have her written recipe?",
        "Only half of it, the rest I pieced together from memory and a phone call with my aunt.",
        "What was the secret in the end?",
        "Patience, mostly. Cooking it slowly on low heat, just like she always said.",
    ],
    "language": [
        "Impressive! Can you hold a conversation yet?",
        "Ordering coffee and asking for directions, that's about it. The grammar is hard work.",
        "Are you planning to travel there?",
        "That's the dream. Practising with the app until then, and maybe a tutor later.",
    ],
    "vegetarian": [
        "Wow, big change. What made you decide?",
        "Partly health, partly the environment. I've been reading a lot about it.",
        "What will you do about barbecues?",
        "Halloumi and veggie skewers, and a lot of willpower. We'll see how long it lasts.",
    ],
    "device": [
        "Oh no, did you lose anything?",
        "Most of it was backed up, thank goodness. A few photos from last month are gone though.",
        "Refurbished is smart, they're half the price.",
        "And it comes with a year of warranty, so I'm not too worried.",
    ],
    "anniversary": [
        "Happy anniversary in advance! Any gifts planned?",
        "I framed a photo from our first holiday together. Cheesy, but it works every time.",
        "Where was that holiday again?",
        "A tiny island with one shop and no phone signal. Still our favourite trip.",
    ],
    "boardgame": [
        "Finally! Who usually wins?",
        "My brother-in-law, every single time. He reads the rulebook like it's a legal contract.",
        "How long did the game take?",
        "Almost three hours with all the arguing about rules. Worth it to see his face.",
    ],
    "degree": [
        "Really? That's a brave move. Full time or part time?",
        "Part time if I can, so I can keep working. It would take about four years.",
        "What does your partner think?",
        "Supportive, if a bit worried about money. We're going through the numbers this weekend.",
    ],
}

#: A second wording of every topic question (aligned with its ``questions``), written the way annotators of public
#: conversational-memory benchmarks write: from the statement, reusing its words ("Which band did Ana see live?"
#: for "Saw Big Thief live at the Roundhouse").  ``make_recall_data`` stores it as each question's ``literal``;
#: ``benchmarks/recall.py --wording literal`` asks it instead.  The paraphrased wording (the default) keeps the
#: keyword side weak; this one makes it strong, so weights chosen on one wording can be checked on the other.
LITERAL: dict[str, list[str]] = {
    "pet": [
        "What did {A} and the kids name the {breed}?",
        "What breed is {A}'s dog {pet}?",
        "What is the name of the {breed} {A} adopted?",
    ],
    "job": [
        "Which company did {A} sign with to lead the {team} team?",
        "Which team will {A} be leading at {company}?",
        "When did {A} say yes to the job at {company}?",
    ],
    "trip": [
        "Which city did {A} come back from {month}, where the {sight} was the highlight?",
        "What was the highlight of {A}'s trip to {city}?",
        "When did {A} get home from the trip to {city}?",
    ],
    "gear": ["What new travel gear did {A} buy {gap} before the trip to {city}?"],
    "instrument": [
        "What lessons did {A} sign up for, and which song did they finally play all the way through?",
        "Which song can {A} finally play all the way through on the {instrument}?",
        "Which evening are {A}'s {instrument} lessons?",
    ],
    "vehicle": [
        "Did {A} end up selling the {vehicle}?",
        "What did {A} decide about selling the {vehicle} after the repairs?",
    ],
    "cuisine": ["What food could {A} eat every day?", "Which cooking is {A}'s comfort food?"],
    "hate": ["What can't {A} stand the taste of?"],
    "book": ["Which book by {author} is {A} reading?", "Who is the author of {book}, which {A} is reading?"],
    "injury": ["How did {A} hurt their {bodypart}?", "What did {A} hurt playing {sport}?"],
    "move": ["Which neighbourhood is {A} moving to?", "When did {A} sign the lease on the new flat?"],
    "wedding": ["Which of {A}'s siblings is getting married?", "Which {sibling_rel} of {A}'s just got engaged?"],
    "indirect": [
        "Did {A} go to the new {place} on {street}, and what did they think of it?",
        "What dish did {A} order at the {place} on {street}?",
    ],
    "gift": ["What did {A} get their dad for his birthday?"],
    "allergy": ["What is {A} allergic to?", "What did {A}'s allergy tests show?"],
    "course": ["What evening class did {A} enrol in?"],
    "volunteer": ["Where does {A} volunteer on Sunday mornings?"],
    "plant": ["Which of {A}'s plants finally flowered?"],
    "show": ["Which show did {A} binge over the weekend?"],
    "nursery": ["What colour did {A} paint the baby's room?"],
    "race": [
        "What was {A}'s finishing time in the {race}?",
        "Which race did {A} sign up for, and what was their time?",
        "When did {A} finish the {race}?",
    ],
    "tooth": ["Which of {A}'s kids lost a tooth?"],
    "lost": ["What did {A} lose or leave behind?"],
    "concert": ["Which band did {A} see live {month}?", "Where did {A} see {band} live?"],
    "recipe": ["Which of Grandma's recipes did {A} finally nail?"],
    "language": ["Which language is {A} learning on an app?"],
    "vegetarian": ["Is {A} still vegetarian?", "Why did {A} go back to eating meat?"],
    "device": ["Which of {A}'s devices died?"],
    "anniversary": [
        "Where did {partner} book a table for {A}'s anniversary?",
        "Which anniversary are {A} and {partner} celebrating at {restaurant}?",
    ],
    "boardgame": ["Which board game does {A} play on game night?"],
    "degree": ["What degree is {A} thinking of going back to uni for?", "Did {A} apply for the {degree} course?"],
}

# Questions over everything one person said on a theme (dataset format 3), as in "What activities does
# she do?": the evidence is every fact of these topics that person told (at least two, in different
# sessions), so a ranking must find several turns, not the best one.  Each theme has paraphrased
# wordings (one is picked) and one literal wording; {A} is the person.
AGGREGATES: list[dict[str, Any]] = [
    {
        "id": "learning",
        "topics": ["instrument", "course", "language", "degree"],
        "ask": ["What has {A} been trying to learn?", "Which new skills is {A} working on?"],
        "literal": "Which lessons, classes, courses or languages has {A} signed up for or started?",
    },
    {
        "id": "pastimes",
        "topics": ["boardgame", "volunteer", "plant", "show", "book", "race", "recipe"],
        "ask": ["How does {A} like to spend free time?", "What does {A} do for fun?"],
        "literal": "What activities and hobbies does {A} do in their spare time?",
    },
    {
        "id": "family",
        "topics": ["wedding", "tooth", "nursery", "anniversary", "pet", "gift"],
        "ask": ["What family news has {A} shared?", "What's been going on at home for {A}?"],
        "literal": "What has {A} said about their family: kids, partner, siblings, dad, pets?",
    },
    {
        "id": "health",
        "topics": ["injury", "allergy"],
        "ask": ["What health problems has {A} had?", "Has {A} had any trouble with their health?"],
        "literal": "What injuries or allergies has {A} had?",
    },
    {
        "id": "food",
        "topics": ["cuisine", "hate", "allergy"],
        "ask": ["What should someone cooking for {A} keep in mind?", "What does {A} like and not like to eat?"],
        "literal": "What food does {A} love, hate or have to avoid?",
    },
    {
        "id": "travel",
        "topics": ["trip"],
        "ask": ["Which places has {A} visited?", "Where has {A} been on holiday?"],
        "literal": "Which cities has {A} come back from trips to?",
    },
    {
        "id": "music",
        "topics": ["concert"],
        "ask": ["Which artists has {A} seen perform?", "Who has {A} watched on stage?"],
        "literal": "Which bands has {A} seen live?",
    },
]
