"""Topic name validation: legal names pass, path tricks never reach the file system."""

from __future__ import annotations

import pytest

from pyspark_logsource.errors import InvalidTopic, error_for_code
from pyspark_logsource.topics import MAX_TOPIC_LENGTH, is_internal, validate_topic_name


@pytest.mark.parametrize(
    "name", ["clicks", "a", "A.b_c-9", "__consumer_offsets", "x" * MAX_TOPIC_LENGTH, "..a", ".a."]
)
def test_legal_names_are_returned(name):
    assert validate_topic_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".",
        "..",
        "../x",
        "a/b",
        "/etc",
        "a\\b",
        "x" * 250,
        "." * 250,
        "a b",
        "tab\t",
        "new\nline",
        "caf\u00e9",
        "\u0661\u0662",
        "a\x00b",
        "a:b",
        "a*",
        "~home",
    ],
)
def test_illegal_names_raise_invalid_topic(name):
    with pytest.raises(InvalidTopic) as e:
        validate_topic_name(name)
    assert e.value.code == 17
    assert isinstance(error_for_code(17, "x"), InvalidTopic)


@pytest.mark.parametrize("name", [None, 3, b"bytes"])
def test_non_strings_raise_invalid_topic(name):
    with pytest.raises(InvalidTopic, match="must be a string"):
        validate_topic_name(name)


def test_error_message_names_the_bad_characters():
    with pytest.raises(InvalidTopic, match=r"\['/'\]"):
        validate_topic_name("a/b")


def test_internal_topics():
    assert is_internal("__consumer_offsets")
    assert not is_internal("_x")
