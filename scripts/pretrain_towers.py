"""Pre-train the tiny demo's two vision towers (entry point of lightning_modules/tower_pretraining.py).

    python scripts/pretrain_towers.py --config configs/demo.yaml --steps 250 --out data/demo_towers
"""
from core.user_errors import run_command

from lightning_modules.tower_pretraining import main

if __name__ == "__main__":
    run_command(main)
