"""Lightning callbacks: evaluation, prediction writing, data-health reporting."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)

from callbacks.prediction_writer import PredictionWriter  # noqa: E402,F401
from callbacks.skipped_videos import SkippedVideoReport  # noqa: E402,F401
from callbacks.grounded_evaluation import GroundedEvaluation  # noqa: E402,F401
from callbacks.cpu_threads import CpuThreads  # noqa: E402,F401
from callbacks.annotated_video_writer import AnnotatedVideoWriter  # noqa: E402,F401
from callbacks.tensorboard_visualizer import ValidationClipVisualizer  # noqa: E402,F401
from callbacks.init_from_checkpoint import InitFromCheckpoint  # noqa: E402,F401
from callbacks.task_evaluation import ANetEntitiesEvaluation, VidSTGEvaluation  # noqa: E402,F401
