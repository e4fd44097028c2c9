"""The judge's training data: factual-error corruptions of reference captions (VC-Inspector paper, section 3.2).

A caption's objects and actions are found (:mod:`~judge.data.corruption.caption_extraction`, with the
WordNet :mod:`~judge.data.corruption.lexicon` and :mod:`~judge.data.corruption.english_inflection`), some
are substituted by the rule backend or an LLM backend, and each corruption is scored by how much
of the caption it changed (:mod:`judge.data.targets`). :mod:`~judge.data.corruption.generator` writes them.
"""
