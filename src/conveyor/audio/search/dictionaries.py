"""Which PostgreSQL text search dictionary reads a record's language.

A record's ISO 639-1 language (the one chosen at upload, else the detected one) picks the
built-in configuration of that language, so ``meetings`` finds ``meeting``; a language without
one (or none known) is read by ``simple`` (words as they are, lower-cased). SQLite's FTS5 index
uses one tokenizer for every language (Unicode words, diacritics removed, Porter's English
stemmer on top).
"""

from __future__ import annotations

__all__ = ["DICTIONARIES", "SIMPLE", "dictionary_of"]

SIMPLE = "simple"

# PostgreSQL's built-in configurations since version 12 (armenian, basque, catalan, hindi,
# serbian and yiddish came later and are left out, so every supported server has these).
DICTIONARIES = {
    "ar": "arabic",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "english",
    "es": "spanish",
    "fi": "finnish",
    "fr": "french",
    "ga": "irish",
    "hu": "hungarian",
    "id": "indonesian",
    "it": "italian",
    "lt": "lithuanian",
    "nb": "norwegian",
    "ne": "nepali",
    "nl": "dutch",
    "nn": "norwegian",
    "no": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
}


def dictionary_of(language: str | None) -> str:
    """The configuration for ISO 639-1 ``language`` (any case), ``simple`` when none fits."""
    if not language:
        return SIMPLE
    return DICTIONARIES.get(language.strip().lower()[:2], SIMPLE)
