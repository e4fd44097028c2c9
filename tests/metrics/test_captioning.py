"""Captioning metrics: parity with pycocoevalcap used the classic COCO-evaluator way, on random
captions; one Java process per tool; clear errors (SPICE, missing Java, bad input)."""
from __future__ import annotations

import random
import subprocess
from unittest import mock

import pytest

from metrics.functional import captioning
from metrics.functional.captioning import SpiceUnavailableError, evaluate_captions, open_meteor

VOCAB = ("a an the man woman dog cat ball grass park street car red blue small big runs sits holds "
         "rides plays on in with near next to of and two young old wooden table chair horse").split()


def random_caption(rng: random.Random) -> str:
    words = [rng.choice(VOCAB) for _ in range(rng.randint(3, 14))]
    words[0] = words[0].capitalize()
    text = " ".join(words)
    if rng.random() < 0.3:  # inner punctuation the PTB tokeniser splits off and drops
        cut = rng.randint(1, len(words) - 1)
        text = " ".join(words[:cut]) + rng.choice([",", ";", " -"]) + " " + " ".join(words[cut:])
    return text + rng.choice([".", "", "!", " ."])


def random_corpus(seed: int, size: int = 20):
    rng = random.Random(seed)
    gts = {f"v{i}": [random_caption(rng) for _ in range(rng.randint(1, 5))] for i in range(size)}
    res = {k: random_caption(rng) for k in gts}
    first = next(iter(gts))
    res[first] = gts[first][0].upper()          # a near-copy: high scores on every metric
    res[f"v{size - 1}"] = ""                    # an empty candidate must score 0, not crash
    return gts, res


def classic_scores(gts, res, with_meteor: bool):
    """What pycocoevalcap's COCOEvalCap does: tokenise gts and res, then each scorer's compute_score."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.meteor.meteor import Meteor
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    tokenizer = PTBTokenizer()
    gts_t = tokenizer.tokenize({k: [{"caption": c} for c in v] for k, v in gts.items()})
    res_t = tokenizer.tokenize({k: [{"caption": c}] for k, c in res.items()})
    out = {}
    bleu, bleu_each = Bleu(4).compute_score(gts_t, res_t, verbose=0)
    for n in range(4):
        out[f"BLEU-{n + 1}"] = (bleu[n], bleu_each[n])
    out["ROUGE-L"] = Rouge().compute_score(gts_t, res_t)
    out["CIDEr"] = Cider().compute_score(gts_t, res_t)
    if with_meteor:
        meteor = Meteor()
        try:
            out["METEOR"] = meteor.compute_score(gts_t, res_t)
        finally:
            meteor.meteor_p.kill()
            meteor.meteor_p.wait()
    return out


def assert_same(ours, ours_each, classic, ids, names):
    for name in names:
        score, each = classic[name]
        assert ours[name] == pytest.approx(float(score), rel=1e-12, abs=1e-15), name
        assert [ours_each[name][k] for k in ids] == pytest.approx([float(s) for s in each], rel=1e-12, abs=1e-15), name


@pytest.mark.parametrize("seed", [0, 1])
def test_bleu_rouge_cider_match_pycocoevalcap(seed):
    gts, res = random_corpus(seed)
    names = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "ROUGE-L", "CIDEr")
    ours, each = evaluate_captions(gts, res, metrics=names, return_per_sample=True)
    assert list(ours) == list(names)
    assert_same(ours, each, classic_scores(gts, res, with_meteor=False), list(gts), names)
    empty = f"v{len(gts) - 1}"
    assert all(each[name][empty] == 0.0 for name in names)
    assert each["CIDEr"]["v0"] > 1.0 and each["BLEU-1"]["v0"] > 0.9  # the near-copy


@pytest.fixture(scope="module")
def full_evaluation():
    """Our evaluation with every Java process it starts recorded, and the classic one."""
    gts, res = random_corpus(seed=7)
    started = []
    real_popen = subprocess.Popen

    def recording_popen(cmd, *args, **kwargs):
        process = real_popen(cmd, *args, **kwargs)
        if cmd and cmd[0] == "java":
            started.append((list(cmd), process))
        return process

    with mock.patch.object(subprocess, "Popen", recording_popen):
        ours, each = evaluate_captions(gts, res, metrics=captioning.CAPTION_METRICS, return_per_sample=True)
    return gts, res, ours, each, started, classic_scores(gts, res, with_meteor=True)


@pytest.mark.slow
def test_meteor_matches_pycocoevalcap_including_empty_candidate(full_evaluation):
    gts, res, ours, each, _, classic = full_evaluation
    assert_same(ours, each, classic, list(gts), captioning.CAPTION_METRICS)
    assert each["METEOR"][f"v{len(gts) - 1}"] == 0.0
    assert 0.0 < ours["METEOR"] < 1.0


@pytest.mark.slow
def test_one_java_process_per_tool_and_meteor_closed(full_evaluation):
    *_, started, _ = full_evaluation
    jars = [next(a for a in cmd if a.endswith(".jar") or a.startswith("stanford")) for cmd, _ in started]
    assert len(started) == 2, jars  # one tokeniser call for both sides, one METEOR for all samples
    assert any("stanford-corenlp" in j for j in jars) and any("meteor" in j for j in jars)
    assert all(process.poll() is not None for _, process in started)  # nothing left running


def test_meteor_process_closed_after_error():
    with pytest.raises(RuntimeError, match="boom"):
        with open_meteor() as meteor:
            process = meteor.meteor_p
            meteor.lock.acquire()  # the state pycocoevalcap's __del__ would deadlock on
            raise RuntimeError("boom")
    assert process.wait(timeout=10) is not None
    meteor.close()  # idempotent


def test_line_break_characters_do_not_shift_captions():
    # Java's tokeniser ends a line at \r, \f, \u2028...; the COCO evaluator only replaces \n, so
    # such a caption would move every later caption onto the wrong id.
    breaks = ["\r", "\x0b", "\x0c", "\u2028", "\u2029", "\n"]
    gts = {i: [f"a man rides a{c}horse", "a dog runs"] for i, c in enumerate(breaks)}
    res = {i: f"a man{c}rides a horse" for i, c in enumerate(breaks)}
    clean_gts = {i: ["a man rides a horse", "a dog runs"] for i in gts}
    clean_res = {i: "a man rides a horse" for i in res}
    names = ("BLEU-4", "CIDEr")
    _, each = evaluate_captions(gts, res, metrics=names, return_per_sample=True)
    _, clean_each = evaluate_captions(clean_gts, clean_res, metrics=names, return_per_sample=True)
    assert each == clean_each and all(v == pytest.approx(1.0) for v in each["BLEU-4"].values())


def test_spice_is_refused_with_reason():
    with pytest.raises(SpiceUnavailableError, match="offline.*CoreNLP|CoreNLP.*internet"):
        evaluate_captions({"a": ["a dog"]}, {"a": "a dog"}, metrics=("CIDEr", "SPICE"))


def test_missing_java_is_explained(monkeypatch):
    monkeypatch.setattr(captioning.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="make setup"):
        evaluate_captions({"a": ["a dog"]}, {"a": "a dog"}, metrics=("CIDEr",))


@pytest.mark.parametrize("gts, res, message", [
    ({}, {}, "nothing to evaluate"),
    ({"a": ["x"]}, {"b": "x"}, "same ids"),
    ({"a": []}, {"a": "x"}, r"gts\['a'\]"),
    ({"a": "a dog"}, {"a": "x"}, r"gts\['a'\]"),
    ({"a": ["x", 3]}, {"a": "x"}, r"gts\['a'\]\[1\]"),
    ({"a": ["x"]}, {"a": ["x"]}, r"res\['a'\]"),
])
def test_bad_input_is_named(gts, res, message):
    with pytest.raises(ValueError, match=message):
        evaluate_captions(gts, res)


def test_metric_names_resolve():
    assert captioning.resolve_metric_names(["bleu_4", "Rouge_L", "cider", "meteor", "BLEU-4"]) == (
        "BLEU-4", "ROUGE-L", "CIDEr", "METEOR")
    with pytest.raises(ValueError, match="unknown captioning metric 'BLEURT'"):
        captioning.resolve_metric_names(["BLEURT"])
