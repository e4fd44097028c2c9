"""Does the judge's vision tower carry what a judge needs? A verifier trained on its frozen tokens.

A random toy judge has to learn from the corruptions alone to compare a caption with its clip
(docs/judge.md). When it does not, this diagnostic separates the two suspects,
the video features and the language model. It caches the frozen vision tokens (merger output) of the
judge's training and validation clips. It then trains a small transformer from scratch that
reads the tokens and a caption, and flags every caption token a corruption changed, with labels
from the generator's substitution records (:func:`judge.data.targets.substituted_spans`).
It reports the flags' accuracy (unchanged / changed-object / changed-action tokens) and the
Kendall tau-b between the validation scores and the mean flag of each caption.

    python -m experiments.judge_feature_probe --config configs/judge_demo.yaml --clips 2000 --steps 1500

A verifier that ranks the corruptions while the judge does not points at the language model; a
verifier at chance points at the features (``--vision`` compares towers). ``--verifier judge``
trains a fresh copy of the toy judge's own Qwen2.5-VL language model instead (RMSNorm, SwiGLU,
grouped-query attention, its initialisation, 3-D M-RoPE positions of the video tokens), with the
same head and labels: it tells whether that architecture can learn the comparison at all, and
from how many examples.
"""
from __future__ import annotations

import core  # noqa: F401
from core.cli_args import positive_int
from core.command_parser import CommandParser

import json
import time

import numpy as np
import torch
from torch import Tensor, nn

from judge.data.targets import substituted_spans
from metrics.functional.correlation import kendall_tau_b

KINDS = ("unchanged", "object", "action")


class FeatureVerifier(nn.Module):
    """Video tokens (projected, learned absolute positions) then caption tokens, a causal
    transformer, and a per-caption-token "changed" logit."""

    def __init__(self, feature_dim: int, vocab_size: int, dim: int = 128, layers: int = 3, heads: int = 4,
                 max_video: int = 256, max_text: int = 256):
        super().__init__()
        self.video_proj = nn.Linear(feature_dim, dim)
        self.video_pos = nn.Parameter(torch.randn(max_video, dim) * 0.02)
        self.text = nn.Embedding(vocab_size, dim)
        self.text_pos = nn.Parameter(torch.randn(max_text, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, 0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, 1)

    def forward(self, video: Tensor, ids: Tensor, padding: Tensor, layout=None) -> Tensor:
        """``video (B, N, F)``, ``ids`` / ``padding (B, L)`` -> logits ``(B, L)`` (``layout`` unused)."""
        n, length = video.shape[1], ids.shape[1]
        if n > len(self.video_pos) or length > len(self.text_pos):
            raise ValueError(f"{n} video / {length} caption tokens exceed the verifier's positions")
        x = torch.cat([self.video_proj(video) + self.video_pos[:n], self.text(ids) + self.text_pos[:length]], 1)
        causal = torch.triu(torch.ones(n + length, n + length, dtype=torch.bool, device=x.device), 1)
        pad = torch.cat([torch.zeros_like(padding[:, :1]).expand(-1, n), padding], 1)
        return self.head(self.encoder(x, mask=causal, src_key_padding_mask=pad)[:, n:]).squeeze(-1)


class JudgeLMVerifier(nn.Module):
    """The judge's Qwen2.5-VL language model (a fresh, randomly initialised copy, all weights
    trained) reading the video tokens then the caption, with M-RoPE positions as in the judge,
    and the same per-caption-token "changed" logit."""

    def __init__(self, judge, seed: int = 0):
        super().__init__()
        from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLTextModel

        base = judge.base_model
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.language_model = Qwen2_5_VLTextModel(base.config.text_config)
        self._positions = base.model.get_rope_index  # uses the config only, no weights
        self.video_token_id = judge.prompter.video_token_id
        self.head = nn.Linear(base.config.text_config.hidden_size, 1)

    def forward(self, video: Tensor, ids: Tensor, padding: Tensor, layout: tuple[Tensor, Tensor]) -> Tensor:
        """``video (B, N, D)``, ``ids`` / ``padding (B, L)``, ``layout``: the clips' ``video_grid_thw (B, 3)``
        and seconds per temporal patch ``(B,)`` -> logits ``(B, L)``."""
        b, n = video.shape[:2]
        grid, seconds = layout
        embeds = torch.cat([video, self.language_model.embed_tokens(ids)], 1)
        mask = torch.cat([torch.ones(b, n, dtype=torch.long), (~padding).long()], 1)
        full = torch.cat([torch.full((b, n), self.video_token_id), ids.masked_fill(padding, 0)], 1)
        types = (full == self.video_token_id).to(torch.int32) * 2
        positions, _ = self._positions(full, types, video_grid_thw=grid,
                                       second_per_grid_ts=seconds, attention_mask=mask)
        states = self.language_model(inputs_embeds=embeds, attention_mask=mask, position_ids=positions,
                                     use_cache=False).last_hidden_state
        return self.head(states[:, n:]).squeeze(-1)


def token_labels(row: dict, tokenizer) -> tuple[list[int], list[int], list[int]] | None:
    """Caption token ids, 0/1 "changed" labels and kinds (0 unchanged, 1 object, 2 action); None when
    the row's substitutions cannot be located in its caption."""
    spans = substituted_spans(row)
    if spans is None:
        return None
    kind_of = {}
    for a, b in spans:
        text = row["caption"][a:b]
        kinds = {s["kind"] for s in row["substitutions"] if s["new"] == text}
        kind_of[(a, b)] = 1 if "object" in kinds else 2
    encoded = tokenizer(row["caption"], add_special_tokens=False, return_offsets_mapping=True)
    labels, kinds = [], []
    for start, end in encoded["offset_mapping"]:
        hit = [kind_of[(a, b)] for a, b in spans if a < end and start < b]
        labels.append(int(bool(hit)))
        kinds.append(max(hit, default=0))
    return list(encoded["input_ids"]), labels, kinds


def clip_tokens(rows: list[dict], dataset, judge, limit: int | None) -> dict[str, tuple[Tensor, Tensor, float]]:
    """Frozen vision tokens ``(N, F)``, grid ``(3,)`` and seconds per temporal patch (as the judge's
    prompter sets them) of the first ``limit`` distinct clips of ``rows``."""
    tower, prompter = judge.vision_tower().eval(), judge.prompter
    first: dict[str, dict] = {}
    for row in rows:
        first.setdefault(row["video"], row)
    out = {}
    for video in sorted(first)[:limit]:
        frames, fps = dataset.clip_frames(first[video])
        pixels, grid = prompter.encode_video(frames)
        with torch.no_grad():
            seconds = prompter.temporal_patch_size / fps if fps else 1.0
            out[video] = (tower(pixels, grid_thw=grid[None]).pooler_output, grid, float(seconds))
    return out


def examples(rows: list[dict], features: dict[str, tuple[Tensor, Tensor, float]], tokenizer) -> list[tuple]:
    out = []
    for row in rows:
        if row["video"] not in features:
            continue
        labelled = token_labels(row, tokenizer)
        if labelled is not None:
            tokens, grid, seconds = features[row["video"]]
            out.append((tokens, *(torch.tensor(v) for v in labelled), float(row["score"]), grid, seconds))
    return out


def collate(items: list[tuple]) -> tuple[Tensor, Tensor, Tensor, Tensor, tuple[Tensor, Tensor]]:
    width = max(len(item[1]) for item in items)
    ids = torch.zeros(len(items), width, dtype=torch.long)
    labels = torch.full((len(items), width), -1.0)
    kinds = torch.full((len(items), width), -1, dtype=torch.long)
    for i, (_, token_ids, label, kind, *_) in enumerate(items):
        ids[i, :len(token_ids)], labels[i, :len(label)], kinds[i, :len(kind)] = token_ids, label.float(), kind
    layout = (torch.stack([item[5] for item in items]), torch.tensor([item[6] for item in items]))
    return torch.stack([item[0] for item in items]), ids, labels, kinds, layout


@torch.no_grad()
def evaluate(model: nn.Module, items: list[tuple], batch_size: int = 64) -> dict:
    model.eval()
    right = torch.zeros(3)
    total = torch.zeros(3)
    mean_flags = []
    for i in range(0, len(items), batch_size):
        video, ids, labels, kinds, layout = collate(items[i:i + batch_size])
        valid = labels >= 0
        logits = model(video, ids, ~valid, layout)
        correct = ((logits > 0).float() == labels) & valid
        for k in range(3):
            right[k] += (correct & (kinds == k)).sum()
            total[k] += (valid & (kinds == k)).sum()
        flags = torch.sigmoid(logits).masked_fill(~valid, 0.0)
        mean_flags.append(flags.sum(1) / valid.sum(1))
    model.train()
    scores = [item[4] for item in items]
    tau = kendall_tau_b((-torch.cat(mean_flags)).tolist(), scores)  # more flags, lower score
    accuracy = {f"accuracy_{name}": round(float(right[k] / total[k]), 4) if total[k] else None
                for k, name in enumerate(KINDS)}
    return {"token_accuracy": round(float(right.sum() / total.sum()), 4), **accuracy,
            "base_rate_unchanged": round(float(total[0] / total.sum()), 4), "kendall_tau_b": round(float(tau), 4)}


def main(argv: list[str] | None = None) -> dict:
    parser = CommandParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", role="input", default="configs/judge_demo.yaml")
    parser.add_argument("--vision", role="input", default=None,
                        help="vision-tower file (default: the config's vision_checkpoint)")
    parser.add_argument("--clips", type=positive_int, default=2000, help="training clips whose corruptions are used")
    parser.add_argument("--val-clips", type=positive_int, default=None, help="validation clips (default: all)")
    parser.add_argument("--verifier", choices=("scratch", "judge"), default="scratch",
                        help="scratch: a small LayerNorm/GELU transformer; judge: a fresh copy of the judge's "
                             "own Qwen2.5-VL language model")
    parser.add_argument("--steps", type=positive_int, default=1500)
    parser.add_argument("--batch-size", type=positive_int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--clip", type=float, default=None,
                        help="clip the gradient norm to this (the judge configs clip at 1.0); default: no clipping")
    parser.add_argument("--eval-every", type=positive_int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=positive_int, default=1)
    parser.add_argument("overrides", nargs="*", help="extra CLI overrides for the judge config")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from cli import cli_main

    vision = [f"--model.init_args.vision_checkpoint={args.vision}"] if args.vision else []
    cli = cli_main(["--config", args.config, *vision, *args.overrides], run=False)
    judge, data = cli.model.judge, cli.datamodule
    data.prepare_data()
    data.setup("fit")
    tokenizer = judge.prompter.tokenizer
    start = time.perf_counter()
    splits = {}
    for split, limit in (("train", args.clips), ("val", args.val_clips)):
        dataset = data.datasets[split]
        features = clip_tokens(dataset.rows, dataset, judge, limit)
        splits[split] = examples(dataset.rows, features, tokenizer)
        if not splits[split]:
            raise ValueError(f"{data.split_file(split)}: no row with substitution records to label")
    print(json.dumps({"cached_seconds": round(time.perf_counter() - start, 1),
                      **{f"{k}_rows": len(v) for k, v in splits.items()}}), flush=True)
    torch.manual_seed(args.seed)
    if args.verifier == "judge":
        model = JudgeLMVerifier(judge, seed=args.seed)
    else:
        model = FeatureVerifier(splits["train"][0][0].shape[-1], len(tokenizer))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    rng = np.random.default_rng(args.seed)
    history = []
    for step in range(1, args.steps + 1):
        picked = rng.choice(len(splits["train"]), min(args.batch_size, len(splits["train"])), replace=False)
        video, ids, labels, _, layout = collate([splits["train"][i] for i in picked])
        valid = labels >= 0
        loss = nn.functional.binary_cross_entropy_with_logits(model(video, ids, ~valid, layout)[valid],
                                                              labels[valid])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if args.clip:
            nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        if step % args.eval_every == 0 or step == args.steps:
            history.append({"step": step, "train_loss": round(loss.item(), 4), **evaluate(model, splits["val"])})
            print(json.dumps(history[-1]), flush=True)
    return {"config": args.config, "vision": args.vision, "verifier": args.verifier, "clip": args.clip,
            "steps": args.steps,
            "history": history}


if __name__ == "__main__":
    main()
