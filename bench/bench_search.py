"""``python -m bench.bench_search``: how long a search takes over 10,000 recordings of 10 min.

One owner with ``--records`` recordings, each with a transcript of ``--minutes`` minutes (150
words a minute in segments of about 5 s; words drawn from a 30,000-word vocabulary by Zipf's
law, as speech is, plus a few names said in only some recordings) and a title; a second
owner with as many again, so the owner's filter is part of the work. Then
:func:`conveyor.audio.search.search_records` (the same call as the page, the API and the CLI:
the match, the ranking, the snippets, the moments) runs each query ``--repeat`` times and the
least, the median and the slowest are reported in milliseconds, on SQLite and, with
``--postgres URL``, on PostgreSQL (emptied first: give it a database of its own). Prints one
JSON object. ``--keep FOLDER`` keeps both databases filled for the next run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, text

WORDS_PER_MINUTE = 150
WORDS_PER_SEGMENT = 12
VOCABULARY = 30_000
NAMES = ["okonkwo", "margarethe", "vasquez", "thorvaldsen", "zanzibar"]
QUERIES = [
    ("a name said in 0.1% of recordings", "thorvaldsen"),
    ("a name said in 1%", "vasquez"),
    ("a name and a word", "okonkwo budget"),
    ("a common word (in nearly every recording)", "the"),
    ("a common word that is no stop word (in ~3 of 4)", "budget"),
    ("the start of a name (SQLite: a prefix)", "thorv"),
    ("a word of middling use", "{middling}"),
    ("two common words", "the and"),
    ("a word nobody said", "zeppelinfahrt"),
]
_SYLLABLES = [a + b for a in "bcdfghklmnprstvz" for b in ("a", "e", "i", "o", "u", "ai", "ou")]
_COMMON = [
    "the",
    "and",
    "to",
    "of",
    "a",
    "in",
    "that",
    "is",
    "it",
    "you",
    "for",
    "was",
    "on",
    "are",
    "with",
    "as",
    "we",
    "this",
    "be",
    "have",
    "at",
    "not",
    "but",
    "they",
    "from",
    "by",
    "or",
    "one",
    "had",
    "what",
    "all",
    "were",
    "when",
    "there",
    "can",
    "an",
    "your",
    "which",
    "their",
    "said",
    "if",
    "do",
    "will",
    "each",
    "about",
    "how",
    "up",
    "out",
    "them",
    "then",
    "she",
    "many",
    "some",
    "so",
    "these",
    "would",
    "other",
    "into",
    "has",
    "more",
    "her",
    "two",
    "like",
    "him",
    "see",
    "time",
    "could",
    "no",
    "make",
    "than",
    "first",
    "been",
    "its",
    "who",
    "now",
    "people",
    "my",
    "made",
    "over",
    "did",
    "down",
    "only",
    "way",
    "find",
    "use",
    "may",
    "water",
    "long",
    "little",
    "very",
    "after",
    "words",
    "called",
    "just",
    "where",
    "most",
    "know",
    "budget",
    "meeting",
    "report",
]


def _vocabulary(rng: random.Random) -> list[str]:
    words = list(_COMMON)
    seen = set(words)
    while len(words) < VOCABULARY:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def _transcript(
    rng: random.Random, words: list[str], weights: list[float], minutes: int, n: int
) -> tuple[str, list[dict[str, Any]]]:
    count = minutes * WORDS_PER_MINUTE
    said = rng.choices(words, weights=weights, k=count)
    # Names: thorvaldsen in every 1,000th recording, vasquez in every 100th, okonkwo every 50th.
    for name, every in (("thorvaldsen", 1000), ("vasquez", 100), ("okonkwo", 50)):
        if n % every == 0:
            said[rng.randrange(count)] = name.capitalize()
    segments = []
    seconds_per_word = 60.0 / WORDS_PER_MINUTE
    for start in range(0, count, WORDS_PER_SEGMENT):
        chunk = said[start : start + WORDS_PER_SEGMENT]
        segments.append(
            {
                "start": round(start * seconds_per_word, 2),
                "end": round((start + len(chunk)) * seconds_per_word, 2),
                "text": " ".join(chunk).capitalize() + ".",
            }
        )
    return " ".join(s["text"] for s in segments), segments


def _fill(engine: Engine, records: int, minutes: int) -> str:
    """Both owners' records, texts and search rows; returns a word of middling use."""
    from conveyor.db.tables import audio_records, files, search_texts, texts

    rng = random.Random(20)
    words = _vocabulary(rng)
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    now = time.time()
    queue = {"attempts": 0, "updated_at": now, "stage": "done", "state_entered_at": now}
    with engine.begin() as conn:
        conn.execute(
            insert(files).values(
                id=1, key="u/1", mime_type="audio/wav", size=1, state="stored", created_at=now
            )
        )
    batch = 250
    postgresql = engine.dialect.name == "postgresql"
    for owner_n, owner in enumerate(("alice", "bob")):
        for first in range(1, records + 1, batch):
            ids = range(first, min(records + 1, first + batch))
            record_rows, text_rows, search_rows = [], [], []
            for n in ids:
                record_id = owner_n * records + n
                body, segments = _transcript(rng, words, weights, minutes, n)
                title = f"Meeting {n} about {rng.choice(words[100:2000])}"
                record_rows.append(
                    {
                        "id": record_id,
                        "owner": owner,
                        "title": title,
                        "original_name": f"r{n}.ogg",
                        "created_at": now - records + n,
                        "original_file_id": 1,
                        "language": "en",
                        **queue,
                    }
                )
                text_rows.append(
                    {
                        "record_id": record_id,
                        "kind": "transcript",
                        "body": body,
                        "segments": segments,
                        "language": "en",
                        "created_at": now,
                    }
                )
                for kind, value in (("title", title), ("transcript", body)):
                    search_rows.append(
                        {
                            "record_id": record_id,
                            "owner": owner,
                            "kind": kind,
                            "config": "english",
                            "body": value,
                        }
                    )
            with engine.begin() as conn:
                conn.execute(insert(audio_records), record_rows)
                conn.execute(insert(texts), text_rows)
                conn.execute(insert(search_texts), search_rows)
                if postgresql:
                    # As conveyor.audio.search.queries.index_record writes it, in bulk.
                    conn.execute(
                        text(
                            "UPDATE search_texts SET tsv = to_tsvector(config::regconfig, body) "
                            "WHERE tsv IS NULL"
                        )
                    )
    with engine.begin() as conn:
        if postgresql:
            conn.execute(text("ANALYZE"))
        else:
            conn.execute(text("ANALYZE"))
            conn.execute(text("INSERT INTO search_texts_fts(search_texts_fts) VALUES ('optimize')"))
    return words[400]


def _filled(engine: Engine, records: int) -> bool:
    """Whether the database already holds this benchmark's two owners (``--keep``)."""
    with engine.connect() as conn:
        count = conn.execute(text("SELECT count(*) FROM audio_records")).scalar()
    return count == 2 * records


def _measure(
    engine: Engine, records: int, minutes: int, repeat: int, *, reuse: bool = False
) -> dict[str, Any]:
    from conveyor.audio.search import search_records

    started = time.perf_counter()
    if reuse and _filled(engine, records):
        middling = _vocabulary(random.Random(20))[400]
        out: dict[str, Any] = {"fill_s": "kept"}
    else:
        middling = _fill(engine, records, minutes)
        out = {"fill_s": round(time.perf_counter() - started, 1)}
    for name, query in QUERIES:
        query = query.format(middling=middling)
        times = []
        found = 0
        for _ in range(repeat):
            began = time.perf_counter()
            hits = search_records(engine, "alice", query, limit=20)
            times.append((time.perf_counter() - began) * 1000)
            found = len(hits)
        out[name] = {
            "query": query,
            "hits": found,
            "least_ms": round(min(times), 1),
            "median_ms": round(statistics.median(times), 1),
            "max_ms": round(max(times), 1),
        }
    return out


def _has_schema(engine: Engine) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(text("SELECT to_regclass('audio_records') IS NOT NULL")).scalar())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000, help="per owner (two owners)")
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--postgres", help="postgresql://… of a database this may empty")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument(
        "--keep",
        type=Path,
        help="a folder for the SQLite database, kept (and PostgreSQL's kept too): a second "
        "run with the same --records measures again without filling",
    )
    args = parser.parse_args()
    from conveyor.db.engine import make_engine
    from conveyor.db.migrate import upgrade

    result: dict[str, Any] = {
        "records_per_owner": args.records,
        "minutes": args.minutes,
        "repeat": args.repeat,
        "load_before": os.getloadavg()[0],
    }
    reuse = args.keep is not None
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_sqlite:
            folder = args.keep or Path(tmp)
            folder.mkdir(parents=True, exist_ok=True)
            engine = make_engine(f"sqlite:///{folder / 'bench_search.db'}")
            upgrade(engine)
            result["sqlite"] = _measure(
                engine, args.records, args.minutes, args.repeat, reuse=reuse
            )
            engine.dispose()
        if args.postgres:
            engine = make_engine(args.postgres)
            if not (reuse and _has_schema(engine) and _filled(engine, args.records)):
                with engine.begin() as conn:
                    conn.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
                    conn.execute(text("CREATE SCHEMA public"))
            upgrade(engine)
            result["postgresql"] = _measure(
                engine, args.records, args.minutes, args.repeat, reuse=reuse
            )
            engine.dispose()
    result["load_after"] = os.getloadavg()[0]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
