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


@pytest.mark.parametrize("argv, named", [(["--shapes", "4x100x1"], "multiple of 64"),
                                         (["--shapes", "4x64x1", "--only", "topk"], "--only topk"),
                                         (["--shapes", "4x64x1", "--quick"], "not allowed with")])
def test_command_line_names_bad_shapes(argv, named, capsys):
    """The command line reports what was wrong with --shapes before it looks for a GPU."""
    from fp4_inductor.bench import main

    with pytest.raises(SystemExit):
        main(argv)
    assert named in capsys.readouterr().err


def test_step_calls_time_the_step_and_its_own_ops():
    """The captured step's bench and profile compare the step with its ops run alone on the same
    case: the top-k those ops give is the step's."""
    import torch

    from fp4_inductor.bench import step_calls

    calls = step_calls(3, 256, 2, 16, 64, torch.device("cpu"))
    values, indices = calls["step"]()
    alone_values, alone_indices = calls["topk"]()
    assert values.shape == (6, 64) and torch.isfinite(values).any()
    assert torch.equal(values, alone_values) and torch.equal(indices, alone_indices)
