#!/usr/bin/env python3
"""Handwritten-looking notebook pages with ground truth, for scoring nib's OCR (issue 12).

Each page is known text drawn with one of Debian's handwriting-like fonts onto ruled paper, with
hand-drawn checkboxes (empty, ticked, crossed, scribbled, light or partial ticks), bullets and an
underlined heading, then rotated, blurred and noised like a scan. Next to every page goes
`STEM.truth.json` with the text, kind and status of every line. Everything follows from the seed:
the same arguments give the same bytes (with the pinned Pillow and numpy).

    generate.py --out DIR --count N --seed S [--pdf-pages K]

writes N pages (most as STEM.png, about one in eight as a single-page image-only STEM.pdf) and,
with --pdf-pages K, one more K-page image-only PDF (a whole notebook exported at once). See
tests/ocr/README.md for the truth format.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

# ---- Fonts ---------------------------------------------------------------------------------

# The Debian packages the issue names, and the faces of each that look handwritten (paths under
# the font directory). A page uses one face of one package; packages take turns (shuffled), so
# every package appears once in every run of six pages.
FONT_PACKAGES: dict[str, list[str]] = {
    "fonts-dkg-handwriting": [
        "truetype/fifthhorseman/dkg.ttf",
        "truetype/fifthhorseman/dkgIt.ttf",
        "truetype/fifthhorseman/dkgBd.ttf",
    ],
    "fonts-breip": ["truetype/breip/Breip.ttf"],
    "fonts-femkeklaver": ["truetype/femkeklaver/femkeklaver.ttf"],
    "fonts-bwht": [
        "opentype/bwht/BecauseWeBuild-Regular.otf",
        "opentype/bwht/BecauseWeConnect-Regular.otf",
        "opentype/bwht/BecauseWeCreate-Regular.otf",
        "opentype/bwht/BecauseWeLearn-Regular.otf",
        "opentype/bwht/BecauseWeMentor-Regular.otf",
        "opentype/bwht/BecauseWeOrganize-Regular.otf",
    ],
    "fonts-humor-sans": ["truetype/humor-sans/Humor-Sans.ttf"],
    "fonts-comic-neue": [
        "opentype/comic-neue/ComicNeue-Regular.otf",
        "opentype/comic-neue/ComicNeue-Italic.otf",
        "opentype/comic-neue/ComicNeue-Light.otf",
        "opentype/comic-neue/ComicNeue-Bold.otf",
    ],
}


class Fonts:
    """The installed faces, sized fonts, glyph coverage and rendered glyphs (all cached)."""

    def __init__(self, font_dir: Path, allow_missing: bool):
        self.faces: dict[str, list[Path]] = {}
        missing = []
        for package, rels in FONT_PACKAGES.items():
            found = [font_dir / r for r in rels if (font_dir / r).is_file()]
            if found:
                self.faces[package] = found
            else:
                missing.append(package)
        if missing and not allow_missing:
            sys.exit(
                f"generate.py: font packages not installed: {', '.join(missing)} "
                "(apt-get install them, or pass --allow-missing-fonts for an easier set)"
            )
        if not self.faces:
            sys.exit(f"generate.py: none of the handwriting fonts is under {font_dir}")
        self._fonts: dict[tuple[Path, int], ImageFont.FreeTypeFont] = {}
        self._covers: dict[tuple[Path, str], bool] = {}
        self._glyphs: dict[tuple[Path, int, str], tuple[Image.Image, int, int, float]] = {}
        self._cap: dict = {}

    def font(self, path: Path, size: int) -> ImageFont.FreeTypeFont:
        key = (path, size)
        if key not in self._fonts:
            self._fonts[key] = ImageFont.truetype(str(path), size)
        return self._fonts[key]

    def covers(self, path: Path, ch: str) -> bool:
        """Whether the face has a glyph for `ch` (not its .notdef box, not nothing)."""
        if ch == " ":
            return True
        key = (path, ch)
        if key not in self._covers:
            f = self.font(path, 48)
            mask = f.getmask(ch)
            notdef = f.getmask("\ue000")
            blank = mask.getbbox() is None
            same = mask.size == notdef.size and bytes(mask) == bytes(notdef)
            self._covers[key] = not blank and not same
        return self._covers[key]

    def covers_all(self, path: Path, text: str) -> bool:
        return all(self.covers(path, ch) for ch in text)

    def cap_ratio(self, path: Path) -> float:
        """Height of a capital H per unit of font size."""
        if path not in self._cap:
            l, t, r, b = self.font(path, 200).getbbox("H", anchor="ls")
            self._cap[path] = max(0.3, -t / 200)
        return self._cap[path]

    def x_ratio(self, path: Path) -> float:
        """Height of the small letters (x-height; small caps in the all-caps faces) per unit
        of font size."""
        key = (path, "x")
        if key not in self._cap:
            l, t, r, b = self.font(path, 200).getbbox("xnuv", anchor="ls")
            self._cap[key] = max(0.2, -t / 200)
        return self._cap[key]

    def glyph(self, path: Path, size: int, ch: str) -> tuple[Image.Image, int, int, float]:
        """The glyph as an L mask, the offset of its top-left from the pen (left, baseline)
        position, and the advance."""
        key = (path, size, ch)
        if key not in self._glyphs:
            f = self.font(path, size)
            l, t, r, b = f.getbbox(ch, anchor="ls")
            pad = 3
            im = Image.new("L", (max(1, r - l + 2 * pad), max(1, b - t + 2 * pad)), 0)
            ImageDraw.Draw(im).text((pad - l, pad - t), ch, font=f, fill=255, anchor="ls")
            self._glyphs[key] = (im, l - pad, t - pad, f.getlength(ch))
        return self._glyphs[key]


# ---- Text ----------------------------------------------------------------------------------

NAMES = """Dana Priya Maria Tom Kenji Amara Lukas Sofia Omar Chen
Aisha Ben Carla Diego Elena Farid Greta Hugo Ines Jonas Kaito Lena Mateo Nadia Oskar Paula Quentin
Rosa Samir Tanja Uwe Vera Wei Xavier Yuki Zoe Anna Bruno Clara Dev Emil Fatima Gabriel Hana Ivan
Julia Karim Lars Mia Nils Olga Pedro Rui Sara Theo Ulla Viktor Wanda Yusuf Zara Ahmed Beatriz Colin
Dmitri Erin Fiona Gustav Helga Ingrid Jamal Kofi Leila Marco Noor Pablo Ravi Stefan Tariq
Valentina Willem Ximena Yara""".split()
TITLES = ["Dr. Weber", "Mr. Park", "Mrs. Lee", "Prof. Adler", "Ms. Novak", "Dr. Osei"]
CITIES = """Berlin Lisbon Osaka Nairobi Porto Lyon Leeds Graz Gdansk Bergen Seville Utrecht Boston
Denver Austin Quebec Hobart Kyoto Busan Accra Lagos Cairo Tunis Malmo Turku Riga Cork Bilbao Bari
Split Zurich Munich Hamburg Prague Vienna Krakow Oslo Madrid Dublin Ghent""".split()
COMPANIES = """Acme Globex Initech Umbrella Hooli Vandelay Wonka Stark Wayne Cyberdyne Soylent
Tyrell Nakatomi Oscorp Aperture Monarch Dunder Pied-Piper Massive Gringotts Contoso Fabrikam
Northwind Tailspin Litware Adatum Proseware""".split()
PROJECTS = """Atlas Falcon Juniper Orion Pebble Quartz Mosaic Harbor Lantern Nimbus Comet Beacon
Cedar Delta Ember Fjord Glacier Horizon Iris Kestrel Lotus Meridian Nova Onyx Prism Raven Sierra
Tundra Vortex Willow""".split()
GROCERIES = """milk eggs bread butter coffee tea rice pasta tomatoes onions garlic apples bananas
lemons yogurt cheese oats flour sugar salt pepper olive-oil spinach carrots potatoes chicken tofu
beans lentils cereal honey jam batteries tissues soap shampoo toothpaste detergent foil napkins
avocados basil mint ginger cucumbers peppers mushrooms salmon tuna crackers chocolate juice water
wine beer sponges lightbulbs""".split()
GROCERIES = [g.replace("-", " ") for g in GROCERIES]
THINGS = """parcel keys charger umbrella laptop passport tickets receipts books jacket shoes
glasses watch cables adapter printer-ink stamps envelopes gift flowers cake bike helmet ladder
drill paint curtains lamp rug plants seeds frame camera tripod headphones backpack suitcase
blanket pillow towels""".split()
THINGS = [t.replace("-", " ") for t in THINGS]
SHOPS = """IKEA Aldi Lidl Rewe Tesco Boots the-pharmacy the-post-office the-bakery the-hardware-store
Amazon the-library the-bank the-garage the-tailor the-florist""".split()
SHOPS = [s.replace("-", " ") for s in SHOPS]
TOPICS = [t.replace("-", " ") for t in """budget roadmap hiring pricing launch onboarding contract
renewal migration backups offsite retro newsletter survey timeline invoices quarterly-report
security-audit release-notes holiday-plans school-trip car-insurance tax-return rent-increase
wedding birthday-party vacation kitchen-tiles garden-shed the-leak the-new-logo user-interviews
the-API-spec the-demo the-beta the-pilot vendor-quotes the-move performance-review
travel-booking the-conference the-workshop office-keys parking the-printer Q3-targets
the-dashboard the-data-export support-tickets the-outage the-handover""".split()]
DOCS = [d.replace("-", " ") for d in """slides proposal draft minutes agenda invoice quote
spreadsheet report contract brief spec CV cover-letter budget-sheet floor-plan checklist
design-doc test-plan press-release blog-post FAQ one-pager estimate timesheet""".split()]
BILLS = [b.replace("-", " ") for b in """rent electricity water-bill internet phone-bill
council-tax insurance gym parking-fine dentist-bill car-loan credit-card school-fees
subscription""".split()]
APPOINTMENTS = [a.replace("-", " ") for a in """dentist doctor haircut vet car-service eye-test
physio massage table-for-4 flights hotel train-tickets cinema tennis-court meeting-room
babysitter plumber electrician""".split()]
COMPONENTS = [c.replace("-", " ") for c in """login-page search export-job billing the-API
sync-service mobile-app the-importer PDF-viewer settings checkout the-scheduler dashboard
notifications the-CLI""".split()]
METRICS = ["signups", "churn", "NPS", "revenue", "latency", "uptime", "conversion", "tickets"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
WEEKDAYS_SHORT = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
MONTHS_SHORT = [m[:3] for m in MONTHS]
CHORES = [
    "Water the plants", "Take out the recycling", "Clean the fridge", "Defrost the freezer",
    "Change the bed sheets", "Fix the dripping tap", "Hang the shelves", "Sort the mail",
    "Back up the laptop", "Update my CV", "Wash the car", "Mow the lawn", "Walk the dog",
    "Do the laundry", "Vacuum upstairs", "Empty the dishwasher", "Replace the smoke alarm battery",
    "Book the MOT", "Pack for the trip", "Read chapter 4", "Practice guitar", "Go for a run",
    "Meditate 10 min", "Tidy the desk", "Print boarding passes", "Charge the camera",
]
OPINIONS = ["looks good", "too expensive", "needs more data", "on hold", "blocked by legal",
            "ship it", "revisit next week", "not a priority", "going well", "behind schedule",
            "waiting for feedback", "agreed", "still open", "done, needs review"]
ACTIONS = ["send the numbers", "update the spec", "book the room", "call the vendor",
           "share the slides", "draft the email", "check the logs", "fix the typo",
           "review the PR", "ask finance", "write the summary", "order samples",
           "confirm the date", "follow up with legal"]
DECISIONS = ["go with the cheaper quote", "move the launch to May", "hire one more engineer",
             "keep the old logo", "skip the offsite", "switch to weekly syncs",
             "drop the mobile app for now", "use the blue design", "freeze the scope",
             "start the beta on Monday", "split the project in two"]
RISKS = ["supplier delay", "holiday season", "budget cut", "key person away", "legal review",
         "data quality", "scope creep", "server costs", "late sign-off"]


class Content:
    """Notebook text drawn from word lists and templates with a page's random stream."""

    def __init__(self, rng: random.Random, date: datetime.date):
        self.r = rng
        self.date = date
        self.used: dict[str, set[int]] = {}

    def pick(self, items):
        return self.r.choice(items)

    def name(self) -> str:
        return self.pick(TITLES) if self.r.random() < 0.08 else self.pick(NAMES)

    def time(self) -> str:
        r = self.r
        h = r.choice([7, 8, 9, 9, 10, 10, 11, 12, 13, 14, 14, 15, 16, 17, 18, 19, 20])
        m = r.choice([0, 0, 0, 15, 30, 30, 45, 10, 20, 50])
        style = r.random()
        if style < 0.55:
            return f"{h}:{m:02d}"
        if style < 0.75:
            hh = h if h <= 12 else h - 12
            ap = "am" if h < 12 else "pm"
            return f"{hh}{ap}" if m == 0 else f"{hh}:{m:02d}{ap}"
        if style < 0.9:
            return f"{h}h{m:02d}" if m else f"{h}h"
        return f"{h}.{m:02d}"

    def a_date(self) -> str:
        r = self.r
        d = self.date + datetime.timedelta(days=r.randint(-3, 40))
        style = r.random()
        if style < 0.25:
            return f"{d.day}/{d.month}"
        if style < 0.45:
            return f"{MONTHS_SHORT[d.month - 1]} {d.day}"
        if style < 0.6:
            return f"{d.day} {MONTHS[d.month - 1]}"
        if style < 0.72:
            return d.isoformat()
        if style < 0.85:
            return f"{d.day:02d}.{d.month:02d}."
        return f"{WEEKDAYS_SHORT[d.weekday()]} {d.day}th" if d.day not in (1, 2, 3, 21, 22, 23, 31) \
            else f"{WEEKDAYS_SHORT[d.weekday()]} {d.day}"

    def amount(self) -> str:
        r = self.r
        v = r.choice([r.randint(5, 99), r.randint(100, 2500), r.randint(10, 400)])
        cents = r.choice([0, 0, 50, 99, 25, r.randint(1, 99)])
        style = r.random()
        num = f"{v}.{cents:02d}" if cents else f"{v}"
        if style < 0.4:
            return f"${num}"
        if style < 0.6:
            return f"{num} EUR"
        if style < 0.75:
            return f"EUR {num}"
        if style < 0.9:
            return f"{v},{cents:02d}" if cents else f"{v},-"
        return f"{num} USD"

    def number(self) -> str:
        r = self.r
        return str(r.choice([r.randint(2, 12), r.randint(10, 99), r.randint(100, 9999)]))

    def phone(self) -> str:
        r = self.r
        return r.choice([
            f"0{r.randint(150, 179)} {r.randint(1000000, 9999999)}",
            f"{r.randint(200, 999)}-{r.randint(100, 999)}-{r.randint(1000, 9999)}",
            f"ext. {r.randint(100, 899)}",
        ])

    def maybe_lower(self, s: str) -> str:
        return s[0].lower() + s[1:] if self.r.random() < 0.2 and s[:2] != s[:2].upper() else s

    def fresh(self, kind: str, makers) -> str:
        """One of `makers`, not yet used for this kind on this page while others are left."""
        used = self.used.setdefault(kind, set())
        if len(used) >= len(makers):
            used.clear()
        i = self.r.choice([k for k in range(len(makers)) if k not in used])
        used.add(i)
        return makers[i]()

    def task(self) -> str:
        r = self.r
        s = self.fresh("task", [
            lambda: f"Buy {self.pick(GROCERIES)}, {self.pick(GROCERIES)} and {self.pick(GROCERIES)}",
            lambda: f"Call {self.name()} about {self.pick(TOPICS)}",
            lambda: f"Call {self.pick(SHOPS)} ({self.phone()})",
            lambda: f"Email {self.name()} the {self.pick(DOCS)}",
            lambda: f"Send {self.pick(DOCS)} to {self.name()} by {self.pick(WEEKDAYS)}",
            lambda: f"Pay {self.pick(BILLS)} - {self.amount()}",
            lambda: f"Book {self.pick(APPOINTMENTS)} for {self.pick(WEEKDAYS_SHORT)} {self.time()}",
            lambda: f"{self.pick(APPOINTMENTS).capitalize()} {self.a_date()} at {self.time()}",
            lambda: f"Review {self.name()}'s {self.pick(DOCS)}",
            lambda: f"Fix bug #{self.number()} in {self.pick(COMPONENTS)}",
            lambda: f"Prep slides for {self.pick(PROJECTS)} {self.pick(['sync', 'review', 'kickoff', 'demo'])}",
            lambda: f"Renew {self.pick(['passport', 'library card', 'parking permit', 'car insurance', 'domain', 'visa'])} before {self.a_date()}",
            lambda: f"Order {r.randint(2, 12)} {self.pick(THINGS)} from {self.pick(SHOPS)}",
            lambda: f"Ask {self.name()} re: {self.pick(TOPICS)}",
            lambda: f"Return {self.pick(THINGS)} to {self.pick(SHOPS)}",
            lambda: self.pick(CHORES),
            lambda: self.pick(CHORES),
            lambda: f"Finish {self.pick(DOCS)} draft (v{r.randint(2, 5)})",
            lambda: f"Reply to {self.name()}'s email",
            lambda: f"Submit expenses #{self.number()} ({self.amount()})",
            lambda: f"Pick up {self.pick(THINGS)} at {self.time()}",
            lambda: f"Get {self.pick(GROCERIES)} + {self.pick(GROCERIES)}",
            lambda: f"Check {self.pick(METRICS)} for {self.pick(PROJECTS)}",
            lambda: f"Text {self.name()}: {self.pick(['dinner', 'lunch', 'drinks', 'coffee'])} on {self.pick(WEEKDAYS)}?",
            lambda: f"Schedule 1:1 with {self.name()}",
            lambda: f"Deploy {self.pick(COMPONENTS)} fix to staging",
            lambda: f"Birthday gift for {self.name()} (max {self.amount()})",
            lambda: f"Confirm {self.pick(APPOINTMENTS)} with {self.name()}",
            lambda: f"Print {r.randint(2, 30)} copies of the {self.pick(DOCS)}",
            lambda: f"Cancel {self.pick(['gym', 'magazine', 'streaming', 'newspaper', 'phone'])} subscription",
            lambda: f"Transfer {self.amount()} to {self.name()}",
            lambda: f"Write up notes from {self.pick(WEEKDAYS)}'s {self.pick(['call', 'meeting', 'workshop', 'retro'])}",
            lambda: f"Move {self.pick(TOPICS)} meeting to {self.time()}",
            lambda: f"Sign {self.pick(COMPANIES)} {self.pick(['contract', 'NDA', 'quote', 'invoice'])}",
            lambda: f"Get {self.pick(['cash', 'stamps', 'a new SIM', 'fuel', 'keys cut'])} on the way home",
            lambda: f"Look into {self.pick(TOPICS)} for {self.pick(COMPANIES)}",
            lambda: f"Upload photos from {self.pick(CITIES)}",
            lambda: f"Take {self.pick(THINGS)} to {self.name()}'s",
            lambda: f"Plan {self.pick(['menu', 'route', 'agenda', 'budget', 'seating'])} for {self.a_date()}",
            lambda: f"Update {self.pick(PROJECTS)} timeline ({r.randint(2, 9)} weeks)",
            lambda: f"Clear inbox (<{r.randint(5, 50)})",
        ])
        return self.maybe_lower(s)

    def bullet(self) -> str:
        r = self.r
        s = self.fresh("bullet", [
            lambda: f"{self.name()}: {self.pick(TOPICS)} {self.pick(OPINIONS)}",
            lambda: f"{self.name()} will {self.pick(ACTIONS)} by {self.pick(WEEKDAYS)}",
            lambda: f"Budget: {self.amount()}",
            lambda: f"Deadline {self.a_date()}",
            lambda: f"Next meeting {self.pick(WEEKDAYS)} {self.time()}",
            lambda: f"{self.pick(TOPICS).capitalize()} - {self.pick(OPINIONS)}",
            lambda: f"Q{r.randint(1, 4)} goal: {r.randint(2, 60)}% more {self.pick(METRICS)}",
            lambda: f"{r.randint(2, 6)}x {self.pick(GROCERIES)}",
            lambda: f"Room {r.randint(1, 5)}.{r.randint(1, 40):02d}, {self.time()}",
            lambda: f"Decision: {self.pick(DECISIONS)}",
            lambda: f"Risk: {self.pick(RISKS)}",
            lambda: f"With {self.name()}, {self.name()} and {self.name()}",
            lambda: self.pick(GROCERIES),
            lambda: self.pick(GROCERIES),
            lambda: f"{self.pick(CITIES)} trip ~{self.amount()}",
            lambda: f"{self.pick(COMPANIES)} quote: {self.amount()}",
            lambda: f"Call back {self.phone()}",
            lambda: f"{self.pick(METRICS).capitalize()} up {r.randint(1, 40)}% since {self.pick(MONTHS)}",
            lambda: f"{self.pick(METRICS).capitalize()} down to {r.randint(1, 99)}",
            lambda: f"Action: {self.name()} to {self.pick(ACTIONS)}",
            lambda: f"Open question: {self.pick(TOPICS)}?",
            lambda: f"{r.randint(2, 40)} people, {self.amount()} each",
            lambda: f"Owner: {self.name()}",
            lambda: f"Ship date {self.a_date()} (tentative)",
            lambda: f"{self.pick(PROJECTS)} v{r.randint(1, 4)}.{r.randint(0, 9)} is out",
            lambda: f"{self.pick(THINGS).capitalize()} for {self.name()}",
            lambda: f"{r.randint(100, 900)}g {self.pick(['flour', 'sugar', 'butter', 'rice', 'cheese', 'pasta'])}",
            lambda: f"Ref. {self.pick(['INV', 'PO', 'TK', 'ORD'])}-{r.randint(1000, 99999)}",
            lambda: f"{self.pick(WEEKDAYS_SHORT)}-{self.pick(WEEKDAYS_SHORT)}: {self.pick(CITIES)}",
            lambda: f"{self.name()} out until {self.a_date()}",
        ])
        return self.maybe_lower(s)

    def text(self) -> str:
        r = self.r
        return self.fresh("text", [
            lambda: f"Met {self.name()} at {self.pick(CITIES)}, talked about {self.pick(TOPICS)}.",
            lambda: f"Remember to bring the {self.pick(THINGS)}!",
            lambda: f"{self.pick(WEEKDAYS)}: {self.pick(TOPICS)} at {self.time()}",
            lambda: f"Train leaves {self.time()} from platform {r.randint(1, 19)}",
            lambda: f"Ideas for the {self.pick(PROJECTS)} launch?",
            lambda: f"Total so far {self.amount()} (incl. tax)",
            lambda: f"Don't forget {self.name()}'s birthday on {self.a_date()}",
            lambda: f"{self.pick(COMPANIES)} said {self.pick(OPINIONS)}; {self.pick(ACTIONS)}.",
            lambda: f"{self.name()} thinks we should {self.pick(DECISIONS)}.",
            lambda: f"Wifi password: {self.pick(PROJECTS).lower()}{r.randint(10, 99)}",
            lambda: f"Flight {self.pick(['LH', 'BA', 'KL', 'AF', 'UA'])}{r.randint(100, 999)} lands {self.time()}",
            lambda: f"Why is {self.pick(COMPONENTS)} slow on {self.pick(WEEKDAYS)}s?",
            lambda: f"Ask about {self.pick(TOPICS)} - maybe {self.a_date()}?",
            lambda: f"{self.pick(['Great', 'Long', 'Busy', 'Quiet', 'Good'])} day. {self.name()} called at {self.time()}.",
            lambda: f"{self.name()} is in {self.pick(CITIES)} until {self.a_date()}.",
            lambda: f"The {self.pick(THINGS)} is in the {self.pick(['car', 'garage', 'top drawer', 'blue box', 'attic', 'office'])}.",
            lambda: f"Need {r.randint(2, 9)} more {self.pick(['chairs', 'volunteers', 'reviewers', 'tickets', 'boxes'])} for {self.pick(WEEKDAYS)}",
            lambda: f"Door code {r.randint(1000, 9999)}#, {self.pick(['2nd', '3rd', '4th', '5th'])} floor",
            lambda: f"Parking at {self.pick(CITIES)} station: {self.amount()}/day",
            lambda: f"{self.pick(PROJECTS)} is {r.randint(2, 14)} days late, {self.pick(OPINIONS)}.",
            lambda: f"Good call with {self.name()} - {self.pick(OPINIONS)}!",
            lambda: f"If {self.pick(TOPICS)} slips, we {self.pick(DECISIONS)}.",
            lambda: f"Order no. {r.randint(10000, 999999)}, arrives {self.pick(WEEKDAYS)}",
            lambda: f"{self.name()}'s number: {self.phone()}",
            lambda: f"Read: \"{self.pick(['Deep Work', 'Dune', 'Atomic Habits', 'Middlemarch', 'The Hobbit', 'Range'])}\", ch. {r.randint(1, 20)}",
            lambda: f"Slept {r.randint(5, 9)}h, ran {r.randint(2, 15)} km.",
            lambda: f"Weight {r.randint(55, 95)}.{r.randint(0, 9)} kg, steps {r.randint(3, 15)}k",
            lambda: f"{self.pick(['Lunch', 'Dinner', 'Coffee'])} with {self.name()} was {self.pick(['fun', 'useful', 'long', 'great', 'short'])}.",
            lambda: f"Kids: {self.pick(['swimming', 'piano', 'football', 'dentist', 'school play'])} {self.pick(WEEKDAYS_SHORT)} {self.time()}",
            lambda: f"Tickets: row {r.randint(1, 30)}, seats {r.randint(1, 20)}-{r.randint(21, 40)}",
            lambda: f"Mileage {r.randint(10000, 150000)} at {self.a_date()}",
            lambda: f"Why did {self.pick(METRICS)} drop in {self.pick(MONTHS)}?",
        ])

    def heading(self, first: bool) -> str:
        r = self.r
        d = self.date
        return self.fresh("heading", [
            lambda: "Errands",
            lambda: "To do",
            lambda: "TODO",
            lambda: "Today",
            lambda: "This week",
            lambda: "Work",
            lambda: "Home",
            lambda: f"Meeting w/ {self.name()}",
            lambda: f"{self.pick(PROJECTS)} sync",
            lambda: f"Notes {d.day}/{d.month}" if first else "Notes",
            lambda: f"{WEEKDAYS[d.weekday()]} {d.day} {MONTHS_SHORT[d.month - 1]}" if first else "Later",
            lambda: f"{d.isoformat()}" if first else "Tomorrow",
            lambda: "Ideas",
            lambda: "Weekend",
            lambda: f"Trip to {self.pick(CITIES)}",
            lambda: f"Standup {WEEKDAYS_SHORT[d.weekday()]}" if first else "Standup",
            lambda: f"1:1 {self.name()}",
            lambda: f"Q{r.randint(1, 4)} planning",
            lambda: "Follow-ups",
            lambda: "Groceries",
            lambda: "Shopping list",
            lambda: f"{self.pick(COMPANIES)} call",
            lambda: f"Budget {MONTHS[d.month - 1]}",
            lambda: f"{self.pick(PROJECTS)} - open items",
            lambda: "Questions",
            lambda: "Reading",
            lambda: f"{self.name()}'s party",
            lambda: "Before the holidays",
            lambda: f"Week {d.isocalendar()[1]}",
        ])


# ---- Drawing helpers -----------------------------------------------------------------------


def wobbly(points, nrng: np.random.Generator, amp: float, step: float = 5.0):
    """A polyline through `points`, densified, with a smooth sideways wobble of about `amp` px."""
    out = []
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        length = math.hypot(x1 - x0, y1 - y0)
        n = max(2, int(length / step))
        nx, ny = (-(y1 - y0) / length, (x1 - x0) / length) if length else (0.0, 0.0)
        for i in range(n):
            out.append([x0 + (x1 - x0) * i / n, y0 + (y1 - y0) * i / n, nx, ny])
    x1, y1 = points[-1]
    out.append([x1, y1, out[-1][2] if out else 0.0, out[-1][3] if out else 0.0])
    arr = np.array(out, dtype=np.float64)
    s = np.linspace(0.0, 1.0, len(arr))
    f1, f2 = nrng.uniform(0.6, 1.6), nrng.uniform(2.0, 4.5)
    p1, p2 = nrng.uniform(0, 2 * math.pi, 2)
    off = amp * (0.65 * np.sin(2 * math.pi * f1 * s + p1) + 0.35 * np.sin(2 * math.pi * f2 * s + p2))
    off += np.convolve(nrng.normal(0, amp * 0.25, len(arr)), np.ones(3) / 3, mode="same")
    xs = arr[:, 0] + off * arr[:, 2]
    ys = arr[:, 1] + off * arr[:, 3]
    return list(zip(xs.tolist(), ys.tolist()))


def stroke(draw: ImageDraw.ImageDraw, pts, width: float, value: int):
    w = max(1, int(round(width)))
    draw.line(pts, fill=value, width=w, joint="curve")
    r = w / 2
    for x, y in (pts[0], pts[-1]):
        draw.ellipse((x - r, y - r, x + r, y + r), fill=value)


def jitter(nrng: np.random.Generator, p, s: float):
    return (p[0] + nrng.normal(0, s), p[1] + nrng.normal(0, s))


# ---- One page ------------------------------------------------------------------------------


@dataclass
class Line:
    kind: str  # heading | task | bullet | text
    text: str
    status: str | None = None  # open | done for tasks
    mark: str | None = None  # how the box or bullet was drawn (diagnostics only)
    bbox: list[int] = field(default_factory=list)


@dataclass
class Pen:
    color: tuple[int, int, int]
    width: float  # stroke width of hand-drawn marks, px
    thicken: bool  # whether the font's strokes are fattened (a broader pen)


class PageRenderer:
    def __init__(self, fonts: Fonts, index: int, seed: int, date: datetime.date,
                 package: str, stem: str):
        self.fonts = fonts
        self.r = random.Random(f"nib-ocr-page:{seed}:{index}")
        self.n = np.random.default_rng([seed & 0xFFFFFFFF, index, 0x0C5])
        self.date = date
        self.stem = stem
        self.package = package
        self.face = self.r.choice(fonts.faces[package])
        self.content = Content(self.r, date)

    def draw_text(self, mask: Image.Image, text: str, x: float, baseline: float, size: int,
                  slant: float, tilt: float, value: int):
        """Writes a line glyph by glyph (each a little resized, turned and lifted) into the ink
        mask, slanted and tilted. Returns its box (x0, y0, x1, y1), None when empty, and where
        the pen stopped."""
        r, n = self.r, self.n
        w, h = mask.size
        top = int(baseline - size * 1.6)
        bottom = int(baseline + size * 0.9)
        canvas = Image.new("L", (w, bottom - top), 0)
        by = baseline - top
        pen_x = x
        drift = 0.0
        for ch in text:
            if ch == " ":
                pen_x += self.fonts.font(self.face, size).getlength(" ") * r.uniform(0.85, 1.6)
                continue
            cs = max(8, int(round(size * n.normal(1.0, 0.035))))
            im, ox, oy, adv = self.fonts.glyph(self.face, cs, ch)
            drift = 0.8 * drift + n.normal(0, 0.9)
            angle = float(n.normal(0, 2.2))
            if abs(angle) > 0.3:
                cx, cy = im.size[0] / 2, im.size[1] / 2
                im2 = im.rotate(angle, resample=Image.BICUBIC, expand=True)
                ox2 = ox + cx - im2.size[0] / 2
                oy2 = oy + cy - im2.size[1] / 2
            else:
                im2, ox2, oy2 = im, ox, oy
            px = int(round(pen_x + ox2))
            py = int(round(by + oy2 + drift))
            canvas.paste(value, (px, py, px + im2.size[0], py + im2.size[1]), mask=im2)
            pen_x += adv * n.normal(1.0, 0.04) + n.normal(0, 0.6)
        # Slant (shear about the baseline) and tilt (the line rises or falls), in one affine map.
        canvas = canvas.transform(
            canvas.size, Image.AFFINE,
            (1.0, slant, -slant * by, tilt, 1.0, -tilt * x),
            resample=Image.BICUBIC,
        )
        if self.pen.thicken:
            canvas = canvas.filter(ImageFilter.MaxFilter(3))
        region = (0, top, w, bottom)
        merged = Image.fromarray(np.maximum(np.asarray(mask.crop(region)), np.asarray(canvas)))
        mask.paste(merged, region)
        bb = canvas.getbbox()
        box = None if bb is None else (bb[0], bb[1] + top, bb[2], bb[3] + top)
        return box, pen_x

    def checkbox(self, draw, x0: float, y1: float, b: float, status: str, value: int) -> str:
        """An open box with (x0, y1) its bottom-left corner, side b; ticked when done."""
        n, r = self.n, self.r
        pw = self.pen.width
        y0, x1 = y1 - b, x0 + b
        j = b * 0.06
        corners = [jitter(n, c, j) for c in ((x0, y0), (x1, y0), (x1, y1), (x0, y1))]
        start = r.randrange(4)
        seq = corners[start:] + corners[:start]
        first = seq[0]
        # Close the square, overshooting the first corner a little or stopping short.
        nxt = seq[1]
        t = r.uniform(-0.05, 0.25)
        close = (first[0] + (nxt[0] - first[0]) * t, first[1] + (nxt[1] - first[1]) * t)
        path = seq + [first, close] if t > 0 else seq + [first]
        if r.random() < 0.25:  # drawn as two strokes
            stroke(draw, wobbly(seq[:3], n, b * 0.02), pw, value)
            stroke(draw, wobbly(seq[2:] + [first], n, b * 0.02), pw, value)
        else:
            stroke(draw, wobbly(path, n, b * 0.025), pw, value)
        if status == "open":
            return "box-empty"
        kind = r.choices(["check", "x", "slash", "scribble", "small-check"],
                         weights=[44, 24, 10, 10, 12])[0]
        light = r.random() < 0.18
        v = int(value * r.uniform(0.4, 0.65)) if light else value
        w = max(1.0, pw * (0.7 if light else r.uniform(0.9, 1.4)))

        def P(fx, fy, s=0.05):
            return jitter(n, (x0 + fx * b, y0 + fy * b), s * b)

        if kind == "check":
            pts = [P(0.15, 0.5), P(0.42, 0.88), P(r.uniform(0.85, 1.3), -r.uniform(0.0, 0.4))]
            stroke(draw, wobbly(pts, n, b * 0.02, 3), w, v)
        elif kind == "small-check":  # partial: a short tick low in the box
            pts = [P(0.3, 0.62), P(0.45, 0.8), P(0.7, 0.42)]
            stroke(draw, wobbly(pts, n, b * 0.015, 3), w, v)
        elif kind == "x":
            e = r.uniform(-0.1, 0.15)
            stroke(draw, wobbly([P(0.12 - e, 0.12 - e), P(0.9 + e, 0.9 + e)], n, b * 0.02, 3), w, v)
            stroke(draw, wobbly([P(0.88 + e, 0.12 - e), P(0.12 - e, 0.9 + e)], n, b * 0.02, 3), w, v)
        elif kind == "slash":
            stroke(draw, wobbly([P(0.15, 0.9), P(0.9, 0.1)], n, b * 0.02, 3), w, v)
        else:  # scribble: a zigzag filling most of the box
            k = r.randint(4, 7)
            pts = []
            for i in range(k + 1):
                f = 0.12 + 0.76 * i / k
                pts.append(P(f, 0.15 if i % 2 == 0 else 0.85, 0.04))
            stroke(draw, wobbly(pts, n, b * 0.01, 3), w + 1, v)
        return f"{kind}{'-light' if light else ''}"

    def bullet(self, draw, x: float, mid_y: float, cap: float, value: int) -> tuple[str, float]:
        n, r = self.n, self.r
        if r.random() < 0.6:
            rad = cap * r.uniform(0.08, 0.16) + 1
            pts = []
            for i in range(10):
                a = 2 * math.pi * i / 10
                rr = rad * n.normal(1.0, 0.12)
                pts.append((x + rad + rr * math.cos(a), mid_y + rr * math.sin(a) * 0.85))
            draw.polygon(pts, fill=value)
            return "dot", 2 * rad
        length = cap * r.uniform(0.45, 0.9)
        pts = wobbly([(x, mid_y + n.normal(0, 1)), (x + length, mid_y + n.normal(0, 1.5))], n, 0.8, 4)
        stroke(draw, pts, self.pen.width, value)
        return "dash", length

    def render(self) -> tuple[Image.Image, dict]:
        r, n = self.r, self.n
        W = 1404 + r.randint(-24, 24)
        H = 1872 + r.randint(-32, 32)
        spacing = r.uniform(56, 80)
        first_rule = r.uniform(150, 230)
        rules = []
        y = first_rule
        while y < H - 55:
            rules.append(y)
            y += spacing
        has_margin = r.random() < 0.55
        margin_x = r.uniform(120, 190)
        left = margin_x + r.uniform(16, 40) if has_margin else r.uniform(55, 140)
        right = W - r.uniform(50, 110)

        ink_colors = [(22, 36, 105), (28, 48, 150), (24, 24, 30), (45, 45, 52), (70, 72, 80),
                      (15, 30, 80)]
        color = ink_colors[r.randrange(len(ink_colors))]
        color = tuple(int(np.clip(c + n.normal(0, 6), 0, 255)) for c in color)
        pencil = r.random() < 0.12
        if pencil:
            color = (88, 88, 92)
        self.pen = Pen(color=color, width=r.uniform(1.8, 3.6), thicken=r.random() < 0.22)
        alt_color = (150, 25, 30) if r.random() < 0.5 else (20, 90, 60)
        heading_alt = r.random() < 0.2

        self.ink = Image.new("L", (W, H), 0)  # main pen
        alt = Image.new("L", (W, H), 0)  # headings in another pen sometimes
        # Small letters take a third to a half of the line, tall ones stay below the rule above;
        # capitals of the all-caps faces take 42-58 % of it.
        xr, cr = self.fonts.x_ratio(self.face), self.fonts.cap_ratio(self.face)
        if xr >= 0.85 * cr:
            body_size = spacing * r.uniform(0.42, 0.58) / cr
        else:
            body_size = min(spacing * r.uniform(0.33, 0.5) / xr, spacing * r.uniform(0.72, 0.9) / cr)
        body_size = max(14, int(body_size))
        slant = r.uniform(-0.08, 0.22)
        opacity = r.uniform(0.55, 0.8) if pencil else r.uniform(0.82, 1.0)

        lines: list[Line] = []
        fit_width = right - left

        def gen(maker, size: int, avail: float) -> tuple[str, int]:
            """Text from `maker` that the face can write and that fits in `avail` px, and its
            size: another draw of the template when it does not fit, then smaller writing,
            and as a last resort the words that fit."""
            text = "Notes"
            for attempt in range(40):
                s = size if attempt < 25 else max(12, int(size * 0.85))
                t = maker()
                if not self.fonts.covers_all(self.face, t):
                    continue
                text = t
                if self.fonts.font(self.face, s).getlength(t) * 1.12 <= avail:
                    return t, s
            s = max(12, int(size * 0.85))
            words = text.split(" ")
            while len(words) > 1 and self.fonts.font(self.face, s).getlength(" ".join(words)) * 1.12 > avail:
                words.pop()
            return " ".join(words), s

        def put_heading(rule_y: float, first: bool) -> bool:
            """Writes a heading on the rule; true when the next rule should stay blank."""
            mask = alt if heading_alt else self.ink
            scale = r.uniform(1.25, 1.7) if first else r.uniform(1.15, 1.5)
            size = int(body_size * scale)
            text, size = gen(lambda: self.content.heading(first), size, fit_width * 0.9)
            underline = r.random() < 0.6
            base = rule_y - (r.uniform(8, 16) if underline else r.uniform(1, 6))
            x = left + (r.uniform(0, fit_width * 0.25) if r.random() < 0.2 else r.uniform(-5, 10))
            box, end_x = self.draw_text(mask, text, x, base, size, slant + n.normal(0, 0.03),
                                        float(n.normal(0, 0.003)), int(255 * opacity))
            mark = None
            if underline and box:
                d = ImageDraw.Draw(mask)
                uy = base + r.uniform(5, 12)
                tilt = n.normal(0, 0.01)
                x_a, x_b = box[0] - r.uniform(0, 12), box[2] + r.uniform(-5, 30)
                pts = wobbly([(x_a, uy), (x_b, uy + tilt * (x_b - x_a))], n, 1.4, 6)
                stroke(d, pts, self.pen.width * r.uniform(0.9, 1.4), int(255 * opacity))
                mark = "underline"
                if r.random() < 0.15:
                    uy2 = uy + r.uniform(5, 8)
                    pts = wobbly([(x_a + 8, uy2), (x_b - r.uniform(0, 20), uy2)], n, 1.4, 6)
                    stroke(d, pts, self.pen.width, int(255 * opacity))
                    mark = "double-underline"
                box = (min(box[0], int(x_a)), box[1], max(box[2], int(x_b)), max(box[3], int(uy + 6)))
            lines.append(Line("heading", text, None, mark, list(box) if box else []))
            return scale > 1.45 or r.random() < 0.3

        n_rules = len(rules)
        used = r.randint(max(6, n_rules // 2), n_rules) if r.random() < 0.7 else n_rules
        second_at = r.randint(4, max(5, used - 3)) if r.random() < 0.45 and used > 9 else -1
        # Sections are mostly one kind of line: a todo list, notes with bullets, or a mix.
        mode = r.choice(["todo", "todo", "notes", "mixed", "mixed"])
        weights = {"todo": [70, 15, 15], "notes": [15, 45, 40], "mixed": [40, 30, 30]}
        nested = False
        done_share = r.uniform(0.2, 0.7)
        i = 2 if put_heading(rules[0], True) else 1
        while i < used:
            rule_y = rules[i]
            if i == second_at:
                if i + 1 < used:
                    i += 1  # a blank line before the new section
                    rule_y = rules[i]
                i += 2 if put_heading(rule_y, False) else 1
                mode = r.choice(["todo", "notes", "mixed"])
                continue
            if r.random() < 0.06:
                i += 1
                continue
            kind = r.choices(["task", "bullet", "text"], weights=weights[mode])[0]
            size = max(12, int(body_size * r.uniform(0.93, 1.07)))
            cap = self.fonts.cap_ratio(self.face) * size
            base = rule_y - r.uniform(0.5, 6) + n.normal(0, 1.2)
            x = left + n.normal(0, 4)
            if kind == "bullet" and lines and lines[-1].kind in ("task", "bullet") and r.random() < 0.25:
                nested = True
            elif kind != "bullet":
                nested = False
            if nested and kind == "bullet":
                x += cap * r.uniform(1.3, 2.4)
            v = int(255 * opacity * r.uniform(0.85, 1.0))
            d = ImageDraw.Draw(self.ink)
            status = None
            mark = None
            if kind == "task":
                b = cap * r.choice([r.uniform(0.7, 0.95), r.uniform(0.95, 1.2), r.uniform(1.2, 1.6)])
                status = "done" if r.random() < done_share else "open"
                mark = self.checkbox(d, x, base + r.uniform(-2, 4), b, status, v)
                mx0, my0, mx1 = x - 4, base - b - 0.5 * b, x + 1.3 * b
                tx = x + b + cap * r.uniform(0.35, 0.9)
                maker = self.content.task
            elif kind == "bullet":
                mark, width = self.bullet(d, x, base - cap * r.uniform(0.3, 0.5), cap, v)
                mx0, my0, mx1 = x - 4, base - cap, x + width + 4
                tx = x + width + cap * r.uniform(0.35, 0.8)
                maker = self.content.bullet
            else:
                mx0 = my0 = mx1 = None
                tx = x
                maker = self.content.text
            text, size = gen(maker, size, right - tx)
            box, end_x = self.draw_text(self.ink, text, tx, base, size,
                                        slant + n.normal(0, 0.04), float(n.normal(0, 0.004)), v)
            if kind == "task" and status == "done" and box and r.random() < 0.07:
                sy = base - cap * r.uniform(0.3, 0.45)
                stroke(d, wobbly([(box[0] - 4, sy), (box[2] + 6, sy + n.normal(0, 2))], n, 1.2, 6),
                       self.pen.width * 0.9, v)
                mark += "+struck"
            if box and mx0 is not None:
                box = (int(min(box[0], mx0)), int(min(box[1], my0)), max(box[2], int(mx1)), box[3])
            lines.append(Line(kind, text, status, mark, list(box) if box else []))
            i += 1

        page = self.compose(W, H, rules, has_margin, margin_x, color, alt_color, alt)
        angle = round(float(r.uniform(-2.0, 2.0)), 3)
        page, lines = self.degrade(page, angle, lines)
        truth = {
            "stem": self.stem,
            "date": self.date.isoformat(),
            "width": W,
            "height": H,
            "font": f"{self.package}/{self.face.name}",
            "rotation_deg": angle,
            "lines": [
                {"kind": ln.kind, "text": ln.text, "status": ln.status, "bbox": ln.bbox,
                 **({"mark": ln.mark} if ln.mark else {})}
                for ln in lines
            ],
        }
        return page, truth

    def compose(self, W, H, rules, has_margin, margin_x, color, alt_color, alt) -> Image.Image:
        r, n = self.r, self.n
        base = np.array([r.uniform(244, 252), r.uniform(240, 249), r.uniform(226, 242)])
        # Paper: base colour, a soft illumination gradient, and fine grain.
        yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
        gx, gy = r.uniform(-1, 1), r.uniform(-1, 1)
        shade = 1.0 - r.uniform(0.0, 0.07) * ((gx * (xx / W - 0.5) + gy * (yy / H - 0.5)) + 0.5)
        paper = base[None, None, :] * shade[:, :, None]
        grain = n.normal(0, 2.0, (H // 4 + 1, W // 4 + 1)).astype(np.float32)
        grain = np.asarray(Image.fromarray(grain, mode="F").resize((W, H), Image.BILINEAR))
        paper = paper + grain[:, :, None]
        # Rules and margin, faint, drawn on a layer so they can be blended.
        layer = Image.new("L", (W, H), 0)
        d = ImageDraw.Draw(layer)
        rule_alpha = r.uniform(0.45, 0.8)
        rule_color = np.array([r.uniform(120, 160), r.uniform(165, 195), r.uniform(215, 240)])
        rule_w = r.choice([1, 2, 2])
        for y in rules:
            tilt = n.normal(0, 0.5)
            d.line([(0, y), (W, y + tilt)], fill=255, width=rule_w)
        la = np.asarray(layer, dtype=np.float32)[:, :, None] / 255 * rule_alpha
        paper = paper * (1 - la) + rule_color[None, None, :] * la
        if has_margin:
            layer = Image.new("L", (W, H), 0)
            ImageDraw.Draw(layer).line([(margin_x, 0), (margin_x + n.normal(0, 1), H)], fill=255,
                                       width=r.choice([1, 2, 2]))
            la = np.asarray(layer, dtype=np.float32)[:, :, None] / 255 * r.uniform(0.35, 0.6)
            paper = paper * (1 - la) + np.array([225, 110, 120])[None, None, :] * la
        # Ink: coverage times an uneven flow (ballpoint skips, pressure).
        flow = n.uniform(0.72, 1.0, (H // 24 + 1, W // 24 + 1)).astype(np.float32)
        flow = np.asarray(Image.fromarray(flow, mode="F").resize((W, H), Image.BILINEAR))
        for mask, col in ((self.ink, color), (alt, alt_color)):
            a = np.asarray(mask, dtype=np.float32) / 255 * flow
            a = a[:, :, None]
            paper = paper * (1 - a) + np.array(col, dtype=np.float32)[None, None, :] * a
        return Image.fromarray(np.clip(paper, 0, 255).astype(np.uint8), mode="RGB")

    def degrade(self, page: Image.Image, angle: float, lines: list[Line]):
        r, n = self.r, self.n
        W, H = page.size
        dim = r.uniform(0.86, 0.97)
        edge = tuple(int(c * dim) for c in page.getpixel((5, 5)))
        page = page.rotate(angle, resample=Image.BICUBIC, fillcolor=edge)
        # Boxes follow the page: rotate their corners (Pillow turns counter-clockwise).
        a = math.radians(angle)
        ca, sa = math.cos(a), math.sin(a)
        cx, cy = W / 2, H / 2
        for ln in lines:
            if not ln.bbox:
                continue
            x0, y0, x1, y1 = ln.bbox
            xs, ys = [], []
            for px, py in ((x0, y0), (x1, y0), (x1, y1), (x0, y1)):
                dx, dy = px - cx, py - cy
                xs.append(cx + dx * ca + dy * sa)
                ys.append(cy - dx * sa + dy * ca)
            bx0, by0 = max(0, int(min(xs))), max(0, int(min(ys)))
            bx1, by1 = min(W, int(math.ceil(max(xs)))), min(H, int(math.ceil(max(ys))))
            ln.bbox = [bx0, by0, bx1 - bx0, by1 - by0]
        page = page.filter(ImageFilter.GaussianBlur(r.uniform(0.5, 1.5)))
        arr = np.asarray(page, dtype=np.float32)
        arr = arr + n.normal(0, r.uniform(3.0, 11.0), arr.shape).astype(np.float32)
        # Dust: a few dark specks.
        for _ in range(r.randint(0, 120)):
            y, x = r.randrange(H), r.randrange(W)
            arr[y:y + r.randint(1, 3), x:x + r.randint(1, 3)] *= r.uniform(0.4, 0.8)
        page = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), mode="RGB")
        if r.random() < 0.3:
            page = page.convert("L")  # a greyscale scan
        if r.random() < 0.55:  # JPEG artefacts from an earlier step of the pipeline
            buf = io.BytesIO()
            page.save(buf, "JPEG", quality=r.randint(30, 75))
            page = Image.open(io.BytesIO(buf.getvalue()))
            page.load()
        return page, lines


# ---- Output --------------------------------------------------------------------------------

PDF_DPI = 226  # a tablet's export resolution: 1404 x 1872 px is 6.2 x 8.3 in


def pdf_time(date: datetime.date) -> time.struct_time:
    return time.struct_time((date.year, date.month, date.day, 12, 0, 0, date.weekday(),
                             date.timetuple().tm_yday, 0))


def save_png(page: Image.Image, path: Path, colors: int):
    """PNG, full colour, or (colors > 0, to keep committed samples small) a palette of that
    many colours plus three more shades of the paper, so that its noise stays visible."""
    if colors:
        rgb = page.convert("RGB")
        q = rgb.quantize(colors=colors, method=Image.Quantize.FASTOCTREE,
                         dither=Image.Dither.NONE, kmeans=3)
        pal = np.array(q.getpalette()[: colors * 3], dtype=np.float64).reshape(-1, 3)
        counts = np.bincount(np.asarray(q).ravel(), minlength=len(pal))
        paper = pal[counts.argmax()]
        shades = [np.clip(paper * (1 + k * 0.025), 0, 255) for k in (-2, -1, 1)]
        flat = np.vstack([pal, *shades]).round().astype(np.uint8).ravel().tolist()
        holder = Image.new("P", (1, 1))
        holder.putpalette(flat + [0] * (768 - len(flat)))
        page = rgb.quantize(palette=holder, dither=Image.Dither.NONE)
    page.save(path, "PNG", optimize=True)


def save_pdf(pages: list[Image.Image], path: Path, date: datetime.date, quality: int):
    when = pdf_time(date)
    pages[0].save(path, "PDF", save_all=True, append_images=pages[1:], resolution=PDF_DPI,
                  quality=quality, creationDate=when, modDate=when)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="output folder (created)")
    p.add_argument("--count", type=int, default=10, help="single pages (PNG, some PDF)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--pdf-pages", type=int, default=0,
                   help="also write one multi-page PDF of this many pages")
    p.add_argument("--pdf-share", type=float, default=0.12,
                   help="share of the single pages written as single-page PDFs")
    p.add_argument("--png-colors", type=int, default=0,
                   help="quantize PNGs to this many colours (0: full colour); for committed samples")
    p.add_argument("--pdf-quality", type=int, default=80, help="JPEG quality inside the PDFs")
    p.add_argument("--font-dir", type=Path, default=Path("/usr/share/fonts"))
    p.add_argument("--allow-missing-fonts", action="store_true",
                   help="use whichever of the six font packages are installed")
    args = p.parse_args(argv)

    fonts = Fonts(args.font_dir, args.allow_missing_fonts)
    args.out.mkdir(parents=True, exist_ok=True)
    total = args.count + args.pdf_pages
    # Each choice over the run has a stream of its own, so that page i's date, font and format
    # do not depend on how many pages come after it.
    g = random.Random(f"nib-ocr-dates:{args.seed}")
    # Dates: one page per day, from a day of 2025-2026 that the seed picks, skipping some days.
    day = datetime.date(2025, 1, 1) + datetime.timedelta(days=g.randrange(0, 500))
    dates = []
    for _ in range(total):
        dates.append(day)
        day += datetime.timedelta(days=g.choice([1, 1, 1, 2, 3]))
    # Font packages take turns in shuffled rounds, so every one is used equally often.
    g = random.Random(f"nib-ocr-fonts:{args.seed}")
    packages = []
    order = sorted(fonts.faces)
    while len(packages) < total:
        rnd = order[:]
        g.shuffle(rnd)
        packages.extend(rnd)
    # Single-page PDFs evenly spread (a random phase), about pdf_share of the pages.
    g = random.Random(f"nib-ocr-pdf:{args.seed}")
    phase = g.random()
    as_pdf = [math.floor((i + 1) * args.pdf_share + phase) > math.floor(i * args.pdf_share + phase)
              for i in range(args.count)]
    if args.count >= 3 and not any(as_pdf):
        as_pdf[g.randrange(1, args.count)] = True

    def render(i: int, stem: str):
        return PageRenderer(fonts, i, args.seed, dates[i], packages[i], stem).render()

    for i in range(args.count):
        stem = dates[i].isoformat()
        page, truth = render(i, stem)
        truth["format"] = "pdf" if as_pdf[i] else "png"
        if as_pdf[i]:
            save_pdf([page], args.out / f"{stem}.pdf", dates[i], args.pdf_quality)
        else:
            save_png(page, args.out / f"{stem}.png", args.png_colors)
        write_truth(args.out / f"{stem}.truth.json", truth)
        print(f"{stem}.{truth['format']}  {truth['font']}  {len(truth['lines'])} lines",
              file=sys.stderr)
    if args.pdf_pages:
        first = args.count
        stem = dates[first].isoformat()
        pages, truths = [], []
        for k in range(args.pdf_pages):
            i = first + k
            page, truth = render(i, dates[i].isoformat())
            truth["page"] = k + 1
            pages.append(page)
            truths.append(truth)
        save_pdf(pages, args.out / f"{stem}.pdf", dates[first], args.pdf_quality)
        write_truth(args.out / f"{stem}.truth.json",
                    {"stem": stem, "date": dates[first].isoformat(), "format": "pdf",
                     "pages": truths})
        print(f"{stem}.pdf  {args.pdf_pages} pages", file=sys.stderr)
    return 0


def write_truth(path: Path, truth: dict):
    """Indented JSON with one line of the page per text line (compact, readable in a diff)."""

    def dump(obj, indent: str) -> str:
        if isinstance(obj, dict) and "kind" in obj:
            return json.dumps(obj, ensure_ascii=False)
        if isinstance(obj, dict):
            inner = indent + "  "
            items = [f"{inner}{json.dumps(k)}: {dump(v, inner)}" for k, v in obj.items()]
            return "{\n" + ",\n".join(items) + "\n" + indent + "}"
        if isinstance(obj, list) and obj and isinstance(obj[0], dict):
            inner = indent + "  "
            return "[\n" + ",\n".join(inner + dump(v, inner) for v in obj) + "\n" + indent + "]"
        return json.dumps(obj, ensure_ascii=False)

    text = dump(truth, "") + "\n"
    assert json.loads(text) == truth
    path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
