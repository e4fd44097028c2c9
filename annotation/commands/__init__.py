"""The subcommands of ``grove annotate``: ``run`` (:mod:`~annotation.commands.run`), ``score``
(:mod:`~annotation.commands.score`), ``compare`` (the paper's Table 6, :mod:`~annotation.commands.compare`)
and ``detail-captions`` (:mod:`~annotation.commands.detail_captions`)."""
