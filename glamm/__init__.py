"""GLaMM (Rasheed et al., "GLaMM: Pixel Grounding Large Multimodal Model", CVPR 2024), GROVE's
image ancestor, as one package: the model (:mod:`glamm.model`), its released checkpoint's layout
(:mod:`glamm.checkpoint`) and check (:mod:`glamm.check`), the GROVE paper's GLaMM baselines in
the prediction format (:mod:`glamm.baseline`) and the commands (:mod:`glamm.commands`,
``grove glamm``). The annotation pipeline's GLaMM Stage 1 (``annotation/``) calls it.
"""
import core  # noqa: F401  (torchvision compatibility before segment_anything imports it)
