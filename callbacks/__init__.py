"""Lightning callbacks: evaluation, prediction writing, data-health reporting."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)

# Short names (``package.Class``) for run configs saved before configs named each class by its
# module; configs and docs name classes as ``package.module.Class``.
from callbacks.annotated_video_writer import AnnotatedVideoWriter  # noqa: F401
from callbacks.cpu_threads import CpuThreads  # noqa: F401
from callbacks.grounded_evaluation import GroundedEvaluation  # noqa: F401
from callbacks.init_from_checkpoint import InitFromCheckpoint  # noqa: F401
from callbacks.prediction_writer import PredictionWriter  # noqa: F401
from callbacks.skipped_videos import SkippedVideoReport  # noqa: F401
from callbacks.task_evaluation import ANetEntitiesEvaluation, VidSTGEvaluation  # noqa: F401
from callbacks.tensorboard_visualizer import ValidationClipVisualizer  # noqa: F401
