"""The project's dependency files agree with each other, and the `bot` command resolves.

pyproject.toml declares the dependencies (ranges), requirements.txt pins what ./run installs into .venv
(runtime, then test tools, then static checks), and requirements.lock pins, with hashes, what the Docker
image installs (the runtime dependencies and the build backend; regenerate it with `./run lock`).
"""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# requirements.txt section -> the pyproject.toml dependency list it pins
SECTIONS = {"Runtime": "dependencies", "Tests": "test", "Checks": "dev"}


def requirements_txt() -> dict[str, dict[str, Version]]:
    """requirements.txt's pins by section ("# Runtime", "# Tests", "# Checks"): {section: {name: version}}."""
    sections: dict[str, dict[str, Version]] = {}
    current = None
    for raw in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("#"):
            title = line.lstrip("# ").strip()
            if title in SECTIONS:
                current = sections.setdefault(title, {})
            continue
        if not line:
            continue
        assert current is not None, f"requirements.txt: {line!r} comes before any section"
        name, sep, version = line.partition("==")
        assert sep and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name), \
            f"requirements.txt: {line!r} is not NAME==VERSION"
        current[canonicalize_name(name)] = Version(version)
    return sections


def lock_entries() -> list[str]:
    """requirements.lock's requirements, each with its continuation lines joined, comments dropped."""
    text = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    lines = [line.split(" #", 1)[0].rstrip() for line in text.splitlines() if not line.lstrip().startswith("#")]
    return [entry.strip() for entry in re.sub(r"\\\n\s*", " ", "\n".join(lines)).splitlines() if entry.strip()]


def lock_pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for entry in lock_entries():
        requirement = Requirement(entry.split(" --hash", 1)[0])
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", entry
        pins[canonicalize_name(requirement.name)] = Version(specifier.version)
    return pins


def declared(group: str) -> dict[str, Requirement]:
    project = PYPROJECT["project"]
    listed = project["dependencies"] if group == "dependencies" else project["optional-dependencies"][group]
    requirements = [Requirement(item) for item in listed]
    return {canonicalize_name(r.name): r for r in requirements}


def test_requirements_txt_has_the_three_sections() -> None:
    sections = requirements_txt()
    assert set(sections) == set(SECTIONS)
    assert {"pytest", "ruff", "mypy"} <= set(sections["Tests"]) | set(sections["Checks"])


def test_every_lock_entry_is_pinned_and_hashed_and_the_lock_sets_no_index() -> None:
    entries = lock_entries()
    assert len(entries) > 20
    for entry in entries:
        assert not entry.startswith("-"), f"requirements.lock must carry no pip options: {entry}"
        assert re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?==\S+", entry), entry
        assert re.search(r"--hash=sha256:[0-9a-f]{64}\b", entry), f"no hash: {entry.split()[0]}"
    lock_pins()  # every entry parses as NAME==VERSION


def test_runtime_pins_are_the_locked_versions() -> None:
    locked = lock_pins()
    runtime = requirements_txt()["Runtime"]
    missing = sorted(set(runtime) - set(locked))
    assert not missing, f"pinned in requirements.txt but not in requirements.lock (run ./run lock): {missing}"
    # Any package in both files, runtime or a tool's dependency, has one version.
    for section in requirements_txt().values():
        different = {name: (str(version), str(locked[name])) for name, version in section.items()
                     if name in locked and locked[name] != version}
        assert not different, f"requirements.txt vs requirements.lock (run ./run lock): {different}"
    for name in ("pytest", "pytest-asyncio", "jsonschema", "trustme", "ruff", "mypy"):
        assert name not in locked, f"{name} is a development tool, not something the image installs"


@pytest.mark.parametrize(("section", "group"), SECTIONS.items())
def test_pyproject_declares_what_requirements_txt_pins(section: str, group: str) -> None:
    pins = requirements_txt()[section]
    wanted = declared(group)
    assert set(pins) == set(wanted), f"requirements.txt # {section} vs pyproject {group}"
    for name, requirement in wanted.items():
        assert requirement.specifier.contains(pins[name], prereleases=True), \
            f"{name}=={pins[name]} is outside pyproject's {requirement}"


def test_the_image_can_build_the_project_from_the_lock_alone() -> None:
    # The Dockerfile installs the lock with --require-hashes, then the project with --no-build-isolation:
    # the build backend must come from the lock.
    locked = lock_pins()
    for item in PYPROJECT["build-system"]["requires"]:
        requirement = Requirement(item)
        name = canonicalize_name(requirement.name)
        assert name in locked and requirement.specifier.contains(locked[name]), f"{item} is not in requirements.lock"
    dockerfile = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text(encoding="utf-8"))
    runs = [line.strip()[4:] for line in dockerfile.splitlines() if line.strip().startswith("RUN ")]
    deps = next(i for i, run in enumerate(runs) if "requirements.lock" in run and "pip install" in run)
    assert "--require-hashes" in runs[deps]
    project = next(i for i, run in enumerate(runs) if re.search(r"pip install --no-deps --no-build-isolation ", run))
    assert deps < project
    python = re.search(r"^FROM python:(\d+\.\d+)", dockerfile, re.M)
    header = re.search(r"autogenerated by pip-compile with Python (\d+\.\d+)", (ROOT / "requirements.lock").read_text())
    assert python and header and python.group(1) == header.group(1), "lock the dependencies with the image's Python"


def test_the_bot_entry_point_resolves_to_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    target = PYPROJECT["project"]["scripts"]["bot"]
    module_name, _, attribute = target.partition(":")
    command = importlib.import_module(module_name)
    for part in attribute.split("."):
        command = getattr(command, part)
    assert callable(command)
    assert command(["kql", "query_incidents", "--args", '{"time_window": "last_24h"}']) == 0
    assert "SecurityIncident" in capsys.readouterr().out
