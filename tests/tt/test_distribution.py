"""The installable package: one version everywhere, the license, the install line (scripts/check_wheel.sh builds
and installs the wheel itself; it is slow and runs by hand)."""

import contextlib
import io
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

import tilelang_tt
from tilelang_tt import cli

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _cli_version() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    name, number = out.getvalue().split()
    assert name == "tilelang-tt"
    return number


def test_one_version_in_the_module_the_cli_and_the_installed_metadata():
    assert tilelang_tt.__version__ == _cli_version() == version("tilelang-tt")


# scikit-build-core's regex provider, its default pattern (scikit_build_core/metadata/regex.py); the build
# backend lives only in pip's isolated build environment, so the suite applies the same pattern itself.
_SCIKIT_BUILD_VERSION_REGEX = r'(?i)^(__version__|VERSION)(?: ?\: ?str)? *= *([\'"])v?(?P<value>.+?)\2'


def test_the_build_reads_the_version_from_the_module():
    """pyproject.toml has no version of its own: the build takes version.py's (the regex the build backend runs)."""
    assert "version" not in PYPROJECT["project"] and "version" in PYPROJECT["project"]["dynamic"]
    settings = PYPROJECT["tool"]["scikit-build"]["metadata"]["version"]
    assert settings["provider"] == "scikit_build_core.metadata.regex"
    assert "regex" not in settings  # the default pattern above is the one the build runs
    text = (ROOT / settings["input"]).read_text()
    match = re.search(_SCIKIT_BUILD_VERSION_REGEX, text, re.MULTILINE)
    assert match and match.group("value") == tilelang_tt.__version__


def test_license_apache_2_in_the_metadata_and_the_files():
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE", "NOTICE"]
    text = (ROOT / "LICENSE").read_text().split()
    assert text[:4] == ["Apache", "License", "Version", "2.0,"] and "APPENDIX:" in text
    notice = (ROOT / "NOTICE").read_text()
    assert "TileLang" in notice and "MIT" in notice and "TT-Metalium" in notice


def test_readme_install_line_takes_the_cpu_build_of_torch():
    lines = [line for line in (ROOT / "README.md").read_text().splitlines() if "pip install" in line and "torch" in line]
    assert lines and all("--index-url https://download.pytorch.org/whl/cpu" in line for line in lines), lines
