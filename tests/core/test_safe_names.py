"""core.safe_names: every key becomes one readable file name in its folder, distinct keys distinct names."""
from core.safe_names import MAX_STEM_BYTES, safe_file_name, unsafe_id_reason

import random


def test_ordinary_and_non_latin_names_stay_readable():
    assert safe_file_name("vid_12-a.b") == "vid_12-a.b"
    assert safe_file_name("猫", ".mp4") == "猫.mp4" and safe_file_name("犬", ".mp4") == "犬.mp4"
    assert safe_file_name("café_0") == "café_0"


def test_names_never_leave_or_name_a_folder(tmp_path):
    for key in ("../../../X", "sub/dir", "..", ".", ".hidden", "a\\b", "a\x00b", "", " ", "~x", "x" * 400,
                "猫" * 200):
        name = safe_file_name(key, ".pkl")
        assert "/" not in name and "\\" not in name and "\x00" not in name and not name.startswith(".")
        assert len(name.encode("utf-8")) <= MAX_STEM_BYTES + 13
        path = tmp_path / name
        path.write_text("x")  # one file, directly in the folder
        assert path.parent == tmp_path and path.is_file()


def test_distinct_keys_give_distinct_names():
    rng = random.Random(0)
    alphabet = "ab_./\\ ~猫-"
    keys = {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(5000)}
    names = {safe_file_name(k) for k in keys}
    assert len(names) == len(keys)
    assert safe_file_name("a b") != safe_file_name("a_b") == "a_b"


def test_ids_that_cannot_name_a_file_have_a_reason():
    assert unsafe_id_reason("vid_1") is None and unsafe_id_reason("猫") is None
    for value, why in (("a/b", "path separator"), ("..", "folder"), ("a\tb", "control"), ("", "empty")):
        assert why in unsafe_id_reason(value)
