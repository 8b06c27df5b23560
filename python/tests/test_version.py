"""One version everywhere: the top-level CMakeLists.txt project() line, the wheel's metadata
(read from that line), ladder.__version__ (compiled from it) and `ladder --version` (the CLI)."""
import importlib.metadata
import os
import pathlib
import re
import shutil
import subprocess

import pytest

import ladder

ROOT = pathlib.Path(__file__).resolve().parents[2]


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(ladder VERSION ([0-9]+\.[0-9]+\.[0-9]+)", text).group(1)


def test_module_and_metadata_report_the_project_version():
    assert ladder.__version__ == project_version()
    assert importlib.metadata.version("ladder") == ladder.__version__


def cli():
    """The built CLI: $LADDER_CLI, else ./ladder (scripts/test.sh runs pytest from the build folder)."""
    path = os.environ.get("LADDER_CLI") or (shutil.which("./ladder") if pathlib.Path("ladder").is_file() else None)
    return path


def test_cli_reports_the_same_version():
    path = cli()
    if path is None:
        pytest.skip("no built ladder CLI here (set LADDER_CLI or run from the build folder)")
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert out == f"ladder {ladder.__version__}"


def test_cmake_package_reports_the_same_version():
    """The build folder's CMake package files: version.hpp (what a consumer's code sees) and
    ladderConfigVersion.cmake (what find_package(ladder) sees). scripts/test.sh runs pytest
    from the build folder; tests/package checks the installed copies against the CLI."""
    header = pathlib.Path("generated/include/ladder/version.hpp")
    config = pathlib.Path("ladderConfigVersion.cmake")
    if not header.is_file() or not config.is_file():
        pytest.skip("not run from a configured build folder (no generated version.hpp here)")
    in_header = re.search(r'#define LADDER_VERSION_STRING "([^"]+)"', header.read_text()).group(1)
    in_config = re.search(r'set\(PACKAGE_VERSION "([^"]+)"\)', config.read_text()).group(1)
    assert in_header == in_config == ladder.__version__
