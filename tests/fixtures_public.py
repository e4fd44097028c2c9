"""Writers of small fixture datasets in the exact public layouts (HowToGround1M / iGround, VidSTG,
ActivityNet-Entities), with tiny videos, for the reader, metric and config tests.

Every writer returns the paths it wrote. Contents are fixed by hand so tests can state exact
expectations; the tricky cases the readers must survive are built in: numpy arrays and numpy
scalars inside pickles, frames without boxes, a missing video, phrases with regex
metacharacters, a phrase tagged twice in its caption, and several instances of one phrase in a
frame ("raw" iGround).
"""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np

from datamodules.records import GroundedRecord, annotation_grid
from datamodules.video import write_video

# ---------------------------------------------------------------- HowToGround1M / iGround

HTG_FPS, HTG_FRAMES, HTG_SIZE = 10.0, 20, (64, 48)  # 2 s clips at 10 fps: a 10-frame 5-fps grid
TRICKY_PHRASE = "a (red) ball? [x]+"
MISSING_VIDEO_KEY = "vidMissing_0"


def _frames_with_boxes(num: int, size: tuple[int, int], boxes_per_frame: list[np.ndarray], grid: np.ndarray,
                       start: int) -> np.ndarray:
    """Grey frames with the annotated boxes painted in (so the content follows the labels)."""
    w, h = size
    frames = np.full((num, h, w, 3), 90, dtype=np.uint8)
    for f, boxes in zip(grid - start, boxes_per_frame):
        for k, (x1, y1, x2, y2) in enumerate(np.asarray(boxes).reshape(-1, 4).astype(int)):
            frames[f:f + 2, y1:y2, x1:x2] = (200, 60 + 80 * k, 40)
    return frames


def howtoground_records(raw: bool = True) -> list[GroundedRecord]:
    """Four clips. ``raw=True``: separate instances of a phrase (iGround "raw"); False: their union."""
    w, h = HTG_SIZE
    grid = annotation_grid(HTG_FPS, 0, HTG_FRAMES - 1)
    specs = [
        # (video_id, clip_id, tagged caption, phrases)
        ("vidA", "0", f"<p>a man</p> throws <p>{TRICKY_PHRASE}</p> to <p>a man</p>", ["a man", TRICKY_PHRASE]),
        ("vidA", "1", "<p>a woman</p> cuts <p>the bread</p> with <p>a knife</p>", ["a woman", "the bread", "a knife"]),
        ("vid_B-2", "7", "<p>two cups</p> stand on <p>a table</p>", ["two cups", "a table"]),
        ("vidMissing", "0", "<p>a dog</p> runs", ["a dog"]),
    ]
    records = []
    for n, (vid, clip, tagged, phrases) in enumerate(specs):
        bboxes, labels = [], []
        for i in range(len(grid)):
            boxes, labs = [], []
            if i % 4 != 3:  # every 4th annotated frame has no box at all
                for j, p in enumerate(phrases):
                    if (i + j) % 3 == 2:
                        continue  # the phrase is absent from this frame
                    x = 2 + 6 * j + (i % 5)
                    boxes.append([x, 4 + 3 * j, x + 12, 20 + 3 * j])
                    labs.append(p)
                    if raw and j == 0 and p in ("two cups", "a man"):  # a second instance of the phrase
                        boxes.append([x + 20, 24, x + 30, 40])
                        labs.append(p)
            bboxes.append(np.asarray(boxes, dtype=np.float32).reshape(-1, 4))
            labels.append(labs)
        records.append(GroundedRecord(
            # one small video per clip; one record names .webm and must be found as .mp4
            video_fname=f"{vid}_{clip}.webm" if n == 2 else f"{vid}_{clip}.mp4", video_id=vid, clip_id=clip, fps=HTG_FPS,
            clip_start_frame=0, clip_end_frame=HTG_FRAMES - 1, width=w, height=h,
            caption=tagged.replace("<p>", "").replace("</p>", ""), tagged_caption=tagged, phrases=phrases,
            bboxes=bboxes, labels=labels))
    return records


def public_record_dict(record: GroundedRecord) -> dict:
    """A record as the public pickles hold it: numpy scalars, numpy string arrays, float32 box arrays."""
    return {
        "video_fname": record.video_fname, "video_id": record.video_id, "clip_id": record.clip_id,
        "fps": np.float64(record.fps), "clip_start_frame": np.int64(record.clip_start_frame),
        "clip_end_frame": np.int64(record.clip_end_frame), "width": np.int64(record.width),
        "height": np.int64(record.height), "caption": record.caption, "tagged_caption": record.tagged_caption,
        "phrases": np.array(record.phrases),
        "bboxes": [np.asarray(b, dtype=np.float32).reshape(-1, 4) for b in record.bboxes],
        "labels": [np.array(l, dtype=str) for l in record.labels],
    }


def write_howtoground_pickle_folder(records, folder: Path) -> Path:
    """Public layout: one ``{video_id}_{clip_id}.pkl`` per record (the public split script's output)."""
    folder.mkdir(parents=True, exist_ok=True)
    for r in records:
        with (folder / f"{r.key}.pkl").open("wb") as f:
            pickle.dump(public_record_dict(r), f, protocol=pickle.HIGHEST_PROTOCOL)
    return folder


def write_howtoground_pickle(records, path: Path) -> Path:
    """Public layout: one pickle ``{key: record}`` (``HowToGround1M.pkl``, ``iGround_*_set_*.pkl``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        pickle.dump({r.key: public_record_dict(r) for r in records}, f)
    return path


def write_howtoground_public(root: Path) -> dict[str, Path]:
    """The HowToGround1M / iGround fixture in every public layout (raw and processed), plus videos."""
    from datamodules.howtoground import merge_instances

    raw = howtoground_records(raw=True)

    processed = [merge_instances(r) for r in raw]
    videos = root / "videos"
    videos.mkdir(parents=True, exist_ok=True)
    grid = annotation_grid(HTG_FPS, 0, HTG_FRAMES - 1)
    for r in raw:
        if r.key != MISSING_VIDEO_KEY:
            write_video(videos / f"{r.video_id}_{r.clip_id}.mp4",
                        _frames_with_boxes(HTG_FRAMES, HTG_SIZE, r.bboxes, grid, 0), HTG_FPS, threads=1)
    from datamodules.records import write_records_json

    ann = root / "annotations"
    keys_file = ann / "train_keys.pkl"
    ann.mkdir(parents=True, exist_ok=True)
    with keys_file.open("wb") as f:  # like the public train_keys_deduplicated.pkl (one key has no file)
        pickle.dump([r.key for r in raw] + ["vidZ_9"], f)
    return {
        "videos": videos,
        "folder": write_howtoground_pickle_folder(raw, ann / "per_key"),
        "pickle": write_howtoground_pickle(raw, ann / "HowToGround1M.pkl"),
        "json": write_records_json(raw, ann / "records.json"),
        "processed": write_howtoground_pickle(processed, ann / "iGround_train_set_processed.pkl"),
        "raw": write_howtoground_pickle(raw, ann / "iGround_val_set_raw.pkl"),
        "keys": keys_file,
    }


# ---------------------------------------------------------------- VidSTG

VIDSTG_FPS, VIDSTG_FRAMES, VIDSTG_SIZE = 10.0, 30, (64, 48)
VIDSTG_USED, VIDSTG_TUBE = (0, 30), (4, 24)


def _vidor_box(tid: int, f: int) -> dict:
    x = 2 + 10 * tid + f % 7
    return {"xmin": x, "ymin": 4 + 2 * tid, "xmax": x + 14, "ymax": 22 + 2 * tid}


def vidor_trajectories(vid_index: int, num_frames: int = VIDSTG_FRAMES) -> list[list[dict]]:
    """Per frame, the objects' ``{tid, bbox}``; object 0 is missing on frames 12-13 (a gap), object 1
    exists only from frame 6."""
    out = []
    for f in range(num_frames):
        objs = []
        if not 12 <= f <= 13:
            objs.append({"tid": 0, "bbox": _vidor_box(0, f + vid_index), "generated": 0, "tracker": "none"})
        if f >= 6:
            objs.append({"tid": 1, "bbox": _vidor_box(1, f), "generated": 1, "tracker": "linear"})
        out.append(objs)
    return out


def write_vidstg_public(root: Path, write_videos: bool = True, fps: float = VIDSTG_FPS,
                        num_frames: int = VIDSTG_FRAMES, used: tuple[int, int] = VIDSTG_USED,
                        tube: tuple[int, int] = VIDSTG_TUBE) -> dict[str, Path]:
    """Two videos; per video one question and one caption. Writes VidSTG's own annotation file
    (without trajectories), the VidOR annotation folder, the same entries with inline
    trajectories, and TubeDETR's preprocessed file; plus videos under ``videos/<group>/<vid>.mp4``.
    ``fps``, ``num_frames``, ``used`` and ``tube`` (``[begin, end)``) give VidOR-like frame rates."""
    vids = ["2401075277", "3201234567"]
    entries, vidor_files, tube_videos, tube_traj = [], {}, [], {}
    sentences = {
        vids[0]: ([("What does the (adult) hold?", 1)], [("An adult in red [clothes] walks.", 0)]),
        vids[1]: ([("Who is next to the child?", 0)], [("A child with a ball runs.", 1)]),
    }
    for v, vid in enumerate(vids):
        traj = vidor_trajectories(v, num_frames)
        video_path = f"000{v}/{vid}.mp4"
        vidor_files[vid] = {"video_id": vid, "video_path": video_path, "frame_count": num_frames,
                            "fps": fps, "width": VIDSTG_SIZE[0], "height": VIDSTG_SIZE[1],
                            "subject/objects": [{"tid": 0, "category": "adult"}, {"tid": 1, "category": "child"}],
                            "trajectories": traj, "relation_instances": []}
        questions, captions = sentences[vid]
        entry = {"vid": vid, "frame_count": num_frames, "fps": fps, "width": VIDSTG_SIZE[0],
                 "height": VIDSTG_SIZE[1], "subject/objects": vidor_files[vid]["subject/objects"],
                 "used_segment": {"begin_fid": used[0], "end_fid": used[1]},
                 "used_relation": {"subject_tid": 0, "object_tid": 1, "predicate": "next_to"},
                 "temporal_gt": {"begin_fid": tube[0], "end_fid": tube[1]},
                 "questions": [{"description": d, "type": "object", "target_id": t} for d, t in questions],
                 "captions": [{"description": d, "type": "subject", "target_id": t} for d, t in captions]}
        entries.append(entry)
        base = {"original_video_id": vid, "frame_count": num_frames, "fps": fps, "width": VIDSTG_SIZE[0],
                "height": VIDSTG_SIZE[1], "start_frame": used[0], "end_frame": used[1],
                "tube_start_frame": tube[0], "tube_end_frame": tube[1], "video_path": video_path}
        for kind, items in (("interrogative", questions), ("declarative", captions)):
            for d, t in items:
                tube_videos.append({**base, "caption": d, "type": "x", "target_id": t,
                                    "video_id": len(tube_videos), "qtype": kind})
                per_frame = {}
                for f, objs in enumerate(traj):
                    for o in objs:
                        if o["tid"] == t:
                            b = o["bbox"]
                            per_frame[str(f)] = {"bbox": [b["xmin"], b["ymin"], b["xmax"] - b["xmin"], b["ymax"] - b["ymin"]]}
                tube_traj.setdefault(vid, {})[str(t)] = per_frame
    ann = root / "vidstg"
    ann.mkdir(parents=True, exist_ok=True)
    (ann / "train_annotations.json").write_text(json.dumps(entries))
    inline = [{**e, "trajectories": vidor_files[e["vid"]]["trajectories"]} for e in entries]
    (ann / "inline_annotations.json").write_text(json.dumps(inline))
    (ann / "train.json").write_text(json.dumps({"videos": tube_videos, "trajectories": tube_traj}))
    for v, (vid, data) in enumerate(vidor_files.items()):
        path = root / "vidor" / "training" / f"000{v}" / f"{vid}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
    videos = root / "videos"
    if write_videos:
        for v, vid in enumerate(vids):
            frames = np.full((num_frames, VIDSTG_SIZE[1], VIDSTG_SIZE[0], 3), 80, dtype=np.uint8)
            for f, objs in enumerate(vidor_trajectories(v, num_frames)):
                for o in objs:
                    b = o["bbox"]
                    frames[f, b["ymin"]:b["ymax"], b["xmin"]:b["xmax"]] = (220, 40 + 150 * o["tid"], 60)
            write_video(videos / f"000{v}" / f"{vid}.mp4", frames, fps, threads=1)
    return {"original": ann / "train_annotations.json", "inline": ann / "inline_annotations.json",
            "tubedetr": ann / "train.json", "vidor": root / "vidor", "videos": videos}


# ---------------------------------------------------------------- ActivityNet-Entities

ANET_FPS, ANET_SECONDS, ANET_SIZE = 10.0, 6.0, (64, 36)  # 16:9, drawn on a 720 x 405 grid
ANET_RSIZE = (720, 405)


def anet_segments() -> dict[str, dict]:
    """Cleaned-file segments of two validation videos and one training video (hand-made)."""
    return {
        "v_val000001": {
            "0": {"tokens": ["a", "man", "throws", "a", "ball", "to", "a", "man", "."],
                  "process_clss": [["man"], ["ball"], ["man"]], "process_idx": [[1], [4], [7]],
                  "process_bnd_box": [[10, 20, 300, 380], [400, 100, 480, 180], [500, 30, 700, 390]],
                  "frame_ind": [2, 2, 7], "crowds": [0, 0, 0]},
            "1": {"tokens": ["the", "men", "wave", "at", "the", "camera"],
                  "process_clss": [["man"]], "process_idx": [[1]],
                  "process_bnd_box": [[50, 50, 250, 350]], "frame_ind": [4], "crowds": [1]},
            "2": {"tokens": ["nothing", "is", "annotated", "here"], "process_clss": [], "process_idx": [],
                  "process_bnd_box": [], "frame_ind": [], "crowds": []},
        },
        "v_val000002": {
            "0": {"tokens": ["a", "woman", "rides", "a", "horse"],
                  "process_clss": [["woman"], ["horse"]], "process_idx": [[1], [4]],
                  "process_bnd_box": [[100, 50, 300, 300], [200, 150, 650, 400]], "frame_ind": [0, 9],
                  "crowds": [0, 0]},
        },
        "v_trn000003": {
            "0": {"tokens": ["a", "dog", "(", "brown", ")", "jumps", "over", "a", "fence", "?"],
                  "process_clss": [["dog"], ["fence"]], "process_idx": [[1], [8]],
                  "process_bnd_box": [[20, 40, 320, 300], [0, 200, 719, 404]], "frame_ind": [3, 5],
                  "crowds": [0, 0]},
        },
    }


ANET_TIMESTAMPS = {"v_val000001": [[0.5, 3.5], [2.0, 5.0], [1.0, 2.0]], "v_val000002": [[0.0, 4.0]],
                   "v_trn000003": [[1.0, 5.0]]}


def write_anet_public(root: Path, write_videos: bool = True, timestamps_in_segments: bool = False) -> dict[str, Path]:
    """The cleaned annotation file, the split file, ActivityNet Captions timestamps, the raw file's
    ``rwidth``/``rheight`` and one video per video id (``v_*.mp4``)."""
    segments = anet_segments()
    if timestamps_in_segments:
        for vid, segs in segments.items():
            for seg, ann in segs.items():
                ann["timestamps"] = ANET_TIMESTAMPS[vid][int(seg)]
    ann_dir = root / "anet"
    ann_dir.mkdir(parents=True, exist_ok=True)
    cleaned = ann_dir / "anet_entities_cleaned_class_thresh50_trainval.json"
    cleaned.write_text(json.dumps({"vocab": ["ball", "dog", "fence", "horse", "man", "woman"],
                                   "annotations": {v: {"segments": s} for v, s in segments.items()}}))
    split = ann_dir / "split_ids_anet_entities.json"
    split.write_text(json.dumps({"training": ["v_trn000003"], "validation": ["v_val000001", "v_val000002"],
                                 "testing": []}))
    captions = ann_dir / "val_1.json"
    captions.write_text(json.dumps({v: {"duration": ANET_SECONDS, "timestamps": t,
                                        "sentences": ["..."] * len(t)} for v, t in ANET_TIMESTAMPS.items()}))
    raw = ann_dir / "anet_entities_trainval.json"
    raw.write_text(json.dumps({"database": {v: {"rwidth": ANET_RSIZE[0], "rheight": ANET_RSIZE[1], "segments": {}}
                                            for v in segments}}))
    videos = root / "anet_videos"
    if write_videos:
        n = int(ANET_FPS * ANET_SECONDS)
        for vid in segments:
            # frame i has brightness 4 * i, so tests can tell which source frame was decoded
            frames = np.repeat((np.arange(n, dtype=np.uint8) * 4)[:, None, None, None], 3, axis=3)
            frames = np.broadcast_to(frames, (n, ANET_SIZE[1], ANET_SIZE[0], 3)).copy()
            write_video(videos / f"{vid}.mp4", frames, ANET_FPS, crf=0, threads=1)
    return {"cleaned": cleaned, "split": split, "captions": captions, "raw": raw, "videos": videos}
