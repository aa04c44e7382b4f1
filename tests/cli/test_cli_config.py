"""No silent misconfiguration and no secrets on screen (D16 for database URLs too).

A ``CONVEYOR_*`` variable that is not a setting stops the command and names the likely key;
every value is checked at start-up (including the recognizer's device and compute type); the
database and storage in use are stated with the password hidden, in errors as well."""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path

import ctranslate2
import pytest

from conveyor.cli.exits import ExitCode
from conveyor.cli.output import setup_logging
from conveyor.config import (
    Settings,
    TranscriptionSettings,
    environment_problems,
    load_settings,
    provider_sections,
)
from conveyor.errors import ConfigError
from conveyor.providers.local import device_problem
from conveyor.providers.registry import names
from tests.support.cli_run import invoke, run

SECRET = "hunter2-s3cret"


@pytest.fixture(autouse=True)
def _in_a_fresh_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


ISO_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (INFO|WARNING|ERROR) ")


def test_every_setting_variable_is_accepted_and_nothing_else() -> None:
    names = {"CONVEYOR_CONFIG": "x", "CONVEYOR_TEST_POSTGRES_URL": "x"}
    for section, field in Settings.model_fields.items():
        assert field.annotation is not None
        for key in field.annotation.model_fields:
            names[f"CONVEYOR_{section.upper()}__{key.upper()}"] = "1"
            names[f"conveyor_{section}__{key}"] = "1"  # read case-insensitively, so allowed
    assert environment_problems(names) == []
    assert environment_problems({"HOME": "/root", "CONVEYORX": "1"}) == []


@pytest.mark.parametrize(
    ("variable", "likely"),
    [
        ("CONVEYOR_DATABASE_URL", "CONVEYOR_DATABASE__URL"),
        ("CONVEYOR_PIPELINES__WORKERS", "CONVEYOR_PIPELINE__WORKERS"),
        ("CONVEYOR_WORKERS", "CONVEYOR_PIPELINE__WORKERS"),
        ("CONVEYOR_MEDIA__SHORTWORKERS", "CONVEYOR_MEDIA__SHORT_WORKERS"),
        ("CONVEYOR_CONFIG_FILE", "CONVEYOR_CONFIG"),
    ],
)
def test_unknown_variable_names_the_likely_key(variable: str, likely: str) -> None:
    (problem,) = environment_problems({variable: "1"})
    assert variable in problem and f"did you mean {likely}?" in problem


def test_unknown_variable_stops_the_command_before_any_database(tmp_path: Path) -> None:
    url = f"postgresql://conveyor:{SECRET}@127.0.0.1:1/conveyor"
    result = invoke("records", "list", CONVEYOR_DATABASE_URL=url)
    assert result.exit_code == ExitCode.USAGE
    assert "did you mean CONVEYOR_DATABASE__URL?" in result.stderr
    assert not (tmp_path / "conveyor-data").exists()  # it did not fall back to the default
    assert SECRET not in result.output


def test_bad_values_are_refused_at_start_up_naming_the_key(tmp_path: Path) -> None:
    device = invoke("records", "list", CONVEYOR_TRANSCRIPTION__DEVICE="gpu")
    assert device.exit_code == ExitCode.USAGE and "[transcription] device" in device.stderr
    assert "environment variable CONVEYOR_TRANSCRIPTION__DEVICE" in device.stderr
    compute = invoke("records", "list", CONVEYOR_TRANSCRIPTION__COMPUTE_TYPE="int4")
    assert compute.exit_code == ExitCode.USAGE and "[transcription] compute_type" in compute.stderr
    url = invoke("records", "list", CONVEYOR_DATABASE__URL=f"mysql://u:{SECRET}@h/db")
    assert url.exit_code == ExitCode.USAGE and "[database] url" in url.stderr
    assert SECRET not in url.stderr and "***" in url.stderr


def test_a_compute_type_the_device_cannot_run_stops_the_worker_before_any_record(
    tmp_path: Path,
) -> None:
    unsupported = sorted(
        {"float16", "bfloat16", "int8_float16"} - ctranslate2.get_supported_compute_types("cpu")
    )
    assert unsupported, "this CPU supports every half-precision type; pick another"
    problem = device_problem(TranscriptionSettings(compute_type=unsupported[0]))
    assert problem is not None and unsupported[0] in problem and "int8" in problem
    assert device_problem(TranscriptionSettings()) is None
    cuda = device_problem(TranscriptionSettings(device="cuda"))
    assert (cuda is None) == (ctranslate2.get_cuda_device_count() > 0)
    result = invoke("worker", CONVEYOR_TRANSCRIPTION__COMPUTE_TYPE=unsupported[0])
    assert result.exit_code == ExitCode.USAGE, result.stderr
    assert "[transcription] compute_type" in result.stderr


def test_commands_say_which_database_and_storage_they_use(tmp_path: Path) -> None:
    result = invoke("records", "list")
    assert result.exit_code == 0
    database = tmp_path.resolve() / "conveyor-data" / "conveyor.db"
    assert f"database sqlite:///{database}" in result.stderr
    assert f"storage {tmp_path.resolve() / 'conveyor-data'}" in result.stderr


def test_the_storage_is_shown_as_the_store_describes_itself(tmp_path: Path) -> None:
    # A bucket: its URL and endpoint as the store reads them, never the credential (D16); a
    # bucket that cannot be used is a storage failure (exit 5) naming the settings to check.
    result = invoke(
        "records",
        "list",
        CONVEYOR_STORAGE__URL="s3://conveyor-objects/prod",
        CONVEYOR_STORAGE__ENDPOINT="http://127.0.0.1:1",
        CONVEYOR_STORAGE__ACCESS_KEY_ID="AKIAEXAMPLE",
        CONVEYOR_STORAGE__SECRET_ACCESS_KEY=SECRET,
    )
    assert "storage s3://conveyor-objects/prod/ at http://127.0.0.1:1" in result.stderr
    assert result.exit_code == ExitCode.UNAVAILABLE, result.stderr
    assert "check [storage] url, endpoint, region" in result.stderr
    assert SECRET not in result.output


def test_a_storage_folder_that_cannot_be_made_is_exit_5_naming_it(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    result = invoke("records", "list", CONVEYOR_STORAGE__ROOT=str(tmp_path / "file" / "data"))
    assert result.exit_code == ExitCode.UNAVAILABLE, result.stderr
    assert f"cannot use the storage: Not a directory: {tmp_path / 'file'}" in result.stderr
    assert "point [storage] root (CONVEYOR_STORAGE__ROOT)" in result.stderr


def test_the_database_follows_the_data_folder(tmp_path: Path) -> None:
    data = tmp_path / "elsewhere"
    result = invoke("records", "list", CONVEYOR_STORAGE__ROOT=str(data))
    assert result.exit_code == 0, result.stderr
    assert (data / "conveyor.db").is_file()  # beside the objects, not in ./conveyor-data
    assert not (tmp_path / "conveyor-data").exists()
    assert f"database sqlite:///{data.resolve() / 'conveyor.db'}" in result.stderr


def test_relative_paths_in_a_config_file_are_relative_to_its_folder(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "conveyor.toml").write_text('[storage]\nroot = "data"\n')
    elsewhere = tmp_path / "run"
    elsewhere.mkdir()
    result = run(["records", "list"], elsewhere, CONVEYOR_CONFIG="../etc/conveyor.toml")
    assert result.returncode == 0, result.stderr
    assert (etc / "data" / "conveyor.db").is_file()
    assert not any(elsewhere.iterdir())  # nothing written where the command ran
    config = (etc / "conveyor.toml").resolve()
    assert f"config {config}, database sqlite:///{etc.resolve() / 'data'}" in result.stderr


def test_a_home_folder_path_in_a_config_file_is_the_home_folders(tmp_path: Path) -> None:
    """``~`` in a config file's path keys (and a ``sqlite:///~/...`` URL) is the home folder,
    from any working directory: no folder named ``~`` is made where the command runs."""
    home, sub, elsewhere = tmp_path / "home", tmp_path / "sub", tmp_path / "elsewhere"
    for folder in (home, sub, elsewhere):
        folder.mkdir()
    (sub / "c.toml").write_text(
        '[storage]\nroot = "~/x-conveyor"\n[database]\nurl = "sqlite:///~/x-db/c.db"\n'
    )
    (home / "x-db").mkdir()
    result = run(
        ["records", "list"], elsewhere, CONVEYOR_CONFIG=str(sub / "c.toml"), HOME=str(home)
    )
    assert result.returncode == 0, result.stderr
    assert (home / "x-db" / "c.db").is_file()
    assert (home / "x-conveyor").is_dir()
    assert f"storage {home.resolve() / 'x-conveyor'}" in result.stderr
    assert not any(elsewhere.iterdir()) and not (sub / "~").exists()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[storage]\nroot = ""\n', "conveyor.toml line 2: [storage] root"),
        ('[storage]\nwork_dir = " "\n', "conveyor.toml line 2: [storage] work_dir"),
        (
            '[transcription.openai]\nkey_file = ""\n',
            "conveyor.toml line 2: [transcription.openai] key_file",
        ),
    ],
)
def test_an_empty_path_is_a_config_mistake_not_the_working_directory(
    tmp_path: Path, text: str, said: str
) -> None:
    (tmp_path / "conveyor.toml").write_text(text)
    result = run(["records", "list"], tmp_path)
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert f"invalid configuration: {said}: must not be empty" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conveyor.toml"]  # nothing made
    (tmp_path / "conveyor.toml").unlink()
    variable = run(["records", "list"], tmp_path, CONVEYOR_STORAGE__ROOT="")
    assert variable.returncode == ExitCode.USAGE, variable.stderr
    assert (
        "environment variable CONVEYOR_STORAGE__ROOT: [storage] root: must not be empty"
        in variable.stderr
    )
    assert not any(tmp_path.iterdir())


def test_a_provider_the_registry_does_not_know_is_refused_where_it_was_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The names ``[transcription] provider`` accepts are the providers' registry's; another is
    a configuration error naming the file and line, or the variable, and the names there are."""
    (tmp_path / "conveyor.toml").write_text(
        '[transcription]\nlanguage = "en"\nprovider = "whispr"\n'
    )
    result = invoke("records", "list")
    assert result.exit_code == ExitCode.USAGE
    assert (
        "conveyor.toml line 3: [transcription] provider: 'whispr' is not a provider; use one of "
        f"{', '.join(names())}" in result.stderr
    )
    assert {"local", "openai", "speechkit"} <= set(names())
    assert not (tmp_path / "conveyor-data").exists()
    monkeypatch.setenv("CONVEYOR_TRANSCRIPTION__PROVIDER", "speechkt")
    from_env = invoke("records", "list")
    assert from_env.exit_code == ExitCode.USAGE
    assert (
        "environment variable CONVEYOR_TRANSCRIPTION__PROVIDER: [transcription] provider: "
        "'speechkt' is not a provider" in from_env.stderr
    )


def test_a_config_file_mistake_names_the_file_the_line_and_the_likely_key(
    tmp_path: Path,
) -> None:
    (tmp_path / "conveyor.toml").write_text(
        '[storage]\nroots = "data"\n\n[pipeline]\nshort_workers = 2\nworkers = "many"\n'
    )
    result = invoke("records", "list")
    assert result.exit_code == ExitCode.USAGE
    assert (
        "conveyor.toml line 2: [storage] roots is not a setting; did you mean [storage] root?"
        in result.stderr
    )
    assert (
        "line 5: [pipeline] short_workers is not a setting; did you mean [media] short_workers?"
        in result.stderr
    )
    assert (
        "conveyor.toml line 6: [pipeline] workers: must be a whole number, e.g. workers = 2 "
        '(got "many")' in result.stderr
    )
    (tmp_path / "conveyor.toml").write_text("[pipline]\nworkers = 2\n")
    section = invoke("records", "list")
    assert section.exit_code == ExitCode.USAGE
    assert (
        "conveyor.toml line 1: [pipline] is not a setting; did you mean [pipeline]?"
        in section.stderr
    )
    assert not (tmp_path / "conveyor-data").exists()
    (tmp_path / "conveyor.toml").write_text("[storage]\nroot = data\n")
    broken = invoke("records", "list")
    assert broken.exit_code == ExitCode.USAGE
    assert "conveyor.toml: not valid TOML" in broken.stderr and "line 2" in broken.stderr


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "[storage]\nroot = 5\n",
            "conveyor.toml line 2: [storage] root: must be a path in quotes, "
            'e.g. root = "conveyor-data" (got 5)',
        ),
        (
            '[storage]\nurl = "file:"\npath_style = "maybe"\n',
            "conveyor.toml line 3: [storage] path_style: must be true or false, "
            'e.g. path_style = false (got "maybe")',
        ),
        (
            "[pipeline]\nretry_base = 1979-05-27\n",
            "conveyor.toml line 2: [pipeline] retry_base: must be a number, e.g. retry_base = 2.0 "
            "(got 1979-05-27)",
        ),
        (
            '[api]\ntrusted_proxies = "10.0.0.1"\n',
            "conveyor.toml line 2: [api] trusted_proxies: must be a list in square brackets "
            '(got "10.0.0.1")',
        ),
        (
            '[api]\ntrusted_proxies = ["10.0.0.1", 5]\n',
            "conveyor.toml line 2: [api] trusted_proxies item 2: must be text in quotes (got 5)",
        ),
        ("pipeline = 4\n", "conveyor.toml line 1: [pipeline]: must be a table of keys (got 4)"),
        (
            "[transcription]\nopenai = 5\n",
            "conveyor.toml line 2: [transcription.openai]: must be a table of keys (got 5)",
        ),
        (
            '[transcription]\ndevice = "gpu"\n',
            "conveyor.toml line 2: [transcription] device: must be one of 'cpu', 'cuda' or 'auto' "
            '(got "gpu")',
        ),
        (
            "[pipeline]\nworkers = -1\n",
            "conveyor.toml line 2: [pipeline] workers: must be at least 0 (got -1)",
        ),
        (
            '[database]\nurl = "mysql://db"\n',
            "conveyor.toml line 2: [database] url: must start with sqlite:/// (a file) or "
            "postgresql://",
        ),
        (
            "[media]\nshort_workers = true\n",
            "conveyor.toml line 2: [media] short_workers: must be a whole number, "
            "e.g. short_workers = 2 (got true)",
        ),
        (
            '[pipeline]\nworkers = "2"\n',
            "conveyor.toml line 2: [pipeline] workers: must be a whole number, e.g. workers = 2 "
            '(got "2")',
        ),
        (
            "[pipeline]\nworkers = 2.0\n",
            "conveyor.toml line 2: [pipeline] workers: must be a whole number, e.g. workers = 2 "
            "(got 2.0)",
        ),
        (
            "[storage]\npath_style = 1\n",
            "conveyor.toml line 2: [storage] path_style: must be true or false, "
            "e.g. path_style = false (got 1)",
        ),
        (
            f'[storage]\nsecret_access_key = ["{SECRET}"]\n',
            "conveyor.toml line 2: [storage] secret_access_key: must be text in quotes (got ***)",
        ),
    ],
)
def test_a_wrong_type_in_the_config_file_is_said_in_plain_words(
    tmp_path: Path, text: str, said: str
) -> None:
    """A wrong type in any key names the file, the line and the key, and says what the key
    takes, as the other mistakes do: no pydantic wording ("Input should be", class names)."""
    (tmp_path / "conveyor.toml").write_text(text)
    result = invoke("records", "list")
    assert result.exit_code == ExitCode.USAGE, result.stderr
    assert f"error: invalid configuration: {said}" in result.stderr
    for pydantic_words in ("Input should", "Input is", "<class", "Value error", "Settings"):
        assert pydantic_words not in result.stderr
    assert SECRET not in result.stderr
    assert not (tmp_path / "conveyor-data").exists()


def test_a_file_of_the_right_types_is_taken_and_a_variable_is_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file's strict reading refuses no value of the right TOML type (a float key written as
    an integer is one), and a variable that sets a key wins over the file's value of it, so that
    value is not refused."""
    (tmp_path / "conveyor.toml").write_text(
        '[storage]\nroot = "data"\npath_style = true\npresign_expires = 30\n'
        '[pipeline]\nworkers = 0\nretry_base = 3\n[api]\ntrusted_proxies = ["10.0.0.0/8"]\n'
        '[transcription]\nlanguage = "EN"\n[transcription.openai]\nmodel = "whisper-1"\n'
    )
    settings = load_settings()
    assert settings.pipeline.workers == 0 and settings.pipeline.retry_base == 3.0
    assert settings.storage.path_style is True and settings.transcription.language == "en"
    (tmp_path / "conveyor.toml").write_text('[pipeline]\nworkers = "2"\n')
    monkeypatch.setenv("CONVEYOR_PIPELINE__WORKERS", "3")
    assert load_settings().pipeline.workers == 3


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        (
            "CONVEYOR_PIPELINE__WORKERS",
            "many",
            "environment variable CONVEYOR_PIPELINE__WORKERS: [pipeline] workers: must be a "
            'whole number, e.g. CONVEYOR_PIPELINE__WORKERS=2 (got "many")',
        ),
        (
            "CONVEYOR_API__TRUSTED_PROXIES",
            "10.0.0.1",
            "environment variable CONVEYOR_API__TRUSTED_PROXIES: [api] trusted_proxies: must be "
            "a JSON list",
        ),
        (
            "CONVEYOR_STORAGE",
            "{root",
            "environment variable CONVEYOR_STORAGE: [storage]: must be a JSON object of its keys",
        ),
        (
            "CONVEYOR_STORAGE",
            '{"root": 5}',
            "environment variable CONVEYOR_STORAGE: [storage] root: must be a path",
        ),
    ],
)
def test_a_wrong_type_in_an_environment_variable_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, said: str
) -> None:
    """A list or a table set as text that is not JSON is a usage error naming the variable,
    not pydantic-settings' traceback (exit 70)."""
    monkeypatch.setenv(variable, value)
    result = invoke("records", "list")
    assert result.exit_code == ExitCode.USAGE, result.stderr
    assert f"error: invalid configuration: {said}" in result.stderr
    assert "Traceback" not in result.stderr and "SettingsError" not in result.stderr


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://conveyor:{SECRET}@127.0.0.1:1/conveyor",
        f"postgresql://conveyor@127.0.0.1:1/conveyor?password={SECRET}",
    ],
)
def test_an_unreachable_database_is_named_without_its_password(tmp_path: Path, url: str) -> None:
    result = invoke("records", "list", CONVEYOR_DATABASE__URL=url)
    assert result.exit_code == ExitCode.UNAVAILABLE
    assert "cannot reach the database postgresql://conveyor" in result.stderr
    assert SECRET not in result.output
    assert "Traceback" not in result.stderr


def test_log_lines_are_iso_8601_utc_and_carry_no_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    setup_logging(logging.INFO)
    try:
        logging.getLogger("conveyor.test").warning(
            "record 7: cannot connect to postgresql://u:%s@db/x", SECRET
        )
    finally:
        logging.basicConfig(force=True, handlers=[logging.NullHandler()])
    line = stream.getvalue()
    assert ISO_LINE.match(line), line
    assert SECRET not in line and "postgresql://u:***@db/x" in line


def test_a_providers_own_keys_are_settings_like_every_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider's own section is the ``SETTINGS`` its backend module declares: its keys are
    read from the file and the environment under ``[transcription.<name>]``, a mistyped one is
    named with the likely key, and its ``Path`` keys are relative to the config file's folder."""
    sections = provider_sections()
    assert {"openai", "speechkit"} <= set(sections)
    variables = {
        f"CONVEYOR_TRANSCRIPTION__{name.upper()}__{key.upper()}": "1"
        for name, model in sections.items()
        for key in model.model_fields
    }
    assert environment_problems(variables) == []
    (problem,) = environment_problems({"CONVEYOR_TRANSCRIPTION__OPENAI__MODLE": "x"})
    assert "did you mean CONVEYOR_TRANSCRIPTION__OPENAI__MODEL?" in problem
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "conveyor.toml").write_text(
        '[transcription.speechkit]\nkey_file = "speechkit.key"\nmodel = "general:rc"\n'
    )
    monkeypatch.setenv("CONVEYOR_CONFIG", str(etc / "conveyor.toml"))
    monkeypatch.setenv("CONVEYOR_TRANSCRIPTION__OPENAI__MODEL", "gpt-4o-transcribe")
    transcription = load_settings().transcription
    speechkit = sections["speechkit"].of(transcription)
    assert speechkit.model_dump()["key_file"] == etc / "speechkit.key"
    assert speechkit.model_dump()["model"] == "general:rc"
    assert sections["openai"].of(transcription).model_dump()["model"] == "gpt-4o-transcribe"
    (etc / "conveyor.toml").write_text('[transcription.openai]\nbase_url = "x"\nmodle = "y"\n')
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert (
        f"{etc / 'conveyor.toml'} line 3: [transcription.openai] modle is not a setting; "
        "did you mean [transcription.openai] model?" in str(refused.value)
    )


def test_config_mistakes_found_after_loading_name_the_file_and_line(
    tmp_path: Path, corpus: Path
) -> None:
    """A store URL the backend refuses and a language the recognizer does not know are config
    mistakes too: named with the file and line like the others, exit 2, nothing stored (the
    language even when no worker runs here)."""
    (tmp_path / "conveyor.toml").write_text('[storage]\nroot = "data"\nurl = "ftp://x"\n')
    store = invoke("records", "list")
    assert store.exit_code == ExitCode.USAGE, store.stderr
    assert (
        "invalid configuration: conveyor.toml line 3: [storage] url 'ftp://x': no store for 'ftp'"
        in store.stderr
    )
    (tmp_path / "conveyor.toml").write_text('[transcription]\nlanguage = "xx"\n')
    jfk = str(corpus / "audio" / "jfk.wav")
    for workers in ("0", "1"):
        added = invoke("records", "add", jfk, CONVEYOR_PIPELINE__WORKERS=workers)
        assert added.exit_code == ExitCode.USAGE, added.stderr
        assert (
            "invalid configuration: conveyor.toml line 2: [transcription] language: 'xx' is not "
            "a language code the recognizer knows" in added.stderr
        )
    assert not (tmp_path / "conveyor-data" / "uploads").exists()
    # Every command stops on it, as on any other mistake in the file, not only those that store.
    (tmp_path / "conveyor.toml").write_text('[transcription]\nlanguage = "english"\n')
    listed = run(["records", "list"], tmp_path)
    assert listed.returncode == ExitCode.USAGE, listed.stderr
    assert (
        "invalid configuration: conveyor.toml line 2: [transcription] language: 'english' is not "
        "a language code the recognizer knows" in listed.stderr
    )
    assert not (tmp_path / "conveyor-data").exists()
    variable = run(["records", "list"], tmp_path, CONVEYOR_TRANSCRIPTION__LANGUAGE="EN")
    assert variable.returncode == 0, variable.stderr  # a known code, in any case


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (  # a section in capitals is read as the section; its line is found all the same
            "[PIPELINE]\nworkrs = 2\n",
            "conveyor.toml line 2: [pipeline] workrs is not a setting; "
            "did you mean [pipeline] workers?",
        ),
        (
            '[storage]\nROOT = "x"\n',
            "conveyor.toml line 2: [storage] ROOT is not a setting; did you mean [storage] root?",
        ),
        (  # the same key in another section, in any case
            "[media]\nWORKERS = 3\n",
            "conveyor.toml line 2: [media] WORKERS is not a setting; "
            "did you mean [pipeline] workers?",
        ),
    ],
)
def test_a_key_in_another_case_names_its_line_and_the_key(
    tmp_path: Path, text: str, said: str
) -> None:
    (tmp_path / "conveyor.toml").write_text(text)
    result = invoke("records", "list")
    assert result.exit_code == ExitCode.USAGE, result.stderr
    assert f"error: invalid configuration: {said}" in result.stderr
    assert not (tmp_path / "conveyor-data").exists()


def test_a_config_file_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """Notepad on Windows starts a UTF-8 file with a byte-order mark, which TOML does not allow:
    it is read as if it were not there, and lines are counted as an editor shows them."""
    bom = b"\xef\xbb\xbf"
    (tmp_path / "conveyor.toml").write_bytes(bom + b'[storage]\nroot = "data"\n')
    result = invoke("records", "list")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "data" / "conveyor.db").is_file()
    (tmp_path / "conveyor.toml").write_bytes(bom + b"[storage]\nroot = 5\nroots = 1\n")
    wrong = invoke("records", "list")
    assert wrong.exit_code == ExitCode.USAGE
    assert "conveyor.toml line 2: [storage] root: must be a path in quotes" in wrong.stderr
    assert "conveyor.toml line 3: [storage] roots is not a setting" in wrong.stderr
    (tmp_path / "conveyor.toml").write_bytes(bom + b"[pipeline]\nworkers = 2.0\n")
    strict = invoke("records", "list")  # the file's own types are checked with the mark too
    assert strict.exit_code == ExitCode.USAGE
    assert "conveyor.toml line 2: [pipeline] workers: must be a whole number" in strict.stderr


def test_the_default_data_folder_is_beside_a_config_file_that_sets_no_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``[storage] root`` unset in the file: its default is relative, so relative to the file's
    folder as every path in it; the database and the work folder follow it. A variable still
    wins, relative to where the command runs."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "conveyor.toml").write_text("[pipeline]\nworkers = 1\n")
    elsewhere = tmp_path / "run"
    elsewhere.mkdir()
    result = run(["records", "list"], elsewhere, CONVEYOR_CONFIG="../etc/conveyor.toml")
    assert result.returncode == 0, result.stderr
    data = etc.resolve() / "conveyor-data"
    assert (data / "conveyor.db").is_file()
    assert not any(elsewhere.iterdir())  # nothing written where the command ran
    assert f"database sqlite:///{data / 'conveyor.db'}, storage {data}" in result.stderr
    (etc / "empty.toml").write_text("")  # not even a [storage] table
    empty = run(["records", "list"], elsewhere, CONVEYOR_CONFIG="../etc/empty.toml")
    assert empty.returncode == 0 and f"storage {data}" in empty.stderr, empty.stderr
    assert not any(elsewhere.iterdir())
    variable = run(
        ["records", "list"],
        elsewhere,
        CONVEYOR_CONFIG="../etc/conveyor.toml",
        CONVEYOR_STORAGE__ROOT="mine",
    )
    assert variable.returncode == 0, variable.stderr
    assert (elsewhere / "mine" / "conveyor.db").is_file()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("CONVEYOR_CONFIG", "../etc/conveyor.toml")
    settings = load_settings()
    assert settings.storage.root == data and settings.storage.work_dir is None  # <root>/work
    assert settings.database.url == f"sqlite:///{data / 'conveyor.db'}"
