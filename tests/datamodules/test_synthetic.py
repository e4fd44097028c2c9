"""Synthetic clips: boxes and absences match an independent per-frame reference render, captions are well formed,
generation is reproducible, and the dataset on disk is complete, reusable and decodes to the generated frames."""
import json
from collections import Counter

import numpy as np
import pytest

from command_line.synthetic_data import synthetic_main
from datamodules import synthetic
from datamodules.synthetic import generate_synthetic_dataset, summarize_dataset
from datamodules.synthetic_scenes import (
    ACTIONS,
    COLOURS,
    SHAPES,
    SyntheticConfig,
    annotate_scene,
    clip_rng,
    draw_shape,
    generate_clip,
    render_frames,
    sample_scene,
)
from formats.records import GroundedRecord, read_records, tagged_phrases
from formats.video_files import open_video

CONFIG = SyntheticConfig(duration_s=2.0)  # 50 frames, 10 annotated ones


def reference_masks(scene, frame):
    """Per object, its visible pixels in ``frame`` and the pixels it would show alone (loops; no shared code
    with the generator but the shape templates)."""
    h, w = scene.height, scene.width
    wall = np.zeros((h, w), dtype=bool)
    if scene.wall.vertical:
        wall[:, scene.wall.start:scene.wall.end] = True
    else:
        wall[scene.wall.start:scene.wall.end, :] = True
    own = []
    for obj in scene.objects:
        mask = np.zeros((h, w), dtype=bool)
        x0, y0 = (int(np.round(c - obj.size / 2.0)) for c in obj.centres[frame])
        tpl = draw_shape(obj.shape, obj.size)
        for dy in range(obj.size):
            for dx in range(obj.size):
                if tpl[dy, dx] and 0 <= y0 + dy < h and 0 <= x0 + dx < w:
                    mask[y0 + dy, x0 + dx] = True
        own.append(mask)
    visible, alone = [], []
    for k, obj in enumerate(scene.objects):
        seen = own[k] & ~wall if obj.behind_wall else own[k].copy()
        alone.append(seen.copy())
        for later in own[k + 1:]:  # objects are listed in drawing order
            seen &= ~later
        visible.append(seen)
    return visible, alone, own, wall


def threshold(obj, config=CONFIG):
    return max(config.min_visible_pixels, config.min_visible_fraction * draw_shape(obj.shape, obj.size).sum())


def scenes(count, config=CONFIG, split="val"):
    for i in range(count):
        scene = sample_scene(clip_rng(7, split, i), config)
        yield scene, annotate_scene(scene, config, f"synth{split}{i:05d}")


def test_shape_templates():
    s = 30
    areas = {shape: draw_shape(shape, s).sum() / s ** 2 for shape in SHAPES}
    # cross: two arms a third of the side wide
    expected = {"circle": np.pi / 4, "square": 1.0, "triangle": 0.5, "diamond": 0.5, "cross": 5 / 9}
    for shape in SHAPES:
        assert areas[shape] == pytest.approx(expected[shape], abs=0.04), shape
        mask = draw_shape(shape, s)
        np.testing.assert_array_equal(mask, mask[:, ::-1])  # all are left-right symmetric
        if shape != "triangle":
            np.testing.assert_array_equal(mask, mask[::-1])
    tri = draw_shape("triangle", s)
    assert tri[0].sum() < tri[-1].sum()  # apex up
    # the four non-square shapes all differ pairwise at small sizes too
    small = [draw_shape(shape, 14) for shape in SHAPES]
    assert all((a != b).any() for i, a in enumerate(small) for b in small[i + 1:])


def test_boxes_and_absences_match_reference_render():
    reasons = Counter()
    for scene, record in scenes(12):
        frames = render_frames(scene, record.frame_indices)
        boxes, present = record.phrase_boxes()
        column = {p: j for j, p in enumerate(record.phrases)}
        for i, frame in enumerate(record.frame_indices):
            visible, alone, own, wall = reference_masks(scene, frame)
            for k, obj in enumerate(scene.objects):
                j = column[obj.phrase]
                count = visible[k].sum()
                assert present[i, j] == (count >= threshold(obj)), (record.key, frame, obj.phrase)
                if present[i, j]:
                    ys, xs = np.nonzero(visible[k])
                    np.testing.assert_array_equal(boxes[i, j], [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
                    # the rendered frame shows exactly the object's colour on its visible pixels
                    assert (frames[i][visible[k]] == COLOURS[obj.colour]).all()
                else:  # really hidden: out of frame, behind the wall, or (never, by design) under another object
                    in_frame = own[k].sum()
                    if in_frame < threshold(obj):
                        reasons["out of frame"] += 1
                    else:
                        assert obj.behind_wall and (own[k] & wall).sum() > in_frame - threshold(obj)
                        reasons["behind the wall"] += 1
                    assert alone[k].sum() < threshold(obj)
            # no stray pixels of object colours anywhere else (background and wall are low saturation)
            for colour in {o.colour for o in scene.objects}:
                union = np.any([visible[k] for k, o in enumerate(scene.objects) if o.colour == colour], axis=0)
                np.testing.assert_array_equal((frames[i] == COLOURS[colour]).all(-1), union)
    assert reasons["out of frame"] > 0 and reasons["behind the wall"] > 0


def test_records_validate_and_captions_are_well_formed():
    seen = Counter()
    for scene, record in scenes(40):
        again = GroundedRecord.from_dict(json.loads(json.dumps(record.to_dict())), source="json")
        assert again.phrases == record.phrases and again.tagged_caption == record.tagged_caption
        assert record.video_fname == f"{record.key}.mp4" and record.clip_id == "0"
        assert (record.clip_start_frame, record.clip_end_frame) == (0, CONFIG.num_frames - 1)
        assert (record.width, record.height) == CONFIG.frame_size
        assert len(record.frame_indices) == len(record.bboxes) == 10
        assert tagged_phrases(record.tagged_caption) == record.phrases  # each phrase tagged exactly once
        for phrase in record.phrases:
            assert record.caption.count(phrase) == 1
        assert len(record.caption.split()) <= 26 and "<p>" not in record.caption
        identities = [(o["colour"], o["shape"]) for o in record.extra["synthetic"]["objects"]]
        assert len(set(identities)) == len(identities) and 1 <= len(identities) <= 3
        presence = record.presence()
        first = presence.argmax(0)
        assert presence.any(0).all() and (np.diff(first) >= 0).all()  # clauses in order of first appearance
        for j, obj in enumerate(record.extra["synthetic"]["objects"]):
            p = presence[:, j]
            clause = ACTIONS[obj["action"]].format(side=obj["detail"], direction=obj["detail"])
            assert f"<p>{record.phrases[j]}</p> {clause}" in record.tagged_caption
            if obj["action"] in ("enters", "emerges"):
                assert not p[0] and p[-1]
            elif obj["action"] in ("leaves", "hides"):
                assert p[0] and not p[-1]
            elif obj["action"] == "passes":
                assert p[0] and p[-1] and not p.all()
            else:
                assert p.all()
            seen.update([obj["action"], obj["colour"], obj["shape"]])
    assert set(ACTIONS) | set(COLOURS) | set(SHAPES) <= set(seen)


def test_same_seed_same_clip_and_seeds_differ():
    frames_a, rec_a = generate_clip(clip_rng(3, "train", 5), CONFIG, "train", 5)
    frames_b, rec_b = generate_clip(clip_rng(3, "train", 5), CONFIG, "train", 5)
    np.testing.assert_array_equal(frames_a, frames_b)
    assert json.dumps(rec_a.to_dict()) == json.dumps(rec_b.to_dict())
    assert rec_a.key == "synthtrain00005_0"
    frames_c, _ = generate_clip(clip_rng(3, "train", 6), CONFIG, "train", 6)
    frames_d, _ = generate_clip(clip_rng(3, "val", 5), CONFIG, "val", 5)
    assert not np.array_equal(frames_a, frames_c) and not np.array_equal(frames_a, frames_d)
    assert frames_a.shape == (50, 128, 128, 3) and frames_a.dtype == np.uint8


def test_config_validation():
    with pytest.raises(ValueError, match="too small"):
        SyntheticConfig(frame_size=64)
    with pytest.raises(ValueError, match="min_objects"):
        SyntheticConfig(min_objects=3, max_objects=2)
    assert SyntheticConfig(frame_size=[160, 128]).frame_size == (160, 128)


def _dataset(root, workers=1, **kw):
    return generate_synthetic_dataset(root, num_train=4, num_val=2, num_test=2, seed=1, workers=workers,
                                      duration_s=2.0, **kw)


def test_dataset_on_disk(tmp_path):
    root = tmp_path / "synth"
    paths = _dataset(root)
    assert set(paths) == {"train", "val", "test"}
    records = {split: read_records(path) for split, path in paths.items()}
    assert [len(records[s]) for s in ("train", "val", "test")] == [4, 2, 2]
    assert [r.video_id for r in records["val"]] == ["synthval00000", "synthval00001"]
    assert sorted(p.name for p in (root / "videos").iterdir()) == sorted(
        r.video_fname for rs in records.values() for r in rs)
    assert not list(root.glob(".staging-*"))

    # the video decodes to the generator's frames
    record = records["train"][2]
    scene = sample_scene(clip_rng(1, "train", 2), SyntheticConfig(duration_s=2.0, seed=1))
    drawn = render_frames(scene)
    with open_video(root / "videos", record.video_fname) as video:
        assert (video.num_frames, video.width, video.height, video.fps) == (50, 128, 128, 25.0)
        decoded = video.read_frames(record.frame_indices)
    assert np.abs(decoded.astype(float) - drawn[record.frame_indices]).mean() < 3.0
    boxes, present = record.phrase_boxes()
    for i, j in zip(*np.nonzero(present)):  # object colours survive encoding at each box centre region
        obj = record.extra["synthetic"]["objects"][j]
        x1, y1, x2, y2 = boxes[i, j].astype(int)
        patch = decoded[i, y1:y2, x1:x2].reshape(-1, 3).astype(float)
        nearest = np.abs(patch - np.array(COLOURS[obj["colour"]])).sum(1).min()
        assert nearest < 30

    # reuse: same config returns at once without touching the files
    stamp = paths["train"].stat().st_mtime_ns
    assert _dataset(root) == paths and paths["train"].stat().st_mtime_ns == stamp
    # a different config is refused on request, else regenerated
    with pytest.raises(ValueError, match="num_train"):
        generate_synthetic_dataset(root, num_train=3, num_val=2, num_test=2, seed=1, workers=1, duration_s=2.0,
                                   on_config_change="error")
    generate_synthetic_dataset(root, num_train=3, num_val=2, num_test=2, seed=1, workers=1, duration_s=2.0)
    assert len(read_records(paths["train"])) == 3 and len(list((root / "videos").iterdir())) == 7

    summary = summarize_dataset(root)
    train = summary["splits"]["train"]
    assert train["clips"] == 3 and sum(train["objects_per_clip"].values()) == 3
    slots = sum(len(r.labels) * len(r.phrases) for r in read_records(paths["train"]))
    absent = sum((~r.presence()).sum() for r in read_records(paths["train"]))
    assert train["absent_slot_share"] == pytest.approx(absent / slots, abs=1e-4)


def test_interrupted_run_is_not_reused(tmp_path, monkeypatch):
    root = tmp_path / "synth"
    real = synthetic._make_clip
    calls = []

    def failing(task):
        calls.append(task)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(synthetic, "_make_clip", failing)
    with pytest.raises(KeyboardInterrupt):
        _dataset(root)
    assert not (root / "manifest.json").exists() and not (root / "annotations").exists()
    monkeypatch.setattr(synthetic, "_make_clip", real)
    paths = _dataset(root)
    assert len(read_records(paths["train"])) == 4 and len(list((root / "videos").iterdir())) == 8

    # interrupted while moving folders into place: the manifest still says "incomplete"
    manifest = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(json.dumps({**manifest, "complete": False}))
    (root / "videos" / "synthtrain00000_0.mp4").unlink()
    _dataset(root, on_config_change="error")  # same config: simply regenerated, not a config change
    assert json.loads((root / "manifest.json").read_text())["complete"] is True
    assert (root / "videos" / "synthtrain00000_0.mp4").exists()


def test_refuses_to_overwrite_foreign_data(tmp_path):
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "mine.mp4").write_bytes(b"not generated here")
    with pytest.raises(FileExistsError, match="no manifest"):
        _dataset(tmp_path)
    assert (tmp_path / "videos" / "mine.mp4").exists()


def test_output_does_not_depend_on_worker_count(tmp_path):
    one = _dataset(tmp_path / "one", workers=1)
    two = _dataset(tmp_path / "two", workers=2)
    for split in one:
        assert one[split].read_bytes() == two[split].read_bytes()
    for video in (tmp_path / "one" / "videos").iterdir():
        assert video.read_bytes() == (tmp_path / "two" / "videos" / video.name).read_bytes()


def test_cli_generates_and_summarises(tmp_path, capsys):
    summary = synthetic_main(["--root", str(tmp_path / "cli"), "--num-train", "2", "--num-val", "1", "--num-test", "1",
                              "--duration-s", "1", "--workers", "1"])
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(json.dumps(summary))
    assert [printed["splits"][s]["clips"] for s in ("train", "val", "test")] == [2, 1, 1]
    assert printed["splits"]["train"]["examples"][0].count("<p>") >= 1


def test_cli_without_options_inspects_the_existing_data_whatever_its_sizes(tmp_path, monkeypatch, capsys):
    root = tmp_path / "demo_like"
    synthetic.generate_synthetic_dataset(root, num_train=2, num_val=1, num_test=3, duration_s=1.0, workers=1)
    manifest = (root / "manifest.json").read_text()

    def no_generation(task):
        raise AssertionError("the existing dataset was regenerated")

    monkeypatch.setattr(synthetic, "_make_clip", no_generation)
    summary = synthetic_main(["--root", str(root), "--workers", "1"])
    assert [summary["splits"][s]["clips"] for s in ("train", "val", "test")] == [2, 1, 3]
    assert (root / "manifest.json").read_text() == manifest
    assert "reusing the dataset" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="regenerated"):  # an option that differs still regenerates
        synthetic_main(["--root", str(root), "--num-test", "4", "--workers", "1"])
