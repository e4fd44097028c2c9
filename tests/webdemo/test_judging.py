"""The judge on the page: each predicted clip's caption rated through the project's pair scoring."""
from pathlib import Path

import numpy as np
import pytest

from formats.video_writer import write_video
from tests.judge.judge_fixtures import EXPLANATION, ScriptedJudge
from webdemo.app import DemoApp, judge_markdown
from webdemo.judging import clip_judge
from webdemo.results import ClipResult, DemoResult
from webdemo.workspace import Workspace


class _Loaded:
    def __init__(self, judge, num_frames=4, max_new_tokens=16):
        self.judge, self.num_frames, self.max_new_tokens = judge, num_frames, max_new_tokens


@pytest.fixture(scope="module")
def ramp_video(tmp_path_factory) -> Path:
    """Frame i is uniformly grey level 2 * i: which frames the judge saw can be read off their pixels."""
    frames = np.repeat((np.arange(100, dtype=np.uint8) * 2)[:, None, None, None], 32 * 32 * 3, axis=1)
    return write_video(tmp_path_factory.mktemp("ramp") / "ramp.mp4", frames.reshape(100, 32, 32, 3), 25.0, crf=0)


def _result(video: Path, captions) -> DemoResult:
    clips = [ClipResult(f"ramp_{i}", 50 * i, 50 * i + 49, list(range(50 * i, 50 * i + 50, 5)),
                        None if c is None else {"caption": c, "phrases": [], "frames": []}, skipped=None)
             for i, c in enumerate(captions)]
    return DemoResult("ramp.mp4", str(video), 25.0, 32, 32, 100, 0.5, clips, Path("unused.json"), None)


def test_each_clip_is_rated_on_its_own_frames(ramp_video):
    seen = []

    class Recording(ScriptedJudge):
        def score(self, frames, captions, max_new_tokens=64, sampled_fps=None):
            seen.extend(f[:, 0, 0, 0].astype(int).tolist() for f in frames)
            return super().score(frames, captions, max_new_tokens, sampled_fps)

    judge = Recording(lambda caption: f"{3 if 'circle' in caption else 1}\n{EXPLANATION}")
    rows = [{"key": "a", "video": str(ramp_video), "caption": "a red circle", "start_frame": 0, "end_frame": 49},
            {"key": "b", "video": str(ramp_video), "caption": "a blue square", "start_frame": 50, "end_frame": 99}]
    answers = clip_judge(_Loaded(judge))(rows)
    assert [a["score"] for a in answers] == [3, 1] and answers[0]["explanation"] == EXPLANATION
    assert answers[0]["error"] is None
    first, second = (np.array(s) / 2 for s in seen)
    assert first.min() >= 0 and first.max() <= 49 and second.min() >= 50 and second.max() <= 99  # +- codec noise


def test_the_page_shows_score_and_explanation_or_why_there_is_none(ramp_video, tmp_path):
    answers = {"a red circle": f"Score: 4\n{EXPLANATION}", "gibberish": "I think it is fine"}
    judge = clip_judge(_Loaded(ScriptedJudge(lambda c: answers[c])))
    result = _result(ramp_video, ["a red circle", "gibberish", None])
    with Workspace(parent=tmp_path) as workspace:
        DemoApp(None, workspace, judge)._judge(result, progress=lambda *a, **k: None)
    good, unparsable, skipped = (judge_markdown(c.judge) for c in result.clips)
    assert good == f"**VC-Inspector score: 4 / 5**\n\n{EXPLANATION}"
    assert "the judge gave no score: no score line" in unparsable and 'role="alert"' in unparsable
    assert skipped == ""  # a clip without a prediction is not judged


def test_a_failing_judge_keeps_the_predictions(ramp_video, tmp_path):
    def broken(rows):
        raise RuntimeError("judge out of memory")

    result = _result(ramp_video, ["a red circle"])
    with Workspace(parent=tmp_path) as workspace:
        DemoApp(None, workspace, broken)._judge(result, progress=lambda *a, **k: None)
    assert result.clips[0].prediction["caption"] == "a red circle"
    assert "judge out of memory" in judge_markdown(result.clips[0].judge)


@pytest.mark.slow
def test_a_released_judge_folder_rates_a_clip(ramp_video, tmp_path):
    from tests.judge.judge_fixtures import save_tiny_qwen_folder
    from webdemo.judging import load_clip_judge

    save_tiny_qwen_folder(tmp_path / "qwen", seed=5)
    judge = load_clip_judge(str(tmp_path / "qwen"))
    (answer,) = judge([{"key": "a", "video": str(ramp_video), "caption": "a grey screen", "start_frame": 0,
                        "end_frame": 99}])
    assert set(answer) == {"score", "explanation", "error"}
    # a random tiny model: either a score in 1..5 or the reason there is none
    assert (answer["score"] in {1, 2, 3, 4, 5}) != (answer["error"] is not None)
