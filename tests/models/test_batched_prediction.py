"""``Grove.predict`` on a batch of clips gives each clip what it gets alone, and what a window-by-window
reference computes: clips of different lengths (padded frames filled with noise, so that a leak shows),
with and without phrases, in every window mode and in passes of any number of windows.

Captions and phrases must be identical; boxes and objectness equal to float tolerance (a batch pads
the captions' ids to its longest and multiplies larger matrices, which moves the float rounding: up
to about 1e-6 measured on these clips). The random model's greedy captions (std-0.1 LLaMA weights, as
configs/demo.yaml trains; seed 0) tag phrases, which the test checks before relying on it; clips
without phrases are given as captions.
"""
from __future__ import annotations

import core  # noqa: F401

import pytest
import torch

from models.grove import Grove
from models.grove.frame_sampling import centre_frames
from models.grove.prompting import format_target
from models.grove.windows import clip_windows
from tests.fixtures.tiny_grove import tiny_grove

T = 8
TOL = 1e-5
LENGTHS = (40, 13, 5, 22)  # 5, 2, 1 and 3 interleaved windows; 5 < T: official's one-frame windows
NEW_TOKENS = 24
CAPTIONS = ("a <p> red shape </p> [DET] near <p> a blue circle </p> [DET] and <p> a wall </p> [DET]",
            "<p> a square </p> [DET] moves", "nothing is named here", "<p> a star </p> [DET] beside <p> it </p> [DET]")


@pytest.fixture(scope="module")
def model() -> Grove:
    return tiny_grove(0)


def _clips(lengths=LENGTHS, seed: int = 0):
    """A padded batch: global and grounding frames, frame mask, caption positions (segment centres)."""
    gen = torch.Generator().manual_seed(seed)
    b, n = len(lengths), max(lengths)
    frame_mask = torch.arange(n).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    caption_positions = torch.stack([torch.from_numpy(centre_frames(k, T)) for k in lengths])
    return (torch.randn(b, n, 3, 64, 64, generator=gen), torch.randn(b, n, 3, 128, 128, generator=gen), frame_mask,
            caption_positions)


def _alone(clips, i: int):
    """Clip ``i`` of a padded batch as a batch of one, cut to its own frames."""
    global_frames, grounding_frames, frame_mask, caption_positions = clips
    k = int(frame_mask[i].sum())
    return (global_frames[i:i + 1, :k], grounding_frames[i:i + 1, :k], frame_mask[i:i + 1, :k],
            caption_positions[i:i + 1])


def _predict(model, clips, **kw):
    global_frames, grounding_frames, frame_mask, caption_positions = clips
    return model.predict(global_frames, grounding_frames, frame_mask, window=T, caption_positions=caption_positions,
                         max_new_tokens=NEW_TOKENS, **kw)


def _assert_clip_matches(batch, i: int, alone, lengths) -> None:
    """Clip ``i`` of ``batch`` against a prediction of that clip alone (or a reference, batch index 0)."""
    k, p = lengths[i], len(alone.phrases[0])
    assert batch.tagged_captions[i] == alone.tagged_captions[0] and batch.phrases[i] == alone.phrases[0]
    torch.testing.assert_close(batch.boxes[i, :k, :p], alone.boxes[0, :k, :p], atol=TOL, rtol=0)
    torch.testing.assert_close(batch.scores[i, :k, :p], alone.scores[0, :k, :p], atol=TOL, rtol=0)
    assert not batch.boxes[i, k:].any() and not batch.boxes[i, :, p:].any()  # padding: no box, no score
    assert not batch.scores[i, k:].any() and not batch.scores[i, :, p:].any()


@pytest.mark.parametrize("window_mode", ["interleaved", "contiguous", "official"])
def test_generated_captions_and_boxes_of_a_batch_are_each_clip_s_own(model, window_mode):
    clips = _clips()
    batch = _predict(model, clips, window_mode=window_mode)
    counts = [len(p) for p in batch.phrases]
    assert max(counts) > 0, counts  # the premise: the random captions tag phrases to ground
    for i in range(len(LENGTHS)):
        _assert_clip_matches(batch, i, _predict(model, _alone(clips, i), window_mode=window_mode), LENGTHS)
    filled = batch.boxes.abs().sum(-1) > 0
    grounded = counts.index(max(counts))
    assert filled[grounded, :LENGTHS[grounded], 0].all()  # every real frame of a grounded clip has its box


def _reference(model, clips, captions, window_mode):
    """Window by window, one clip at a time, with the model's parts: the schedule of
    :func:`models.grove.windows.clip_windows`, each window's video tokens, caption-forced LLM pass,
    grounding features and box decoder; a frame takes its box from the window that keeps it."""
    global_frames, grounding_frames, frame_mask, _ = clips
    b, n = frame_mask.shape
    parsed = [model.prompter.parse_generated(format_target(c)) for c in captions]
    phrases = [p[2] for p in parsed]
    max_p = max(len(p) for p in phrases)
    boxes, scores = torch.zeros(b, n, max_p, 4), torch.ones(b, n, max_p)
    for i in range(b):
        p = len(phrases[i])
        if p == 0:
            continue
        enc = model.prompter.encode_training([parsed[i][0]])
        positions, keep, _ = clip_windows(int(frame_mask[i].sum()), T, window_mode)
        for pos, kept in zip(positions, keep):
            video = model.encode_video(global_frames[i:i + 1, pos])
            _, queries, _ = model.det_queries(enc["input_ids"], enc["attention_mask"], video, num_slots=p)
            win_boxes, logits = model.decode_boxes(model.encode_grounding(grounding_frames[i:i + 1, pos]), queries)
            boxes[i, pos[kept], :p] = win_boxes[0, kept]
            scores[i, pos[kept], :p] = logits[0, kept].sigmoid()
    real = (torch.arange(max_p) < torch.tensor([len(p) for p in phrases]).unsqueeze(1))[:, None] & frame_mask[..., None]
    return [p[0] for p in parsed], phrases, boxes * real.unsqueeze(-1), scores * real


@pytest.mark.parametrize("window_mode", ["interleaved", "official"])
def test_teacher_forced_batch_in_any_passes_equals_the_window_by_window_reference(model, window_mode):
    clips = _clips(seed=1)
    tagged, phrases, boxes, scores = _reference(model, clips, CAPTIONS, window_mode)
    assert [len(p) for p in phrases] == [3, 1, 0, 2]
    for windows_per_pass in (None, 1, 3, 64):
        out = _predict(model, clips, window_mode=window_mode, captions=list(CAPTIONS),
                       windows_per_pass=windows_per_pass)
        assert out.tagged_captions == tagged and out.phrases == phrases
        torch.testing.assert_close(out.boxes, boxes, atol=TOL, rtol=0)
        torch.testing.assert_close(out.scores, scores, atol=TOL, rtol=0)


def test_passes_are_filled_with_several_clips_windows_and_skip_what_has_nothing_to_box(model, monkeypatch):
    clips = _clips(seed=2)
    passes, video_frames = [], []
    grounding, video = model.encode_grounding, model.encode_video
    monkeypatch.setattr(model, "encode_grounding", lambda frames: passes.append(frames.shape[0]) or grounding(frames))
    monkeypatch.setattr(model, "encode_video", lambda frames: video_frames.append(frames.shape[:2]) or video(frames))
    _predict(model, clips, window_mode="interleaved", captions=list(CAPTIONS))
    # 5 + 2 + 3 windows (clip 2 has no phrase; the shorter clips' padding windows are not run), 4 per pass
    assert passes == [4, 4, 2]
    passes.clear()
    _predict(model, clips, window_mode="interleaved", captions=list(CAPTIONS), windows_per_pass=10)
    assert passes == [10]
    with pytest.raises(ValueError, match="windows_per_pass"):
        _predict(model, clips, window_mode="interleaved", captions=list(CAPTIONS), windows_per_pass=0)


def test_the_window_showing_the_caption_s_frames_reuses_their_video_tokens(model, monkeypatch):
    """A 40-frame clip captions from its segment centres 2, 7, ..., 37: its third interleaved window."""
    clips = _alone(_clips(seed=3), 0)
    tok = model.tokenizer
    answer = tok(" a man wipes <p> the floor </p> [DET]", add_special_tokens=False)["input_ids"]
    monkeypatch.setattr(model.language_model, "generate", lambda video, ids, mask, max_new_tokens: [answer])
    frames = []
    video = model.encode_video
    monkeypatch.setattr(model, "encode_video", lambda f: frames.append(f.shape[0] * f.shape[1]) or video(f))
    out = _predict(model, clips, window_mode="interleaved")
    assert out.phrases == [["the floor"]]
    assert frames == [8] * 5  # the caption's 8 frames, then the 4 other windows (one per pass for one clip)
    tagged, _, boxes, scores = _reference(model, clips, out.tagged_captions, "interleaved")
    assert tagged == out.tagged_captions
    torch.testing.assert_close(out.boxes, boxes, atol=TOL, rtol=0)
    torch.testing.assert_close(out.scores, scores, atol=TOL, rtol=0)


def test_official_protocol_batch_grounds_each_clip_s_caption_window_on_its_own_ids(model, monkeypatch):
    """Two answers, chosen per clip by its video tokens: the batch's caption windows see each clip's own
    generated ids, its other windows the re-tokenised answer, as the clip alone does."""
    tok = model.tokenizer
    answers = [tok(" a man wipes <p> the floor </p> [DET]; he <p> a cloth </p> [DET]", add_special_tokens=False)
               ["input_ids"] + [tok.eos_token_id],
               tok(" <p> a dog </p> [DET] runs.", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]]
    monkeypatch.setattr(model.language_model, "generate", lambda video, ids, mask, max_new_tokens, keep_eos: (
        [list(answers[int(row.sum() > 0)]) for row in video]))
    lengths = (17, 9, 20)
    clips = _clips(lengths, seed=4)
    batch = _predict(model, clips, window_mode="official", text_protocol="official")
    assert sorted({len(p) for p in batch.phrases}) == [1, 2]  # both answers occur
    for i in range(len(lengths)):
        alone = _predict(model, _alone(clips, i), window_mode="official", text_protocol="official")
        _assert_clip_matches(batch, i, alone, lengths)
        assert batch.answers[i] == alone.answers[0] and batch.captions[i] == alone.captions[0]
