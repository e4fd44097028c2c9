"""The 16-bit agreement diagnostic on one seed: it prints one line per dtype, and a 16-bit copy really
differs from fp32 while its caption stays the same."""
from experiments.sixteen_bit_agreement import agreement, main


def test_one_seed_agrees_and_is_printed(capsys):
    rows = agreement(1)
    assert set(rows) == {"bf16", "fp16"}
    for row in rows.values():
        assert row["captions_equal"] == 1 and 0 < row["box"] < 0.01 and 0 < row["objectness"] < 0.02
    assert rows["fp16"]["box"] < rows["bf16"]["box"]  # 11 significant bits against 8
    main(["--seeds", "1"])
    assert [line.split(":")[0] for line in capsys.readouterr().out.splitlines()] == ["bf16", "fp16"]
