"""Where the project keeps its generated data, and the offline language resources it reads."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("GROVE_DATA_DIR", REPO_ROOT / "data"))
NLTK_DATA_DIR = DATA_DIR / "nltk_data"


def ensure_nltk_data() -> Path:
    """Put the repo's WordNet folder (made by ``make setup``) on NLTK's search path."""
    import nltk

    if str(NLTK_DATA_DIR) not in nltk.data.path:
        nltk.data.path.insert(0, str(NLTK_DATA_DIR))
    if not (NLTK_DATA_DIR / "corpora" / "wordnet" / "lexnames").exists():
        raise FileNotFoundError(
            f"WordNet is not prepared at {NLTK_DATA_DIR}/corpora/wordnet; run `make setup` "
            "(it installs Debian's wordnet-base and builds the folder NLTK reads)")
    return NLTK_DATA_DIR
