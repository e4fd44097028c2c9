"""Caption refinement (prompt D.8): two rounds with tiny models, the stopping rule, the command."""
import json

import pytest

from judge.application.refinement import REFINE_PROMPT, VisionLanguageCaptioner, refine_captions
from judge.model.vc_inspector import VCInspectorJudge
from tests.judge.judge_fixtures import TINY, ScriptedJudge, random_frames, save_tiny_qwen_folder


class SpyCaptioner(VisionLanguageCaptioner):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.instructions = []

    def generate(self, frames, instructions, sampled_fps):
        self.instructions.append(list(instructions))
        return super().generate(frames, instructions, sampled_fps)


def _clips(n=2):
    return [{"key": f"k{i}", "video": f"v{i}.mp4", "frames": random_frames(i), "fps": 2.0} for i in range(n)]


def test_two_rounds_with_tiny_models_rewrite_with_the_judges_explanation():
    captioner = SpyCaptioner(model=VCInspectorJudge(tiny=TINY, max_pixels=56 * 56, min_pixels=28 * 28, seed=4),
                             max_new_tokens=5)
    judge = VCInspectorJudge(tiny=TINY, max_pixels=56 * 56, min_pixels=28 * 28, seed=7).eval()
    rows = refine_captions(judge, captioner, _clips(), rounds=2, initial={"k0": "a red circle moves up."},
                           stop_when_no_gain=False, max_new_tokens=5)
    assert [(r["key"], r["round"]) for r in rows] == [("k0", 0), ("k0", 1), ("k0", 2), ("k1", 0), ("k1", 1), ("k1", 2)]
    assert rows[0]["caption"] == "a red circle moves up."  # the given first caption is judged, not rewritten
    assert captioner.instructions[0] == [captioner.caption_prompt]  # only k1 needed a first caption
    for round_ in (1, 2):  # each rewrite sees the previous round's caption and the judge's explanation of it
        previous = [r for r in rows if r["round"] == round_ - 1]
        assert captioner.instructions[round_] == [
            REFINE_PROMPT.format(caption=r["caption"], explanation=r["explanation"]) for r in previous]
    assert all(sum(r["best"] for r in rows if r["key"] == k) == 1 for k in ("k0", "k1"))


class ScriptedCaptioner:
    def caption(self, frames, sampled_fps):
        return ["c0"] * len(frames)

    def refine(self, frames, captions, explanations, sampled_fps):
        return [f"c{int(c[1:]) + 1}" for c in captions]


def test_refinement_stops_when_the_score_stops_improving(tmp_path):
    scores = {"c0": "2\n\nmeh", "c1": "4\n\nbetter", "c2": "4\n\nsame", "c3": "5\n\nbest"}
    judge = ScriptedJudge(lambda c: scores[c])
    rows = refine_captions(judge, ScriptedCaptioner(), _clips(1), rounds=5, out=tmp_path / "r.jsonl")
    assert [(r["caption"], r["score"], r["best"]) for r in rows] == [
        ("c0", 2, False), ("c1", 4, True), ("c2", 4, False)]
    assert [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()] == rows
    unreadable = ScriptedJudge(lambda c: "5\n\nok" if c == "c0" else "nothing")
    assert [r["round"] for r in refine_captions(unreadable, ScriptedCaptioner(), _clips(1), rounds=5)] == [0, 1]
    with pytest.raises(ValueError, match="rounds must be >= 0"):
        refine_captions(judge, ScriptedCaptioner(), _clips(1), rounds=-1)


@pytest.mark.slow
def test_refine_command_with_a_released_judge_folder_and_a_captioner_folder(tiny_synthetic_root, tmp_path):
    from judge.application.commands import main

    save_tiny_qwen_folder(tmp_path / "model", seed=3)
    records = json.loads((tiny_synthetic_root / "annotations" / "test.json").read_text())["records"]
    predictions = {r["video_fname"].rsplit(".", 1)[0]: {"caption": r["caption"]} for r in records}
    predictions["absent_clip"] = {"caption": "a red circle."}
    (tmp_path / "pred.json").write_text(json.dumps(predictions))
    summary = main(["refine", "--judge", str(tmp_path / "model"), "--videos", str(tiny_synthetic_root / "videos"),
                    "--captions", str(tmp_path / "pred.json"), "--captioner", str(tmp_path / "model"),
                    "--captioner-max-pixels", "3136", "--captioner-max-new-tokens", "4", "--max-new-tokens", "4",
                    "--num-frames", "4", "--rounds", "2", "--all-rounds", "--out", str(tmp_path / "out.jsonl")])
    rows = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert summary["clips"] == len(records) + 1 and summary["video_errors"] == 1 and summary["rounds_run"] == 2
    assert sorted((r["key"], r["round"]) for r in rows if r["error"] is None or not r["error"].startswith("video")) == \
        sorted((k, n) for k in predictions if k != "absent_clip" for n in range(3))
