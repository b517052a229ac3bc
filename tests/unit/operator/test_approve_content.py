"""``ankka approve --content``: a JSON object (the form's values answering an MCP server's
question), refused with a clear error otherwise."""

from __future__ import annotations

import argparse

import pytest

from ankka.operator.approve import configure


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.parse_args(["t1", "eli_1", "--digest", "d" * 64, *argv])


def test_content_is_a_json_object_and_absent_by_default() -> None:
    assert parsed().content is None
    assert parsed("--content", '{"quantity": 3}').content == {"quantity": 3}


@pytest.mark.parametrize("raw", ["[1]", "not json", '"text"'])
def test_content_that_is_not_a_json_object_is_refused_naming_it(
    raw: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parsed("--content", raw)
    assert "--content" in capsys.readouterr().err
