"""GLaMM's grounded caption generation: masks at the frame's size, tight boxes, SAM's mask path,
batching, and GLaMM's tokenization around [SEG] on the real LLaMA vocabulary."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torchvision.ops import masks_to_boxes as torchvision_masks_to_boxes

from glamm.model import GLaMM, glamm_encode, masks_to_boxes
from models.grove.language_model import load_tokenizer_folder
from tests.fixtures.official_glamm_state import save_loud_glamm_folder

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "official" / "glamm_tiny.yaml"
CAPTIONS = ["<p>a red circle</p> moves left of <p>a blue square</p>.", "<p>a man</p> walks"]


def llama_tokenizer_root() -> Path:
    return Path(os.environ.get("GROVE_LLAMA_TOKENIZER_DIR", ROOT.parent / "shared" / "llama_tokenizer"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return save_loud_glamm_folder(tmp_path_factory.mktemp("glamm") / "tiny")


@pytest.fixture(scope="module")
def model(folder) -> GLaMM:
    return GLaMM.from_folder(folder, config=TINY)


@pytest.fixture(scope="module")
def frames() -> np.ndarray:
    return np.random.RandomState(0).randint(0, 256, (2, 90, 120, 3)).astype(np.uint8)


def test_masks_to_boxes_hand_cases():
    masks = torch.zeros(3, 6, 8, dtype=torch.bool)
    masks[0, 2, 3] = True  # one pixel
    masks[1, 1:4, 2:7] = True
    masks[1, 5, 0] = True  # a stray pixel widens the tight box
    boxes, found = masks_to_boxes(masks)
    assert found.tolist() == [True, True, False]
    assert boxes.tolist() == [[3, 2, 3, 2], [0, 1, 6, 5], [0, 0, 0, 0]]


def test_grounding_a_synthetic_frame_gives_frame_sized_masks_and_their_tight_boxes(model, frames):
    out = model.ground(frames, captions=CAPTIONS)
    assert [o.phrases for o in out] == [["a red circle", "a blue square"], ["a man"]]
    assert out[0].caption == "a red circle moves left of a blue square."
    for result in out:
        assert result.masks.shape == (len(result.phrases), 90, 120) == result.mask_logits.shape
        assert torch.equal(result.masks, result.mask_logits > 0)
        assert 0 < result.masks.float().mean() < 1  # the fixture's masks are neither empty nor full
        nonempty = result.masks.flatten(1).any(dim=1)
        assert torch.equal(result.has_box, nonempty)
        assert torch.equal(result.boxes[nonempty], torchvision_masks_to_boxes(result.masks[nonempty]))


def test_mask_path_equals_sams_mask_decoder_per_frame(model, frames):
    """The batched (frame, query) decoding against segment_anything's MaskDecoder on each frame alone."""
    with torch.no_grad():
        tokens, embeddings = model.encode_images(frames)
        answers = [model.answer_ids(c)[:-1] for c in CAPTIONS]
        hidden, ids = model.llm_pass(tokens, answers)
        queries, count = model.seg_queries(hidden, ids)
        logits = model.decode_masks(embeddings, queries, count, (90, 120))
        assert count.tolist() == [2, 1]
        size, (rh, rw) = model.image_size, (96, 128)  # 90 x 120 with its longest side at 128
        for i in range(2):
            pe = model.prompt_encoder
            sparse, dense = pe(points=None, boxes=None, masks=None)  # "no prompt": dense = no_mask_embed
            sparse = queries[i, :count[i]].unsqueeze(1)
            low, _ = model.mask_decoder(image_embeddings=embeddings[i:i + 1], image_pe=pe.get_dense_pe(),
                                        sparse_prompt_embeddings=sparse, dense_prompt_embeddings=dense,
                                        multimask_output=False)
            full = F.interpolate(low, (size, size), mode="bilinear", align_corners=False)[..., :rh, :rw]
            expected = F.interpolate(full, (90, 120), mode="bilinear", align_corners=False)[:, 0]
            torch.testing.assert_close(logits[i, :count[i]], expected, rtol=1e-4, atol=1e-3)
        assert torch.isinf(logits[1, 1]).all()  # the second frame has one phrase: its second slot is padding


def test_frames_are_batched_independently(model, frames):
    both = model.ground(frames, captions=CAPTIONS)
    alone = model.ground(frames[1:], captions=CAPTIONS[1:])
    torch.testing.assert_close(both[1].mask_logits, alone[0].mask_logits, rtol=1e-4, atol=1e-3)


def test_generation_returns_one_mask_per_phrase(model, frames):
    out = model.ground(frames, max_new_tokens=6)
    assert len(out) == 2
    for result in out:
        assert result.masks.shape[0] == len(result.phrases) == result.boxes.shape[0]


def test_caption_command_prints_and_draws(folder, frames, tmp_path, capsys):

    from PIL import Image

    from formats.video_writer import write_video

    Image.fromarray(frames[0]).save(tmp_path / "frame.png")
    write_video(tmp_path / "clip.mp4", np.repeat(frames[1:], 5, axis=0), fps=5.0)
    from glamm import commands as script

    out = tmp_path / "drawn"
    assert script.main(["caption", "--folder", str(folder), "--config", str(TINY), "--max-new-tokens", "4",
                        "--out", str(out), "--device", "cpu", str(tmp_path / "frame.png"),
                        str(tmp_path / "clip.mp4")]) == 0
    printed = capsys.readouterr().out
    assert printed.count("frame: ") == 1 and printed.count("clip_000002: ") == 1  # the video's centre frame
    drawn = sorted(p.name for p in out.iterdir())
    assert drawn == ["clip_000002.jpg", "frame.jpg"]
    assert np.asarray(Image.open(out / "frame.jpg")).shape == frames[0].shape


def test_bf16_model_grounds_as_on_a_gpu(folder, frames):
    """GLaMM's GPU precision (bf16 weights; masks upsampled in fp32), here on the CPU."""
    half = GLaMM.from_folder(folder, config=TINY, dtype=torch.bfloat16)
    result = half.ground(frames[:1], captions=CAPTIONS[:1])[0]
    assert result.mask_logits.dtype == torch.float32 and result.masks.shape == (2, 90, 120)
    nonempty = result.masks.flatten(1).any(dim=1)
    assert torch.equal(result.boxes[nonempty], torchvision_masks_to_boxes(result.masks[nonempty]))


def test_bad_frames_are_refused(model):
    with pytest.raises(ValueError, match="uint8"):
        model.ground(np.zeros((1, 8, 8, 3), np.float32))


# ------------------------------------------------------------------ the real vocabulary

@pytest.fixture(scope="module")
def llama():
    folder = llama_tokenizer_root() / "glamm"
    if not (folder / "tokenizer.model").is_file():
        pytest.skip(f"the real LLaMA vocabulary is not at {folder} (set GROVE_LLAMA_TOKENIZER_DIR)")
    return load_tokenizer_folder(folder)


def test_glamm_tokenization_puts_p_end_right_before_seg(llama):
    """transformers 4.31.0.dev0 (GLaMM's pin) strips spaces around added tokens: '</p> [SEG]' is
    '</p>', '[SEG]', so GLaMM's query (the state before [SEG]) is at '</p>' (32006)."""
    ids = glamm_encode(llama, "<p> a man </p> [SEG] rides <p> a horse </p> [SEG].")
    # '▁a' 263, '▁man' 767, '▁r' 364 'ides' 2247, '▁horse' 10435, and '▁.' 869: the piece after an
    # added token is encoded on its own, so sentencepiece gives it its word-start marker
    assert ids == [32005, 263, 767, 32006, 32004, 364, 2247, 32005, 263, 10435, 32006, 32004, 869]
    seg = [i for i, t in enumerate(ids) if t == 32004]
    assert [ids[i - 1] for i in seg] == [32006, 32006]
    # transformers 5 (pinned here) puts '▁' (29871) between them: GLaMM's rule must not follow it
    current = llama("<p> a man </p> [SEG]", add_special_tokens=False)["input_ids"]
    assert current[current.index(32004) - 1] == 29871


def test_glamm_prompt_and_query_positions_on_the_real_vocabulary(llama):
    from models.grove.configuration import LanguageModelConfig
    from models.grove.language_model import GroveLanguageModel

    text = "A chat between a curious human and an artificial intelligence assistant. USER: The <im_start>"
    assert glamm_encode(llama, text)[-2:] == [llama.convert_tokens_to_ids("▁The"), 32000]  # no space piece
    assert glamm_encode(llama, "<im_end> provides")[:2] == [32001, llama.convert_tokens_to_ids("▁provides")]
    config = LanguageModelConfig(llama_config={"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
                                               "num_attention_heads": 2, "num_key_value_heads": 2},
                                 special_tokens="glamm", query_token="before_det")
    lm = GroveLanguageModel(config, tokenizer=llama)
    assert len(llama) == 32007 and lm.det_token_id == 32004  # GLaMM's vocabulary, queries at [SEG]
    ids = torch.tensor([glamm_encode(llama, "<p> a dog </p> [SEG] and <p> a cat </p> [SEG]")])
    assert ids[lm.query_mask(ids)].tolist() == [32006, 32006]
