"""``conveyor vocabulary …``: an owner's standing vocabulary hints."""

from __future__ import annotations

from typing import Annotated

import typer

from conveyor.cli.exits import ExitCode
from conveyor.cli.groups import CommandGroup
from conveyor.cli.ingest import OWNER_HELP
from conveyor.cli.output import JsonOption, console, fail, note, print_json
from conveyor.cli.settings import make_runtime
from conveyor.cli.texts import TextParser
from conveyor.limits import HINTS

__all__ = ["vocabulary_app"]

vocabulary_app = CommandGroup(
    help="An owner's vocabulary: names and terms given to the recognizer with every recording "
    "of theirs, besides the recording's own --hints.",
)


@vocabulary_app.command("show")
def vocabulary_show(
    owner: Annotated[str, typer.Option(metavar="NAME", help=OWNER_HELP)] = "me",
    as_json: JsonOption = False,
) -> None:
    """Print the owner's vocabulary (nothing when they have none)."""
    from conveyor.audio.vocabulary import owner_vocabulary

    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        hints = owner_vocabulary(conn, owner.strip())
    if as_json:
        print_json({"owner": owner.strip(), "hints": hints})
        return
    if hints is None:
        note(f"{owner.strip()!r} has no vocabulary; set one with `conveyor vocabulary set TEXT`")
        return
    print(hints)


@vocabulary_app.command("set")
def vocabulary_set(
    hints: Annotated[
        str,
        typer.Argument(
            metavar="TEXT",
            help=f"Names and terms, separated by commas ({HINTS.rule}).",
            parser=TextParser(HINTS),
        ),
    ],
    owner: Annotated[str, typer.Option(metavar="NAME", help=OWNER_HELP)] = "me",
    as_json: JsonOption = False,
) -> None:
    """Replace the owner's vocabulary; it applies to every recording not yet recognised."""
    from conveyor.audio.vocabulary import set_owner_vocabulary
    from conveyor.errors import RejectedInput

    runtime = make_runtime()
    try:
        stored = set_owner_vocabulary(runtime.engine, runtime.clock, owner.strip(), hints)
    except RejectedInput as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    if as_json:
        print_json({"owner": owner.strip(), "hints": stored})
        return
    if stored is None:
        console.print(f"vocabulary of {owner.strip()!r} removed (the text was empty)")
    else:
        console.print(f"vocabulary of {owner.strip()!r} set: {stored}")


@vocabulary_app.command("clear")
def vocabulary_clear(
    owner: Annotated[str, typer.Option(metavar="NAME", help=OWNER_HELP)] = "me",
) -> None:
    """Remove the owner's vocabulary."""
    from conveyor.audio.vocabulary import set_owner_vocabulary

    runtime = make_runtime()
    set_owner_vocabulary(runtime.engine, runtime.clock, owner.strip(), None)
    console.print(f"vocabulary of {owner.strip()!r} removed")
