"""strata from Python: a training job (tf.distribute-style strategies,
chosen by the job's INI) with Keras's fit / evaluate / predict on NumPy
arrays in memory; strata.collectives and strata.torch give any framework
the job's secured collectives. See docs/python.md.

    import strata
    job = strata.Job({"model": {"layers": "dense 128 relu, dense 10"}})
    history = job.fit(x_train, y_train, epochs=5, batch_size=64,
                      validation_data=(x_test, y_test))
"""

from . import callbacks, collectives, errors
from .callbacks import Callback, History, LambdaCallback, ProgressBar
from .checkpoint import load as load_checkpoint
from .checkpoint import save as save_checkpoint
from .errors import StrataError
from .job import Job, version

__version__ = "0.1.0"
__all__ = ["Job", "version", "callbacks", "collectives", "errors", "Callback", "History",
           "LambdaCallback", "ProgressBar", "StrataError", "load_checkpoint",
           "save_checkpoint"]
