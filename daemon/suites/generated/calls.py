"""Generated function-calling tasks: new functions, parameters and questions per seed.

A task is a pure function of ``(seed, key)``: one function (or, with ``distractors``,
several of which one fits) made from a domain's entities, measured quantities, choices,
switches and names; a question that mentions the values the call must carry, in one of
several phrasings and in a shuffled order; and the possible answer by construction, in
BFCL's shape, so that BFCL's own checker judges it as it judges a public task. Optional
parameters the question leaves out may be omitted or given their default.

The space is compositional (domain x entity x result x parameter subset x values x
phrasing x order), so no table written before the seed existed can hold the answers, and
nothing in the function's wording is shared with any public task beyond ordinary English.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Quantity:
    """A number the call carries: its name, unit and range."""

    name: str
    unit: str
    kind: Literal["integer", "float"]
    low: float
    high: float


@dataclass(frozen=True)
class Choice:
    name: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class Switch:
    """A boolean: how the question says it is on, and off."""

    name: str
    on: str
    off: str


@dataclass(frozen=True)
class Named:
    """A string the question writes out: a proper name (made from syllables, so no list of
    known names holds it) introduced by one of ``lead`` ("owned by", "located in")."""

    name: str
    lead: tuple[str, ...]


@dataclass(frozen=True)
class Domain:
    entities: tuple[str, ...]
    results: tuple[str, ...]
    quantities: tuple[Quantity, ...]
    choices: tuple[Choice, ...] = ()
    switches: tuple[Switch, ...] = ()
    names: tuple[Named, ...] = ()


Q = Quantity
DOMAINS: tuple[Domain, ...] = (
    Domain(
        ("greenhouse", "planter", "seed tray"),
        ("water need", "harvest yield", "heating cost"),
        (
            Q("floor_area", "square meters", "float", 2, 90),
            Q("air_temperature", "degrees Celsius", "integer", 5, 40),
            Q("humidity", "percent", "integer", 10, 95),
            Q("plant_count", "plants", "integer", 4, 400),
        ),
        (Choice("crop", ("tomato", "basil", "pepper", "lettuce", "kale", "spinach")),),
        (Switch("organic", "that is grown organically", "that is not grown organically"),),
        (Named("grower", ("run by", "tended by")),),
    ),
    Domain(
        ("cargo ship", "barge", "ferry"),
        ("fuel use", "crossing time", "port fee"),
        (
            Q("route_length", "nautical miles", "integer", 20, 3000),
            Q("cargo_mass", "tonnes", "float", 1, 900),
            Q("cruise_speed", "knots", "integer", 6, 30),
        ),
        (Choice("fuel_type", ("diesel", "methanol", "hydrogen", "ammonia")),),
        (Switch("night_sailing", "sailing at night", "sailing only by day"),),
        (Named("home_port", ("based in", "registered in")),),
    ),
    Domain(
        ("bakery", "pastry kitchen", "bread oven"),
        ("flour order", "baking time", "daily output"),
        (
            Q("dough_weight", "kilograms", "float", 0.5, 80),
            Q("oven_temperature", "degrees Celsius", "integer", 150, 280),
            Q("batch_count", "batches", "integer", 1, 40),
        ),
        (Choice("loaf_style", ("sourdough", "rye", "brioche", "baguette", "focaccia")),),
        (Switch("gluten_free", "that bakes gluten free", "that does not bake gluten free"),),
        (Named("baker", ("run by", "owned by")),),
    ),
    Domain(
        ("solar array", "rooftop panel", "battery bank"),
        ("daily output", "payback period", "storage need"),
        (
            Q("panel_area", "square meters", "float", 1, 400),
            Q("sun_hours", "hours", "float", 1, 12),
            Q("tilt_angle", "degrees", "integer", 0, 60),
            Q("capacity", "kilowatt hours", "integer", 2, 500),
        ),
        (Choice("panel_type", ("monocrystalline", "polycrystalline", "thin film")),),
        (Switch("grid_tied", "connected to the grid", "off the grid"),),
        (Named("site", ("installed in", "located in")),),
    ),
    Domain(
        ("library", "archive", "reading room"),
        ("shelf space", "cataloguing time", "lending rate"),
        (
            Q("book_count", "books", "integer", 100, 90000),
            Q("visitor_count", "visitors a day", "integer", 5, 4000),
            Q("opening_hours", "hours a day", "float", 2, 16),
        ),
        (Choice("collection", ("fiction", "maps", "periodicals", "manuscripts", "music")),),
        (Switch("open_weekends", "that opens on weekends", "that is closed on weekends"),),
        (Named("branch", ("in", "called")),),
    ),
    Domain(
        ("bridge", "footbridge", "overpass"),
        ("load limit", "repair cost", "inspection interval"),
        (
            Q("span_length", "meters", "float", 5, 1200),
            Q("deck_width", "meters", "float", 2, 40),
            Q("age", "years", "integer", 1, 150),
        ),
        (Choice("material", ("steel", "concrete", "timber", "stone", "composite")),),
        (Switch("rail_traffic", "that carries trains", "that carries no trains"),),
        (Named("river", ("over", "crossing")),),
    ),
    Domain(
        ("orchard", "vineyard", "olive grove"),
        ("harvest yield", "irrigation need", "picking time"),
        (
            Q("tree_count", "trees", "integer", 10, 5000),
            Q("rainfall", "millimeters", "integer", 100, 2000),
            Q("slope", "degrees", "integer", 0, 35),
        ),
        (Choice("variety", ("early", "late", "dwarf", "heritage", "hybrid")),),
        (Switch("netted", "that is covered by nets", "that has no nets"),),
        (Named("estate", ("on the estate of", "belonging to")),),
    ),
    Domain(
        ("aquarium", "fish pond", "reef tank"),
        ("filter size", "feeding schedule", "water change volume"),
        (
            Q("volume", "liters", "integer", 20, 50000),
            Q("fish_count", "fish", "integer", 1, 300),
            Q("water_temperature", "degrees Celsius", "float", 10, 30),
        ),
        (Choice("water", ("fresh", "brackish", "salt")),),
        (Switch("planted", "that is planted", "that has no plants"),),
        (Named("keeper", ("kept by", "looked after by")),),
    ),
    Domain(
        ("warehouse", "cold store", "loading dock"),
        ("storage cost", "cooling load", "picking rate"),
        (
            Q("pallet_count", "pallets", "integer", 10, 20000),
            Q("ceiling_height", "meters", "float", 3, 30),
            Q("staff_count", "workers", "integer", 1, 300),
        ),
        (Choice("goods", ("frozen", "chilled", "dry", "hazardous", "bulk")),),
        (Switch("night_shift", "that runs a night shift", "that runs no night shift"),),
        (Named("operator", ("run by", "leased to")),),
    ),
    Domain(
        ("hiking trail", "cycle route", "ski run"),
        ("travel time", "difficulty score", "calorie use"),
        (
            Q("distance", "kilometers", "float", 0.5, 300),
            Q("elevation_gain", "meters", "integer", 0, 4000),
            Q("group_size", "people", "integer", 1, 40),
        ),
        (Choice("season", ("spring", "summer", "autumn", "winter")),),
        (Switch("guided", "with a guide", "without a guide"),),
        (Named("region", ("in", "through")),),
    ),
    Domain(
        ("concert hall", "theatre", "lecture hall"),
        ("ticket revenue", "reverberation time", "staffing need"),
        (
            Q("seat_count", "seats", "integer", 50, 6000),
            Q("ticket_price", "euros", "float", 2, 300),
            Q("event_count", "events a month", "integer", 1, 60),
        ),
        (Choice("seating", ("stalls", "balcony", "standing", "boxes")),),
        (Switch("air_conditioned", "that is air conditioned", "that is not air conditioned"),),
        (Named("venue", ("called", "known as")),),
    ),
    Domain(
        ("beehive", "apiary", "honey house"),
        ("honey yield", "swarm risk", "feeding need"),
        (
            Q("colony_count", "colonies", "integer", 1, 200),
            Q("frame_count", "frames", "integer", 5, 40),
            Q("flowering_days", "days", "integer", 10, 200),
        ),
        (Choice("bee_breed", ("carniolan", "italian", "buckfast", "caucasian")),),
        (Switch("migratory", "that is moved between fields", "that stays in one place"),),
        (Named("beekeeper", ("kept by", "tended by")),),
    ),
    Domain(
        ("data center", "server room", "edge cabinet"),
        ("power draw", "cooling cost", "rack capacity"),
        (
            Q("rack_count", "racks", "integer", 1, 2000),
            Q("load_per_rack", "kilowatts", "float", 0.5, 60),
            Q("outside_temperature", "degrees Celsius", "integer", -20, 45),
        ),
        (Choice("cooling", ("air", "liquid", "immersion", "free air")),),
        (Switch("redundant", "with redundant power", "without redundant power"),),
        (Named("campus", ("on the campus of", "hosted by")),),
    ),
    Domain(
        ("swimming pool", "lido", "spa"),
        ("heating cost", "chlorine dose", "lane capacity"),
        (
            Q("pool_length", "meters", "integer", 10, 100),
            Q("pool_depth", "meters", "float", 0.8, 5),
            Q("swimmer_count", "swimmers an hour", "integer", 5, 600),
        ),
        (Choice("cover", ("none", "solar", "insulated", "automatic")),),
        (Switch("outdoor", "that is outdoors", "that is indoors"),),
        (Named("club", ("run by", "belonging to")),),
    ),
    Domain(
        ("wind farm", "turbine", "wind pump"),
        ("annual output", "blade wear", "maintenance cost"),
        (
            Q("rotor_diameter", "meters", "integer", 5, 240),
            Q("wind_speed", "meters per second", "float", 2, 25),
            Q("turbine_count", "turbines", "integer", 1, 300),
        ),
        (Choice("site_type", ("onshore", "offshore", "coastal", "upland")),),
        (Switch("curtailed", "that is curtailed at night", "that is never curtailed"),),
        (Named("developer", ("built by", "operated by")),),
    ),
    Domain(
        ("clinic", "pharmacy", "dental practice"),
        ("waiting time", "stock order", "staff rota"),
        (
            Q("patient_count", "patients a day", "integer", 5, 900),
            Q("room_count", "rooms", "integer", 1, 60),
            Q("shift_length", "hours", "float", 4, 14),
        ),
        (Choice("service", ("walk in", "appointment", "emergency", "telephone")),),
        (Switch("open_late", "that opens late", "that closes early"),),
        (Named("practice", ("called", "run by")),),
    ),
)

VERBS = ("calculate", "estimate", "compute", "predict", "work out", "determine")
_PHRASES = (
    "What is the {result} of {entity} with {mentions}?",
    "Could you {verb} the {result} for {entity} with {mentions}?",
    "Please {verb} the {result} of {entity} that has {mentions}.",
    "I need the {result} for {entity}: {mentions}.",
    "{Verb} the {result} of {entity} given {mentions}.",
    "For {entity} with {mentions}, {verb} the {result}.",
    "We run {entity} with {mentions}. {Verb} its {result}, please.",
)
_SYLLABLES = (
    "bar",
    "cel",
    "dun",
    "fen",
    "gar",
    "hol",
    "kir",
    "lam",
    "mor",
    "nes",
    "pel",
    "quin",
    "ros",
    "sal",
    "tav",
    "vel",
    "wyn",
    "zor",
    "ast",
    "bri",
    "cov",
    "dal",
    "eth",
    "fal",
)


def _article(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def _words(name: str) -> str:
    return name.replace("_", " ")


def _identifier(text: str) -> str:
    return "_".join(text.replace("-", " ").split())


def proper_name(rng: random.Random) -> str:
    """A name no list holds: two or three syllables, capitalised."""
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def _number(q: Quantity, rng: random.Random) -> int | float:
    if q.kind == "integer":
        return rng.randint(int(q.low), int(q.high))
    return round(rng.uniform(q.low, q.high), 1)


@dataclass(frozen=True)
class _Param:
    name: str
    schema: dict[str, Any]
    value: Any
    mention: str
    required: bool
    default: Any = None


def _quantity_param(q: Quantity, rng: random.Random) -> _Param:
    value = _number(q, rng)
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    mention = rng.choice(
        (
            f"{_article(_words(q.name))} of {shown} {q.unit}",
            f"its {_words(q.name)} at {shown} {q.unit}",
        )
    )
    schema = {"type": q.kind, "description": f"The {_words(q.name)} in {q.unit}."}
    return _Param(q.name, schema, value, mention, required=True)


def _choice_param(c: Choice, rng: random.Random, required: bool) -> _Param:
    value = rng.choice(c.options)
    default = rng.choice([o for o in c.options if o != value])
    options = ", ".join(f"'{o}'" for o in c.options)
    what = f"The {_words(c.name)}: one of {options}."
    if not required:
        what += f" Default is '{default}'."
    schema = {"type": "string", "enum": list(c.options), "description": what}
    mention = rng.choice((f"{value} as its {_words(c.name)}", f"the {_words(c.name)} '{value}'"))
    return _Param(c.name, schema, value, mention, required, default)


def _switch_param(s: Switch, rng: random.Random) -> _Param:
    value = rng.random() < 0.5
    schema = {
        "type": "boolean",
        "description": f"Whether it is {_words(s.name)}. Default is false.",
    }
    return _Param(s.name, schema, value, s.on if value else s.off, required=False, default=False)


def _named_param(n: Named, rng: random.Random) -> _Param:
    value = proper_name(rng)
    schema = {"type": "string", "description": f"The name of the {_words(n.name)}."}
    return _Param(n.name, schema, value, f"{rng.choice(n.lead)} {value}", required=True)


@dataclass(frozen=True)
class GeneratedCall:
    """A task in BFCL's data shapes: the question's messages, the functions and the
    possible answer (one call)."""

    question: list[dict[str, Any]]
    functions: list[dict[str, Any]]
    answers: list[dict[str, dict[str, list[Any]]]]


def _function(
    domain: Domain, rng: random.Random
) -> tuple[dict[str, Any], list[_Param], tuple[str, str, str]]:
    """A function of ``domain``, the parameters the question will fill, and what it does
    (its verb, entity and result, for the question)."""
    entity, result = rng.choice(domain.entities), rng.choice(domain.results)
    verb = rng.choice(VERBS)
    quantities = rng.sample(domain.quantities, rng.randint(1, min(3, len(domain.quantities))))
    params = [_quantity_param(q, rng) for q in quantities]
    for c in domain.choices:
        if rng.random() < 0.6:
            params.append(_choice_param(c, rng, required=rng.random() < 0.5))
    for s in domain.switches:
        if rng.random() < 0.4:
            params.append(_switch_param(s, rng))
    for n in domain.names:
        if rng.random() < 0.5:
            params.append(_named_param(n, rng))
    rng.shuffle(params)
    name = _identifier(f"{verb} {entity} {result}")
    listed = ", ".join(_words(p.name) for p in params)
    function = {
        "name": name,
        "description": f"{verb.capitalize()} the {result} of {_article(entity)} from its {listed}.",
        "parameters": {
            "type": "dict",
            "properties": {p.name: p.schema for p in params},
            "required": [p.name for p in params if p.required],
        },
    }
    return function, params, (verb, entity, result)


def generate_call(seed: str, key: str, distractors: int = 0) -> GeneratedCall:
    """The task ``key`` of ``seed``: one function to call, with ``distractors`` functions
    from other domains beside it (shuffled), and a question that fills every required
    parameter and, at random, some optional ones."""
    rng = random.Random(hashlib.sha256(f"{seed}\0{key}".encode()).digest())
    domains = rng.sample(DOMAINS, 1 + distractors)
    function, params, (verb, entity, result) = _function(domains[0], rng)
    others = [_function(d, rng)[0] for d in domains[1:]]
    stated = [p for p in params if p.required or rng.random() < 0.5]
    rng.shuffle(stated)
    mentions = [p.mention for p in stated]
    joined = (
        mentions[0] if len(mentions) == 1 else ", ".join(mentions[:-1]) + " and " + mentions[-1]
    )
    template = rng.choice(_PHRASES)
    question = template.format(
        result=result,
        entity=_article(entity),
        mentions=joined,
        verb=verb,
        Verb=verb.capitalize(),
    )
    allowed: dict[str, list[Any]] = {}
    for p in params:
        if p in stated and not p.required and p.value == p.default:
            # Said, but what the default gives anyway: given or left to the default.
            allowed[p.name] = [p.value, ""]
        elif p in stated:
            allowed[p.name] = [p.value]
        else:  # left out by the question: omitted, or its documented default
            allowed[p.name] = ["", p.default]
    functions = [function, *others]
    rng.shuffle(functions)
    return GeneratedCall(
        question=[{"role": "user", "content": question}],
        functions=functions,
        answers=[{function["name"]: allowed}],
    )
