"""Re-score saved predictions at temporal-objectness thresholds (entry point of metrics/commands/threshold_sweep.py).

    python scripts/threshold_sweep.py --gt data/synthetic/annotations/test.json \
        --pred runs/demo/version_N/predictions_test.json --out runs/demo/version_N/threshold_sweep
"""

from core.user_errors import run_command

from metrics.commands.threshold_sweep import main

if __name__ == "__main__":
    run_command(main)
