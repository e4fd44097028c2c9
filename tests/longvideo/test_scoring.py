"""Long synthetic videos with true identities, and the identity measures (TrackEval) of linking."""
import numpy as np
import pytest

from datamodules.synthetic_scenes import COLOURS
from formats.video_reader import PyAVVideoSource
from longvideo.scoring import clips_from_truth, entity_tracks, identity_scores, per_clip_tracks
from longvideo.synthetic_long import LongVideoConfig, generate_long_video
from longvideo.timeline import build_timeline

CONFIG = LongVideoConfig(duration_s=40.0, fps=10.0, width=320, height=180, num_objects=4, look_alikes=1,
                         visit_s=(4.0, 10.0), absence_s=(3.0, 8.0), seed=3)


@pytest.fixture(scope="module")
def long_video(tmp_path_factory):
    path = tmp_path_factory.mktemp("long") / "long.mp4"
    return path, generate_long_video(path, CONFIG)


def runs(truth, oid):
    """The visits of object ``oid``: runs of grid frames where it is visible (gaps of under 2 s bridged)."""
    seen = [f["frame"] for f in truth["frames"] if oid in f["ids"]]
    return sum(1 for a, b in zip(seen, seen[1:]) if b - a > 2 * truth["fps"]) + (1 if seen else 0)


def test_objects_persist_leave_come_back_appear_late_and_look_alike(long_video):
    path, truth = long_video
    assert [f["frame"] for f in truth["frames"]] == list(range(0, 400, 2))
    ids = [o["id"] for o in truth["objects"]]
    assert max(runs(truth, i) for i in ids) >= 2  # someone leaves and comes back
    first_seen = [min(f["frame"] for f in truth["frames"] if i in f["ids"]) for i in ids]
    assert max(first_seen) > 40  # someone joins later
    phrases = [o["phrase"] for o in truth["objects"]]
    assert len(set(phrases)) == len(phrases) - 1  # one look-alike pair
    # the boxes hold the object's colour in the decoded video
    with PyAVVideoSource(path) as video:
        checked = 0
        for entry in truth["frames"][::25]:
            frame = video.read_frames([entry["frame"]])[0].astype(int)
            for oid, box in zip(entry["ids"], entry["boxes"]):
                colour = np.array(COLOURS[truth["objects"][oid]["phrase"].split()[1]])
                x1, y1, x2, y2 = (int(v) for v in box)
                inside = frame[y1:y2, x1:x2].reshape(-1, 3)
                assert (np.abs(inside - colour).sum(1) < 60).mean() > 0.2
                checked += 1
    assert checked > 5


def test_identity_measures_hand_computed():
    truth = [{"frame": f, "ids": [7], "boxes": [[0, 0, 10, 10]]} for f in range(10)]
    same = {f: [(1, [0, 0, 10, 10])] for f in range(10)}
    assert identity_scores(truth, same) == {"HOTA": 1.0, "DetA": 1.0, "AssA": 1.0, "IDF1": 1.0, "MOTA": 1.0,
                                            "IDSW": 0}
    switched = {f: [(1 if f < 5 else 2, [0, 0, 10, 10])] for f in range(10)}
    scores = identity_scores(truth, switched)
    assert scores["IDF1"] == pytest.approx(0.5)  # 5 of 10 frames on the best-matching id, both ways
    assert scores["IDSW"] == 1 and scores["DetA"] == pytest.approx(1.0)
    assert scores["AssA"] == pytest.approx(0.5)  # each true-predicted pair agrees on half the frames


def test_linking_the_true_boxes_beats_no_linking_and_perfect_ids_score_one(long_video):
    _, truth = long_video
    clips, predictions = clips_from_truth(truth, clip_seconds=4.0, paraphrase=0.0, seed=0)
    # identities hidden: phrases in random order per clip, boxes exact
    assert all(p["caption"] for p in predictions.values())
    perfect = {int(f["frame"]): list(zip(f["ids"], f["boxes"])) for f in truth["frames"]}
    assert identity_scores(truth["frames"], perfect)["HOTA"] == pytest.approx(1.0)
    floor = identity_scores(truth["frames"], per_clip_tracks(clips, predictions))
    video = {k: truth[k] for k in ("fps", "num_frames", "width", "height")} | {"video_id": "long"}
    one_hot = {o["phrase"]: np.eye(8)[k] for k, o in enumerate(truth["objects"])}
    # look-alikes in one clip are "a yellow cross" and "a yellow cross 2": the same meaning
    text = {p: one_hot[p.rstrip(" 0123456789")] for pred in predictions.values() for p in pred["phrases"]}
    timeline = build_timeline(video, clips, predictions, text_vectors=text)
    linked = identity_scores(truth["frames"], entity_tracks(timeline))
    assert floor["DetA"] > 0.98 and linked["DetA"] > 0.98  # overlapping clips linked apart: a box twice
    assert linked["AssA"] > floor["AssA"] + 0.2 and linked["IDF1"] > floor["IDF1"] + 0.2
