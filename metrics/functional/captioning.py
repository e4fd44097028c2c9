"""Captioning metrics as the COCO caption evaluation computes them: BLEU-1..4, METEOR,
ROUGE-L and CIDEr(-D) from ``pycocoevalcap``, after Stanford PTB tokenisation of both sides.

The scorers are pycocoevalcap's own, so the figures are the published ones; what this module adds
is the plumbing the COCO evaluator lacks:

* one Java process for the tokeniser and one for METEOR per evaluation (references and candidates
  are tokenised together: the tokeniser keeps one caption per line, so the result is identical to
  the evaluator's two calls), and the METEOR process is always shut down, even when scoring fails
  (pycocoevalcap leaves it to ``__del__``, which can deadlock on its lock after an error);
* characters the Java tokeniser reads as line ends (\\r, \\f, U+2028, ...) become spaces first; the
  COCO evaluator replaces only \\n, so such a caption silently shifts later captions to wrong ids;
* clear errors for bad input, for a missing Java, and for SPICE, which needs Stanford CoreNLP
  models that pycocoevalcap downloads at run time (impossible offline);
* captions longer than ``core.bounded_text.METEOR_MAX_CHARS`` are left out of METEOR (a line of
  a million characters kills its Java process and with it the whole evaluation): they are named
  in a warning, score NaN per sample, and METEOR is the corpus score of the rest.

An empty candidate is legal: it tokenises to an empty line and scores 0 on every metric.
"""
from __future__ import annotations

from core.bounded_text import METEOR_MAX_CHARS, describe_over_limit, over_limit

import functools
import logging
import re
import shutil
import subprocess
from typing import Hashable, Mapping, Sequence

log = logging.getLogger(__name__)

BLEU_METRICS = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4")
CAPTION_METRICS = BLEU_METRICS + ("METEOR", "ROUGE-L", "CIDEr")
DEFAULT_CAPTION_METRICS = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr")

# Case-insensitive aliases, including the COCO evaluator's own keys (Bleu_4, ROUGE_L).
_ALIASES = {name.lower(): name for name in CAPTION_METRICS}
_ALIASES.update({f"bleu_{n}": f"BLEU-{n}" for n in range(1, 5)})
_ALIASES.update({f"bleu{n}": f"BLEU-{n}" for n in range(1, 5)})
_ALIASES.update({"bleu": "BLEU-4", "rouge_l": "ROUGE-L", "rougel": "ROUGE-L", "rouge": "ROUGE-L",
                 "cider-d": "CIDEr"})


class SpiceUnavailableError(RuntimeError):
    """SPICE cannot run offline; raised instead of letting pycocoevalcap try a download."""


SPICE_MESSAGE = (
    "SPICE is not available offline: pycocoevalcap's SPICE needs the Stanford CoreNLP 3.6.0 jars "
    "(stanford-corenlp-3.6.0.jar and -models.jar, ~400 MB) that it downloads from nlp.stanford.edu on "
    "first use, and this environment has no internet. Use METEOR, CIDEr, BLEU-4, ROUGE-L or CAPTURE "
    "(metrics.capture) instead.")


def require_java() -> str:
    """Path of the ``java`` executable; the PTB tokeniser and METEOR are Java programs."""
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("captioning metrics need Java (the PTB tokeniser and METEOR are Java "
                           "programs) but no `java` is on PATH; run `make setup`, which installs "
                           "Debian's default-jre-headless")
    return java


def resolve_metric_names(metrics: Sequence[str]) -> tuple[str, ...]:
    """Canonical names (``BLEU-4``, ``METEOR``, ``ROUGE-L``, ``CIDEr``) in the order asked, deduplicated."""
    if isinstance(metrics, str):
        metrics = (metrics,)
    names: list[str] = []
    for metric in metrics:
        key = str(metric).strip().lower()
        if key == "spice":
            raise SpiceUnavailableError(SPICE_MESSAGE)
        if key not in _ALIASES:
            raise ValueError(f"unknown captioning metric {metric!r}; known: {', '.join(CAPTION_METRICS)}")
        if _ALIASES[key] not in names:
            names.append(_ALIASES[key])
    if not names:
        raise ValueError("no captioning metric requested")
    return tuple(names)


def validate_captions(gts: Mapping[Hashable, Sequence[str]], res: Mapping[Hashable, str]) -> None:
    """Raise a ValueError naming the key and the problem for anything the scorers would choke on."""
    if not isinstance(gts, Mapping) or not isinstance(res, Mapping):
        raise TypeError("gts and res must be mappings: id -> list of reference captions, id -> candidate caption")
    if len(gts) == 0 or len(res) == 0:
        raise ValueError(f"nothing to evaluate: gts has {len(gts)} entries and res has {len(res)}")
    missing = [k for k in gts if k not in res]
    extra = [k for k in res if k not in gts]
    if missing or extra:
        raise ValueError(f"gts and res must have the same ids: {len(missing)} id(s) without a candidate "
                         f"(e.g. {missing[:3]}), {len(extra)} candidate id(s) without references (e.g. {extra[:3]})")
    for key, refs in gts.items():
        if isinstance(refs, str) or not isinstance(refs, Sequence) or len(refs) == 0:
            raise ValueError(f"gts[{key!r}] must be a non-empty list of reference captions, got {refs!r}")
        for i, ref in enumerate(refs):
            if not isinstance(ref, str):
                raise ValueError(f"gts[{key!r}][{i}] must be a string, got {type(ref).__name__}")
    for key, cand in res.items():
        if not isinstance(cand, str):
            raise ValueError(f"res[{key!r}] must be one candidate caption (a string), got {type(cand).__name__}")


# Characters the Java tokeniser treats as line ends: left in a caption they would shift every later
# caption onto the wrong id (the COCO evaluator only replaces "\n").
_LINE_BREAKS = re.compile("[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def tokenize_captions(gts: Mapping[Hashable, Sequence[str]], res: Mapping[Hashable, str]
                      ) -> tuple[dict[Hashable, list[str]], dict[Hashable, list[str]]]:
    """PTB-tokenise references and candidates in one Java call (lower-cased, punctuation removed)."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    joint = {("gts", k): [{"caption": _LINE_BREAKS.sub(" ", c)} for c in refs] for k, refs in gts.items()}
    joint.update({("res", k): [{"caption": _LINE_BREAKS.sub(" ", c)}] for k, c in res.items()})
    tokens = PTBTokenizer().tokenize(joint)
    missing = [k for k in joint if k not in tokens]
    if missing:  # a silent zip-truncation in the wrapper would otherwise surface as a KeyError later
        raise RuntimeError(f"PTB tokeniser returned no line for {len(missing)} caption(s), e.g. {missing[:3]}")
    return ({k: tokens[("gts", k)] for k in gts}, {k: tokens[("res", k)] for k in res})


@functools.lru_cache(maxsize=1)
def _meteor_class():
    from pycocoevalcap.meteor.meteor import Meteor

    class ClosableMeteor(Meteor):
        """pycocoevalcap's METEOR (same jar, flags and protocol) whose Java process is closed
        deterministically: ``close`` is idempotent and does not take the lock, so it also runs after
        a failure that left the lock held."""

        def close(self) -> None:
            process = self.__dict__.pop("meteor_p", None)
            if process is None:
                return
            for stream in (process.stdin, process.stdout, process.stderr):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
            if process.poll() is None:
                process.kill()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:  # pragma: no cover (killed processes exit at once)
                pass

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.close()

        def __del__(self) -> None:
            self.close()

    return ClosableMeteor


def open_meteor():
    """A started METEOR scorer to use as a context manager (one Java process, closed on exit)."""
    require_java()
    return _meteor_class()()


def evaluate_captions(gts: Mapping[Hashable, Sequence[str]], res: Mapping[Hashable, str],
                      metrics: Sequence[str] = DEFAULT_CAPTION_METRICS, return_per_sample: bool = False):
    """COCO caption evaluation of candidates ``res[id]`` against references ``gts[id]``.

    Returns ``{metric: corpus score}`` with canonical names (BLEU-n, METEOR, ROUGE-L, CIDEr) as
    floats on pycocoevalcap's scale (fractions; CIDEr unbounded, ~0-10). With
    ``return_per_sample=True`` also returns ``{metric: {id: score}}``. CIDEr's document frequencies
    come from this evaluation's references, as in the COCO evaluator.
    """
    names = resolve_metric_names(metrics)
    validate_captions(gts, res)
    require_java()
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    ref_tokens, cand_tokens = tokenize_captions(gts, res)
    ids = list(ref_tokens)
    corpus: dict[str, float] = {}
    per_sample: dict[str, dict[Hashable, float]] = {}

    def store(name: str, score, scores) -> None:
        corpus[name] = float(score)
        per_sample[name] = {k: float(s) for k, s in zip(ids, scores)}

    if any(n in BLEU_METRICS for n in names):
        bleu, bleu_per_sample = Bleu(4).compute_score(ref_tokens, cand_tokens, verbose=0)
        for n, name in enumerate(BLEU_METRICS):
            store(name, bleu[n], bleu_per_sample[n])
    if "METEOR" in names:
        over = over_limit({k: [*gts[k], res[k]] for k in ids}, METEOR_MAX_CHARS)
        kept = [k for k in ids if k not in over]
        if over:
            log.warning("METEOR: %s", describe_over_limit(over, METEOR_MAX_CHARS, "clip(s) with a caption"))
        score, scores = float("nan"), []
        if kept:
            with open_meteor() as meteor:
                score, scores = meteor.compute_score({k: ref_tokens[k] for k in kept},
                                                     {k: cand_tokens[k] for k in kept})
        corpus["METEOR"] = float(score)
        per_sample["METEOR"] = {k: float("nan") for k in ids} | {k: float(v) for k, v in zip(kept, scores)}
    if "ROUGE-L" in names:
        store("ROUGE-L", *Rouge().compute_score(ref_tokens, cand_tokens))
    if "CIDEr" in names:
        store("CIDEr", *Cider().compute_score(ref_tokens, cand_tokens))

    corpus = {name: corpus[name] for name in names}
    if return_per_sample:
        return corpus, {name: per_sample[name] for name in names}
    return corpus
