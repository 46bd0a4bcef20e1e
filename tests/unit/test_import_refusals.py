"""`longterm import` refuses a file in no shape it reads, instead of reporting it imported.

Before, ``{"foo": "bar"}``, ``{"data": [1, 2, 3]}`` and ``[{"name": "x"}]`` exited 0 with
"1 sessions, 1 new events, 0 memories saved": a user believed the data was kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from longterm import InvalidInputError
from longterm.transcripts import load_file

LONGTERM = str(Path(sys.executable).with_name("longterm"))


@pytest.mark.parametrize(
    "content, field",
    [({"foo": "bar"}, "foo"), ({"data": [1, 2, 3]}, "data"), ([{"name": "x"}], "name")],
)
def test_an_object_that_is_no_message_is_refused(tmp_path: Path, content: object, field: str):
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(content))
    with pytest.raises(InvalidInputError, match=f"none of the fields of a message \\(its fields: {field}\\)"):
        load_file(path, app_name="a", user_id="u")
    env = {**os.environ, "LONGTERM_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [
            LONGTERM,
            "--config",
            json.dumps({"path": str(tmp_path / "m.db")}),
            "import",
            str(path),
            "--app",
            "a",
            "--user",
            "u",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode != 0 and done.stderr.startswith("error:") and "Traceback" not in done.stderr
    assert "none of the fields of a message" in done.stderr


def test_openai_messages_with_typed_parts_import(tmp_path: Path):
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"role": "user", "content": [{"type": "text", "text": "I like blues"}]}) + "\n")
    (session,) = load_file(path, app_name="a", user_id="u").sessions
    assert session["events"][0]["content"]["parts"] == [{"type": "text", "text": "I like blues"}]


def test_openai_image_parts_import_as_media(tmp_path: Path):
    path = tmp_path / "chat.jsonl"
    msg = {
        "role": "user",
        "content": [
            {"type": "text", "text": "my cat"},
            {"type": "image_url", "image_url": {"url": "https://x/cat.png"}},
        ],
    }
    path.write_text(json.dumps(msg) + "\n")
    (session,) = load_file(path, app_name="a", user_id="u").sessions
    assert session["events"][0]["content"]["parts"][1] == {
        "file_data": {"file_uri": "https://x/cat.png", "mime_type": "image/*"}
    }
