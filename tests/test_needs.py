"""Under ``CI=true`` nothing skips: a missing corpus, service or browser, and any other skip, fail.

Runs a small suite with this suite's own ``conftest.py`` and ``tests.support.needs`` in a
subprocess, once as CI and once locally, and counts the outcomes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

PROBES = {
    "test_probe_need": """
        from pathlib import Path
        from tests.support.needs import need, need_corpus

        def test_missing_corpus():
            need_corpus(Path("no-such-corpus-folder"))

        def test_missing_service():
            need(False, "a browser")

        def test_met():
            need(True, "something present")
    """,
    "test_probe_skips": """
        import pytest

        def test_plain_skip():
            pytest.skip("not here")

        @pytest.mark.skipif(True, reason="a marker")
        def test_marker():
            pass
    """,
    "test_probe_module_skip": """
        import pytest
        pytest.skip("a whole module", allow_module_level=True)

        def test_never():
            pass
    """,
    "test_probe_module_need": """
        from pathlib import Path
        from tests.support.needs import need_corpus
        FOLDER = need_corpus(Path("no-such-corpus-folder"), module=True)

        def test_never():
            pass
    """,
}


@pytest.fixture
def probe_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    # The probe suite imports the helpers by full name, as this suite does.
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest((HERE / "conftest.py").read_text())
    pytester.makepyfile(**PROBES)
    return pytester


def test_under_ci_every_skip_is_a_failure(
    probe_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    result = probe_suite.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rA", "--continue-on-collection-errors"
    )
    # Failed: 2 missing needs and a skip; errors: a skipif (at set-up) and the 2 modules.
    result.assert_outcomes(passed=1, failed=3, errors=3)
    result.stdout.fnmatch_lines(["*no-such-corpus-folder is missing, and under CI=true*"])
    result.stdout.fnmatch_lines(["*a browser is missing, and under CI=true nothing may skip*"])
    result.stdout.fnmatch_lines(["*skipped under CI=true, where nothing may skip*"])


def test_locally_a_missing_need_skips_with_its_reason(
    probe_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    result = probe_suite.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, skipped=6)
    result.stdout.fnmatch_lines(["*a browser is missing*"])
