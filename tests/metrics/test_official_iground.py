"""The official GROVE iGround protocol against an independent, loop-by-loop reading of ``eval_iground.py``."""
import json

import numpy as np
import pytest
import torch

from formats.records import GroundedRecord, write_records_json
from metrics.commands.evaluate import main
from metrics.evaluator.evaluation import evaluate_official
from metrics.protocols.official_iground import evaluate_official_iground
from metrics.text_encoder import HFMeanPoolEncoder

PHRASES = ["a man", "a knife", "the board", "a red cup", "an onion"]


class RandomPhraseEncoder:
    """Fixed random 3-d vector per phrase (unnormalised): cosines spread over [-1, 1]."""

    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        self.table = {p: rng.normal(size=3) for p in PHRASES}

    def encode(self, texts):
        return torch.tensor(np.stack([self.table[t] for t in texts]), dtype=torch.float32)


# ---------------------------------------------------------------- the script, read literally

def script_iou(a, b):
    xA, yA, xB, yB = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    inter = max(0, xB - xA + 1) * max(0, yB - yA + 1)
    union = (a[2] - a[0] + 1) * (a[3] - a[1] + 1) + (b[2] - b[0] + 1) * (b[3] - b[1] + 1) - inter
    return 0.0 if union == 0 else inter / union


def coco_iou(d, g):
    """Standard IoU of two [x, y, w, h] boxes (pycocotools' bbox IoU, no +1)."""
    w = min(d[0] + d[2], g[0] + g[2]) - max(d[0], g[0])
    h = min(d[1] + d[3], g[1] + g[3]) - max(d[1], g[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / (d[2] * d[3] + g[2] * g[3] - inter)


def coco_ap50(frames):
    """COCO AP@0.5 (101 recall points, constant scores) over ``[(image id, gts, dts)]``; -1 without GT."""
    n_gt = sum(len(g) for _, g, _ in frames)
    if n_gt == 0:
        return -1.0
    matched = []
    for _, gts, dts in sorted(frames, key=lambda x: x[0]):  # pycocotools sorts the image ids
        taken = [False] * len(gts)
        for d in dts[:100]:
            best, m = 0.5, -1
            for j, g in enumerate(gts):
                if taken[j] or coco_iou(d, g) < best:
                    continue
                best, m = coco_iou(d, g), j
            if m >= 0:
                taken[m] = True
            matched.append(m >= 0)
    tp = np.cumsum(matched)
    fp = np.cumsum([not x for x in matched])
    rc = tp / n_gt
    pr = tp / (tp + fp + np.spacing(1))
    pr = np.maximum.accumulate(pr[::-1])[::-1] if len(pr) else pr
    q = np.zeros(101)
    for k, t in enumerate(np.linspace(0, 1, 101)):
        i = np.searchsorted(rc, t, side="left")
        if i >= len(pr):
            break
        q[k] = pr[i]
    return float(q.mean())


def script_protocol(records, preds, encoder):
    def emb(text):
        return encoder.encode([text])[0].numpy().astype(np.float64)

    aps, mious, recalls = [], [], []
    for r in records:
        if r.key not in preds:
            continue
        by_frame = {f["frame"]: f for f in preds[r.key]["frames"]}
        frames, frame_mious, tp, positives = [], [], 0, 0
        for i, (f, gb, gl) in enumerate(zip(r.frame_indices, r.bboxes, r.labels)):
            gts = []
            for b in gb:
                x1, y1, x2, y2 = map(int, b)
                gts.append([x1, y1, x2 - x1, y2 - y1])
            p = by_frame.get(int(f), {"boxes": [], "labels": []})
            dts = []
            for b in p["boxes"]:
                b = np.array(b, dtype=float)
                b[[0, 2]] = np.clip(b[[0, 2]], 0, r.width)
                b[[1, 3]] = np.clip(b[[1, 3]], 0, r.height)
                x1, y1, x2, y2 = map(int, b)
                dts.append([x1, y1, x2 - x1, y2 - y1])
            frames.append((f"{r.key}_{i}", gts, dts))
            if gts and dts:
                frame_mious.append(np.mean([[script_iou(d, g) for g in gts] for d in dts]))
            positives += len(gl)
            ious = np.array([[script_iou(g, d) for d in dts] for g in gts]).reshape(len(gts), len(dts))
            sims = np.array([[emb(a) @ emb(b) / np.linalg.norm(emb(a)) / np.linalg.norm(emb(b))
                              for b in p["labels"]] for a in gl]).reshape(len(gl), len(p["labels"]))
            while ious.size > 0 and sims.size > 0:
                idx = np.unravel_index(np.argmax(ious), ious.shape)
                if ious[idx] < 0.5 or sims[idx] < 0.5:
                    break
                tp += 1
                ious[idx[0], :] = 0
                ious[:, idx[1]] = 0
                sims[idx[0], :] = 0
                sims[:, idx[1]] = 0
        aps.append(coco_ap50(frames))
        mious.append(np.mean(frame_mious) if frame_mious else 0.0)
        recalls.append(tp / positives if positives else 0)
    return {"AP50": float(np.mean(aps)), "mIoU": float(np.mean(mious)), "recall": float(np.mean(recalls))}


# ---------------------------------------------------------------- random inputs

def random_case(seed, n=5):
    rng = np.random.default_rng(seed)
    records, preds = [], {}
    for v in range(n):
        w, h = 120, 90
        n_frames = int(rng.integers(2, 14))  # ids "_10" sort before "_2"
        bboxes, labels = [], []
        no_gt = v == 0  # one clip without any GT box
        for _ in range(n_frames):
            k = 0 if no_gt else int(rng.integers(0, 4))
            # near the top-left corner and large: [x, y, w, h] read as corners is still a box
            xy = rng.uniform(0, [40, 30], size=(k, 2))
            wh = rng.uniform(20, 80, size=(k, 2))
            bboxes.append(np.concatenate([xy, np.minimum(xy + wh, [w, h])], axis=1))
            labels.append(list(rng.choice(PHRASES, size=k)))
        rec = GroundedRecord(video_fname=f"v{v}.mp4", video_id=f"v{v}", clip_id="0", fps=5.0,
                             clip_start_frame=0, clip_end_frame=n_frames - 1, width=w, height=h,
                             caption=" and ".join(PHRASES), phrases=list(PHRASES),
                             tagged_caption=" and ".join(f"<p>{p}</p>" for p in PHRASES), bboxes=bboxes, labels=labels)
        records.append(rec)
        if v == n - 1:
            continue  # a clip without prediction: left out
        frames = []
        for f, gb, gl in zip(rec.frame_indices, bboxes, labels):
            boxes, labs = [], []
            for b, lab in zip(gb, gl):
                if rng.random() < 0.8:
                    boxes.append((b + rng.normal(0, 3, 4)).tolist())
                    labs.append(lab if rng.random() < 0.7 else str(rng.choice(PHRASES)))
            for _ in range(int(rng.integers(0, 3))):  # false positives, some past the border
                x, y = rng.uniform(-10, w), rng.uniform(-10, h)
                boxes.append([x, y, x + rng.uniform(2, 40), y + rng.uniform(2, 40)])
                labs.append(str(rng.choice(PHRASES)))
            boxes = [[min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3])] for b in boxes]
            if boxes:
                frames.append({"frame": int(f), "boxes": boxes, "labels": labs, "scores": [0.9] * len(boxes)})
        preds[rec.key] = {"caption": "a man cuts", "phrases": PHRASES, "frames": frames}
    return records, preds


@pytest.mark.parametrize("seed", range(6))
def test_equals_the_script_on_random_inputs(seed):
    records, preds = random_case(seed)
    encoder = RandomPhraseEncoder(seed)
    got = evaluate_official_iground({r.key: r for r in records}, preds, encoder, caption_metrics=())
    expected = script_protocol(records, preds, encoder)
    assert got["metrics"] == pytest.approx(expected, abs=1e-9)
    assert got["unscored_clips"] == [records[-1].key]


def test_quirks_by_hand():
    """Touching boxes score 1/121 (xywh read as corners, +1 sizes); a clip without GT adds -1 to AP50."""
    def rec(key, boxes):
        return GroundedRecord(video_fname="x.mp4", video_id=key, clip_id="0", fps=5.0, clip_start_frame=0,
                              clip_end_frame=0, width=100, height=100, caption="a man", tagged_caption="<p>a man</p>",
                              phrases=["a man"], bboxes=[np.array(boxes, dtype=float).reshape(-1, 4)],
                              labels=[["a man"] * len(boxes)])
    with_gt, without_gt = rec("a", [[10, 10, 20, 20]]), rec("b", [])
    pred = {"caption": "a man", "phrases": ["a man"],
            "frames": [{"frame": 0, "boxes": [[0.0, 0.0, 10.0, 10.0]], "labels": ["a man"]}]}
    encoder = RandomPhraseEncoder()
    out = evaluate_official_iground({"a_0": with_gt}, {"a_0": pred}, encoder, caption_metrics=())["metrics"]
    # GT [10,10,10,10] and prediction [0,0,10,10] (xywh) read as corners: overlap 1 px, union 121 px
    assert out["mIoU"] == pytest.approx(1 / 121)
    assert out["AP50"] == 0.0 and out["recall"] == 0.0
    both = evaluate_official_iground({"a_0": with_gt, "b_0": without_gt}, {"a_0": pred, "b_0": pred}, encoder,
                                     caption_metrics=())["metrics"]
    assert both["AP50"] == pytest.approx((0.0 - 1.0) / 2)
    exact = {"caption": "a man", "phrases": ["a man"],
             "frames": [{"frame": 0, "boxes": [[10.0, 10.0, 20.9, 20.9]], "labels": ["a man"]}]}
    right = evaluate_official_iground({"a_0": with_gt}, {"a_0": exact}, encoder, caption_metrics=())["metrics"]
    assert right == {"AP50": pytest.approx(1.0), "mIoU": pytest.approx(1.0), "recall": 1.0}  # truncated to 20


def tiny_bert(folder):
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = sorted({w for p in PHRASES for w in p.split()})
    vocab = folder / "vocab.txt"
    folder.mkdir(parents=True, exist_ok=True)
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n")
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=5 + len(words), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    BertModel(config).eval().save_pretrained(folder)
    return folder


def test_bert_from_local_path_pools_like_the_script(tmp_path):
    from transformers import AutoModel, AutoTokenizer

    folder = tiny_bert(tmp_path / "bert")
    encoder = HFMeanPoolEncoder(folder, max_length=512)
    tok, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    texts = ["a red cup", "a man", "the board a knife an onion"]
    with torch.no_grad():
        expected = torch.stack([model(**tok(t, return_tensors="pt", max_length=512, truncation=True)
                                      ).last_hidden_state[0].mean(0) for t in texts])
    got = encoder.encode(texts)
    cos = torch.nn.functional.cosine_similarity(got[:, None], got[None], dim=-1)
    cos_expected = torch.nn.functional.cosine_similarity(expected[:, None], expected[None], dim=-1)
    torch.testing.assert_close(cos, cos_expected, atol=1e-5, rtol=0)

    records, preds = random_case(1, n=3)
    report = evaluate_official({r.key: r for r in records}, preds, str(folder), caption_metrics=())
    assert report["settings"]["text_encoder"] == "HFMeanPoolEncoder"
    one_at_a_time = {p: encoder.encode([p])[0] for p in PHRASES}  # the script embeds each phrase alone

    class Cached:
        def encode(self, texts):
            return torch.stack([one_at_a_time[t] for t in texts])

    assert report["metrics"]["recall"] == pytest.approx(script_protocol(records, preds, Cached())["recall"], abs=1e-6)


def test_cli_official_protocol(tmp_path, capsys):
    records, preds = random_case(2, n=3)
    gt = write_records_json(records, tmp_path / "gt.json")
    p = tmp_path / "pred.json"
    p.write_text(json.dumps(preds))
    with pytest.raises(SystemExit, match="bert-base-uncased"):
        main(["--gt", str(gt), "--pred", str(p), "--protocol", "official", "--caption-metrics", ""])
    folder = tiny_bert(tmp_path / "bert")
    report = main(["--gt", str(gt), "--pred", str(p), "--protocol", "official", "--text-encoder", str(folder),
                   "--caption-metrics", ""])
    assert report["settings"]["protocol"] == "official"
    assert report["missing_predictions"] == [records[-1].key]
    assert "left out, as the official protocol does" in capsys.readouterr().out
