"""Names of :mod:`kviewer.fleet`, imported on first use (``lazy_loader.attach_stub``)."""

from . import analyze as analyze
from . import command as command
from . import engine as engine
from . import read as read
from . import record as record
from . import write as write
