"""The judge itself: the Qwen2.5-VL judge (:mod:`~judge.model.vc_inspector`), its prompt and answer
format (:mod:`~judge.model.prompt_format`), the prompter that turns frames and captions into model
inputs (:mod:`~judge.model.prompter`), the toy judge's tokenizer, the frozen tower's feature cache,
the exported folder (:mod:`~judge.model.pretrained`) and the same judge behind an OpenAI-compatible
endpoint (:mod:`~judge.model.endpoint`).
"""
