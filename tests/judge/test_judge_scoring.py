"""Scoring pairs: pair files, error rows for missing videos and unreadable answers, resuming, the command."""
import json

import pytest

from judge.application.scoring import read_scored, score_pairs
from judge.data.pairs import read_pairs
from judge.data.readers import JudgeDataError
from judge.model.vc_inspector import VCInspectorJudge
from tests.judge.judge_fixtures import TINY, ScriptedJudge


def _rows(root):
    records = json.loads((root / "annotations" / "test.json").read_text())["records"]
    rows = [{"key": f"c{i}", "video": r["video_fname"], "caption": r["caption"]} for i, r in enumerate(records)]
    return rows + [{"key": "missing", "video": "no_such_clip.mp4", "caption": "a red circle moves up."}]


def _answer(caption):  # a readable score for most captions, prose for the one about the wall
    return "it looks fine" if "wall" in caption else f"{1 + len(caption) % 5}\n\nexplained"


def _readable(caption):  # a readable score for every caption: rows that succeed, to be resumed
    return f"{1 + len(caption) % 5}\n\nexplained"


def test_pair_files_jsonl_and_csv_with_errors_naming_file_and_line(tmp_path):
    (tmp_path / "p.jsonl").write_text('{"video": "a.mp4", "caption": "x"}\n\n{"key": "k", "video": "b.mp4", '
                                      '"caption": "y", "start_s": 1, "end_s": 2.5}\n')
    assert read_pairs(tmp_path / "p.jsonl") == [
        {"key": "0", "video": "a.mp4", "caption": "x"},
        {"key": "k", "video": "b.mp4", "caption": "y", "start_s": 1.0, "end_s": 2.5}]
    (tmp_path / "p.csv").write_text('video,caption,start_frame,end_frame\na.mp4,"a, b",,\nb.mp4,c,3,9\n')
    assert read_pairs(tmp_path / "p.csv") == [
        {"key": "0", "video": "a.mp4", "caption": "a, b"},
        {"key": "1", "video": "b.mp4", "caption": "c", "start_frame": 3, "end_frame": 9}]
    (tmp_path / "bad.jsonl").write_text('{"video": "a.mp4", "caption": "x"}\n{"video": "b.mp4"}\n')
    with pytest.raises(JudgeDataError, match=r"bad.jsonl, line 2: field 'caption'"):
        read_pairs(tmp_path / "bad.jsonl")
    (tmp_path / "bad.csv").write_text("clip,caption\na,b\n")
    with pytest.raises(JudgeDataError, match=r"bad.csv: the CSV header lacks column\(s\) \['video'\]"):
        read_pairs(tmp_path / "bad.csv")
    (tmp_path / "dup.jsonl").write_text('{"key": "a", "video": "a", "caption": "x"}\n' * 2)
    with pytest.raises(JudgeDataError, match="keys must be unique"):
        read_pairs(tmp_path / "dup.jsonl")


def test_missing_video_and_unreadable_answer_become_error_rows(tiny_synthetic_root, tmp_path):
    rows = _rows(tiny_synthetic_root)
    judge = ScriptedJudge(_answer)
    out, summary = score_pairs(judge, rows, tmp_path / "out.jsonl", video_root=str(tiny_synthetic_root / "videos"),
                               num_frames=4, batch_size=2, progress=False)
    assert [r["key"] for r in out] == [r["key"] for r in rows]
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert written == out and all(set(r) == {"key", "video", "caption", "score", "explanation", "parsed", "error",
                                             "scored_with"}
                                  for r in written)
    for row, source in zip(out, rows):
        if source["key"] == "missing":
            assert row["score"] is None and row["error"].startswith("video: FileNotFoundError")
        elif "wall" in source["caption"]:
            assert row["score"] is None and not row["parsed"] and row["error"].startswith("answer: ")
        else:
            assert row == {**source, "score": 1 + len(source["caption"]) % 5, "explanation": "explained",
                           "parsed": True, "error": None}
    unreadable = sum("wall" in r["caption"] for r in rows[:-1])
    assert summary["video_errors"] == 1 and summary["unparsable"] == unreadable
    assert summary["scored"] == len(rows) - 1 - unreadable and summary["resumed"] == 0


def test_a_rerun_resumes_after_the_last_complete_row(tiny_synthetic_root, tmp_path):
    rows = _rows(tiny_synthetic_root)
    settings = dict(video_root=str(tiny_synthetic_root / "videos"), num_frames=4, batch_size=1, progress=False)
    full, _ = score_pairs(ScriptedJudge(_readable), rows, tmp_path / "full.jsonl", **settings)
    lines = (tmp_path / "full.jsonl").read_text().splitlines()
    (tmp_path / "cut.jsonl").write_text("\n".join(lines[:1]) + "\n" + lines[1][:20])  # interrupted mid-line
    judge = ScriptedJudge(_readable)
    resumed, summary = score_pairs(judge, rows, tmp_path / "cut.jsonl", **settings)
    assert summary["resumed"] == 1 and sum(len(c) for c in judge.calls) == len(rows) - 2  # minus the missing video
    assert resumed == full
    assert read_scored(tmp_path / "cut.jsonl") == full  # the cut line is set apart and skipped


def test_the_tiny_judge_scores_synthetic_clips_in_process(tiny_synthetic_root):
    judge = VCInspectorJudge(tiny=TINY, max_pixels=56 * 56, min_pixels=28 * 28, seed=1).eval()
    out, summary = score_pairs(judge, _rows(tiny_synthetic_root), None, video_root=str(tiny_synthetic_root / "videos"),
                               num_frames=4, batch_size=2, max_new_tokens=4, progress=False)
    assert summary["pairs"] == len(out) == 3 and summary["video_errors"] == 1
    for row in out[:-1]:  # a random judge: whatever it answers is either a 1-5 score or a reported error
        assert (row["score"] is None) == (row["error"] is not None) == (not row["parsed"])
        assert row["score"] is None or 1 <= row["score"] <= 5


def test_score_command_takes_a_config_with_overrides(tiny_synthetic_root, tmp_path, capsys):
    from judge.application.commands import main

    config = {"model": {"class_path": "judge.training.module.JudgeModule",
                        "init_args": {"tiny": TINY, "max_pixels": 3136, "min_pixels": 784, "max_new_tokens": 40}},
              "data": {"class_path": "judge.data.datamodule.JudgeDataModule",
                       "init_args": {"video_root": str(tiny_synthetic_root / "videos"), "num_frames": 6}}}
    (tmp_path / "judge.yaml").write_text(json.dumps(config))
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("video,caption\n" + "".join(f"{r['video']},{r['caption'].replace(',', '')}\n"
                                                 for r in _rows(tiny_synthetic_root)))
    summary = main(["score", "--config", str(tmp_path / "judge.yaml"), "--model.init_args.max_new_tokens=3",
                    "--pairs", str(pairs), "--out", str(tmp_path / "out.jsonl"), "--no-progress"])
    assert summary["pairs"] == 3 and summary["video_errors"] == 1
    assert '"video_errors": 1' in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["score", "--config", str(tmp_path / "judge.yaml"), "--pairs", str(pairs), "--out", "x", "--bogus"])


def _settings(root, **extra):
    return {"video_root": str(root / "videos"), "num_frames": 4, "batch_size": 2, "progress": False,
            "judge_id": "the scripted judge", **extra}


def test_a_kill_at_start_never_truncates_the_output(tiny_synthetic_root, tmp_path, monkeypatch):
    import pathlib

    rows = _rows(tiny_synthetic_root)
    out = tmp_path / "out.jsonl"
    score_pairs(ScriptedJudge(_answer), rows[:1], out, **_settings(tiny_synthetic_root))
    before = out.read_bytes()
    real_open, real_write_text = pathlib.Path.open, pathlib.Path.write_text

    def killed_after_truncating(self, mode="r", *args, **kwargs):  # a kill right after a file is opened for writing
        if self == out and "w" in mode:
            real_open(self, mode, *args, **kwargs).close()
            raise KeyboardInterrupt
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", killed_after_truncating)
    monkeypatch.setattr(pathlib.Path, "write_text", lambda self, *a, **k: killed_after_truncating(self, "w"))

    class KilledJudge(ScriptedJudge):
        def score(self, *args, **kwargs):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        score_pairs(KilledJudge(_answer), rows, out, **_settings(tiny_synthetic_root))
    monkeypatch.setattr(pathlib.Path, "open", real_open)
    monkeypatch.setattr(pathlib.Path, "write_text", real_write_text)
    assert out.read_bytes().startswith(before) and len(read_scored(out)) == 1


def test_resume_goes_by_pair_content_and_retries_failures(tiny_synthetic_root, tmp_path):
    from judge.model.prompt_format import JudgeAnswer

    rows = _rows(tiny_synthetic_root)[:2]
    out = tmp_path / "out.jsonl"
    first, _ = score_pairs(ScriptedJudge(_readable), rows, out, **_settings(tiny_synthetic_root))
    # another pairs file with the same keys (line numbers) but other captions: nothing is taken as done
    other = [{**r, "caption": r["caption"] + " again"} for r in rows]
    judge = ScriptedJudge(_readable)
    scored, summary = score_pairs(judge, other, out, **_settings(tiny_synthetic_root))
    assert summary["resumed"] == 0 and sorted(sum(judge.calls, [])) == sorted(r["caption"] for r in other)
    assert [r["caption"] for r in scored] == [r["caption"] for r in other]
    # the same pair under a new key is resumed, and its row is copied under that key
    renamed = [{**rows[0], "key": "renamed"}]
    judge = ScriptedJudge(_readable)
    scored, summary = score_pairs(judge, renamed, out, **_settings(tiny_synthetic_root))
    assert summary["resumed"] == 1 and judge.calls == [] and scored == [{**first[0], "key": "renamed"}]
    assert read_scored(out)[-1] == scored[0]

    class DownThenUp(ScriptedJudge):  # the endpoint is down on the first run
        def score(self, frames, captions, max_new_tokens=64, sampled_fps=None):
            if not self.calls:
                self.calls.append(list(captions))
                return [JudgeAnswer(None, "", "endpoint: URLError: connection refused") for _ in captions]
            return super().score(frames, captions, max_new_tokens, sampled_fps)

    judge = DownThenUp(_readable)
    retry = tmp_path / "retry.jsonl"
    failed, summary = score_pairs(judge, rows, retry, **_settings(tiny_synthetic_root, batch_size=4))
    assert summary["endpoint_errors"] == 2 and summary["scored"] == 0
    again, summary = score_pairs(judge, rows, retry, **_settings(tiny_synthetic_root, batch_size=4))
    assert summary["resumed"] == 0 and summary["endpoint_errors"] == 0 and again == first
    third, summary = score_pairs(judge, rows, retry, **_settings(tiny_synthetic_root, batch_size=4))
    assert summary["resumed"] == 2 and third == first and len(judge.calls) == 2


def test_an_over_long_caption_fails_that_pair_only(tiny_synthetic_root, tmp_path):
    from judge.application.scoring import caption_tokens
    from judge.model.tokenizer import build_tiny_judge_tokenizer

    rows = _rows(tiny_synthetic_root)[:2]
    huge = {"key": "huge", "video": rows[0]["video"], "caption": "a red circle " * 80_000}  # ~10^6 characters
    judge = ScriptedJudge(_answer)
    out, summary = score_pairs(judge, [rows[0], huge, rows[1]], tmp_path / "out.jsonl",
                               **_settings(tiny_synthetic_root))
    assert summary["text_errors"] == 1 and summary["scored"] + summary["unparsable"] == 2
    assert huge["caption"] not in sum(judge.calls, [])  # the judge never saw it
    assert out[1]["key"] == "huge" and out[1]["score"] is None
    assert out[1]["error"].startswith("text: the caption has 260000 tokens, over the limit of 1024")

    class LocalJudge:  # a judge with its own tokenizer counts tokens with it
        class prompter:
            tokenizer = build_tiny_judge_tokenizer()

    count = caption_tokens(LocalJudge())
    assert count("a red circle") == len(LocalJudge.prompter.tokenizer("a red circle")["input_ids"])
