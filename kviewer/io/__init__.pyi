"""Names of :mod:`kviewer.io`, imported on first use (``lazy_loader.attach_stub``)."""

from . import cache as cache
from . import folders as folders
from . import graphs as graphs
from . import memory as memory
from . import ncu as ncu
from . import nsys as nsys
from . import nsys_gpu_metrics as nsys_gpu_metrics
from . import nsys_rep as nsys_rep
from . import ranks as ranks
from . import registry as registry
from . import rocprof as rocprof
from . import source as source
from . import sqlite_safety as sqlite_safety
from . import torch as torch
from .registry import CancelToken as CancelToken, LoaderSpec as LoaderSpec, detect as detect, load as load, loaders as loaders
