"""Words as people write them: a piece Whisper splits off a word (at a hyphen) is joined back."""

from __future__ import annotations

from conveyor.providers.timing import words_of


def test_a_piece_without_its_own_space_joins_the_word_before_it() -> None:
    # As faster-whisper gives "He was not an ill-disposed" (the hyphen is a prepended mark).
    raw = [
        {"word": " He", "start": 0.0, "end": 0.2, "probability": 0.9},
        {"word": " was", "start": 0.2, "end": 0.4, "probability": 0.9},
        {"word": " ill", "start": 0.4, "end": 0.6, "probability": 0.8},
        {"word": "-sposed", "start": 0.6, "end": 1.1, "probability": 0.5},
        {"word": " man.", "start": 1.2, "end": 1.5, "probability": 0.9},
    ]
    words = words_of(raw, offset=10.0)
    assert [w.text for w in words] == ["He", "was", "ill-sposed", "man."]
    joined = words[2]
    assert (joined.start, joined.end, joined.probability) == (10.4, 11.1, 0.5)


def test_lists_without_spaces_are_taken_word_for_word() -> None:
    # OpenAI's API and SpeechKit give bare words; nothing may be glued together.
    raw = [
        {"word": "ask", "start": 8.2, "end": 8.5},
        {"word": "not", "start": 8.5, "end": 8.8},
    ]
    assert [w.text for w in words_of(raw)] == ["ask", "not"]
