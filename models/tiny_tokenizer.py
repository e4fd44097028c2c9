"""A small byte-level BPE tokenizer for the tiny GROVE, built offline and deterministically.

No model hub is reachable, and the tiny LLM needs a vocabulary small enough to train on a CPU.
Byte-level BPE encodes any text (unknown words fall back to bytes); the merges come from a
built-in corpus of common English words, the prompt texts and the words of synthetic scenes
(colours, shapes, motions, directions, objects). The result is saved once and reused.
"""
from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

from models.grove.prompting import CHAT_TEMPLATES, DEFAULT_QUESTIONS, VIDEO_PREAMBLE

VOCAB_SIZE = 1536
SPECIAL_TOKENS = {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}

COMMON_WORDS = """
the of and to a in is it you that he was for on are with as his they be at one have this from or had
by hot word but what some we can out other were all there when up use your how said an each she which
do their time if will way about many then them write would like so these her long make thing see him
two has look more day could go come did number sound no most people my over know water than call
first who may down side been now find any new work part take get place made live where after back
little only round man year came show every good me give our under name very through just form
sentence great think say help low line differ turn cause much mean before move right boy old too
same tell does set three want air well also play small end put home read hand port large spell add
even land here must big high such follow act why ask men change went light kind off need house
picture try us again animal point mother world near build self earth father head stand own page
should country found answer school grow study still learn plant cover food sun four between state
keep eye never last let thought city tree cross farm hard start might story saw far sea draw left
late run while press close night real life few north open seem together next white children begin
got walk example ease paper group always music those both mark often letter until mile river car
feet care second book carry took science eat room friend began idea fish mountain stop once base
hear horse cut sure watch color face wood main enough plain girl usual young ready above ever red
list though feel talk bird soon body dog family direct pose leave song measure door product black
short numeral class wind question happen complete ship area half rock order fire south problem
piece told knew pass since top whole king space heard best hour better true during hundred five
remember step early hold west ground interest reach fast verb sing listen six table travel less
morning ten simple several vowel toward war lay against pattern slow center love person money serve
appear road map rain rule govern pull cold notice voice unit power town fine certain fly fall lead
cry dark machine note wait plan figure star box noun field rest correct able pound done beauty drive
stood contain front teach week final gave green oh quick develop ocean warm free minute strong
special mind behind clear tail produce fact street inch multiply nothing course stay wheel full
force blue object decide surface deep moon island foot system busy test record boat common gold
possible plane stead dry wonder laugh thousand ago ran check game shape equate miss brought heat
snow tire bring yes distant fill east paint language among grand ball yet wave drop heart present
heavy dance engine position arm wide sail material size vary settle speak weight general ice matter
circle pair include divide syllable felt perhaps pick sudden count square reason length represent
art subject region energy hunt probable bed brother egg ride cell believe fraction forest sit race
window store summer train sleep prove lone leg exercise wall catch mount wish sky board joy winter
sat written wild instrument kept glass grass cow job edge sign visit past soft fun bright gas
weather month million bear finish happy hope flower clothe strange gone jump baby eight village
meet root buy raise solve metal whether push seven paragraph third shall held hair describe cook
floor either result burn hill safe cat century consider type law bit coast copy phrase silent tall
sand soil roll temperature finger industry value fight lie beat excite natural view sense ear else
quite broke case middle kill son lake moment scale loud spring observe child straight consonant
nation dictionary milk speed method organ pay age section dress cloud surprise quiet stone tiny
climb cool design poor lot experiment bottom key iron single stick flat twenty skin smile crease
hole trade melody trip office receive row mouth exact symbol die least trouble shout except wrote
seed tone join suggest clean break lady yard rise bad blow oil blood touch grew cent mix team wire
cost lost brown wear garden equal sent choose fell fit flow fair bank collect save control decimal
gentle woman captain practice separate difficult doctor please protect noon whose locate ring
character insect caught period indicate radio spoke atom human history effect electric expect crop
modern element hit student corner party supply bone rail imagine provide agree thus capital chair
danger fruit rich thick soldier process operate guess necessary sharp wing create neighbor wash bat
rather crowd corn compare poem string bell depend meat rub tube famous dollar stream fear sight thin
triangle planet hurry chief colony clock mine tie enter major fresh search send yellow gun allow
print dead spot desert suit current lift rose continue block chart hat sell success company subtract
event particular deal swim term opposite wife shoe shoulder spread arrange camp invent cotton born
determine quart nine truck noise level chance gather shop stretch throw shine property column
molecule select wrong gray repeat require broad prepare salt nose plural anger claim continent
oxygen sugar death pretty skill women season solution magnet silver thank branch match suffix
especially fig afraid huge sister steel discuss forward similar guide experience score apple bought
led pitch coat mass card band rope slip win dream evening condition feed tool total basic smell
valley nor double seat arrive master track parent shore division sheet substance favor connect post
spend chord fat glad original share station dad bread charge proper bar offer segment slave duck
instant market degree populate chick dear enemy reply drink occur support speech nature range steam
motion path liquid log meant quotient teeth shell neck
"""

SCENE_WORDS = """
red orange yellow green blue purple pink brown black white gray grey cyan magenta violet teal gold
silver beige navy maroon olive dark light bright pale
circle square triangle rectangle star ellipse oval hexagon pentagon diamond cross ring disk disc
cube sphere cone cylinder ball box block dot line arrow heart shape object objects shapes
moves moving moved move slides sliding slid slide bounces bouncing bounced bounce rotates rotating
rotated rotate spins spinning spun spin grows growing grew grow shrinks shrinking shrank shrink
appears appearing appeared appear disappears disappearing disappeared disappear enters entering
entered enter leaves leaving left leave stays staying stayed stay follows following followed follow
chases chasing chased chase passes passing passed pass crosses crossing crossed cross jumps jumping
jumped jump falls falling fell fall rises rising rose rise drifts drifting drifted drift
left right up down upward downward upwards downwards across toward towards away from into out of
onto over under above below behind beside near next to around along through between center centre
middle top bottom corner edge side frame screen scene background foreground diagonally slowly
quickly steadily while then and
person man woman hand hands knife spoon bowl pan pot plate cup glass bottle table board cutting
onion tomato potato carrot meat bread cheese egg eggs water oil salt pepper sugar flour dough
sauce spatula whisk fork stove oven sink towel brush paint wall floor wood screw screwdriver hammer
nail drill saw tape thread needle knot scissors paper pen pencil phone laptop keyboard mouse
camera bag box shirt shoe hat car bike tool tools pieces piece slice slices
is are the a an it its their his her them they he she who which that this these those one two
three four five first second another other each both all some
cuts cutting cut stirs stirring stirred stir pours pouring poured pour holds holding held hold
picks picking picked pick puts putting put places placing placed place uses using used use
opens opening opened open closes closing closed close ties tying tied tie washes washing washed
wash mixes mixing mixed mix adds adding added add takes taking took take shows showing showed
show turns turning turned turn presses pressing pressed press pulls pulling pulled pull pushes
pushing pushed push punches punching punched punch
"""


def training_corpus() -> list[str]:
    """The built-in corpus, in a fixed order (the tokenizer must not depend on hash seeds)."""
    words = COMMON_WORDS.split() + SCENE_WORDS.split()
    lines = [" ".join(words[i:i + 12]) for i in range(0, len(words), 12)]
    lines += [w + s for w in COMMON_WORDS.split() for s in ("s", "ed", "ing")]
    colours = "red green blue yellow orange purple white black".split()
    shapes = "circle square triangle rectangle star ellipse".split()
    motions = "moves slides bounces rotates grows shrinks appears disappears".split()
    directions = ["to the left", "to the right", "up", "down", "across the frame", "toward the centre"]
    for colour, shape, motion, direction in itertools.product(colours, shapes, motions, directions):
        lines.append(f"a {colour} {shape} {motion} {direction}")
        lines.append(f"<p> a {colour} {shape} </p> [DET] {motion} {direction}.")
    for question in DEFAULT_QUESTIONS:
        for name in ("vicuna_v1", "plain"):
            lines.append(CHAT_TEMPLATES[name].format(user=VIDEO_PREAMBLE + question))
    return lines


# Printable ASCII and SentencePiece's word-boundary mark: the alphabet of the character-level
# tokenizer used when the vocabulary is too small for byte-level BPE (256 bytes).
CHAR_ALPHABET = [chr(c) for c in range(33, 127)] + ["\u2581"]


def _train_char_level(vocab_size: int):
    """A LLaMA-like (SentencePiece-style word boundaries) character BPE of ``vocab_size`` entries.

    For vocabularies below byte-level BPE's 256-byte floor, such as the released GROVE's tiny
    test geometry (118 base ids + 10 GLaMM/GROVE tokens); characters outside the alphabet map
    to ``<unk>``.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    floor = len(CHAR_ALPHABET) + len(SPECIAL_TOKENS)
    if vocab_size < floor:
        raise ValueError(f"model.language_model.tiny_vocab_size: {vocab_size} is below the {floor} entries of the "
                         f"character alphabet plus special tokens")
    tok = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=list(SPECIAL_TOKENS.values()), initial_alphabet=CHAR_ALPHABET,
                                  limit_alphabet=len(CHAR_ALPHABET))
    tok.train_from_iterator(training_corpus(), trainer=trainer)
    return tok


def train_byte_level_bpe(corpus: Sequence[str], vocab_size: int, special_tokens: Sequence[str]):
    """A byte-level BPE (any text encodes; unknown words fall back to bytes) trained on ``corpus``
    with ``special_tokens`` first; deterministic for a fixed corpus. The tiny GROVE's and the toy
    judge's tokenizers are both this, on their own corpora."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=list(special_tokens),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer=trainer)
    return tok


def saved_tokenizer(out_dir: str | os.PathLike, build: Callable[[], Any], marker: dict | None = None):
    """The tokenizer saved in ``out_dir``; when absent, ``build()`` (a ``PreTrainedTokenizerFast``) is
    saved to a staging folder beside it (with ``grove_tiny_tokenizer.json`` holding ``marker``) and
    renamed into place, so an interrupted or concurrent build never leaves a half-written folder."""
    from transformers import PreTrainedTokenizerFast

    out = Path(out_dir)
    if not (out / "tokenizer.json").exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".tiny_tokenizer_", dir=out.parent))
        try:
            build().save_pretrained(staging)
            if marker is not None:
                (staging / "grove_tiny_tokenizer.json").write_text(json.dumps(marker))
            try:  # atomic publish; a concurrent builder may have won the race, which is fine
                os.replace(staging, out)
            except OSError:
                if not (out / "tokenizer.json").exists():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return PreTrainedTokenizerFast.from_pretrained(str(out))


def build_tiny_tokenizer(out_dir: str | os.PathLike, vocab_size: int = VOCAB_SIZE):
    """The tiny tokenizer saved in ``out_dir`` (built and saved there first if absent)."""
    from transformers import PreTrainedTokenizerFast

    def build():
        trained = (train_byte_level_bpe(training_corpus(), vocab_size, SPECIAL_TOKENS.values())
                   if vocab_size >= 256 + len(SPECIAL_TOKENS) else _train_char_level(vocab_size))
        return PreTrainedTokenizerFast(tokenizer_object=trained, **SPECIAL_TOKENS)

    return saved_tokenizer(out_dir, build, marker={"vocab_size": vocab_size})
