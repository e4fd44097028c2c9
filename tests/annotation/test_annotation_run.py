"""The annotation pipeline end to end on tiny synthetic clips (local engine): noise-free oracle output
equals the truth, the output trains (HowToGround1M layout), corrupt videos are skipped and named,
interrupted runs resume, scoring uses the project's evaluator, and configs are checked."""
import json
import shutil
from pathlib import Path

import pytest

from annotation.__main__ import main
from annotation.commands.run import run_annotation
from annotation.config import ConfigError, load_config
from formats.records import read_records

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "annotation"
ORACLE = [str(CONFIGS / "synthetic.yaml"), str(CONFIGS / "synthetic_oracle.yaml")]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    from datamodules.synthetic import generate_synthetic_dataset

    root = tmp_path_factory.mktemp("annotation_synthetic")
    paths = generate_synthetic_dataset(root, num_train=0, num_val=0, num_test=4, seed=0, workers=1, duration_s=2.0)
    return {"videos": root / "videos", "truth": paths["test"]}


def oracle_config(**engine):
    return load_config(ORACLE, {"engine": {"batch_size": 2, "torch_threads": 1, **engine}})


def test_noise_free_oracle_output_equals_the_truth_and_trains(synthetic, tmp_path):
    out = tmp_path / "out"
    report = main(["run", *sum((["--config", c] for c in ORACLE), []), "--videos", str(synthetic["videos"]),
                   "--truth", str(synthetic["truth"]), "--out", str(out), "--batch-size", "2", "--no-progress"])
    assert report["clips"] == {"planned": 4, "already_done": 0, "seen": 4, "accepted": 4, "rejected": 0,
                               "skipped_corrupt": 0, "bad_spans": 0}
    assert json.loads((out / "report.json").read_text())["clips"]["accepted"] == 4
    assert set(report["stages"]) >= {"decode", "stage1", "stage2", "stage3", "stages_2_3"}
    truth = {r.key: r for r in read_records(synthetic["truth"])}
    pred = {r.key: r for r in read_records(out / "annotations")}
    assert sorted(p.name for p in (out / "annotations").iterdir()) == sorted(f"{k}.pkl" for k in truth)
    for key, t in truth.items():
        p = pred[key]
        assert set(p.phrases) == set(t.phrases)
        # clause order ties (objects visible from the first frame) cannot be told apart: compare clauses
        assert set(p.tagged_caption.rstrip(".").split(", then ")) == set(t.tagged_caption.rstrip(".").split(", then "))
        assert (p.fps, p.clip_start_frame, p.clip_end_frame, p.width, p.height) == \
            (t.fps, t.clip_start_frame, t.clip_end_frame, t.width, t.height)
        for pb, pl, tb, tl in zip(p.bboxes, p.labels, t.bboxes, t.labels):
            assert dict(zip(pl, pb.tolist())) == dict(zip(tl, tb.tolist()))
    # what `python cli.py fit` reads: the lazily indexed per-key pickle folder
    from datamodules.howtoground import HowToGroundDataModule

    dm = HowToGroundDataModule(train_annotations=str(out / "annotations"), video_root=str(synthetic["videos"]),
                               index_dir=str(tmp_path / "index"), num_workers=0, num_frames=4,
                               global_image_size=32, grounding_image_size=32)
    dm.prepare_data()
    dm.setup("fit")
    assert len(dm.datasets["train"]) == 4
    sample = dm.datasets["train"][0]
    assert sample is not None

    score = main(["score", "--pred", str(out), "--truth", str(synthetic["truth"]), "--text-encoder", "exact",
                  "--caption-metrics", "", "--no-capture", "--out", str(tmp_path / "score.json")])
    assert score["metrics"]["AP50"] == pytest.approx(1.0) and score["metrics"]["mIoU"] == pytest.approx(1.0)
    assert score["metrics"]["recall"] == pytest.approx(1.0) and score["coverage"]["accepted"] == 4
    assert json.loads((tmp_path / "score.json").read_text())["metrics"]["AP50"] == pytest.approx(1.0)


def test_corrupt_video_is_skipped_and_named(synthetic, tmp_path):
    videos = tmp_path / "videos"
    shutil.copytree(synthetic["videos"], videos)
    victim = sorted(videos.glob("*.mp4"))[1]
    victim.write_bytes(victim.read_bytes()[:600])  # truncated mid-stream
    (videos / sorted(videos.glob("*.mp4"))[2].name).unlink()  # and one missing
    report = run_annotation(oracle_config(), ORACLE, videos, tmp_path / "out", synthetic["truth"], progress=False)
    assert report["clips"]["accepted"] == 2 and report["clips"]["skipped_corrupt"] == 2
    reasons = report["skipped_corrupt"]
    assert victim.stem in reasons and victim.name in reasons[victim.stem]
    assert sorted(p.stem for p in (tmp_path / "out" / "annotations").glob("*.pkl")) == \
        sorted(k for k in (r.key for r in read_records(synthetic["truth"])) if k not in reasons)


def test_interrupted_run_resumes_without_redoing_clips(synthetic, tmp_path, monkeypatch):
    from annotation.engines import workers as pipeline

    out = tmp_path / "out"
    real_run, calls = pipeline.TextWorker.run, []

    def interrupted(self, clips):
        calls.append(len(clips))
        if len(calls) == 2:
            raise KeyboardInterrupt  # the user stops the run during the second batch
        return real_run(self, clips)

    monkeypatch.setattr(pipeline.TextWorker, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_annotation(oracle_config(batch_size=1), ORACLE, synthetic["videos"], out, synthetic["truth"],
                       progress=False)
    first = {p.name: p.stat().st_mtime_ns for p in (out / "annotations").glob("*.pkl")}
    assert len(first) == 1
    debris = out / "annotations" / ".synthtest00000_0.pkl.0a1b2c3d.partial"
    debris.write_bytes(b"\x80")  # a record half-written when a run was killed
    monkeypatch.setattr(pipeline.TextWorker, "run", real_run)
    report = run_annotation(oracle_config(), ORACLE, synthetic["videos"], out, synthetic["truth"], progress=False)
    assert report["clips"]["already_done"] == 1 and report["clips"]["accepted"] == 3
    assert report["totals_in_output"] == {"accepted": 4, "rejected": 0}
    assert {n: (out / "annotations" / n).stat().st_mtime_ns for n in first} == first
    assert not debris.exists()  # cleared by the run that completed
    again = run_annotation(oracle_config(), ORACLE, synthetic["videos"], out, synthetic["truth"], progress=False)
    assert again["clips"]["already_done"] == 4 and again["clips"]["seen"] == 0
    assert len(read_records(out / "annotations")) == 4


def test_rejected_clips_are_recorded_and_redone_only_on_request(synthetic, tmp_path):
    config = load_config(ORACLE, {"tracks": {"min_boxes": 10_000}})  # no clip has that many boxes
    out = tmp_path / "out"
    report = run_annotation(config, ORACLE, synthetic["videos"], out, synthetic["truth"], limit=2, progress=False)
    assert report["clips"]["rejected"] == 2 and report["rejected_by_reason"] == {
        "stage3: box(es) matched a video-level phrase (at least # needed)": 2}
    assert len(list((out / "rejected").glob("*.json"))) == 2
    assert run_annotation(config, ORACLE, synthetic["videos"], out, synthetic["truth"], limit=2,
                          progress=False)["clips"]["already_done"] == 2
    redo = run_annotation(oracle_config(), ORACLE, synthetic["videos"], out, synthetic["truth"], limit=2,
                          retry_rejected=True, progress=False)
    assert redo["clips"]["accepted"] == 2 and not list((out / "rejected").glob("*.json"))


def test_videos_without_truth_are_cut_into_clips(synthetic, tmp_path):
    from annotation.clips import clips_from_videos

    specs, skipped = clips_from_videos(synthetic["videos"], seconds=0.8, min_seconds=0.5)
    first = [s for s in specs if s.video_fname == "synthtest00000_0.mp4"]
    # 2-s clips at 25 fps in 20-frame windows: 0-19, 20-39, 40-49 (10 frames = 0.4 s < 0.5 s: dropped)
    assert [(s.clip_id, s.start_frame, s.end_frame) for s in first] == [("0", 0, 19), ("1", 20, 39)]
    assert first[0].video_id == "synthtest00000_0" and not skipped
    whole, _ = clips_from_videos(synthetic["videos"])
    assert [s.key for s in whole][:1] == ["synthtest00000_0_0"] and whole[0].end_frame is None


def test_config_errors_name_the_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("stage2:\n  backend: rule\n  min_shares: 0.3\n")
    with pytest.raises(ConfigError,
                       match=r"bad.yaml: key 'stage2.min_shares' is not an option of stage2 backend 'rule'"):
        load_config([bad])
    bad.write_text("stage3:\n  backend: llm\n")
    with pytest.raises(ConfigError, match="stage3 use backend 'llm' but there is no 'llm' section"):
        load_config([bad])
    bad.write_text("stage1:\n  backend: glam\n")
    with pytest.raises(ConfigError,
                       match=r"stage1.backend 'glam' is unknown "
                             r"\(known: captioner_detector, detail_captions, glamm, noisy_oracle\)"):
        load_config([bad])
    bad.write_text("engine:\n  batchsize: 3\n")
    with pytest.raises(ConfigError, match="unknown key 'engine.batchsize'"):
        load_config([bad])
    # an overlay that switches a stage's backend drops the options of the old backend
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("stage3:\n  backend: llm\nllm:\n  backend: openai\n  url: http://localhost:1/v1\n  model: m\n")
    config = load_config([CONFIGS / "synthetic.yaml", overlay])
    assert config["stage3"] == {"backend": "llm"} and config["stage2"]["min_share"] == 0.2


def test_numeric_options_are_checked_where_they_are_typed(synthetic, tmp_path, capsys):
    base = ["run", *sum((["--config", c] for c in ORACLE), []), "--videos", str(synthetic["videos"]),
            "--truth", str(synthetic["truth"]), "--out", str(tmp_path / "out")]
    for option, value, wanted in (("--limit", "-1", "an integer >= 0"), ("--batch-size", "0", "a positive integer"),
                                  ("--limit", "two", "an integer >= 0")):
        with pytest.raises(SystemExit):
            main([*base, option, value])
        assert f"argument {option}: must be {wanted}, got '{value}'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="--limit must be >= 0"):
        run_annotation(oracle_config(), ORACLE, synthetic["videos"], tmp_path / "out", synthetic["truth"], limit=-1)


def test_missing_videos_folder_is_a_message_and_leaves_no_folders(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match=r"error: --videos .*no_such_folder: not a folder"):
        main(["run", *sum((["--config", c] for c in ORACLE), []), "--videos", str(tmp_path / "no_such_folder"),
              "--out", str(out), "--no-progress"])
    assert not out.exists()


def test_record_ids_never_leave_the_output_folder(synthetic, tmp_path):
    from annotation.output import OutputFolder
    from formats.records import write_records_json

    # ids that cannot name one file are refused when the truth is read, naming file, record and field
    records = read_records(synthetic["truth"])
    bad = [r.to_dict() for r in records]
    bad[1]["video_id"] = "../../../X"
    (tmp_path / "bad_truth.json").write_text(json.dumps({"records": bad}))
    with pytest.raises(SystemExit, match=r"bad_truth.json, record '../../../X_.*field 'video_id'.*path separator"):
        main(["run", *sum((["--config", c] for c in ORACLE), []), "--videos", str(synthetic["videos"]),
              "--truth", str(tmp_path / "bad_truth.json"), "--out", str(tmp_path / "out"), "--no-progress"])
    assert not (tmp_path / "out").exists() and not (tmp_path.parent / "X_0.pkl").exists()

    # records built in code (not validated) still land inside OUT/annotations under distinct names
    output = OutputFolder(tmp_path / "out2" / "deep")
    ids = ["../../../X", "sub/dir", "猫", "犬", "sub_dir"]
    for vid in ids:
        record = records[0]
        record.video_id = vid
        written = output.write_record(record)
        assert written.parent == output.annotations
    names = sorted(p.name for p in output.annotations.iterdir())
    clip = records[0].clip_id
    assert len(names) == len(ids) and {f"猫_{clip}.pkl", f"犬_{clip}.pkl", f"sub_dir_{clip}.pkl"} <= set(names)
    assert {OutputFolder.file_stem(f"{v}_{records[0].clip_id}") for v in ids} == output.done_keys()
    assert sorted(p.name for p in (tmp_path / "out2").iterdir()) == ["deep"]
    write_records_json(records[:1], tmp_path / "ok.json")  # still a readable record


def test_score_output_equal_to_an_input_is_refused(synthetic, tmp_path):
    truth = tmp_path / "truth.json"
    shutil.copy(synthetic["truth"], truth)
    before = truth.read_bytes()
    with pytest.raises(SystemExit, match=r"--out .*truth.json is --truth .*truth.json, an input of this command"):
        main(["score", "--pred", str(tmp_path / "pred"), "--truth", str(truth), "--out", str(truth)])
    assert truth.read_bytes() == before
