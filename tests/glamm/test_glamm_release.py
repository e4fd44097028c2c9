"""GLaMM as released: SAM's input pixels, the GCG evaluation prompt, the LLM settings of the folder."""
from __future__ import annotations

import re
import types
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from glamm.model import GCG_QUESTION, GLaMM, llm_config_from_folder
from models.grove.configuration import LanguageModelConfig
from tests.fixtures.llama_vocabulary import llama_tokenizer_root
from tests.fixtures.official_glamm_state import save_glamm_folder

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "official" / "glamm_tiny.yaml"
SAM_MEAN = torch.tensor([123.675, 116.28, 103.53]).view(3, 1, 1)
SAM_STD = torch.tensor([58.395, 57.12, 57.375]).view(3, 1, 1)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return save_glamm_folder(tmp_path_factory.mktemp("glamm") / "tiny")


@pytest.fixture(scope="module")
def model(folder) -> GLaMM:
    return GLaMM.from_folder(folder, config=TINY)


def test_sam_input_is_resize_longest_side_on_the_8_bit_frame(model):
    """GLaMM's inference: ``ResizeLongestSide.apply_image`` (PIL on uint8), normalise, pad bottom-right."""
    from segment_anything.utils.transforms import ResizeLongestSide

    frames = np.random.default_rng(0).integers(0, 256, size=(2, 37, 53, 3), dtype=np.uint8)
    seen = []
    hook = model.grounding_encoder.register_forward_pre_hook(lambda module, args: seen.append(args[0].clone()))
    try:
        model.encode_images(frames)
    finally:
        hook.remove()
    size = model.image_size
    resize = ResizeLongestSide(size)
    for i, frame in enumerate(frames):
        resized = torch.from_numpy(resize.apply_image(frame)).permute(2, 0, 1).float()
        expected = torch.zeros(3, size, size)
        expected[:, :resized.shape[1], :resized.shape[2]] = (resized - SAM_MEAN) / SAM_STD
        torch.testing.assert_close(seen[0][i, 0], expected, rtol=0, atol=1e-5)


def test_gcg_question_is_the_string_the_release_sends():
    # eval/gcg/infer.py writes the literal over two lines: "... interleaved \" then, indented by four
    # spaces, "segmentation masks ...": the space before the backslash plus the four of the indentation
    assert "interleaved" + " " * 5 + "segmentation" in GCG_QUESTION
    assert re.sub(r" +", " ", GCG_QUESTION) == ("Could you please give me a detailed description of the image? Please "
                                                "respond with interleaved segmentation masks for the corresponding "
                                                "parts of the answer.")


def released_prompt_ids(sp, added: dict[str, int], question: str, image_tokens: int) -> list[int]:
    """GLaMM's GCG prompt ids from the SentencePiece model itself: the LLaVA-v1 conversation, split at
    ``<image>`` (BOS on the first chunk only, -200 per image token between), each chunk split at the
    added tokens with the whitespace around them stripped, every other piece encoded on its own."""
    system = ("A chat between a curious human and an artificial intelligence assistant. The assistant gives "
              "helpful, detailed, and polite answers to the human's questions.")
    text = (f"{system} USER: The <im_start><image><im_end> provides an overview of the picture.\n{question} "
            "ASSISTANT:")
    splitter = re.compile("(" + "|".join(re.escape(t) for t in sorted(added, key=len, reverse=True)) + ")")

    def chunk_ids(chunk: str) -> list[int]:
        ids = []
        for piece in splitter.split(chunk):
            if piece in added:
                ids.append(added[piece])
            elif piece.strip():
                ids.extend(sp.encode(piece.strip()))
        return ids

    before, after = text.split("<image>")
    return [sp.bos_id(), *chunk_ids(before), *[-200] * image_tokens, *chunk_ids(after)]


def test_gcg_prompt_ids_on_the_real_vocabulary():
    spm = pytest.importorskip("sentencepiece")
    from models.grove.language_model import load_tokenizer_folder

    folder = llama_tokenizer_root() / "glamm"
    llama = load_tokenizer_folder(folder)
    sp = spm.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    added = {t: llama.convert_tokens_to_ids(t) for t in ("<im_start>", "<im_end>", "<bbox>", "<point>", "[SEG]",
                                                         "<p>", "</p>")}
    added.update({"<s>": sp.bos_id(), "</s>": sp.eos_id(), "<unk>": sp.unk_id()})
    stub = types.SimpleNamespace(template="llava_v1", question=GCG_QUESTION, tokenizer=llama, num_image_tokens=576)
    ids = GLaMM.prompt_ids(stub)
    assert ids == released_prompt_ids(sp, added, GCG_QUESTION, 576)
    # the five spaces are one more token ('▁▁▁▁') than a single-spaced question gives
    single = GLaMM.prompt_ids(types.SimpleNamespace(**{**vars(stub), "question": re.sub(r" +", " ", GCG_QUESTION)}))
    four_spaces = sp.piece_to_id("\u2581" * 4)
    assert len(ids) == len(single) + 1 and four_spaces in ids and four_spaces not in single
    position = ids.index(four_spaces)
    assert sp.id_to_piece(ids[position - 1]) == "aved" and sp.id_to_piece(ids[position + 1]) == "\u2581segment"


def tiny_yaml_without(tmp_path: Path, **settings) -> Path:
    """configs/official/glamm_tiny.yaml with the given llama_config settings replaced (None: removed)."""
    config = yaml.safe_load(TINY.read_text())
    llama = config["model"]["init_args"]["language_model"]["llama_config"]
    for key, value in settings.items():
        if value is None:
            llama.pop(key, None)
        else:
            llama[key] = value
    path = tmp_path / "glamm_tiny_variant.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_from_folder_takes_llm_settings_from_config_json(folder, tmp_path):
    path = tiny_yaml_without(tmp_path, rms_norm_eps=None)
    model = GLaMM.from_folder(folder, config=path)
    llm = model.language_model.model.config
    assert llm.rms_norm_eps == 1e-5  # the folder's value; LlamaConfig's default would be 1e-6
    assert model.language_model.model.model.norm.variance_epsilon == 1e-5


def test_from_folder_refuses_a_disagreement_naming_both_values(folder, tmp_path):
    path = tiny_yaml_without(tmp_path, rms_norm_eps=1e-6)
    with pytest.raises(ValueError, match=r"rms_norm_eps: 1e-05 in .*config.json, 1e-06 in .*glamm_tiny_variant"):
        GLaMM.from_folder(folder, config=path)


def test_llm_config_from_folder_fills_and_compares(tmp_path):
    (tmp_path / "config.json").write_text('{"rms_norm_eps": 1e-05, "hidden_size": 64, "max_position_embeddings": 4096,'
                                          ' "model_type": "llava", "mm_hidden_size": 1024}')
    config = LanguageModelConfig(llama_config={"hidden_size": 64, "rms_norm_eps": 1.0e-5})
    merged = llm_config_from_folder(tmp_path, config, "x.yaml").llama_config
    assert merged == {"hidden_size": 64, "rms_norm_eps": 1e-5, "max_position_embeddings": 4096}
    clash = LanguageModelConfig(llama_config={"hidden_size": 32, "max_position_embeddings": 2048})
    with pytest.raises(ValueError, match="hidden_size: 64 in .* 32 in x.yaml; max_position_embeddings: 4096"):
        llm_config_from_folder(tmp_path, clash, "x.yaml")
    assert llm_config_from_folder(tmp_path / "absent", config, "x.yaml") is config
