"""Use a VC-Inspector judge: score pairs, measure FOIL accuracy, refine captions (docs/judge.md).

    python scripts/judge.py score  --config configs/judge_demo.yaml --ckpt_path CKPT --pairs PAIRS --out OUT
    python scripts/judge.py foil   --judge RELEASED_FOLDER --activitynet_foil DIR --out OUT
    python scripts/judge.py refine --config CONFIG --videos DIR --captions IN --captioner VLM --rounds K --out OUT
"""

import core  # noqa: F401  (torchvision compatibility: must precede lightning)

from lightning_modules.judge_commands import main

if __name__ == "__main__":
    main()
