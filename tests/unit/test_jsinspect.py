"""The tolerant reader of Node ``util.inspect`` text."""

from __future__ import annotations

import math

import pytest

from ctx_inspect.formats.jsinspect import InspectError, is_complete, parse_inspect, strip_ansi


def test_one_line_object_with_every_scalar() -> None:
    text = "{ a: 1, b: -2.5, c: 'x', d: undefined, e: null, f: true, g: false, h: 12n, i: 1e3 }"
    assert parse_inspect(text) == {
        "a": 1,
        "b": -2.5,
        "c": "x",
        "d": None,
        "e": None,
        "f": True,
        "g": False,
        "h": 12,
        "i": 1000.0,
    }


def test_multi_line_object_equals_its_one_line_form() -> None:
    multi = """{
  provider: 'anthropic',
  blocked: [
    {
      provider: 'anthropic',
      limit: 141808
    },
    { provider: 'openai', limit: 87808 }
  ]
}"""
    one = (
        "{ provider: 'anthropic', blocked: [ { provider: 'anthropic', limit: 141808 }, "
        "{ provider: 'openai', limit: 87808 } ] }"
    )
    assert parse_inspect(multi) == parse_inspect(one)
    assert parse_inspect(one)["blocked"][1] == {"provider": "openai", "limit": 87808}


def test_empty_containers() -> None:
    assert parse_inspect("{}") == {}
    assert parse_inspect("[]") == []
    assert parse_inspect("{ blocked: [] }") == {"blocked": []}


def test_strings_quotes_and_escapes() -> None:
    assert parse_inspect('"it\'s"') == "it's"
    assert parse_inspect("`both ' and \"`") == "both ' and \""
    assert parse_inspect(r"'a\nb\tc\\d\'e\x41\u00e9\u{1F680}'") == "a\nb\tc\\d'eAé🚀"
    assert parse_inspect("{ 'key-with-dash': 1, \"key's\": 2 }") == {"key-with-dash": 1, "key's": 2}


def test_old_node_split_strings_and_cut_strings() -> None:
    assert parse_inspect("'abc' +\n  'def'") == "abcdef"
    assert parse_inspect("{ s: 'aaaa'... 9996 more characters }") == {"s": "aaaa"}


def test_special_numbers() -> None:
    value = parse_inspect("{ a: NaN, b: Infinity, c: -Infinity, d: -0, e: 1_000 }")
    assert math.isnan(value["a"])
    assert value["b"] == math.inf and value["c"] == -math.inf
    assert value["d"] == 0 and value["e"] == 1000


def test_depth_markers_functions_and_references_become_text() -> None:
    value = parse_inspect(
        "<ref *1> { a: [Object], b: [Array], f: [Function: go], g: [class Foo], "
        "c: [Circular *1], s: Symbol(tag), d: 2026-01-17T11:27:00.101Z }"
    )
    assert value == {
        "a": "[Object]",
        "b": "[Array]",
        "f": "[Function: go]",
        "g": "[class Foo]",
        "c": "[Circular *1]",
        "s": "Symbol(tag)",
        "d": "2026-01-17T11:27:00.101Z",
    }


def test_class_instances_maps_sets_and_sparse_arrays() -> None:
    assert parse_inspect("Foo { x: 1 }") == {"x": 1}
    assert parse_inspect("Map(2) { 'a' => 1, 'b' => { c: 2 } }") == {"a": 1, "b": {"c": 2}}
    assert parse_inspect("Set(3) { 1, 'two', 3 }") == [1, "two", 3]
    assert parse_inspect("[ 1, <2 empty items>, 4, ... 10 more items ]") == [1, 4]
    assert parse_inspect("[Object: null prototype] { a: 1 }") == {"a": 1}
    assert parse_inspect("{ [Symbol(k)]: 1 }") == {"[Symbol(k)]": 1}


def test_ansi_colours_are_ignored() -> None:
    coloured = "{ a: \x1b[33m1\x1b[39m, b: \x1b[32m'x'\x1b[39m, c: \x1b[90mundefined\x1b[39m }"
    assert parse_inspect(coloured) == {"a": 1, "b": "x", "c": None}
    assert strip_ansi("\x1b[1;31mred\x1b[0m") == "red"
    assert strip_ansi("plain") == "plain"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("{ a: 1", 6),
        ("{ a: 'open }", 5),
        ("{ a: 1 } trailing", 9),
        ("{ a: 1 b: 2 }", 7),
        ("", 0),
        ("{ a: @ }", 5),
        ("'\\u{zz}'", 7),
    ],
)
def test_errors_say_where(text: str, where: int) -> None:
    with pytest.raises(InspectError) as err:
        parse_inspect(text)
    assert err.value.offset == where
    assert f"at character {where}" in str(err.value)


def test_is_complete() -> None:
    assert is_complete("{ a: 1 }")
    assert is_complete("{ a: '}' }")
    assert is_complete("[ { a: [ 1 ] } ]")
    assert not is_complete("{")
    assert not is_complete("{ a: [ 1 }")
    assert not is_complete("{ a: 'x }")
    assert not is_complete("no brackets")
    assert not is_complete("} {")
