"""Using a trained judge: loading it (:mod:`~judge.application.loading`), scoring pairs and FOIL
pairs (:mod:`~judge.application.scoring`, :mod:`~judge.application.hallucination`), refinement of
captions (:mod:`~judge.application.refinement`), the GROVE-side callback
(:mod:`~judge.application.callback`) and the ``grove judge`` commands
(:mod:`~judge.application.commands`)."""
