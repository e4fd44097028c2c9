"""Linking by language: the annotation pipeline's Stages 2-3 on clip captions (offline backends)."""
import numpy as np

from longvideo.language import LanguageLinker
from longvideo.timeline import build_timeline

CONFIG = """\
stage2:
  backend: rule
  input: captions
stage3:
  backend: embedding
  encoder: minilm
  threshold: 0.5
"""


def test_clip_phrases_are_put_into_the_summary_phrases_and_become_entities(tmp_path):
    (tmp_path / "language.yaml").write_text(CONFIG)
    linker = LanguageLinker(tmp_path / "language.yaml")
    segments = [{"key": "v_0", "start_frame": 0, "caption": "A red circle moves right.", "phrases": ["a red circle"]},
                {"key": "v_1", "start_frame": 40, "caption": "The red circle stops.", "phrases": ["the red circle"]},
                {"key": "v_2", "start_frame": 80, "caption": "A red circle rolls.", "phrases": ["a red circle"]}]
    summary, names, problem = linker.story("v", 10.0, segments)
    assert problem is None and "<p>" in summary
    assert names["v_0"] == names["v_1"] == names["v_2"] and names["v_0"][0] is not None
    video = {"video_id": "v", "fps": 10.0, "num_frames": 120, "width": 64, "height": 64}
    clips = [{"key": s["key"], "clip": i, "frames": [s["start_frame"]], "start_frame": s["start_frame"],
              "end_frame": s["start_frame"] + 39} for i, s in enumerate(segments)]
    predictions = {s["key"]: {"caption": s["caption"], "phrases": s["phrases"],
                              "frames": [{"frame": s["start_frame"], "boxes": [list(np.r_[0, 0, 9, 9] + i * 20)],
                                          "labels": s["phrases"], "scores": [0.9]}]}
                   for i, s in enumerate(segments)}
    timeline = build_timeline(video, clips, predictions, names=names, summary=summary)
    assert [e["segments"] for e in timeline["entities"]] == [["v_0", "v_1", "v_2"]]
    assert timeline["story"]["summary"] == summary
    assert timeline["story"]["summary_phrases"] == [{"phrase": names["v_0"][0], "entity": 0}]
    assert names["v_0"][0] in summary  # a tagged phrase of the summary, standing for entity 0


def test_no_predicted_clip_is_a_problem_not_a_crash(tmp_path):
    (tmp_path / "language.yaml").write_text(CONFIG)
    assert LanguageLinker(tmp_path / "language.yaml").story("v", 10.0, []) == (None, {}, "no clip was predicted")
