"""Scorers on tiny random open_clip / transformers towers equal the formulas on the towers' own
embeddings; the judge adapter maps answers to scores."""
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from agreement.benchmarks.items import CaptionItem, Visual
from agreement.scorers.embedding import ClipScoreScorer, EMScoreScorer, ViClipScoreScorer
from agreement.scorers.judge import JudgeScorer
from agreement.scorers.towers import load_towers

TINY_OPEN_CLIP = {"seed": 0, "open_clip_config": {
    "embed_dim": 16, "vision_cfg": {"layers": 1, "width": 32, "head_width": 16, "patch_size": 8, "image_size": 32},
    "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}}}
TINY_HF = {"seed": 0, "hf_clip_config": {
    "projection_dim": 16,
    "text_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                    "max_position_embeddings": 32, "vocab_size": 49408, "eos_token_id": 49407},
    "vision_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                      "image_size": 32, "patch_size": 8}}}


class ArrayFrames:
    """Frames by visual: a fixed random clip per video name."""

    def __init__(self, num_frames=3):
        self.num_frames = num_frames

    def frames(self, visual):
        rng = np.random.default_rng(abs(hash(visual.video)) % 2**32)
        return rng.integers(0, 256, (self.num_frames, 40, 48, 3), dtype=np.uint8)


def _items():
    return [CaptionItem("a", "a red circle moves up", Visual(video="v1.mp4"), ["a red circle rises", "a circle"]),
            CaptionItem("b", "a blue square", Visual(video="v2.mp4"), ["a blue square slides left"]),
            CaptionItem("c", "a red circle moves down", Visual(video="v1.mp4"), ["a red circle rises"])]


@pytest.fixture(scope="module", params=[TINY_OPEN_CLIP, TINY_HF], ids=["open_clip", "transformers"])
def towers(request):
    return load_towers(request.param, "towers")


def test_caption_embedding_is_the_towers_own(towers):
    captions = ["a red circle moves up", "a dog"]
    ids = towers.tokenize(captions)
    if towers.backend == "open_clip":
        expected = towers.model.encode_text(ids)
    else:
        mask = (torch.arange(ids.shape[1])[None] <= (ids == towers.eos_id).int().argmax(-1)[:, None]).long()
        expected = towers.model.get_text_features(input_ids=ids, attention_mask=mask)
        expected = getattr(expected, "pooler_output", expected)
    assert torch.allclose(towers.encode_text(captions), expected, atol=1e-5)


def test_clipscore_and_refclipscore_match_the_formula(towers):
    items, frames = _items(), ArrayFrames()
    scores = ClipScoreScorer(towers, prefix="").score(items, frames)
    ref_scores = ClipScoreScorer(towers, prefix="", references=True).score(items, frames)
    for item, s, rs in zip(items, scores, ref_scores):
        clip = F.normalize(F.normalize(towers.encode_frames(frames.frames(item.visual)), dim=-1).mean(0), dim=-1)
        text = F.normalize(towers.encode_text([item.caption])[0], dim=-1)
        expected = 2.5 * max(float(clip @ text), 0.0)
        assert s == pytest.approx(expected, abs=1e-5)
        refs = F.normalize(towers.encode_text(item.references), dim=-1)
        best = max(float((refs @ text).max()), 0.0)
        hm = 0.0 if expected + best == 0 else 2 * expected * best / (expected + best)
        assert rs == pytest.approx(hm, abs=1e-5)


def test_emscore_matches_the_formula_without_idf(towers):
    items, frames = _items(), ArrayFrames()
    scores = EMScoreScorer(towers, idf=False).score(items, frames)
    for item, s in zip(items, scores):
        f = F.normalize(towers.encode_frames(frames.frames(item.visual)), dim=-1)
        emb, ids, mask = towers.encode_tokens([item.caption])
        tok = F.normalize(emb[0][mask[0]], dim=-1)
        sim = tok @ f.T
        p, r = sim.max(1).values.mean(), sim.max(0).values.mean()
        coarse = tok[-1] @ F.normalize(f.mean(0), dim=-1)
        assert s == pytest.approx(float(((2 * p * r / (p + r)) + coarse) / 2), abs=1e-5)


def test_emscore_with_references_is_the_mean_of_video_and_reference_scores(towers):
    items, frames = _items(), ArrayFrames()
    video = EMScoreScorer(towers, idf=False).score(items, frames)
    both = EMScoreScorer(towers, idf=False, references=True).score(items, frames)
    # an item whose only reference is itself scores 1 on the reference side
    same = [CaptionItem("d", "a blue square", Visual(video="v2.mp4"), ["a blue square"])]
    own = EMScoreScorer(towers, idf=False, references=True).score(same, frames)
    alone = EMScoreScorer(towers, idf=False).score(same, frames)
    assert own[0] == pytest.approx((alone[0] + 1.0) / 2, abs=1e-5)
    assert not np.allclose(video, both)


def test_viclipscore_uses_the_video_towers_clip_embedding():
    class Towers:
        def encode_clip(self, frames):
            return torch.tensor([1.0, 0.0])

        def encode_text(self, captions):
            return torch.tensor([[1.0, 1.0] if "up" in c else [-1.0, 0.0] for c in captions])

    scores = ViClipScoreScorer(Towers()).score(_items(), ArrayFrames())
    assert scores.tolist() == pytest.approx([2.5 / np.sqrt(2), 0.0, 0.0])


def test_judge_scorer_reads_scores_and_leaves_unreadable_answers_nan():
    class Judge:
        def score(self, frames, captions, max_new_tokens=64):
            assert all(f.ndim == 4 for f in frames)
            return [SimpleNamespace(score=None if "square" in c else len(c) % 5 + 1) for c in captions]

    scores = JudgeScorer(Judge(), batch_size=2).score(_items(), ArrayFrames())
    assert scores[0] == len("a red circle moves up") % 5 + 1 and np.isnan(scores[1])


VICLIP_TINY = {"width": 32, "layers": 2, "heads": 2, "patch_size": 8, "embed_dim": 16, "text_width": 32,
               "text_layers": 1, "text_heads": 2, "image_size": 32, "num_frames": 4}


def test_viclip_single_frame_equals_an_open_clip_vit_with_the_same_weights():
    """With one frame the joint space-time tower is CLIP's ViT (plus the mean temporal embedding)."""
    import open_clip

    from agreement.scorers.viclip import ViClip

    torch.manual_seed(0)
    viclip = ViClip(**VICLIP_TINY).eval()
    vision = viclip.vision_encoder
    vision.temporal_positional_embedding.data.normal_()
    clip = open_clip.CLIP(embed_dim=16, quick_gelu=True, vision_cfg={"layers": 2, "width": 32, "head_width": 16,
                                                                     "patch_size": 8, "image_size": 32},
                          text_cfg={"context_length": 32, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1})
    state = {k: v for k, v in vision.state_dict().items() if k != "temporal_positional_embedding"}
    state["conv1.weight"] = state["conv1.weight"][:, :, 0]
    # the temporal embedding's mean is added to every patch: fold it into the patch positions
    state["positional_embedding"] = state["positional_embedding"].clone()
    state["positional_embedding"][1:] += vision.temporal_positional_embedding.mean(1)[0]
    missing, unexpected = clip.visual.load_state_dict(state, strict=False)
    assert not unexpected and not [k for k in missing if "attn_mask" not in k]
    image = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(vision(image[:, :, None]), clip.visual(image), atol=1e-5)


def test_viclip_release_checkpoint_loads_and_viclipscore_is_the_formula(tmp_path):
    from agreement.scorers.viclip import ViClip, load_viclip

    torch.manual_seed(1)
    model = ViClip(**VICLIP_TINY)
    torch.save({"model": model.state_dict(), "epoch": 3}, tmp_path / "viclip.pth")
    spec = {"architecture": VICLIP_TINY, "seed": 5, "checkpoint": str(tmp_path / "viclip.pth")}
    towers = load_viclip(spec, "towers")
    with pytest.raises(ValueError, match="towers.checkpoint"):
        load_viclip({**spec, "architecture": {**VICLIP_TINY, "width": 64}}, "towers")
    for name, value in model.state_dict().items():
        assert torch.equal(towers.model.state_dict()[name], value)
    items, frames = _items(), ArrayFrames(num_frames=6)
    scores = ViClipScoreScorer(towers).score(items, frames)
    for item, s in zip(items, scores):
        v = F.normalize(towers.encode_clip(frames.frames(item.visual)), dim=-1)
        t = F.normalize(towers.encode_text([item.caption])[0], dim=-1)
        assert s == pytest.approx(2.5 * max(float(v @ t), 0.0), abs=1e-5)
    # frame order matters to a video tower (temporal embeddings), not to a frame average
    towers.model.vision_encoder.temporal_positional_embedding.data.normal_()
    clip = frames.frames(items[0].visual)
    assert not torch.allclose(towers.encode_clip(clip), towers.encode_clip(clip[::-1].copy()))


def test_real_size_viclip_l_has_clip_vit_l14_towers_on_the_meta_device():
    import open_clip

    from agreement.scorers.viclip import SIZES, ViClip

    with torch.device("meta"):
        viclip = ViClip(**SIZES["L"])
        cfg = open_clip.get_model_config("ViT-L-14")
        clip = open_clip.CLIP(**{**cfg, "text_cfg": {**cfg["text_cfg"], "context_length": 32}})
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    # the same ViT-L/14 plus the 8 x 1024 temporal embedding; the same text transformer with 32 positions
    assert count(viclip.vision_encoder) == count(clip.visual) + 8 * 1024
    text = count(clip) - count(clip.visual) - clip.logit_scale.numel()
    assert count(viclip.text_encoder) == text


def test_released_judge_folder_scores_one_frame_images(tmp_path):
    """The judge loads through the judge package and takes an image as a one-frame video."""
    sys_path = str(Path(__file__).resolve().parents[1] / "judge")
    sys.path.insert(0, sys_path)
    try:
        from judge_fixtures import save_tiny_qwen_folder
    finally:
        sys.path.remove(sys_path)
    from agreement.scorers.judge import load_judge_scorer

    save_tiny_qwen_folder(tmp_path / "judge")
    scorer = load_judge_scorer(judge_path=str(tmp_path / "judge"), max_new_tokens=6, batch_size=2)
    items = [CaptionItem("a", "a red circle", Visual(image="a.jpg")), CaptionItem("b", "a dog", Visual(image="b.jpg"))]
    scores = scorer.score(items, ArrayFrames(num_frames=1))
    assert scores.shape == (2,)
    assert all(np.isnan(s) or s in (1, 2, 3, 4, 5) for s in scores)  # a random judge rarely writes a score line
