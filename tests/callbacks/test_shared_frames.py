"""One decode per clip: a video folder's clips decoded once give the model the grid frames a grid read
gives, and the annotated MP4 drawn from those frames is, byte for byte, the one a second decode makes."""
from types import SimpleNamespace

import numpy as np
import pytest

from callbacks.annotated_video import ClipPrediction, render_annotated_video
from callbacks.annotated_video_writer import AnnotatedVideoWriter
from callbacks.shared_frame_video import SharedFramesError, SharedFrameVideo
from datamodules.video_folder import VideoFolderDataset
from formats.video_reader import PyAVVideoSource
from formats.video_writer import write_video

W, H, FPS = 96, 64, 25
SIZES = {"global_image_size": 32, "grounding_image_size": 48}


def _videos(folder, seconds=(5.2, 3.0), seed=0):
    """Moving noise (every frame differs): any frame taken from the wrong place shows."""
    rng = np.random.default_rng(seed)
    for k, length in enumerate(seconds):
        n = int(round(length * FPS))
        base = rng.integers(0, 256, (H, W + n, 3), dtype=np.uint8)
        frames = np.stack([base[:, i:i + W] for i in range(n)])
        write_video(folder / f"v{k}.mp4", frames, FPS, gop=FPS)
    return folder


def _prediction(record, rng):
    frames = [{"frame": int(g), "labels": ["a cat", "a box"],
               "boxes": [[float(x), 5.0, float(x) + 30, 40.0], [50.0, 10.0 + j % 7, 90.0, 60.0]]}
              for j, (g, x) in enumerate(zip(record.frame_indices, rng.integers(0, 60, len(record.frame_indices))))]
    return {"caption": f"a cat and a box in clip {record.key}", "phrases": ["a cat", "a box"], "frames": frames}


def test_a_clip_decoded_once_gives_the_model_the_frames_a_grid_read_gives(tmp_path):
    folder = _videos(tmp_path)
    plain = VideoFolderDataset(folder, clip_seconds=2.0, **SIZES)
    shared = VideoFolderDataset(folder, clip_seconds=2.0, video_frames=True, **SIZES)
    assert len(plain.records) == 5  # 3 + 2 clips, the last of each video aligned to its end (overlapping)
    for i, record in enumerate(plain.records):
        a, b = plain[i], shared[i]
        for name in ("global_frames", "grounding_frames", "frame_indices", "caption_positions", "size"):
            assert a[name].equal(b[name]), (record.key, name)
        with PyAVVideoSource(folder / record.video_fname) as fresh:
            span = fresh.read_frame_list(range(record.clip_start_frame, record.clip_end_frame + 1), colour="yuv")
            grid = fresh.read_frames(record.frame_indices.tolist())
        assert b["video_first"] == record.clip_start_frame
        assert len(b["video_frames"]) == len(span)
        for got, expected in zip(b["video_frames"], span):  # the decoder's planes, in the writer's format
            assert got.subsampled and got.y.shape == (H, W) and got.tags == expected.tags
            assert all(np.array_equal(getattr(got, p), getattr(expected, p)) for p in "yuv")
        assert np.array_equal(b["source_frames"], grid)
        assert "video_frames" not in a


def _feed(video, records, predictions, dataset, order=None):
    for i in order or range(len(records)):
        sample = dataset[i]
        video.add(records[i].key, predictions[records[i].key], sample["video_first"], sample["video_frames"])


@pytest.mark.parametrize("seed", [0, 1])
def test_shared_frames_make_the_file_a_second_decode_makes(tmp_path, seed):
    folder = _videos(tmp_path, seconds=(5.2 + seed,), seed=seed)
    dataset = VideoFolderDataset(folder, clip_seconds=2.0, video_frames=True, **SIZES)
    records = dataset.records
    rng = np.random.default_rng(seed)
    predictions = {r.key: _prediction(r, rng) for r in records}
    last = records[0].extra["num_frames"] - 1
    video = SharedFrameVideo(records, tmp_path / "shared.mp4", 0, last, W, H, FPS)
    _feed(video, records, predictions, dataset)
    shared = video.close()
    with PyAVVideoSource(folder / "v0.mp4") as source:
        second = render_annotated_video(source, tmp_path / "second.mp4",
                                        [ClipPrediction(r, predictions[r.key]) for r in records], 0, last, FPS,
                                        chunk_frames=17)
    assert shared.read_bytes() == second.read_bytes()


def test_a_clip_that_never_came_is_an_error_and_leaves_no_file(tmp_path):
    folder = _videos(tmp_path, seconds=(5.2,))
    dataset = VideoFolderDataset(folder, clip_seconds=2.0, video_frames=True, **SIZES)
    records = dataset.records
    predictions = {r.key: _prediction(r, np.random.default_rng(0)) for r in records}
    video = SharedFrameVideo(records, tmp_path / "out.mp4", 0, records[0].extra["num_frames"] - 1, W, H, FPS)
    _feed(video, records, predictions, dataset, order=[0])
    with pytest.raises(SharedFramesError, match="never came"):
        video.close()
    video.abort()
    gap = SharedFrameVideo(records, tmp_path / "gap.mp4", 0, records[0].extra["num_frames"] - 1, W, H, FPS)
    with pytest.raises(SharedFramesError, match="never decoded"):
        _feed(gap, records, predictions, dataset, order=[1])  # frames 0.. missing before clip 1
    gap.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v0.mp4"]


def _run_callback(callback, dataset, predictions, skip=()):
    """One predict epoch of ``callback`` as Lightning calls it: set-up, then a batch per clip."""
    trainer = SimpleNamespace(world_size=1, is_global_zero=True, predict_dataloaders=[SimpleNamespace(dataset=dataset)],
                              progress_bar_callback=None, callbacks=[],
                              datamodule=SimpleNamespace(datasets={"predict": dataset}))
    callback.setup(trainer, None, "predict")
    callback.on_predict_epoch_start(trainer, None)
    for index, record in enumerate(dataset.records):
        if record.key in skip:
            batch = {"keys": [], "skipped": [(record.key, "VideoDecodeError: test")]}
            callback.on_predict_batch_end(trainer, None, {"predictions": {}}, batch, index)
            continue
        sample = dataset[index]
        batch = {"keys": [record.key], "skipped": []}
        if "video_frames" in sample:
            batch.update(video_frames=[sample["video_frames"]], video_first=[sample["video_first"]])
        callback.on_predict_batch_end(trainer, None, {"predictions": {record.key: predictions[record.key]}}, batch,
                                      index)
    callback.on_predict_epoch_end(trainer, None)


@pytest.mark.parametrize("skip", [(), ("v0_1",)], ids=["all clips", "a clip skipped"])
def test_the_writer_draws_on_the_predictions_frames_and_writes_what_a_second_decode_writes(tmp_path, skip,
                                                                                           monkeypatch):
    import callbacks.annotated_video_writer as writer_module

    (tmp_path / "videos").mkdir()
    folder = _videos(tmp_path / "videos")
    second_decodes = []
    render = writer_module.render_annotated_video
    monkeypatch.setattr(writer_module, "render_annotated_video",
                        lambda source, out, *a, **k: second_decodes.append(out.name) or render(source, out, *a, **k))
    outputs = {}
    for share in (True, False):
        second_decodes.clear()
        dataset = VideoFolderDataset(folder, clip_seconds=2.0, **SIZES)
        predictions = {r.key: _prediction(r, np.random.default_rng(3)) for r in dataset.records}
        callback = AnnotatedVideoWriter(output_dir=str(tmp_path / f"share_{share}"), share_frames=share,
                                        max_queued=1)
        _run_callback(callback, dataset, predictions, skip)
        assert dataset.video_frames is share
        outputs[share] = {p.name: p.read_bytes() for p in callback.written}
        # shared: only a video with a clip that could not be decoded is decoded again
        assert sorted(second_decodes) == ((["v0.mp4"] if skip else []) if share else ["v0.mp4", "v1.mp4"])
    assert sorted(outputs[True]) == ["v0.mp4", "v1.mp4"]
    assert outputs[True] == outputs[False]
    assert not list((tmp_path / "share_True").rglob(".*partial*"))
