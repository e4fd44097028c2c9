"""The judge's one resume rule: a row is reused only when the whole input that made it (video, clip,
caption, judge, video folder, settings) is the same and the row succeeded."""
import json
import shutil

from judge.application.scoring import read_scored, score_pairs
from judge.model.prompt_format import JudgeAnswer
from tests.judge.judge_fixtures import ScriptedJudge


def _rows(root):
    records = json.loads((root / "annotations" / "test.json").read_text())["records"]
    return [{"key": f"c{i}", "video": r["video_fname"], "caption": r["caption"]} for i, r in enumerate(records)][:2]


def _settings(root, **extra):
    return {"video_root": str(root / "videos"), "num_frames": 4, "batch_size": 2, "progress": False, **extra}


def _answer(caption):
    return f"{1 + len(caption) % 5}\n\nexplained"


def test_only_identical_inputs_that_succeeded_are_resumed(tiny_synthetic_root, tmp_path):
    rows, out = _rows(tiny_synthetic_root), tmp_path / "out.jsonl"
    first, _ = score_pairs(ScriptedJudge(_answer), rows, out, **_settings(tiny_synthetic_root), judge_id="judge A")
    assert {r["scored_with"]["judge"] for r in read_scored(out)} == {"judge A"}
    judge = ScriptedJudge(_answer)
    again, summary = score_pairs(judge, rows, out, **_settings(tiny_synthetic_root), judge_id="judge A")
    assert summary["resumed"] == 2 and judge.calls == [] and again == first
    # another judge, another video folder holding the same names, other settings: scored anew
    copy = tmp_path / "videos"
    shutil.copytree(tiny_synthetic_root / "videos", copy)
    for changed in ({"judge_id": "judge B"}, {"video_root": str(copy)}, {"num_frames": 2},
                    {"max_new_tokens": 32}):
        judge = ScriptedJudge(_answer)
        kwargs = {**_settings(tiny_synthetic_root), "judge_id": "judge A", **changed}
        _, summary = score_pairs(judge, rows, out, **kwargs)
        assert summary["resumed"] == 0 and len(sum(judge.calls, [])) == 2, changed


def test_rows_that_failed_for_any_reason_are_scored_again(tiny_synthetic_root, tmp_path):
    rows, out = _rows(tiny_synthetic_root), tmp_path / "out.jsonl"

    class Failing(ScriptedJudge):  # run 1: one unreadable answer, one endpoint error of another wording
        def score(self, frames, captions, max_new_tokens=64, sampled_fps=None):
            self.calls.append(list(captions))
            return [JudgeAnswer(None, "", "no score line"), JudgeAnswer(None, "", "HTTP 503 from the server")]

    failed, summary = score_pairs(Failing(_answer), rows, out, **_settings(tiny_synthetic_root), judge_id="j")
    assert all(r["error"] for r in failed)
    judge = ScriptedJudge(_answer)
    scored, summary = score_pairs(judge, rows, out, **_settings(tiny_synthetic_root), judge_id="j")
    assert summary["resumed"] == 0 and len(sum(judge.calls, [])) == 2
    assert all(r["score"] is not None and r["error"] is None for r in scored)


def test_rows_of_an_older_output_without_their_judge_are_not_resumed(tiny_synthetic_root, tmp_path):
    rows, out = _rows(tiny_synthetic_root), tmp_path / "out.jsonl"
    first, _ = score_pairs(ScriptedJudge(_answer), rows, out, **_settings(tiny_synthetic_root))
    out.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "scored_with"}) + "\n" for r in first))
    judge = ScriptedJudge(_answer)
    _, summary = score_pairs(judge, rows, out, **_settings(tiny_synthetic_root))
    assert summary["resumed"] == 0 and len(sum(judge.calls, [])) == 2
