"""The command line's small doors: `--version`, and a space name refused in words."""

from __future__ import annotations

from importlib import metadata

import pytest
from pydantic import ValidationError

from cli.main import build_parser
from common.models.api import SpaceCreate, SpaceRebuild


def test_version_prints_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"atommem {metadata.version('atommem')}"


@pytest.mark.parametrize("name", ["bad name!", "-dash", "", "x" * 129, "a/b"])
def test_a_bad_space_name_is_refused_with_the_rule_in_words(name: str) -> None:
    for model, field in ((SpaceCreate, "name"), (SpaceRebuild, "into")):
        with pytest.raises(ValidationError, match="letters, digits, '.', '_' or '-'"):
            model.model_validate({field: name})
    assert SpaceCreate(name="alice.v2_x-1").name == "alice.v2_x-1"
