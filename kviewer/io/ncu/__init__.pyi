"""Names of :mod:`kviewer.io.ncu`, imported on first use (``lazy_loader.attach_stub``)."""

from . import common as common
from . import csv_export as csv_export
from . import report as report
