"""The benchmark's command line (the timings themselves need a GPU: docs/benchmarks.md)."""

import pytest

from fp4_inductor.bench import TARGET_SHAPES, parse_shapes


def test_shapes_parse():
    assert parse_shapes("1x131072x1, 8x32768x2") == [(1, 131072, 1), (8, 32768, 2)]
    assert parse_shapes(",".join("x".join(map(str, s)) for s in TARGET_SHAPES)) == list(TARGET_SHAPES)


@pytest.mark.parametrize("text, named", [("64x32768", "64x32768"), ("64x32768x0", "64x32768x0"),
                                         ("ax32768x1", "ax32768x1"), ("4x100x1", "multiple of 64"),
                                         ("4x-64x1", "4x-64x1"), ("", "''")])
def test_bad_shapes_name_what_came(text, named):
    with pytest.raises(ValueError, match="--shapes") as error:
        parse_shapes(text)
    assert named in str(error.value)
