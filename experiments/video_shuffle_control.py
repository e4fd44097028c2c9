"""Does a GROVE checkpoint look at the video? The caption loss with each clip's own video tokens
versus with another clip's, on the validation (or test) split.

A model that learnt only the caption prior scores the same either way (and tends to write one
caption for every clip: see ``distinct_captions`` in the evaluation reports). Use it on any run:

``python -m experiments.video_shuffle_control --config configs/demo.yaml --ckpt CKPT``, with ``CKPT`` a
checkpoint such as ``runs/demo/version_0/checkpoints/last.ckpt``.

Extra arguments go to the CLI parser (e.g. ``--data.init_args.root=...``).
"""
from __future__ import annotations

import core  # noqa: F401
from core.cli_args import positive_int
from core.command_parser import CommandParser
from core.weights import load_state_dict_file

import torch

from cli import cli_main


@torch.no_grad()
def shuffle_control(module, loader, max_batches: int | None = None) -> dict[str, float]:
    """Mean answer-token loss with true and with rolled (clip i gets clip i+1's) video tokens.

    Batches of one clip cannot be rolled and are skipped; the roll is a derangement for any
    batch of two or more clips, so every clip is scored against a video that is not its own.
    """
    model = module.model
    totals = {"true": 0.0, "shuffled": 0.0}
    batches = 0
    for batch in loader:
        if max_batches is not None and batches >= max_batches:
            break
        if len(batch["keys"]) < 2:
            continue
        video = model.encode_video(batch["global_frames"])
        for name, tokens in (("true", video), ("shuffled", video.roll(1, dims=0))):
            loss, _ = model.language_model(batch["input_ids"], batch["attention_mask"], tokens, batch["labels"])
            totals[name] += float(loss)
        batches += 1
    if batches == 0:
        raise ValueError("no batch with two or more clips: raise data.init_args.eval_batch_size")
    result = {name: total / batches for name, total in totals.items()}
    result["gap"] = result["shuffled"] - result["true"]
    result["batches"] = batches
    return result


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = CommandParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", role="input", required=True)
    parser.add_argument("--ckpt", role="input", default=None, help="checkpoint to load (default: the untrained model)")
    parser.add_argument("--split", choices=("val", "test"), default="val")
    parser.add_argument("--max-batches", type=positive_int, default=None)
    args, extra = parser.parse_known_args(argv)
    cli = cli_main(["--config", args.config, *extra], run=False)
    module, data = cli.model, cli.datamodule
    if args.ckpt:
        state = load_state_dict_file(args.ckpt, "--ckpt")  # weights only: no code in the file runs
        module.load_state_dict(state)
    module.eval()
    data.prepare_data()
    data.setup("fit" if args.split == "val" else "test")
    loader = data.val_dataloader() if args.split == "val" else data.test_dataloader()
    result = shuffle_control(module, loader, args.max_batches)
    print(f"caption loss on {args.split} ({result['batches']} batches): own video {result['true']:.4f}, "
          f"another clip's video {result['shuffled']:.4f}, gap {result['gap']:+.4f} "
          "(about 0: the captions do not depend on the video)")
    return result


if __name__ == "__main__":
    main()
