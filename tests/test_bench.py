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


def _ncu_source_summary():
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "ncu_source_summary.py")
    spec = importlib.util.spec_from_file_location("ncu_source_summary", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("by_reason", [False, True])
def test_ncu_source_summary_sums_samples_by_part(tmp_path, capsys, by_reason):
    """``benchmarks/ncu_source_summary.py`` on a small source page (lines before the table, a
    loop holding a GMMA inside an outer loop, a branch to an address not listed): each part's
    samples are the sums of its lines, from the all-samples column or (ncu versions that list
    stalls by reason only) the sum of the reasons'."""
    import gzip

    module = _ncu_source_summary()
    code = [("0x0000", "MOV R1, c[0x0][0x28]", 5, 1), ("0x0010", "LDG.E R2, desc[UR4][R2.64]", 7, 3),
            ("0x0020", "IGMMA.64x128x32.S8.S8 gsb0", 11, 2), ("0x0030", "@P0 BRA 0x20", 13, 4),
            ("0x0040", "SHFL.BFLY PT, R3, R2, 0x1, 0x1f", 17, 5), ("0x0050", "@!P1 BRA 0x10", 19, 6),
            ("0x0060", "@P2 BRA 0x8", 23, 7)]
    csv_path = tmp_path / "source.csv.gz"
    with gzip.open(csv_path, "wt") as f:
        if by_reason:  # the samples split over two reasons; a not-issued reason column is left out
            f.write('"Address","Source","stall_long_sb","stall_wait","stall_wait (Not Issued)"\n')
            f.writelines(f'"{a}","{t}","{s - 1}","1","{n}"\n' for a, t, s, n in code)
        else:
            f.write("==PROF== Connected\n\"Address\",\"Source\",\"Warp Stall Sampling (All Samples)\","
                    "\"Warp Stall Sampling (Not-issued Samples)\"\n")
            f.writelines(f'"{a}","{t}","{s}","{n}"\n' for a, t, s, n in code)
    module.summary(module.read_rows(str(csv_path)))
    out = capsys.readouterr().out
    idle = (lambda n: 0) if by_reason else (lambda n: n)
    assert f"| tile loop | 2 | 24 | 25.3 % | {idle(6)} |" in out  # 0x20-0x30
    assert f"| other loops | 3 | 43 | 45.3 % | {idle(14)} |" in out  # 0x10, 0x40, 0x50
    assert f"| outside loops | 2 | 28 | 29.5 % | {idle(8)} |" in out  # 0x8 is not a listed address
    assert "tile loop: 0x20-0x30" in out


@pytest.mark.parametrize("script, args, reasons", [
    ("ncu_score.sh", ["2"], ["long_scoreboard", "branch_resolving"]),
    ("ncu_wgmma.sh", ["package 4 wgmma=1"], ["long_scoreboard", "membar"]),
])
def test_ncu_scripts_pass_their_metrics(script, args, reasons, tmp_path):
    """The ncu scripts run on the device machine only: here an ncu stand-in on PATH shows what they
    pass it, and without one they say so and exit 1."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which("bash") is None:
        pytest.skip("no bash")
    root = Path(__file__).resolve().parent.parent
    fake = tmp_path / "ncu"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "args"}\necho "    gpu__time_duration.sum us 1.0"\n')
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    run = subprocess.run(["bash", str(root / "benchmarks" / script), *args], cwd=root, env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    metrics = (tmp_path / "args").read_text().split("--metrics ")[1].split()[0].split(",")
    assert "gpu__time_duration.sum" in metrics
    for reason in reasons:
        assert f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio" in metrics
    assert "" not in metrics
    if shutil.which("ncu") is None and not list(Path("/opt/nvidia").glob("nsight-compute/*/ncu")):
        bare = subprocess.run(["bash", str(root / "benchmarks" / script), *args], cwd=root, capture_output=True,
                              text=True, timeout=60)
        assert (bare.returncode, bare.stdout.strip()) == (1, "no ncu found")
